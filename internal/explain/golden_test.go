package explain

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nvcomm/nvcomm/internal/plan"
)

// update rewrites the goldens (make golden sets it); review their diff
// before committing.
var update = os.Getenv("NVCOMM_UPDATE") != ""

// TestExamplesGolden explains the optimal plan of every example of
// testdata/examples and compares with testdata/NAME.txt.
func TestExamplesGolden(t *testing.T) {
	plans, err := filepath.Glob("../../testdata/examples/*.optimal.json")
	if err != nil || len(plans) == 0 {
		t.Fatalf("no example plans: %v", err)
	}
	for _, path := range plans {
		name := strings.TrimSuffix(filepath.Base(path), ".optimal.json")
		t.Run(name, func(t *testing.T) {
			p := decode(t, path)
			var b bytes.Buffer
			if err := Write(&b, p, All()); err != nil {
				t.Fatal(err)
			}
			golden := filepath.Join("testdata", name+".txt")
			if update {
				if err := os.WriteFile(golden, b.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (NVCOMM_UPDATE=1 writes it)", err)
			}
			if diff := cmp.Diff(string(want), b.String()); diff != "" {
				t.Errorf("explain %s (-want +got):\n%s", name, diff)
			}
		})
	}
}

// decode reads a plan file.
func decode(t *testing.T, path string) *plan.Plan {
	t.Helper()
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	p, err := plan.Decode(path, src)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
