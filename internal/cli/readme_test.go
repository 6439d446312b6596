package cli

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// synopsisEntry is one command of README's "Commands" synopsis: the
// command's words and the tokens after them (brackets and bars removed).
type synopsisEntry struct {
	line   int
	words  []string
	tokens []string
}

// readmeSynopsis returns the entries of the first code block after
// "## Commands" in README.md. An entry starts with "nvcomm"; an indented
// line continues the entry above it.
func readmeSynopsis(t *testing.T) []synopsisEntry {
	t.Helper()
	src, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(src), "## Commands\n")
	if !ok {
		t.Fatal("README.md has no Commands section")
	}
	_, rest, _ = strings.Cut(rest, "```\n")
	block, _, ok := strings.Cut(rest, "```")
	if !ok {
		t.Fatal("README.md's Commands section has no code block")
	}
	root := newCommandTree()
	var out []synopsisEntry
	for i, line := range strings.Split(strings.TrimSuffix(block, "\n"), "\n") {
		fields := strings.Fields(strings.NewReplacer("[", " ", "]", " ").Replace(line))
		if strings.HasPrefix(line, " ") && len(out) > 0 {
			out[len(out)-1].tokens = append(out[len(out)-1].tokens, fields...)
			continue
		}
		if len(fields) == 0 || fields[0] != "nvcomm" {
			t.Fatalf("README.md Commands line %d does not start with nvcomm: %q", i+1, line)
		}
		e := synopsisEntry{line: i + 1}
		c := root
		fields = fields[1:]
		for len(fields) > 0 {
			sub := subcommand(c, fields[0])
			if sub == nil {
				break
			}
			c, e.words, fields = sub, append(e.words, fields[0]), fields[1:]
		}
		e.tokens = fields
		out = append(out, e)
	}
	return out
}

// newCommandTree is the root command with the help command added, as
// Execute adds it.
func newCommandTree() *cobra.Command {
	root := newRootCmd()
	root.InitDefaultHelpCmd()
	return root
}

// subcommand returns c's subcommand called name, or nil.
func subcommand(c *cobra.Command, name string) *cobra.Command {
	for _, sub := range c.Commands() {
		if sub.Name() == name {
			return sub
		}
	}
	return nil
}

// TestReadmeSynopsis: README's synopsis lists every command, every
// command's flags and nothing else, each value named as the command's
// help names it (or "…" for one named on an earlier line), and the
// completion command's shells.
func TestReadmeSynopsis(t *testing.T) {
	root := newCommandTree()
	seen := map[string]bool{}
	for _, e := range readmeSynopsis(t) {
		path := strings.Join(e.words, " ")
		c, _, err := root.Find(e.words)
		if err != nil || len(e.words) == 0 {
			t.Errorf("README.md Commands line %d: %q is not a command", e.line, path)
			continue
		}
		seen[path] = true
		if path == "completion" {
			checkShells(t, c, e)
			continue
		}
		checkFlags(t, c, e)
	}
	var missing []string
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			path := strings.TrimPrefix(sub.CommandPath(), "nvcomm ")
			switch {
			case sub.Hidden:
			case sub.HasSubCommands() && path != "completion":
				walk(sub)
			case !seen[path]:
				missing = append(missing, path)
			}
		}
	}
	walk(root)
	if len(missing) > 0 {
		t.Errorf("README.md's Commands synopsis lacks %v", missing)
	}
}

// checkShells compares the synopsis's shells with completion's
// subcommands.
func checkShells(t *testing.T, c *cobra.Command, e synopsisEntry) {
	t.Helper()
	var want []string
	for _, sub := range c.Commands() {
		if !sub.Hidden && sub.Name() != "help" {
			want = append(want, sub.Name())
		}
	}
	var got []string
	if len(e.tokens) == 1 {
		got = strings.Split(e.tokens[0], "|")
	}
	slices.Sort(want)
	slices.Sort(got)
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("README.md Commands line %d: shells of completion (-want +got):\n%s", e.line, d)
	}
}

// checkFlags compares the flags an entry names with the command's own,
// and each value with the name the help gives it.
func checkFlags(t *testing.T, c *cobra.Command, e synopsisEntry) {
	t.Helper()
	named := map[string]bool{}
	for i := 0; i < len(e.tokens); i++ {
		tok := e.tokens[i]
		if !strings.HasPrefix(tok, "-") || tok == "-" {
			continue
		}
		f := c.LocalNonPersistentFlags().Lookup(strings.TrimLeft(tok, "-"))
		if len(tok) == 2 {
			f = c.LocalNonPersistentFlags().ShorthandLookup(tok[1:])
		}
		if f == nil {
			t.Errorf("README.md Commands line %d: %s has no flag %s", e.line, c.CommandPath(), tok)
			continue
		}
		named[f.Name] = true
		value := ""
		if i+1 < len(e.tokens) && !strings.HasPrefix(e.tokens[i+1], "-") && e.tokens[i+1] != "|" {
			value = e.tokens[i+1]
			i++
		}
		want, _ := pflag.UnquoteUsage(f)
		if f.Value.Type() == "bool" {
			want = ""
		}
		if value != want && (value != "…" || want == "") {
			t.Errorf("README.md Commands line %d: %s %s takes %q, want %q as its help says", e.line, c.CommandPath(), tok, value, want)
		}
	}
	c.LocalNonPersistentFlags().VisitAll(func(f *pflag.Flag) {
		if f.Name != "help" && !f.Hidden && !named[f.Name] {
			t.Errorf("README.md Commands line %d: the synopsis of %s lacks --%s", e.line, c.CommandPath(), f.Name)
		}
	})
}

// TestReadmeGlobalFlags: README names the flags every command takes.
func TestReadmeGlobalFlags(t *testing.T) {
	src, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	newRootCmd().PersistentFlags().VisitAll(func(f *pflag.Flag) {
		name, _ := pflag.UnquoteUsage(f)
		if want := "--" + f.Name + " " + name; !strings.Contains(string(src), want) {
			t.Errorf("README.md does not name %q, which every command takes", want)
		}
	})
}
