package sim

import (
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nvcomm/nvcomm/internal/plan"
)

// TestMeshIndexCoords checks coords, which finds a device without a linear
// search, against the row-major definition, and checkMesh's refusals.
func TestMeshIndexCoords(t *testing.T) {
	type probe struct {
		Coords []int
		In     bool
	}
	tests := map[string]struct {
		mesh    plan.Mesh
		devices []int
		want    []probe
		err     string
	}{
		"consecutive 2-D": {
			mesh:    plan.Mesh{Shape: []int{2, 2}, Devices: []int{4, 5, 6, 7}},
			devices: []int{3, 4, 6, 7, 8},
			want:    []probe{{nil, false}, {[]int{0, 0}, true}, {[]int{1, 0}, true}, {[]int{1, 1}, true}, {nil, false}},
		},
		"shuffled": {
			mesh:    plan.Mesh{Shape: []int{3}, Devices: []int{2, 0, 1}},
			devices: []int{0, 1, 2, 3},
			want:    []probe{{[]int{1}, true}, {[]int{2}, true}, {[]int{0}, true}, {nil, false}},
		},
		"duplicate":         {mesh: plan.Mesh{Shape: []int{2}, Devices: []int{1, 1}}, err: `mesh "m": device ids must be distinct and non-negative, got [1 1]`},
		"negative":          {mesh: plan.Mesh{Shape: []int{2}, Devices: []int{-1, 0}}, err: `mesh "m": device ids must be distinct and non-negative, got [-1 0]`},
		"wraps past MaxInt": {mesh: plan.Mesh{Shape: []int{2}, Devices: []int{math.MaxInt, math.MinInt}}, err: `mesh "m": device ids must be distinct and non-negative, got [9223372036854775807 -9223372036854775808]`},
		"count":             {mesh: plan.Mesh{Shape: []int{3}, Devices: []int{0, 1}}, err: `mesh "m": shape [3] holds 3 devices, the mesh lists 2`},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			idx, err := checkMesh("m", tt.mesh)
			if tt.err != "" || err != nil {
				if d := cmp.Diff(tt.err, errString(err)); d != "" {
					t.Fatalf("checkMesh error (-want +got):\n%s", d)
				}
				return
			}
			var got []probe
			for _, d := range tt.devices {
				c, ok := idx.coords(d)
				got = append(got, probe{c, ok})
			}
			if d := cmp.Diff(tt.want, got); d != "" {
				t.Errorf("coords (-want +got):\n%s", d)
			}
		})
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
