package syntax

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzWriteBackward checks that WriteBackward never panics, that a file it
// writes from a fusion with a backward section parses (the backward as
// ops), and that writing that file again changes nothing.
func FuzzWriteBackward(f *testing.F) {
	err := filepath.WalkDir("../../testdata", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".yaml") {
			return err
		}
		src, err := os.ReadFile(path)
		if err == nil && bytes.Contains(src, []byte("backward:")) {
			f.Add(src)
		}
		return err
	})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		out, err := WriteBackward("fuzz.yaml", src)
		if err != nil || bytes.Equal(out, src) {
			return
		}
		if _, err := Parse("fuzz.yaml", out); err != nil {
			t.Fatalf("the written fusion does not parse: %v\n%s", err, out)
		}
		again, err := WriteBackward("fuzz.yaml", out)
		if err != nil || !bytes.Equal(again, out) {
			t.Fatalf("writing the written fusion again changed it (%v)", err)
		}
	})
}
