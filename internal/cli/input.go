package cli

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"os"

	"github.com/dustin/go-humanize"
	"github.com/spf13/cobra"

	"github.com/nvcomm/nvcomm/internal/checked"
)

// DefaultMaxInput is the largest input file nvcomm reads unless
// --max-input raises it. A fusion or plan of this size already takes
// seconds and gigabytes to decode; without a limit, `validate /dev/zero`
// would read until the process runs out of memory.
const DefaultMaxInput = 64 << 20

// maxInputFlag is the name of the root's persistent flag for the limit.
const maxInputFlag = "max-input"

// PlanInputFactor is how many times --max-input a plan may be. A plan
// states per step what its fusion states per op (names, shapes, teams,
// counts): the plans of the generated families are 12-14 times their
// fusion files, and small hand-written fusions up to 16 times, so a fusion
// under the input limit lowers to a plan under this one. No factor covers
// every fusion (one op on a big mesh lists the mesh in every step), so
// `lower` also refuses to write a plan past it (planLimitWriter): a plan
// lower writes is one the other commands read with the same flags.
// Decoding JSON costs about 10 bytes of memory per byte, a tenth of
// YAML's.
const PlanInputFactor = 32

// sizeFlag is a flag holding a positive byte count, written with or without
// a unit: 4096, 64MiB, 1.5GB. Zero means unset (--memory-budget: no limit).
type sizeFlag struct{ bytes int64 }

// String is the flag's value for the help's "(default ...)": empty when
// unset, so that the help prints no default rather than "0 B", which would
// read as a limit of nothing; the flag's usage says what unset means.
func (s *sizeFlag) String() string {
	if s.bytes == 0 {
		return ""
	}
	return humanize.IBytes(uint64(s.bytes))
}

func (s *sizeFlag) Type() string { return "size" }

func (s *sizeFlag) Set(v string) error {
	n, err := humanize.ParseBytes(v)
	switch {
	case err != nil:
		return fmt.Errorf("not a size (a byte count such as 4096, 64MiB or 1GB): %q", v)
	case n == 0:
		return errors.New("must be positive")
	case n > math.MaxInt64:
		return fmt.Errorf("%s is too large", v)
	}
	s.bytes = int64(n)
	return nil
}

// inputLimit returns the --max-input in effect for cmd.
func inputLimit(cmd *cobra.Command) int64 {
	if f := cmd.Flag(maxInputFlag); f != nil {
		if s, ok := f.Value.(*sizeFlag); ok {
			return s.bytes
		}
	}
	return DefaultMaxInput
}

// planLimit returns the largest plan nvcomm reads or writes for cmd:
// PlanInputFactor times --max-input, at most int64's largest.
func planLimit(cmd *cobra.Command) int64 {
	if n, ok := checked.Mul(inputLimit(cmd), PlanInputFactor); ok {
		return n
	}
	return math.MaxInt64
}

// readInput reads a file argument that is not a plan (a fusion, topology
// or CSV file), "-" meaning standard input, and returns the name to use in
// diagnostics. A read error, or input beyond the --max-input limit, names
// the argument as given and exits 1.
func readInput(cmd *cobra.Command, arg string) (string, []byte, error) {
	return readArg(cmd, arg, false)
}

// readPlanOrFusion is readInput for an argument that may be a plan: one
// whose first byte but white space is '{' may be as large as planLimit.
func readPlanOrFusion(cmd *cobra.Command, arg string) (string, []byte, error) {
	return readArg(cmd, arg, true)
}

func readArg(cmd *cobra.Command, arg string, plans bool) (string, []byte, error) {
	if arg == "-" {
		b, err := readLimited(cmd, "<stdin>", cmd.InOrStdin(), plans)
		return "<stdin>", b, err
	}
	f, err := os.Open(arg)
	if err != nil {
		return arg, nil, fmt.Errorf("cannot read %s: %w", arg, pathErr(err))
	}
	defer f.Close()
	b, err := readLimited(cmd, arg, f, plans)
	return arg, b, err
}

