package model

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nvcomm/nvcomm/internal/plan"
)

// TestTeamAxes checks that a collective's teams are named by the mesh
// axes their members differ along.
func TestTeamAxes(t *testing.T) {
	pl := &plan.Plan{Meshes: map[string]plan.Mesh{"m": {Shape: []int{2, 4}, Devices: []int{0, 1, 2, 3, 4, 5, 6, 7}}}}
	p := Parallel{Mesh: []Axis{{DP, 2}, {TP, 4}}}
	tests := []struct {
		teams [][]int
		want  string
	}{
		{[][]int{{0, 1, 2, 3}, {4, 5, 6, 7}}, "tp"},
		{[][]int{{0, 4}, {1, 5}, {2, 6}, {3, 7}}, "dp"},
		{[][]int{{0, 1, 2, 3, 4, 5, 6, 7}}, "dp×tp"},
		{[][]int{{0, 1}, {2, 3}}, "tp"},
		{nil, "?"},
	}
	for _, tc := range tests {
		if d := cmp.Diff(tc.want, teamAxes(pl, p, tc.teams)); d != "" {
			t.Errorf("teamAxes(%v) (-want +got):\n%s", tc.teams, d)
		}
	}
}

// TestScaleDown checks that the scaled-down model keeps the structure
// the mesh shards: grouped-query attention, the MLP's ratio, the padded
// vocabulary, and takes one sequence per replica.
func TestScaleDown(t *testing.T) {
	p := Parallel{Mesh: []Axis{{DP, 8}, {TP, 8}}}
	for _, tc := range []struct {
		config                                     string
		heads, kv, hidden, ffn, vocab, layers, seq int
	}{
		{"llama3_70b", 16, 8, 64, 224, 128, 2, 16},
		{"gpt3_175b", 8, 8, 32, 128, 127, 2, 16},
	} {
		c := readConfig(t, tc.config)
		s, o := ScaleDown(c, p, Options{Batch: 64, Seq: 8192})
		got := []int{s.Heads, s.KVHeads, s.Hidden, s.FFN, s.Vocab, s.Layers, o.Seq, o.Batch}
		want := []int{tc.heads, tc.kv, tc.hidden, tc.ffn, tc.vocab, tc.layers, tc.seq, 8}
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("%s: heads, kv heads, hidden, MLP, vocabulary, layers, seq, batch (-want +got):\n%s", tc.config, d)
		}
		if err := fits(s, p, o); err != nil {
			t.Errorf("%s: the scaled-down model does not fit: %v", tc.config, err)
		}
	}
}
