package lower_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nvcomm/nvcomm/internal/diag"
	"github.com/nvcomm/nvcomm/internal/ir"
	"github.com/nvcomm/nvcomm/internal/lower"
	"github.com/nvcomm/nvcomm/internal/plan"
)

// update reports whether golden files are to be rewritten
// (NVCOMM_UPDATE=1 go test ./...).
var update = os.Getenv("NVCOMM_UPDATE") == "1"

// goldenDirs hold fusion files whose plans are checked in beside them:
// NAME.yaml lowers to NAME.json, or fails with the diagnostics in NAME.err.
var goldenDirs = []string{"../../testdata/examples", "../../testdata/conformance"}

func TestGoldenPlans(t *testing.T) {
	for _, dir := range goldenDirs {
		files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
		if err != nil || len(files) == 0 {
			t.Fatalf("no fusion files in %s (%v)", dir, err)
		}
		for _, file := range files {
			t.Run(filepath.Base(file), func(t *testing.T) { checkGolden(t, file) })
		}
	}
}

func checkGolden(t *testing.T, file string) {
	base := strings.TrimSuffix(file, ".yaml")
	got, ext := lowerFile(t, file)
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
func lowerFile(t *testing.T, file string) (string, string) {
	t.Helper()
	src, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	f, err := ir.Parse(filepath.Base(file), src)
	if err == nil {
		var p *plan.Plan
		p, err = lower.Lower(f, lower.Options{Policy: lower.PolicyNvFuser})
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
