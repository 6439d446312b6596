package cli

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nvcomm/nvcomm/internal/plan"
	"github.com/nvcomm/nvcomm/internal/sim"
)

// TestProbeCount checks how many input values an exported program embeds:
// never more than probeValues, however large the tensor, and no panic when
// its element count overflows int64 (issue 10: export torch of shape
// [2^30, 2^30, 8] panicked in makeslice).
func TestProbeCount(t *testing.T) {
	tests := []struct {
		name string
		t    plan.Tensor
		want int
	}{
		{"small", plan.Tensor{Shape: []int{3, 4}}, 12},
		{"scalar", plan.Tensor{Shape: []int{}}, 1},
		{"reduction axes do not count", plan.Tensor{Shape: []int{100, 3}, ReductionAxes: []int{0}}, 3},
		{"large", plan.Tensor{Shape: []int{1 << 30, 1 << 30, 1}}, probeValues},
		{"2^63 elements", plan.Tensor{Shape: []int{1 << 30, 1 << 30, 8}}, probeValues},
		{"2^64 elements", plan.Tensor{Shape: []int{65536, 65536, 65536, 65536}}, probeValues},
		{"empty", plan.Tensor{Shape: []int{1 << 62, 4, 0}}, 0},
		{"negative", plan.Tensor{Shape: []int{-2, 3}}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, probeCount(tt.t)); diff != "" {
				t.Errorf("probeCount(%v) mismatch (-want +got):\n%s", tt.t.Shape, diff)
			}
		})
	}
	// The probes themselves: 16 values of a 2^63-element input.
	p := &plan.Plan{Tensors: []plan.Tensor{{Name: "x", Shape: []int{1 << 30, 1 << 30, 8}}}}
	if got := len(probes(p, 0, sim.Wide)["x"]); got != probeValues {
		t.Errorf("probes made %d values, want %d", got, probeValues)
	}
}
