package auto

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nvcomm/nvcomm/internal/lower"
)

// TestDefaultNeverSlower solves every example fusion, every held-out
// fusion of format 2 and the test layers under the default policy and
// under nvFuser's rules: the default's choice is never predicted slower.
// Every assignment nvFuser's rules lower, the optimal policy lowers no
// slower (lower's TestOptimalNeverSlower, on the corpora) and the search's
// sum is the plan's prediction, so the fastest under the default is no
// slower than the fastest under nvFuser's rules. Of a training step the
// search's sum (each op with its gradient, each a fusion lowered under
// the policy) is compared.
func TestDefaultNeverSlower(t *testing.T) {
	fusions := map[string][]byte{}
	for name, src := range layers {
		fusions[name] = []byte(src)
	}
	for _, dir := range []string{"examples", "regress"} {
		files, err := filepath.Glob(filepath.Join("../../testdata", dir, "*.yaml"))
		if err != nil || len(files) == 0 {
			t.Fatalf("no fusions in testdata/%s: %v", dir, err)
		}
		for _, file := range files {
			src, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(src), "format: 2") {
				fusions[dir+"/"+filepath.Base(file)] = src
			}
		}
	}
	compared := 0
	for name, src := range fusions {
		nvf, err := Solve(name, src, Options{Lowering: lower.Options{Policy: lower.PolicyNvFuser}})
		if err != nil || len(nvf.Decisions) == 0 {
			continue // nvFuser's rules lower no assignment, or nothing to choose
		}
		opt, err := Solve(name, src, Options{})
		if err != nil {
			t.Errorf("%s: nvFuser's rules lower an assignment, the default policy none: %v", name, err)
			continue
		}
		optTime, nvfTime, what := opt.Seconds, nvf.Seconds, "predicts"
		if opt.BackwardOps > 0 {
			// The search prices each op with its gradient; the step's
			// plan follows propagation from its choice, under either
			// policy.
			optTime, nvfTime, what = opt.Searched, nvf.Searched, "prices the step at"
		}
		if optTime > nvfTime*(1+1e-9) {
			t.Errorf("%s: --auto %s %.2f µs under the default policy, %.2f µs under --policy nvfuser", name, what, optTime*1e6, nvfTime*1e6)
		}
		compared++
	}
	if compared < 20 {
		t.Errorf("compared %d fusions, want the layers and examples with decisions (20 or more)", compared)
	}
}
