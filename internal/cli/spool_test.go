package cli

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestSpooled writes outputs in memory and past spoolMemory, in pieces,
// that succeed or fail: the real writer receives the whole output after a
// success and nothing after a failure.
func TestSpooled(t *testing.T) {
	fail := errors.New("op 7 cannot be lowered")
	for _, tc := range []struct {
		name   string
		size   int
		err    error
		wantOK bool
	}{
		{"empty", 0, nil, true},
		{"small", 1000, nil, true},
		{"just memory", spoolMemory, nil, true},
		{"a file", 3*spoolMemory + 17, nil, true},
		{"small fails", 1000, fail, false},
		{"a file fails", 3*spoolMemory + 17, fail, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := make([]byte, tc.size)
			for i := range out {
				out[i] = byte(i * 7)
			}
			var got bytes.Buffer
			err := spooled(func(w io.Writer) error {
				for rest := out; len(rest) > 0; {
					n := min(len(rest), 64<<10+3)
					if _, err := w.Write(rest[:n]); err != nil {
						return err
					}
					rest = rest[n:]
				}
				return tc.err
			})(&got)
			if !errors.Is(err, tc.err) {
				t.Fatalf("error %v, want %v", err, tc.err)
			}
			want := out
			if !tc.wantOK {
				want = nil
			}
			if d := cmp.Diff(len(want), got.Len()); d != "" || !bytes.Equal(want, got.Bytes()) {
				t.Fatalf("output differs (length -want +got):\n%s", d)
			}
		})
	}
}
