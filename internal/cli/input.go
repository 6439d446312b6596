package cli

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"

	"github.com/dustin/go-humanize"
	"github.com/spf13/cobra"
)

// DefaultMaxInput is the largest input file nvcomm reads unless
// --max-input raises it. A fusion or plan of this size already takes
// seconds and gigabytes to decode; without a limit, `validate /dev/zero`
// would read until the process runs out of memory.
const DefaultMaxInput = 64 << 20

// maxInputFlag is the name of the root's persistent flag for the limit.
const maxInputFlag = "max-input"

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

// readInput reads a file argument, "-" meaning standard input, and returns
// the name to use in diagnostics. A read error, or input beyond the
// --max-input limit, names the argument as given and exits 1.
func readInput(cmd *cobra.Command, arg string) (string, []byte, error) {
	if arg == "-" {
		b, err := readLimited(cmd, "<stdin>", cmd.InOrStdin())
		return "<stdin>", b, err
	}
	b, err := readFile(cmd, arg)
	return arg, b, err
}

// readFile reads the file at path within the --max-input limit.
func readFile(cmd *cobra.Command, path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("cannot read %s: %w", path, pathErr(err))
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() && fi.Size() > inputLimit(cmd) {
		return nil, tooLarge(cmd, path) // fail before reading a byte
	}
	return readLimited(cmd, path, f)
}

// readLimited reads r to its end, or fails as soon as it has read more than
// the limit: devices and pipes have no size to check beforehand.
func readLimited(cmd *cobra.Command, name string, r io.Reader) ([]byte, error) {
	limit := inputLimit(cmd)
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, fmt.Errorf("cannot read %s: %w", name, pathErr(err))
	}
	if int64(len(b)) > limit {
		return nil, tooLarge(cmd, name)
	}
	return b, nil
}

func tooLarge(cmd *cobra.Command, name string) error {
	return fmt.Errorf("cannot read %s: larger than the input limit of %s (raise it with --%s, e.g. --%s 1GiB)",
		name, humanize.IBytes(uint64(inputLimit(cmd))), maxInputFlag, maxInputFlag)
}
