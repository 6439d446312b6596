package lower_test

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nvcomm/nvcomm/internal/lower"
	"github.com/nvcomm/nvcomm/internal/syntax"
)

// rowParallel is a linear whose operands are split along the summed axis
// over 4 devices while its output is whole: tokens x features of x, and
// outputs x features of w.
func rowParallel(tokens, features, outputs int) string {
	return fmt.Sprintf(`format: 1
meshes:
  m: [0, 1, 2, 3]
tensors:
  x: {mesh: m, shape: [%d, %d], placements: [Shard(1)]}
  w: {mesh: m, shape: [%d, %d], placements: [Shard(1)]}
  y: {mesh: m}
ops:
  - {op: linear, in: [x, w], out: y}
`, tokens, features, outputs, features)
}

// TestOptimalSumsOrGathers checks the optimal policy's choice for a
// contraction whose operands are split along the summed axis and whose
// output is whole: sum the partial products when that is better under the
// objective than gathering the operands, gather them (nvFuser's plan, which
// the nvfuser policy always gives) otherwise.
func TestOptimalSumsOrGathers(t *testing.T) {
	gather := []string{"Allgather", "Permute", "Allgather", "Permute", "Matmul"}
	tests := map[string]struct {
		src       string
		policy    lower.Policy
		objective lower.Objective
		want      []string
		bytes     int64
	}{
		// Gathering x and w (each Allgather of a split axis 1 followed by
		// the Permute that orders it): 3·(8·8 + 8·8)·4 B = 1536 B; an
		// Allreduce of y [8, 8]: 2·3/4·64·4 B = 384 B, and one collective
		// instead of two.
		"small output, optimal sums": {rowParallel(8, 32, 8), lower.PolicyOptimal, lower.ObjectiveTime,
			[]string{"Matmul", "Allreduce"}, 384},
		"small output, optimal sums for bytes": {rowParallel(8, 32, 8), lower.PolicyOptimal, lower.ObjectiveBytes,
			[]string{"Matmul", "Allreduce"}, 384},
		"small output, nvfuser gathers": {rowParallel(8, 32, 8), lower.PolicyNvFuser, "", gather, 1536},
		// Gathering: 3·(64·2 + 64·2)·4 B = 3072 B in two Allgathers; an
		// Allreduce of y [64, 64]: 2·3/4·4096·4 B = 24576 B in one, which
		// the cost model predicts faster (a collective's latency, 20 µs,
		// is worth 6 MB at NVLink's rate).
		"large output, optimal gathers for bytes": {rowParallel(64, 8, 64), lower.PolicyOptimal, lower.ObjectiveBytes, gather, 3072},
		"large output, optimal sums for time": {rowParallel(64, 8, 64), lower.PolicyOptimal, lower.ObjectiveTime,
			[]string{"Matmul", "Allreduce"}, 24576},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f, err := syntax.Parse("f.yaml", []byte(tc.src))
			if err != nil {
				t.Fatal(err)
			}
			p, err := lower.Lower(f, lower.Options{Policy: tc.policy, Objective: tc.objective})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, s := range p.Steps {
				got = append(got, s.Type)
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("steps (-want +got):\n%s", d)
			}
			if p.Summary.BytesReceivedMax != tc.bytes {
				t.Errorf("bytes_received_max %d, want %d", p.Summary.BytesReceivedMax, tc.bytes)
			}
		})
	}
}
