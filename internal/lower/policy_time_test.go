package lower_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nvcomm/nvcomm/internal/cost"
	"github.com/nvcomm/nvcomm/internal/plan"
)

// TestOptimalNeverSlower: on every fusion of the golden corpora that both
// policies lower, the optimal policy's plan is never predicted slower, on
// the built-in topology it minimizes time on, than nvFuser's rules' plan:
// nvFuser's plan is one the optimal search may choose. A fusion that fixes
// an sdpa's form (cp: ring) or a decomposed collective's (overlap: ring)
// is left out: the search does not choose it.
func TestOptimalNeverSlower(t *testing.T) {
	compared := 0
	for _, dir := range goldenDirs {
		files, err := filepath.Glob(filepath.Join(dir, "*.optimal.json"))
		if err != nil {
			t.Fatal(err)
		}
		for _, file := range files {
			other := strings.TrimSuffix(file, ".optimal.json") + ".json"
			if _, err := os.Stat(other); err != nil {
				continue // nvFuser's rules reject the fusion (NAME.err)
			}
			opt, fixed := predicted(t, file)
			nvf, _ := predicted(t, other)
			if fixed {
				continue
			}
			if opt > nvf*(1+1e-9) {
				t.Errorf("%s: policy optimal predicts %.2f µs, policy nvfuser %.2f µs", filepath.Base(file), opt*1e6, nvf*1e6)
			}
			compared++
		}
	}
	if compared < 100 {
		t.Errorf("compared %d fusions, want the corpora's (over 100)", compared)
	}
}

// predicted is a golden plan's predicted time on the built-in topology,
// and whether its fusion fixes an sdpa's form.
func predicted(t *testing.T, file string) (float64, bool) {
	t.Helper()
	src, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	p, err := plan.Decode(file, src)
	if err != nil {
		t.Fatal(err)
	}
	pr, err := cost.Predict(cost.Default(), p)
	if err != nil {
		t.Fatal(err)
	}
	return pr.Total, fixesForm(p)
}
