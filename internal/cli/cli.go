// Package cli implements nvcomm's command line: lower, validate and simulate,
// with exit code 0 on success, 1 when the input has errors, a plan is invalid
// or a simulation finds a mismatch, and 2 on usage errors.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"

	"github.com/spf13/cobra"
)

// Exit codes.
const (
	ExitOK    = 0
	ExitInput = 1 // bad input, invalid plan or simulation mismatch
	ExitUsage = 2
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
func Run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
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
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.CompletionOptions.HiddenDefaultCmd = true
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	root.AddCommand(newLowerCmd(), newValidateCmd())
	return root
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

// readInput reads a file argument, "-" meaning standard input, and returns
// the name to use in diagnostics.
func readInput(cmd *cobra.Command, arg string) (string, []byte, error) {
	if arg == "-" {
		b, err := io.ReadAll(cmd.InOrStdin())
		return "<stdin>", b, err
	}
	b, err := os.ReadFile(arg)
	return arg, b, err
}

// writeOutput writes data to path atomically (a temporary file in the same
// directory, then a rename), or to standard output when path is "" or "-".
func writeOutput(cmd *cobra.Command, path string, data []byte) error {
	if path == "" || path == "-" {
		_, err := cmd.OutOrStdout().Write(data)
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
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
