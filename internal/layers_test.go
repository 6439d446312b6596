// Package internal_test checks the layering of nvcomm's packages: imports
// point down the pipeline only (DESIGN §1).
package internal_test

import (
	"go/build"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/nvcomm/nvcomm/"

// allowed lists, per package, the nvcomm packages it may import.
var allowed = map[string][]string{
	"cmd/nvcomm":       {"internal/cli"},
	"internal/cli":     {"internal/sim", "internal/lower", "internal/export", "internal/cost", "internal/plan", "internal/ir", "internal/diag", "internal/checked"},
	"internal/export":  {"internal/plan"},
	"internal/cost":    {"internal/plan", "internal/checked"},
	"internal/sim":     {"internal/plan", "internal/diag"}, // the independent oracle: not internal/checked
	"internal/lower":   {"internal/cost", "internal/plan", "internal/ir", "internal/diag", "internal/checked"},
	"internal/plan":    {"internal/diag", "internal/checked"},
	"internal/ir":      {"internal/diag", "internal/checked"},
	"internal/diag":    {},
	"internal/checked": {},
}

func TestImportsPointDown(t *testing.T) {
	for pkg, ok := range allowed {
		p, err := build.Import(module+pkg, "", 0)
		if err != nil {
			t.Errorf("%s: %v", pkg, err)
			continue
		}
		for _, imp := range p.Imports {
			rel, mine := strings.CutPrefix(imp, module)
			if mine && !slices.Contains(ok, rel) {
				t.Errorf("%s imports %s; allowed: %v", pkg, rel, ok)
			}
		}
	}
}
