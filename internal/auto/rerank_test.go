package auto

import (
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestRerank solves auto_mlp_step_graph_rerank (Megatron's MLP at
// sequence 32768 on 8 devices, its weights auto, within 900 MiB) as lower
// --auto does, and with StepGraph as lower --auto --step-graph does. The
// search's lists put the second weight column-split, just ahead of
// gathering it as FSDP does; as step graphs the FSDP plan overlaps its
// gathers with the products, so StepGraph takes it. The ranking lists
// the search's assignment first, its makespan as a step graph above the
// one taken, and each decision the ranking changed names the search's
// choice as its runner-up. Without StepGraph nothing is ranked.
func TestRerank(t *testing.T) {
	src, err := os.ReadFile("../../testdata/examples/auto_mlp_step_graph_rerank.yaml")
	if err != nil {
		t.Fatal(err)
	}
	budget := int64(900 << 20)
	chosen := func(res *Result) map[string]string {
		out := map[string]string{}
		for _, d := range res.Decisions {
			out[d.Tensor] = d.Chosen
		}
		return out
	}
	list, err := Solve("rerank.yaml", src, Options{MemoryBudget: budget})
	if err != nil {
		t.Fatal(err)
	}
	if list.Ranked != nil || chosen(list)["w2"] != "[Shard(1)]" {
		t.Errorf("lists: w2 %s, ranked %+v; want [Shard(1)] and none", chosen(list)["w2"], list.Ranked)
	}
	graph, err := Solve("rerank.yaml", src, Options{MemoryBudget: budget, StepGraph: true})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"w1": "[Shard(0)]", "w2": "[Shard(0)]", "h": "[Shard(0)]", "a": "[Shard(0)]"}
	if d := cmp.Diff(want, chosen(graph)); d != "" {
		t.Errorf("step graphs: choices (-want +got):\n%s", d)
	}
	if len(graph.Ranked) < 2 || graph.Ranked[0].Tensor != "" || graph.Ranked[0].Listed != list.summed {
		t.Fatalf("ranked %+v: want the search's assignment (%g s) first, and runner-ups", graph.Ranked, list.summed)
	}
	least := graph.Ranked[0]
	for _, r := range graph.Ranked[1:] {
		if r.Makespan < least.Makespan {
			least = r
		}
	}
	if least.Tensor != "w2" || least.Placements != "[Shard(0)]" || least.Makespan >= graph.Ranked[0].Makespan || graph.summed != least.Listed {
		t.Errorf("least makespan %+v (search's %+v), plan's lists %g: want w2 [Shard(0)] taken", least, graph.Ranked[0], graph.summed)
	}
	for _, d := range graph.Decisions {
		if changed := list.decision(d.Tensor).Chosen != d.Chosen; changed != d.ByMakespan ||
			changed && (d.RunnerUp != list.decision(d.Tensor).Chosen || d.Slower != graph.Ranked[0].Makespan-least.Makespan) {
			t.Errorf("decision %+v: the search chose %s", d, list.decision(d.Tensor).Chosen)
		}
	}
}
