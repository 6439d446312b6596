package reshard

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nvcomm/nvcomm/internal/ir"
)

// TestGatherGroups checks which producer devices each consumer device of a
// cross-mesh Gather collects from: all of them for a replicated consumer,
// the devices of its block for a sharded one, and no Gather when a
// consumer device that is a producer device would add its own chunk.
func TestGatherGroups(t *testing.T) {
	mesh := func(devices ...int) *ir.Mesh { return &ir.Mesh{Shape: []int{len(devices)}, Devices: devices} }
	a, b := ir.Digit{Axis: 0, Stride: 8, Extent: 2}, ir.Digit{Axis: 0, Stride: 4, Extent: 2}
	type result struct {
		Starts []int
		N      int
		OK     bool
	}
	tests := map[string]struct {
		from, to *ir.Mesh
		h        []ir.Digit
		want     result
	}{
		"replicated, roots outside": {mesh(0, 1, 2, 3), mesh(4, 5), nil, result{[]int{0, 0}, 4, true}},
		"replicated, roots inside":  {mesh(0, 1, 2, 3), mesh(0, 1), nil, result{[]int{0, 0}, 4, true}},
		"halves":                    {mesh(0, 1, 2, 3), mesh(4, 5), []ir.Digit{a}, result{[]int{0, 2}, 2, true}},
		"halves, roots in blocks":   {mesh(0, 1, 2, 3), mesh(1, 2), []ir.Digit{a}, result{[]int{0, 2}, 2, true}},
		"root outside its block":    {mesh(0, 1, 2, 3), mesh(2, 5), []ir.Digit{a}, result{}},
		"not a leading part":        {mesh(0, 1, 2, 3), mesh(4, 5), []ir.Digit{b}, result{}},
		"the same digits":           {mesh(0, 1, 2, 3), mesh(4, 5, 6, 7), []ir.Digit{a, b}, result{}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			starts, n, ok := gatherGroups(tc.from, tc.to, []ir.Digit{a, b}, tc.h)
			got := result{starts, n, ok}
			if !ok {
				got = result{}
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
}
