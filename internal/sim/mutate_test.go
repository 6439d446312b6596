package sim

import (
	"encoding/json"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/nvcomm/nvcomm/internal/plan"
)

// TestMutatedPlans changes one number at a time in every conformance plan
// (counts, dims, teams, roots, shapes, schedule positions, …) and checks
// that Run never panics and reports PASS exactly when it has no mismatch.
func TestMutatedPlans(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("..", "..", "testdata", "conformance", "*.json"))
	r := rand.New(rand.NewPCG(1, 2))
	for _, file := range files {
		src, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for range 40 {
			mutated := mutateNumber(t, src, r)
			p, err := plan.Decode(file, mutated)
			if err != nil {
				continue
			}
			res, err := Run(p, Options{MaxBytes: 1 << 20})
			if err == nil && res.Pass != (res.Mismatch == nil) {
				t.Errorf("%s: pass = %v with mismatch %v", file, res.Pass, res.Mismatch)
			}
		}
	}
}

// mutateNumber replaces one number of a JSON document with a small random
// integer.
func mutateNumber(t *testing.T, src []byte, r *rand.Rand) []byte {
	var doc any
	if err := json.Unmarshal(src, &doc); err != nil {
		t.Fatal(err)
	}
	var slots []func(float64)
	collectNumbers(doc, func(set func(float64)) { slots = append(slots, set) })
	if len(slots) > 0 {
		slots[r.IntN(len(slots))](float64(r.IntN(34) - 2))
	}
	out, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// collectNumbers calls found with a setter for every number in v.
func collectNumbers(v any, found func(func(float64))) {
	switch v := v.(type) {
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(v)) {
			x := v[k]
			if _, ok := x.(float64); ok {
				found(func(n float64) { v[k] = n })
			} else {
				collectNumbers(x, found)
			}
		}
	case []any:
		for i, x := range v {
			if _, ok := x.(float64); ok {
				found(func(n float64) { v[i] = n })
			} else {
				collectNumbers(x, found)
			}
		}
	}
}
