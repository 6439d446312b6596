package sim

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/nvcomm/nvcomm/internal/plan"
)

// FuzzRun checks that Run never panics on a decodable plan, and that a
// result passes exactly when it has no mismatch.
func FuzzRun(f *testing.F) {
	seeds := []*plan.Plan{seedPlan(), bareAllgather(), scatterPlan(), gatherPlan(), columnMajorPlan(),
		rowParallelLinearBias(), columnParallelRelu(), replicatedLayers()}
	for _, p := range seeds {
		b, err := plan.Marshal(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	files, _ := filepath.Glob(filepath.Join("..", "..", "testdata", "conformance", "*.json"))
	// A Lookup (a gather's: each device's offset, its indices as data).
	files = append(files, filepath.Join("..", "..", "testdata", "examples", "vocab_parallel_target_logit.optimal.json"))
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		p, err := plan.Decode("fuzz.json", src)
		if err != nil {
			return
		}
		res, err := Run(p, Options{MaxBytes: 1 << 22})
		if err != nil {
			return
		}
		if res.Pass != (res.Mismatch == nil) {
			t.Errorf("pass = %v with mismatch %v", res.Pass, res.Mismatch)
		}
	})
}
