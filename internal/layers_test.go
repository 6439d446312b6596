// Package internal_test checks the layering of nvcomm's packages: imports
// point down the pipeline only: cmd/nvcomm → internal/cli → internal/lower →
// internal/plan → internal/ir → internal/diag, with the cost model, the
// simulator and the exporters beside the pipeline (docs/architecture.md).
package internal_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/nvcomm/nvcomm/"

// allowed lists, per package, the nvcomm packages it may import.
var allowed = map[string][]string{
	"cmd/nvcomm":       {"internal/cli"},
	"internal/cli":     {"internal/model", "internal/auto", "internal/syntax", "internal/sim", "internal/lower", "internal/export", "internal/explain", "internal/report", "internal/cost", "internal/plan", "internal/ir", "internal/diag", "internal/checked", "internal/shard", "internal/ops"},
	"internal/explain": {"internal/cost", "internal/plan", "internal/ops"},
	"internal/report":  {"internal/explain", "internal/cost", "internal/plan", "internal/ops"},
	"internal/export":  {"internal/plan", "internal/ops"},
	"internal/cost":    {"internal/plan", "internal/diag", "internal/checked", "internal/shard", "internal/ops"},
	"internal/sim":     {"internal/plan", "internal/diag", "internal/ops"}, // the independent oracle: not internal/checked or internal/shard; the registry gives it kernels, not shards
	"internal/auto":    {"internal/syntax", "internal/lower", "internal/cost", "internal/ir", "internal/diag", "internal/checked", "internal/shard", "internal/ops"},
	"internal/lower":   {"internal/reshard", "internal/cost", "internal/plan", "internal/ir", "internal/diag", "internal/checked", "internal/shard", "internal/ops"},
	"internal/reshard": {"internal/cost", "internal/plan", "internal/ir", "internal/diag", "internal/checked", "internal/shard", "internal/ops"},
	"internal/plan":    {"internal/diag", "internal/checked", "internal/shard", "internal/ops"},
	"internal/syntax":  {"internal/ir", "internal/diag", "internal/shard", "internal/ops"}, // the fusion file's YAML, handed to ir's Source
	"internal/ir":      {"internal/diag", "internal/checked", "internal/shard", "internal/ops"},
	"internal/diag":    {},
	"internal/checked": {},
	"internal/shard":   {"internal/ops"},
	"internal/ops":     {},
	"internal/model":   {"internal/explain", "internal/cost", "internal/plan", "internal/diag"}, // writes fusion YAML from a model configuration, and sums up its plan
	// The JSON Schemas, embedded: their tests read examples and topologies.
	"schema": {},
	// Packages of tests: their non-test files import no nvcomm package.
	"internal":          {},
	"internal/difftest": {"internal/ops"}, // the random generator draws ops from the registry
	// Generators and baselines of the scale benchmarks (make bench-scale).
	"internal/scale": {},
}

// TestImportsPointDown lists every package of the module with go list, so a
// new package cannot escape the check: each must have an entry in allowed,
// and import (outside its tests) only the nvcomm packages listed there.
func TestImportsPointDown(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, "github.com/nvcomm/nvcomm/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for line := range strings.Lines(string(out)) {
		fields := strings.Fields(line)
		pkg, _ := strings.CutPrefix(fields[0], module)
		ok, known := allowed[pkg]
		if !known {
			t.Errorf("package %s has no entry in allowed: add it with the packages it may import", pkg)
			continue
		}
		for _, imp := range fields[1:] {
			rel, mine := strings.CutPrefix(imp, module)
			if mine && !slices.Contains(ok, rel) {
				t.Errorf("%s imports %s; allowed: %v", pkg, rel, ok)
			}
		}
	}
}
