package difftest

import (
	"os"
	"path/filepath"
	"testing"
)

// TestRegressions re-checks fusions that once failed the differential test
// (testdata/regress): each must lower to a valid plan that simulates PASS
// under the optimal policy, and be rejected or do the same under nvfuser.
// Their plans are also pinned as goldens (internal/lower's TestGoldenPlans).
func TestRegressions(t *testing.T) {
	files, err := filepath.Glob("../../testdata/regress/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no regression fusions (%v)", err)
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			src, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			v := check(Case{Src: string(src)}, 1, true)
			if o := v.optimal; o.kind != "pass" {
				t.Errorf("policy optimal: %s: %s", o.kind, o.reason)
			}
			if o := v.nvfuser; o.failed() {
				t.Errorf("policy nvfuser: %s: %s", o.kind, o.reason)
			}
		})
	}
}
