package sim

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/nvcomm/nvcomm/internal/diag"
	"github.com/nvcomm/nvcomm/internal/plan"
)

// overlapPlan reads an example's plan of a decomposed collective
// (testdata/examples/tp_mlp_overlap_*.yaml).
func overlapPlan(t *testing.T, name string) *plan.Plan {
	t.Helper()
	file := "../../testdata/examples/" + name + ".optimal.json"
	src, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	p, err := plan.Decode(file, src)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// overlapExamples are the examples whose plans decompose collectives and
// that the simulator runs.
var overlapExamples = []string{"fsdp_mlp_overlap", "tp_mlp_overlap_collective_k2", "tp_mlp_overlap_collective_k3", "tp_mlp_overlap_collective_k4", "tp_mlp_overlap_collective_k8",
	"tp_mlp_overlap_ring_k2", "tp_mlp_overlap_ring_k4", "tp_mlp_overlap_auto_scaled", "tp_mlp_overlap_bias"}

// TestOverlapExamples: every decomposed plan is a step graph, computes the
// MLP in its list's order and in random orders, and decomposes both
// linears (no step of theirs is a whole Allgather or ReduceScatter of
// every row).
func TestOverlapExamples(t *testing.T) {
	for _, name := range overlapExamples {
		t.Run(name, func(t *testing.T) {
			p := overlapPlan(t, name)
			if !p.Graph() {
				t.Fatalf("format %d, want a step graph", p.Format)
			}
			if ds := plan.Validate(p); len(ds) > 0 {
				t.Fatalf("validate: %v", ds)
			}
			for seed := range uint64(12) {
				if res, err := Run(p, Options{Order: seed}); err != nil || !res.Pass {
					t.Fatalf("order %d: %v %+v", seed, err, res)
				}
			}
			for _, s := range p.Steps {
				if !strings.Contains(s.Output, "/overlap/") && s.Kind == plan.KindCollective {
					t.Errorf("step %d (%s) writes %s: not a chunk's", s.ID, s.Type, s.Output)
				}
			}
		})
	}
}

// TestOverlapMutants: a decomposed collective (of the first operand, the
// partial sums or a linear's weight) with a chunk cut from the wrong
// rows, chunks put back in the wrong order, or a Matmul that no
// longer waits for its chunk's Allgather (a race the list's order hides)
// is rejected by validate and fails simulation (in some order, for the
// race).
func TestOverlapMutants(t *testing.T) {
	for _, tc := range []struct {
		name, file string
		mutate     func(p *plan.Plan)
		// validate is a part of the message validate must report.
		validate string
		race     bool
	}{
		{"chunk cut from the wrong offset", "tp_mlp_overlap_collective_k2", func(p *plan.Plan) {
			s := firstStep(t, p, func(s *plan.Step) bool { return s.Type == plan.Concat && s.Output == "h/overlap/x/0" })
			w := slices.Clone(s.Windows[0])
			w[1] += w[2] // rows of chunk 1, gathered as chunk 0's
			s.Windows = [][]int{w}
		}, "is not step 0 of the collective-based decomposed collective", false},
		{"reduce-scattered chunk from the wrong offset", "tp_mlp_overlap_collective_k4", func(p *plan.Plan) {
			s := firstStep(t, p, func(s *plan.Step) bool { return s.Type == plan.Concat && s.Output == "y/overlap/a/3" })
			s.Windows = [][]int{{s.Windows[0][0], 0, s.Windows[0][2]}}
		}, "is not step 3 of the collective-based decomposed collective", false},
		{"ring's products put back in the wrong order", "tp_mlp_overlap_ring_k4", func(p *plan.Plan) {
			s := firstStep(t, p, func(s *plan.Step) bool { return s.Type == plan.Concat && s.Output == "h" })
			s.Inputs = append(slices.Clone(s.Inputs[1:]), s.Inputs[0])
		}, "of the ring-based decomposed collective", false},
		{"a ring round's rows cut from the wrong block", "tp_mlp_overlap_ring_k2", func(p *plan.Plan) {
			s := firstStep(t, p, func(s *plan.Step) bool { return s.Type == plan.Concat && s.Output == "y/overlap/a/0" })
			s.Windows = [][]int{{s.Windows[0][0], 0, s.Windows[0][2]}} // device 0's own rows first: block 1 is due
		}, "of the ring-based decomposed collective", false},
		{"a bias subtracted after the ring's last round", "tp_mlp_overlap_bias", func(p *plan.Plan) {
			s := firstStep(t, p, func(s *plan.Step) bool { return s.Type == plan.Pointwise && s.Output == "y" })
			sub := "sub"
			s.Func = &sub
		}, "of the ring-based decomposed collective", false},
		{"a bias added to the first chunk's product only", "tp_mlp_overlap_bias", func(p *plan.Plan) {
			s := firstStep(t, p, func(s *plan.Step) bool { return s.Type == plan.Pointwise && s.Output == "h" })
			s.Inputs = []string{"h/overlap/y/0", s.Inputs[1]}
			s.Count.Input /= 2
			s.Dims = []int{s.Dims[0] / 2, s.Dims[1]}
			s.InputDims = [][]int{s.Dims, s.InputDims[1]}
		}, "of the collective-based decomposed collective", false},
		{"a weight's chunk cut from the wrong rows", "fsdp_mlp_overlap", func(p *plan.Plan) {
			s := firstStep(t, p, func(s *plan.Step) bool { return s.Type == plan.Concat && s.Output == "h/overlap/w/1" })
			s.Windows = [][]int{{s.Windows[0][0], 0, s.Windows[0][2]}} // chunk 0's rows of the weight again
		}, "is not step 1 of the collective-based decomposed collective", false},
		{"a weight's column blocks put back in the wrong order", "fsdp_mlp_overlap", func(p *plan.Plan) {
			s := firstStep(t, p, func(s *plan.Step) bool { return s.Type == plan.Concat && s.Output == "h" })
			s.Inputs = []string{s.Inputs[1], s.Inputs[0]}
		}, "of the collective-based decomposed collective", false},
		{"a ring round's product of the weight's block it sends on", "fsdp_mlp_overlap", func(p *plan.Plan) {
			s := firstStep(t, p, func(s *plan.Step) bool { return s.Type == plan.Matmul && s.Output == "y/overlap/y/1" })
			s.Inputs = []string{s.Inputs[0], "y/overlap/w/2"} // round 2's block, multiplied in round 1
		}, "of the ring-based decomposed collective", false},
		{"a Matmul that does not wait for its weight chunk's Allgather", "fsdp_mlp_overlap", func(p *plan.Plan) {
			s := firstStep(t, p, func(s *plan.Step) bool { return s.Type == plan.Matmul && s.Output == "h/overlap/y/1" })
			s.After = nil
		}, "nothing orders the two", true},
		{"a Matmul that does not wait for its chunk's Allgather", "tp_mlp_overlap_collective_k2", func(p *plan.Plan) {
			s := firstStep(t, p, func(s *plan.Step) bool { return s.Type == plan.Matmul && s.Output == "h/overlap/y/1" })
			s.After = nil
		}, "nothing orders the two", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := overlapPlan(t, tc.file)
			tc.mutate(p)
			ds := plan.Validate(p)
			if !slices.ContainsFunc(ds, func(d diag.Diagnostic) bool { return strings.Contains(d.Error(), tc.validate) }) {
				t.Errorf("validate = %v, want a problem with %q", ds, tc.validate)
			}
			for seed := range uint64(16) {
				if res, err := Run(p, Options{Order: seed}); err != nil || !res.Pass {
					if !tc.race || seed > 0 {
						return // caught; a race only in an order the list's does not take
					}
					t.Fatalf("the list's order hides the race, yet order 0 failed: %v %+v", err, res)
				}
				if !tc.race {
					t.Fatalf("order %d passed", seed)
				}
			}
			t.Error("no order of 16 caught the mutant")
		})
	}
}

// firstStep returns p's first step that is, failing the test when none is.
func firstStep(t *testing.T, p *plan.Plan, is func(s *plan.Step) bool) *plan.Step {
	t.Helper()
	for i := range p.Steps {
		if is(&p.Steps[i]) {
			return &p.Steps[i]
		}
	}
	t.Fatal("no such step")
	return nil
}
