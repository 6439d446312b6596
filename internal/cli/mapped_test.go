package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
)

// TestDropInputPages checks that giving a mapped input's pages back
// leaves it reading the same, and that an input read into memory, not
// mapped, is left as it is (MADV_DONTNEED on the heap would zero it).
func TestDropInputPages(t *testing.T) {
	want := bytes.Repeat([]byte("tensors: {t0: {mesh: m}}\n"), 3*mapMin/25)
	path := filepath.Join(t.TempDir(), "big.yaml")
	if err := os.WriteFile(path, want, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, release := withMappedInputs(context.Background())
	defer release()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, mapped := mapInput(ctx, f, int64(len(want)))
	if !mapped {
		b = bytes.Clone(want) // a system that maps nothing: read
	}
	dropInputPages(ctx, b)
	if !bytes.Equal(b, want) {
		t.Errorf("a mapped input reads differently once its pages are given back")
	}
	read := bytes.Clone(want)
	dropInputPages(ctx, read)
	if !bytes.Equal(read, want) {
		t.Errorf("an input read into memory changed when its pages were to be given back")
	}
	dropInputPages(context.Background(), read) // no list of mapped inputs
	dropInputPages(ctx, nil)
}
