package difftest

import (
	"testing"

	"github.com/nvcomm/nvcomm/internal/lower"
	"github.com/nvcomm/nvcomm/internal/plan"
	"github.com/nvcomm/nvcomm/internal/sim"
	"github.com/nvcomm/nvcomm/internal/syntax"
)

// noncontiguous is the seed PR's disabled test Allgather_LoopSplit_Noncontiguous
// (conformance case L-13) with D = 4: the gathered axis is not outermost.
const noncontiguous = `
meshes: {m: [0, 1, 2, 3]}
tensors:
  tv0:
    mesh: m
    shape: [2, 12]
    schedule:
      - outer_split: {axis: 1, factor: 4}
      - parallelize: {axis: 1, type: DIDx}
ops:
  - {op: set, in: tv0, out: tv1}
`

func lowerSource(t *testing.T, src string) *plan.Plan {
	t.Helper()
	f, err := syntax.Parse("test.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	p, err := lower.Lower(f, lower.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestNoncontiguousAllgatherNeedsPermute shows that the seed's
// non-contiguous allgather passes because of its Permute step, and that the
// same plan without it — what nvFuser emitted at the seed — computes wrong
// data.
func TestNoncontiguousAllgatherNeedsPermute(t *testing.T) {
	p := lowerSource(t, noncontiguous)
	var types []string
	for _, s := range p.Steps {
		types = append(types, s.Type)
	}
	if len(types) != 2 || types[0] != plan.Allgather || types[1] != plan.Permute {
		t.Fatalf("steps = %v, want [Allgather Permute]", types)
	}
	res, err := sim.Run(p, sim.Options{})
	if err != nil || !res.Pass {
		t.Fatalf("plan with Permute: err=%v result=%+v", err, res)
	}

	// Drop the Permute: the Allgather writes tv1 directly.
	bare := *p
	bare.Steps = []plan.Step{p.Steps[0]}
	bare.Steps[0].Output = "tv1"
	bare.Summary.LocalSteps = 0
	if problems := plan.Validate(&bare); len(problems) > 0 {
		t.Fatalf("the bare plan should be well-formed: %v", problems)
	}
	res, err = sim.Run(&bare, sim.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Pass {
		t.Fatal("the plan without its Permute passed simulation; it must not")
	}
	if m := res.Mismatch; m.Tensor != "tv1" {
		t.Errorf("mismatch on %q, want tv1: %+v", m.Tensor, m)
	}
}