// readFile reads the file at path, not a plan, within the --max-input
// limit.
func readFile(cmd *cobra.Command, path string) ([]byte, error) {
	_, b, err := readInput(cmd, path)
	return b, err
}

// readLimited reads r to its end, or fails as soon as it has read more than
// its limit: planLimit for a plan when plans is set, --max-input for
// anything else (so neither /dev/zero nor a big YAML file is read past
// the smaller limit). A regular file's size is checked before reading
// more than its first bytes.
func readLimited(cmd *cobra.Command, name string, r io.Reader, plans bool) ([]byte, error) {
	br := bufio.NewReaderSize(r, peekSize)
	head, err := br.Peek(peekSize)
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, bufio.ErrBufferFull) {
		return nil, fmt.Errorf("cannot read %s: %w", name, pathErr(err))
	}
	plan := plans && isPlan(head)
	limit := inputLimit(cmd)
	if plan {
		limit = planLimit(cmd)
	}
	size := int64(0)
	if f, ok := r.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() {
			if fi.Size() > limit {
				return nil, tooLarge(cmd, name, plan)
			}
			size = fi.Size()
			if b, ok := mapInput(cmd.Context(), f, size); ok {
				return b, nil
			}
		}
	}
	b, err := readAll(io.LimitReader(br, limit+1), size)
	if err != nil {
		return nil, fmt.Errorf("cannot read %s: %w", name, pathErr(err))
	}
	if int64(len(b)) > limit {
		return nil, tooLarge(cmd, name, plan)
	}
	return b, nil
}

// readAll reads r to its end into a buffer of size+1 bytes, grown only if
// r holds more: io.ReadAll grows from 512 bytes, which for a plan of 100
// MB allocated, zeroed and copied three times its size and was a sixth of
// validating it.
func readAll(r io.Reader, size int64) ([]byte, error) {
	b := make([]byte, 0, max(size+1, 512)) // the 1: EOF needs no growth
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if errors.Is(err, io.EOF) {
			return b, nil
		}
		if err != nil {
			return b, err
		}
	}
}

// peekSize is how much of an input is read to tell a plan from the rest.
const peekSize = 4096

// tooLarge is the error of an input past its limit: a plan's (plan) or
// any other file's.
func tooLarge(cmd *cobra.Command, name string, plan bool) error {
	if plan {
		return fmt.Errorf("cannot read %s: larger than the plan input limit of %s (%d × --%s; raise it with --%s, e.g. --%s 128MiB for plans up to %s)",
			name, humanize.IBytes(uint64(planLimit(cmd))), PlanInputFactor, maxInputFlag, maxInputFlag, maxInputFlag,
			humanize.IBytes(PlanInputFactor<<27))
	}
	return fmt.Errorf("cannot read %s: larger than the input limit of %s (raise it with --%s, e.g. --%s 1GiB)",
		name, humanize.IBytes(uint64(inputLimit(cmd))), maxInputFlag, maxInputFlag)
}

// planLimitWriter passes a plan on to w until it is more than left bytes,
// then fails: `lower` writes no plan that the commands reading plans
// would refuse with the same --max-input. A file is then left as it was,
// and standard output, which receives a JSON plan only once it is whole
// (spooled), has had none of it (a text or dot plan's first bytes).
type planLimitWriter struct {
	w    io.Writer
	left int64
	cmd  *cobra.Command
}

func (l *planLimitWriter) Write(b []byte) (int, error) {
	if int64(len(b)) > l.left {
		return 0, fmt.Errorf("the plan is larger than the plan input limit of %s (%d × --%s), which validate, simulate, explain, report and export would refuse: lower with a larger --%s and read the plan with the same",
			humanize.IBytes(uint64(planLimit(l.cmd))), PlanInputFactor, maxInputFlag, maxInputFlag)
	}
	l.left -= int64(len(b))
	return l.w.Write(b)
}
