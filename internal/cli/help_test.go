package cli

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// TestEveryCommandHasExamples: every command, subcommands included, shows
// examples in its help, and every flag whose values are a fixed set names
// them in the help (--policy optimal|nvfuser), not one of them alone.
func TestEveryCommandHasExamples(t *testing.T) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Hidden {
			return
		}
		t.Run(strings.ReplaceAll(c.CommandPath(), " ", "_"), func(t *testing.T) {
			if strings.TrimSpace(c.Example) == "" {
				t.Errorf("%s has no Example", c.CommandPath())
			}
			c.LocalFlags().VisitAll(func(f *pflag.Flag) {
				if e, ok := f.Value.(*enumFlag); ok {
					if got := e.Type(); got != strings.Join(e.allowed, "|") {
						t.Errorf("%s --%s: help shows %q, want every value", c.CommandPath(), f.Name, got)
					}
					if len(e.help) != len(e.allowed) {
						t.Errorf("%s --%s: %d completion descriptions for %d values", c.CommandPath(), f.Name, len(e.help), len(e.allowed))
					}
				}
			})
		})
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(newRootCmd())
}

// TestShells: the shells the messages of completion name are its
// subcommands.
func TestShells(t *testing.T) {
	comp, _, err := newRootCmd().Find([]string{"completion"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, sub := range comp.Commands() {
		got = append(got, sub.Name())
	}
	want := slices.Sorted(slices.Values(shells))
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("completion's shells (-want +got):\n%s", d)
	}
}
