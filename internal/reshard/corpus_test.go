package reshard_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/nvcomm/nvcomm/internal/ir"
	"github.com/nvcomm/nvcomm/internal/syntax"
)

// corpus is every example, conformance and regression fusion that parses
// (those the checker rejects have .err goldens), by file.
func corpus(t *testing.T) map[string]*ir.Fusion {
	t.Helper()
	out := map[string]*ir.Fusion{}
	for _, dir := range []string{"../../testdata/examples", "../../testdata/conformance", "../../testdata/regress"} {
		files, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
		for _, file := range files {
			src, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			if f, err := syntax.Parse(file, src); err == nil {
				out[file] = f
			}
		}
	}
	return out
}
