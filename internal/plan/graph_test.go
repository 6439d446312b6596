package plan

import (
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestToGraph rewrites example plans as step graphs: a step waits only
// for the steps of another stream whose buffers it needs, the graph
// validates, and a second rewrite changes nothing.
func TestToGraph(t *testing.T) {
	tests := map[string]map[int][]int{ // by example: the waits of its steps that have some
		"megatron_mlp":           {3: {2}},         // the Allreduce of the row-parallel product
		"sequence_parallel_mlp":  {1: {0}, 4: {3}}, // the gathered input, and the ReduceScatter of the product
		"linear_gathered_weight": {1: {0}},         // the matmul of the gathered weight
		"gpu2_allgather":         {},               // one collective
	}
	for name, want := range tests {
		t.Run(name, func(t *testing.T) {
			file := "../../testdata/examples/" + name + ".optimal.json"
			src, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			p, err := Decode(file, src)
			if err != nil {
				t.Fatal(err)
			}
			ToGraph(p)
			got := map[int][]int{}
			for _, s := range p.Steps {
				if len(s.After) > 0 {
					got[s.ID] = s.After
				}
				if s.Stream != "" {
					t.Errorf("step %d: stream %q, want the kind's own (empty)", s.ID, s.Stream)
				}
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("waits (-want +got):\n%s", diff)
			}
			if p.Format != FormatGraph {
				t.Errorf("format %d, want %d", p.Format, FormatGraph)
			}
			if problems := Validate(p); len(problems) > 0 {
				t.Errorf("the graph does not validate: %v", problems)
			}
			again := clonePlan(t, p)
			ToGraph(again)
			if diff := cmp.Diff(p, again); diff != "" {
				t.Errorf("a second rewrite changed the plan (-first +second):\n%s", diff)
			}
		})
	}
}
