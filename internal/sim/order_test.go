package sim

import (
	"os"
	"slices"
	"testing"

	"github.com/nvcomm/nvcomm/internal/plan"
)

// graphPlan reads the sequence-parallel MLP's plan (an Allgather, three
// local steps, a ReduceScatter) as a step graph.
func graphPlan(t *testing.T) *plan.Plan {
	t.Helper()
	const file = "../../testdata/examples/sequence_parallel_mlp.optimal.json"
	src, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	p, err := plan.Decode(file, src)
	if err != nil {
		t.Fatal(err)
	}
	plan.ToGraph(p)
	return p
}

// TestOrders: random orders of a step graph keep every wait, and differ
// from the list's; a plan of format 1, or order 0, runs in the list's.
func TestOrders(t *testing.T) {
	p := graphPlan(t)
	p.Steps[1].After = nil // the first matmul may now run before the Allgather
	list := []int{0, 1, 2, 3, 4}
	if got := order(p, 0); !slices.Equal(got, list) {
		t.Errorf("order 0 = %v, want the list's", got)
	}
	other := false
	for seed := uint64(1); seed <= 16; seed++ {
		got := order(p, seed)
		pos := make([]int, len(got))
		for k, i := range got {
			pos[i] = k
		}
		if pos[1] > pos[2] || pos[2] > pos[3] || pos[3] > pos[4] {
			t.Errorf("order %d = %v breaks the compute stream's order or the ReduceScatter's wait", seed, got)
		}
		other = other || !slices.Equal(got, list)
	}
	if !other {
		t.Error("16 random orders were all the list's")
	}
	p.Format = plan.Format
	if got := order(p, 5); !slices.Equal(got, list) {
		t.Errorf("a plan of format 1 runs in order %v, want the list's", got)
	}
}

// TestOrdersFindRace: the step graph as written passes in every order; with
// the matmul's wait for the Allgather taken out (a race the list's order
// hides), some random order fails.
func TestOrdersFindRace(t *testing.T) {
	p := graphPlan(t)
	for seed := uint64(0); seed < 8; seed++ {
		if res, err := Run(p, Options{Order: seed}); err != nil || !res.Pass {
			t.Fatalf("order %d of the sound graph: %v, %+v", seed, err, res)
		}
	}
	p.Steps[1].After = nil
	if res, err := Run(p, Options{}); err != nil || !res.Pass {
		t.Fatalf("the list's order hides the race, yet: %v, %+v", err, res)
	}
	for seed := uint64(1); seed <= 16; seed++ {
		if res, err := Run(p, Options{Order: seed}); err != nil || !res.Pass {
			return // found
		}
	}
	t.Error("no random order of 16 caught the missing wait")
}

// TestOrdersRing: a step in which a device is in two teams (a ring's
// SendRecv: device 1 receives from 0 and sends to 2) does not wait for
// itself, so every random order runs every step.
func TestOrdersRing(t *testing.T) {
	p := &plan.Plan{Format: plan.FormatGraph, Steps: []plan.Step{
		{Kind: plan.KindLocal, Type: plan.Copy, Devices: []int{0, 1, 2}},
		{Kind: plan.KindCollective, Type: plan.SendRecv, Teams: [][]int{{0, 1}, {1, 2}, {2, 0}}, After: []int{0}},
		{Kind: plan.KindLocal, Type: plan.Copy, Devices: []int{0, 1, 2}, After: []int{1}},
	}}
	for seed := uint64(1); seed <= 4; seed++ {
		if got := order(p, seed); !slices.Equal(got, []int{0, 1, 2}) {
			t.Errorf("order %d = %v, want [0 1 2]", seed, got)
		}
	}
}
