package model

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestCapacity checks the experts' capacity: ⌈top_k·seq/experts·factor⌉,
// at most the sequence.
func TestCapacity(t *testing.T) {
	for _, tc := range []struct {
		experts, k, seq int
		factor          float64
		want            int
	}{
		{8, 2, 4096, 1.25, 1280},
		{8, 2, 16, 1.25, 5},
		{8, 2, 16, 1, 4},
		{8, 2, 12, 1, 3},
		{8, 1, 10, 1, 2},
		{4, 2, 8, 4, 8}, // at most the sequence
	} {
		c := &Config{Experts: tc.experts, TopK: tc.k}
		if got := capacity(c, Options{Seq: tc.seq, CapacityFactor: tc.factor}); got != tc.want {
			t.Errorf("capacity(%d experts, top %d, seq %d, factor %g) = %d, want %d", tc.experts, tc.k, tc.seq, tc.factor, got, tc.want)
		}
	}
}

// TestMoEFits checks that ep must divide the experts, and that the
// active parameters count top_k of the experts' weights.
func TestMoEFits(t *testing.T) {
	c := readConfig(t, "tiny_mixtral")
	for _, tc := range []struct {
		mesh, want string
	}{
		{"ep=3", "num_local_experts 8 is not a multiple of 3: each device of the mesh axis takes an equal part (ep splits the experts)"},
		{"ep=16", "num_local_experts 8 is not a multiple of 16: each device of the mesh axis takes an equal part (ep splits the experts)"},
	} {
		mesh, err := ParseMesh(tc.mesh)
		if err != nil {
			t.Fatal(err)
		}
		err = Check(c, Parallel{Mesh: mesh})
		if err == nil {
			t.Errorf("%s: no error, want %s", tc.mesh, tc.want)
			continue
		}
		if d := cmp.Diff(tc.want, err.Error()); d != "" {
			t.Errorf("%s (-want +got):\n%s", tc.mesh, d)
		}
	}
	w, err := write(c, Parallel{Mesh: []Axis{{EP, 2}}}, Options{Name: "m", DType: "float32", Layers: 1})
	if err != nil {
		t.Fatal(err)
	}
	m := matmulWeights(w)
	got := []share{m["l0_w_router"], m["l0_w_gate"], m["l0_w_up"], m["l0_w_down"], m["l0_wq"], m["embed"]}
	if d := cmp.Diff([]share{{1, 1}, {2, 8}, {2, 8}, {2, 8}, {1, 1}, {}}, got, cmp.AllowUnexported(share{})); d != "" {
		t.Errorf("the weights' shares that multiply each token (-want +got):\n%s", d)
	}
}
