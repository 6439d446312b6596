package lower

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nvcomm/nvcomm/internal/ir"
)

// TestGatherBytes checks the price of a cross-mesh Gather edge against what
// the plan bills (plan.Traffic): a root inside the senders' mesh already
// holds its chunk; one outside receives every chunk.
func TestGatherBytes(t *testing.T) {
	mesh := func(devices ...int) *ir.Mesh { return &ir.Mesh{Shape: []int{len(devices)}, Devices: devices} }
	type result struct{ Busiest, Total int64 }
	tests := map[string]struct {
		from, to *ir.Mesh
		want     result
	}{
		"roots inside":  {mesh(0, 1, 2, 3), mesh(0, 1), result{3 * 96, 2 * 3 * 96}},
		"roots outside": {mesh(0, 1, 2, 3), mesh(4, 5), result{4 * 96, 2 * 4 * 96}},
		"one of each":   {mesh(0, 1, 2, 3), mesh(3, 4), result{4 * 96, 3*96 + 4*96}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			busiest, total, ok := gatherBytes(tc.from, tc.to, 96)
			if !ok {
				t.Fatal("overflow")
			}
			if d := cmp.Diff(tc.want, result{busiest, total}); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
}
