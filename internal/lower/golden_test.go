package lower_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nvcomm/nvcomm/internal/diag"
	"github.com/nvcomm/nvcomm/internal/lower"
	"github.com/nvcomm/nvcomm/internal/plan"
	"github.com/nvcomm/nvcomm/internal/syntax"
)

// update reports whether golden files are to be rewritten
// (NVCOMM_UPDATE=1 go test ./...).
var update = os.Getenv("NVCOMM_UPDATE") == "1"

// goldenDirs hold fusion files whose plans are checked in beside them, one
// golden per policy: NAME.yaml lowers under policy nvfuser to NAME.json (or
// fails with the diagnostics in NAME.err), and under policy optimal, the
// default, to NAME.optimal.json (or NAME.optimal.err).
var goldenDirs = []string{"../../testdata/examples", "../../testdata/conformance", "../../testdata/regress"}

// goldenSuffix is what a policy's goldens add to the fusion's base name.
var goldenSuffix = map[lower.Policy]string{lower.PolicyNvFuser: "", lower.PolicyOptimal: ".optimal"}

func TestGoldenPlans(t *testing.T) {
	for _, dir := range goldenDirs {
		files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
		if err != nil || len(files) == 0 {
			t.Fatalf("no fusion files in %s (%v)", dir, err)
		}
		for _, file := range files {
			for _, policy := range lower.Policies {
				name := filepath.Base(file) + "/" + policy
				t.Run(name, func(t *testing.T) { checkGolden(t, file, lower.Policy(policy)) })
			}
		}
	}
}

func checkGolden(t *testing.T, file string, policy lower.Policy) {
	base := strings.TrimSuffix(file, ".yaml") + goldenSuffix[policy]
	got, ext := lowerFile(t, file, policy)
	golden := base + ext
	other := base + map[string]string{".json": ".err", ".err": ".json"}[ext]
	if update {
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		os.Remove(other)
		return
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("missing golden %s (run NVCOMM_UPDATE=1 go test ./...): %v", golden, err)
	}
	if d := cmp.Diff(string(want), got); d != "" {
		t.Errorf("%s mismatch (-want +got):\n%s", golden, d)
	}
}

// lowerFile lowers a fusion file and returns the plan JSON (".json") or the
// diagnostics (".err"), with the file named by its base name.
func lowerFile(t *testing.T, file string, policy lower.Policy) (string, string) {
	t.Helper()
	src, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	f, err := syntax.Parse(filepath.Base(file), src)
	if err == nil {
		var p *plan.Plan
		p, err = lower.Lower(f, lower.Options{Policy: policy})
		if err == nil {
			b, err := plan.Marshal(p)
			if err != nil {
				t.Fatal(err)
			}
			if problems := plan.Validate(p); len(problems) > 0 {
				t.Errorf("lowered plan is invalid: %v", problems)
			}
			return string(b), ".json"
		}
	}
	var dl *diag.List
	if !errors.As(err, &dl) {
		t.Fatalf("unexpected error type %T: %v", err, err)
	}
	return dl.Error() + "\n", ".err"
}
