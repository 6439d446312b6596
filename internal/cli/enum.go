package cli

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
)

// enumFlag is a string flag restricted to a fixed set of values; a bad value
// fails at parse time and so exits 2. The first value is the default.
type enumFlag struct {
	allowed []string
	help    []string // one line per allowed value, for shell completion
	value   string
}

func newEnum(allowed ...string) *enumFlag { return &enumFlag{allowed: allowed, value: allowed[0]} }

// describe sets the help shown beside each value by shell completion, one
// per allowed value, in order.
func (e *enumFlag) describe(help ...string) *enumFlag {
	e.help = help
	return e
}

func (e *enumFlag) String() string { return e.value }

// Type names the allowed values, which --help then shows as the flag's
// argument: "--format json|text".
func (e *enumFlag) Type() string { return strings.Join(e.allowed, "|") }

func (e *enumFlag) Set(v string) error {
	if !slices.Contains(e.allowed, v) {
		return fmt.Errorf("must be one of %s", strings.Join(e.allowed, ", "))
	}
	e.value = v
	return nil
}

// completions returns the allowed values, each with its help after a tab
// as cobra's completion expects.
func (e *enumFlag) completions() []cobra.Completion {
	out := make([]cobra.Completion, len(e.allowed))
	for i, v := range e.allowed {
		out[i] = v
		if i < len(e.help) {
			out[i] = cobra.CompletionWithDesc(v, e.help[i])
		}
	}
	return out
}

// enumVar defines the flag name on cmd, holding e, whose shell completion
// offers e's allowed values.
func enumVar(cmd *cobra.Command, e *enumFlag, name, usage string) {
	cmd.Flags().Var(e, name, usage)
	mustRegister(cmd.RegisterFlagCompletionFunc(name, func(*cobra.Command, []string, string) ([]cobra.Completion, cobra.ShellCompDirective) {
		return e.completions(), cobra.ShellCompDirectiveNoFileComp
	}))
}

// mustRegister panics on an error registering a completion, which only a
// programming error (a flag registered twice or not at all) causes; the
// CLI tests build every command and so catch it.
func mustRegister(err error) {
	if err != nil {
		panic(err)
	}
}

// choiceOrFile is a string flag that takes one of a few keywords or a file
// name; its help shows both: "--topology default|FILE".
type choiceOrFile struct {
	value *string
	typ   string
}

func (c choiceOrFile) String() string     { return *c.value }
func (c choiceOrFile) Type() string       { return c.typ }
func (c choiceOrFile) Set(v string) error { *c.value = v; return nil }

// choiceOrFileVar defines the flag name on cmd, stored in p with default
// def, that takes one of keywords or a file name ending in one of exts, and
// completes both.
func choiceOrFileVar(cmd *cobra.Command, p *string, name, def, usage string, keywords []string, exts ...string) {
	*p = def
	cmd.Flags().Var(choiceOrFile{p, strings.Join(append(slices.Clone(keywords), "FILE"), "|")}, name, usage)
	// --help quotes the default of string flags only: (default "default").
	if def != "" {
		cmd.Flags().Lookup(name).DefValue = strconv.Quote(def)
	}
	keywordOrFile(cmd, name, keywords, exts...)
}
