package lower_test

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nvcomm/nvcomm/internal/lower"
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
// output is whole: sum the partial products when that moves fewer bytes
// than gathering the operands, gather them (nvFuser's plan, which the
// nvfuser policy always gives) otherwise.
func TestOptimalSumsOrGathers(t *testing.T) {
	tests := map[string]struct {
		src    string
		policy lower.Policy
		want   []string
		bytes  int64
	}{
		// Gathering x and w (each Allgather of a split axis 1 followed by
		// the Permute that orders it): 3·(8·8 + 8·8)·4 B = 1536 B; an
		// Allreduce of
		// y [8, 8]: 2·3/4·64·4 B = 384 B.
		"small output, optimal sums": {rowParallel(8, 32, 8), lower.PolicyOptimal,
			[]string{"Matmul", "Allreduce"}, 384},
		"small output, nvfuser gathers": {rowParallel(8, 32, 8), lower.PolicyNvFuser,
			[]string{"Allgather", "Permute", "Allgather", "Permute", "Matmul"}, 1536},
		// Gathering: 3·(64·2 + 64·2)·4 B = 3072 B; an Allreduce of y
		// [64, 64]: 2·3/4·4096·4 B = 24576 B.
		"large output, optimal gathers": {rowParallel(64, 8, 64), lower.PolicyOptimal,
			[]string{"Allgather", "Permute", "Allgather", "Permute", "Matmul"}, 3072},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			p := lowerSource(t, tc.src, tc.policy)
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
