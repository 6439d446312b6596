package model

import (
	"strings"
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
		if got := capacity(c, Options{CapacityFactor: tc.factor}, tc.seq); got != tc.want {
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

// TestRoutingGroups checks the routing's groups: each sequence, or under
// context parallelism each sequence's cp slice (Megatron-Core's router
// and capacity see a cp rank's own tokens), so that the capacity is
// ⌈top_k·(seq/cp)/experts·factor⌉ and the routing's tensors are [cp,
// batch, seq/cp, ...] in the unsharded program too.
func TestRoutingGroups(t *testing.T) {
	c := readConfig(t, "tiny_mixtral")
	type routing struct{ Capacity, Weights, Back string }
	for _, tc := range []struct {
		mesh string
		want routing
	}{
		{"ep=2", routing{"capacity: 10", "shape: [2, 32, 8, 1]", "placements: [Shard(0)]}   # [batch, experts, capacity, hidden]"}},
		{"cp=2,ep=2", routing{"capacity: 5", "shape: [2, 2, 16, 8, 1]", "placements: [Shard(0), Shard(1)]}   # [cp, batch, experts, capacity, hidden]"}},
		{"ep=2,cp=4,tp=2", routing{"capacity: 3", "shape: [4, 2, 8, 8, 1]", "placements: [Shard(1), Shard(0), Replicate()]}   # [cp, batch, experts, capacity, hidden]"}},
	} {
		mesh, err := ParseMesh(tc.mesh)
		if err != nil {
			t.Fatal(err)
		}
		src, err := Fusion(c, NewParallel(mesh, false), Options{Name: "m", Batch: 2, Seq: 32, DType: "float32", Layers: 1})
		if err != nil {
			t.Fatal(err)
		}
		var got routing
		for line := range strings.SplitSeq(string(src), "\n") {
			after := func(key string) string { return line[strings.Index(line, key):] }
			switch {
			case strings.Contains(line, "op: moe_dispatch"):
				got.Capacity = strings.TrimSuffix(after("capacity:"), "}")
			case strings.HasPrefix(line, "  l0_weights_b: "):
				got.Weights = after("shape:")[:strings.Index(after("shape:"), "]")+1]
			case strings.HasPrefix(line, "  l0_back: "):
				got.Back, _, _ = strings.Cut(after("placements:"), ": back")
			}
		}
		if d := cmp.Diff(tc.want, got); d != "" {
			t.Errorf("%s: the routing's groups (-want +got):\n%s", tc.mesh, d)
		}
	}
}
