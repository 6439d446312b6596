package sim

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nvcomm/nvcomm/internal/plan"
)

// TestPendingTerms simulates the plans of the examples whose op outputs
// hold pending terms, as lowered and mutated: the reduction of the terms
// is compared with the reference, so a step that computes wrong terms
// fails at the op that writes them, whether a later op reduces them
// (partial_residual) or the fusion leaves them as its output
// (partial_grad_output).
func TestPendingTerms(t *testing.T) {
	type outcome struct {
		Pass   bool
		Op     int
		Tensor string
		Reason string
	}
	stepOf := func(p *plan.Plan, typ string) *plan.Step {
		for i := range p.Steps {
			if p.Steps[i].Type == typ {
				return &p.Steps[i]
			}
		}
		t.Fatalf("no %s step", typ)
		return nil
	}
	for _, tc := range []struct {
		name, example string
		mutate        func(p *plan.Plan)
		want          outcome
	}{
		{"output left pending", "partial_grad_output", func(*plan.Plan) {}, outcome{Pass: true}},
		{"terms reduced by the add's reduction", "partial_residual", func(*plan.Plan) {}, outcome{Pass: true}},
		{"wrong terms of an output left pending", "partial_grad_output",
			func(p *plan.Plan) { stepOf(p, plan.Matmul).TransposeB = true },
			outcome{Op: 0, Tensor: "dw", Reason: "the sum of its pending terms differs"}},
		{"wrong terms that a later op reduces", "partial_residual",
			func(p *plan.Plan) { p.Steps[2].TransposeB = false },
			outcome{Op: 2, Tensor: "y", Reason: "the sum of its pending terms differs"}},
		{"terms reduced with another op", "partial_residual",
			func(p *plan.Plan) { stepOf(p, plan.ReduceScatter).ReduceOp = new("max") },
			outcome{Op: 3, Tensor: "y/reduced", Reason: "value differs"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := filepath.Join("..", "..", "testdata", "examples", tc.example+".optimal.json")
			src, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			p, err := plan.Decode(file, src)
			if err != nil {
				t.Fatal(err)
			}
			tc.mutate(p)
			res, err := Run(p, Options{})
			if err != nil {
				t.Fatal(err)
			}
			got := outcome{Pass: res.Pass}
			if m := res.Mismatch; m != nil {
				got = outcome{Op: m.Op, Tensor: m.Tensor, Reason: m.Reason}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("simulation (-want +got):\n%s", diff)
			}
		})
	}
}
