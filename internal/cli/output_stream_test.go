package cli

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/cobra"
)

// TestStreamOutputFailureKeepsFile checks that output streamed to a file
// is atomic: when the writer fails after writing more than a buffer's
// worth (so bytes reached the temporary file), the file keeps its old
// contents, the writer's error comes back unchanged, and no temporary file
// is left beside it.
func TestStreamOutputFailureKeepsFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "plan.json")
	if err := os.WriteFile(path, []byte("old\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	failure := errors.New("encoding failed half way")
	err := streamOutput(&cobra.Command{}, path, func(w io.Writer) error {
		if _, err := w.Write(bytes.Repeat([]byte("x"), 3*bufferSize)); err != nil {
			return err
		}
		return failure
	})
	if err != failure {
		t.Errorf("error %v, want the writer's own %v", err, failure)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff("old\n", string(got)); d != "" {
		t.Errorf("contents after a failed write (-want +got):\n%s", d)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 {
		t.Errorf("%d files in the directory after a failed write, want only plan.json", len(entries))
	}
}

// TestStreamOutputWhole checks that what the writer writes in many
// pieces, to a file and to standard output, arrives whole and in order,
// and that a failing file write names the file, not a temporary one.
func TestStreamOutputWhole(t *testing.T) {
	var want strings.Builder
	write := func(w io.Writer) error {
		for i := range 20_000 { // several buffers' worth, line by line
			line := strings.Repeat("ab", i%7) + "\n"
			if _, err := io.WriteString(w, line); err != nil {
				return err
			}
		}
		return nil
	}
	if err := write(&want); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "out.txt")
	if err := streamOutput(&cobra.Command{}, path, write); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want.String() {
		t.Errorf("file holds %d bytes, want the %d written", len(got), want.Len())
	}
	var stdout bytes.Buffer
	cmd := &cobra.Command{}
	cmd.SetOut(&stdout)
	if err := streamOutput(cmd, "-", write); err != nil {
		t.Fatal(err)
	}
	if stdout.String() != want.String() {
		t.Errorf("standard output got %d bytes, want the %d written", stdout.Len(), want.Len())
	}
	missing := filepath.Join(dir, "no such dir", "out.txt")
	err = streamOutput(&cobra.Command{}, missing, write)
	if err == nil || !strings.HasPrefix(err.Error(), "cannot write "+missing+": ") || strings.Count(err.Error(), dir) != 1 {
		t.Errorf("error %q, want one naming %s only", err, missing)
	}
}
