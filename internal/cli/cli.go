// Package cli implements nvcomm's command line: lower, validate and simulate,
// with exit code 0 on success, 1 when the input has errors, a plan is invalid
// or a simulation finds a mismatch, 2 on usage errors and 3 when nvcomm
// itself fails (a panic, which would otherwise exit 2 like a usage error).
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/nvcomm/nvcomm/internal/diag"
)

// Exit codes.
const (
	ExitOK       = 0
	ExitInput    = 1 // bad input, invalid plan or simulation mismatch
	ExitUsage    = 2
	ExitInternal = 3 // a bug in nvcomm: an unrecovered panic
)

// usageError marks an error in how the command was called.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// reportedError marks an error whose details were already printed, so Main
// only sets the exit code.
type reportedError struct{}

func (reportedError) Error() string { return "errors reported" }

// Main runs nvcomm with os.Args and the process's standard streams, and
// returns the exit code.
func Main() int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	return Run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
}

// Run runs nvcomm with the given arguments and streams and returns the exit
// code; tests call it in-process.
func Run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) (code int) {
	defer func() {
		if r := recover(); r != nil {
			fmt.Fprintf(stderr, "nvcomm: internal error: %v\n%s", r, debug.Stack())
			code = ExitInternal
		}
	}()
	ctx, unmap := withMappedInputs(ctx)
	defer unmap()
	root := newRootCmd()
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return ExitOK
	}
	if errors.As(err, new(reportedError)) {
		return ExitInput
	}
	fmt.Fprintf(stderr, "nvcomm: %v\n", err)
	var ue usageError
	if errors.As(err, &ue) || isCobraUsage(err) {
		return ExitUsage
	}
	return ExitInput
}

// isCobraUsage recognizes cobra's unknown-command error, which does not go
// through the flag error hook.
func isCobraUsage(err error) bool {
	msg := err.Error()
	return len(msg) > 16 && msg[:16] == "unknown command "
}

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "nvcomm",
		Short: "Compile sharded tensor programs into communication plans",
		Long: `nvcomm turns a fusion file (YAML: device meshes, sharded tensors, ops) into a
deterministic JSON plan of collectives and local steps, checks plans, and proves
them on virtual devices against the unsharded program.`,
		Example: `  nvcomm lower testdata/examples/allgather_loop_split.yaml
  nvcomm lower --format text --policy nvfuser fusion.yaml
  nvcomm lower fusion.yaml -o plan.json && nvcomm validate plan.json
  nvcomm simulate fusion.yaml --topology default
  nvcomm export torch fusion.yaml -o run.py && torchrun --nproc_per_node=4 run.py`,
		Version:       readBuildInfo().Version,
		SilenceUsage:  true,
		SilenceErrors: true,
		// Without a command, print the usage to stderr and exit 2, as the go
		// tool does, rather than cobra's default of help and exit 0.
		RunE: func(cmd *cobra.Command, _ []string) error {
			fmt.Fprint(cmd.ErrOrStderr(), cmd.UsageString())
			return usageError{errors.New("missing command")}
		},
	}
	// The template is the text itself, quoted: a version string is data.
	root.SetVersionTemplate("{{" + strconv.Quote(readBuildInfo().String()) + "}}")
	root.Flags().Bool("version", false, "print nvcomm's version, commit and Go version (as nvcomm version)")
	root.SetFlagErrorFunc(flagError)
	root.PersistentFlags().Var(&sizeFlag{DefaultMaxInput}, maxInputFlag,
		"refuse input files larger than `SIZE` (bytes, or with a unit: 64MiB, 1GB)")
	root.SetHelpCommand(newHelpCmd())
	root.AddCommand(newLowerCmd(), newValidateCmd(), newSimulateCmd(), newExportCmd(), newCalibrateCmd(), newExplainCmd(), newTraceCmd(), newReportCmd(), newModelCmd(), newVersionCmd())
	setUpCompletion(root)
	return root
}

// flagError makes an error in a command's flags a usage error, and adds to
// an unknown flag the flags it may have meant, as cobra does for an
// unknown command ("Did you mean this?").
func flagError(cmd *cobra.Command, err error) error {
	var ne *pflag.NotExistError
	if errors.As(err, &ne) {
		if s := flagSuggestions(cmd, ne); len(s) > 0 {
			err = fmt.Errorf("%w\n\nDid you mean this?\n\t%s", err, strings.Join(s, "\n\t"))
		}
	}
	return usageError{err}
}

// flagSuggestions returns the flags of cmd that an unknown flag may have
// meant: those it misspells (diag.Typo) or begins (--pol for --policy),
// and a long flag written with one dash (-policy), which pflag reads as
// shorthands.
func flagSuggestions(cmd *cobra.Command, ne *pflag.NotExistError) []string {
	typed := ne.GetSpecifiedName()
	if short := ne.GetSpecifiedShortnames(); short != "" {
		typed = short // -policy: the word after the dash
	}
	var names []string
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if !f.Hidden {
			names = append(names, f.Name)
		}
	})
	var out []string
	for _, n := range names {
		if n == typed || (len(typed) >= 3 && strings.HasPrefix(n, typed)) {
			out = append(out, "--"+n)
		}
	}
	if len(out) == 0 {
		if n := diag.Typo(typed, names); n != "" {
			out = append(out, "--"+n)
		}
	}
	slices.Sort(out)
	return out
}

// newHelpCmd replaces cobra's help command, which prints "Unknown help
// topic" and exits 0 for a command that does not exist, with one whose
// unknown topics are usage errors.
func newHelpCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "help [command]",
		Short: "Help about any command",
		Example: `  nvcomm help
  nvcomm help export torch`,
		RunE: func(cmd *cobra.Command, args []string) error {
			target, rest, err := cmd.Root().Find(args)
			if err != nil || target == nil || len(rest) > 0 {
				return usageError{fmt.Errorf("unknown help topic %q", strings.Join(args, " "))}
			}
			target.InitDefaultHelpFlag()
			return target.Help()
		},
	}
}

// exactArgs is cobra.ExactArgs with a usage error, so a wrong number of
// arguments exits 2.
func exactArgs(n int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if err := cobra.ExactArgs(n)(cmd, args); err != nil {
			return usageError{err}
		}
		return nil
	}
}

// report prints diagnostics (or any error) to stderr and returns the marker
// that makes Main exit 1.
func report(cmd *cobra.Command, err error) error {
	if wt, ok := err.(io.WriterTo); ok {
		wt.WriteTo(cmd.ErrOrStderr())
	} else {
		fmt.Fprintln(cmd.ErrOrStderr(), err)
	}
	return reportedError{}
}

// warn prints a warning as every diagnostic is printed, on stderr.
func warn(cmd *cobra.Command, d diag.Diagnostic) {
	fmt.Fprintln(cmd.ErrOrStderr(), d.Error())
}

// reportIn reports err, an error in the input file name, in the one style
// of input errors: "name:line:col: error: message" when err is diagnostics
// that know the position, "name: error: message" otherwise. It returns the
// marker that makes Main exit 1. Errors that are not about an input
// (a file that cannot be read or written) go back to Run instead, which
// prints them as "nvcomm: message".
func reportIn(cmd *cobra.Command, name string, err error) error {
	var d diag.Diagnostic
	if _, ok := err.(io.WriterTo); ok || errors.As(err, &d) {
		return report(cmd, err)
	}
	return report(cmd, diag.Diagnostic{File: name, Message: err.Error()})
}
