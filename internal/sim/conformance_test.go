package sim

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/nvcomm/nvcomm/internal/plan"
)

// TestConformancePlans simulates every golden plan of the conformance
// suite: each must execute and pass.
func TestConformancePlans(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "testdata", "conformance", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Skip("no conformance plans")
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			p, err := plan.Decode(f, src)
			if err != nil {
				t.Fatal(err)
			}
			res, err := Run(p, Options{Seed: 1})
			if err != nil {
				t.Fatal(err)
			}
			if !res.Pass {
				t.Errorf("FAIL: %v", res.Mismatch)
			}
		})
	}
}
