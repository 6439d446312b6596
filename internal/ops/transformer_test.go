package ops_test

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/nvcomm/nvcomm/internal/export"
	"github.com/nvcomm/nvcomm/internal/lower"
	"github.com/nvcomm/nvcomm/internal/ops"
	"github.com/nvcomm/nvcomm/internal/plan"
	"github.com/nvcomm/nvcomm/internal/sim"
	"github.com/nvcomm/nvcomm/internal/syntax"
)

// elementwiseFusion applies op to a row-sharded x (and, for a binary op, a
// column-sharded w), then adds w and gathers the sum: the op's operands
// are resharded before it or after it under either policy.
func elementwiseFusion(op string) string {
	in := "x"
	if ops.Lookup(op).Family == ops.Binary {
		in = "[x, w]"
	}
	return fmt.Sprintf(`format: 2
name: %[1]s_fusion
meshes:
  m: [0, 1, 2, 3]
tensors:
  x: {mesh: m, shape: [8, 12], placements: [Shard(0)]}
  w: {mesh: m, shape: [8, 12], placements: [Shard(1)]}
  z: {mesh: m, placements: [Replicate()]}
ops:
  - {op: %[1]s, in: %[2]s, out: y}
  - {op: add, in: [y, w], out: s}
  - {op: set, in: s, out: z}
`, op, in)
}

// TestTransformerElementwiseEndToEnd lowers, validates, certifies,
// simulates and exports a fusion of each elementwise op of transformer
// blocks under both policies, and checks that the plan with the op's
// Pointwise changed to another op of its arity FAILs simulate.
func TestTransformerElementwiseEndToEnd(t *testing.T) {
	for _, tc := range []struct{ op, other string }{
		{"div", "mul"}, {"exp", "log"}, {"log", "exp"}, {"tanh", "sigmoid"}, {"sigmoid", "tanh"},
		{"silu", "sigmoid"}, {"gelu", "gelu_tanh"}, {"gelu_tanh", "gelu"}, {"erf", "tanh"}, {"sqrt", "rsqrt"},
		{"rsqrt", "reciprocal"}, {"reciprocal", "rsqrt"}, {"square", "abs"},
	} {
		for _, policy := range lower.Policies {
			t.Run(tc.op+"/"+policy, func(t *testing.T) {
				p := lowered(t, tc.op, policy)
				if tc.op != "div" { // a unary op of a row-sharded x, its output propagated: local
					for _, s := range p.Steps {
						if s.Op == 0 && s.Type != plan.Pointwise {
							t.Errorf("op 0 (%s) moves data: step %d is a %s", tc.op, s.ID, s.Type)
						}
					}
				}
				if problems, unproven := lower.Certify(p); len(problems) > 0 || len(unproven) > 0 {
					t.Fatalf("Certify: %v, unproven ops %v", problems, unproven)
				}
				if res, err := sim.Run(p, sim.Options{Seed: 3}); err != nil || !res.Pass {
					t.Fatalf("simulate: %v, %+v", err, res)
				}
				var b bytes.Buffer
				if err := export.Torch(&b, p, export.Options{}); err != nil {
					t.Fatal(err)
				}
				if want := ops.Lookup(tc.op).Torch.Func + "("; !strings.Contains(b.String(), want) {
					t.Errorf("the exported program has no %q", want)
				}
				mutated := lowered(t, tc.op, policy)
				for i, s := range mutated.Steps {
					if s.Type == plan.Pointwise && s.Func != nil && *s.Func == tc.op {
						mutated.Steps[i].Func = &tc.other
					}
				}
				if problems := plan.Validate(mutated); len(problems) > 0 {
					t.Fatalf("Validate of the mutated plan: %v (a func of the same arity is valid)", problems)
				}
				if res, err := sim.Run(mutated, sim.Options{Seed: 3}); err != nil || res.Pass {
					t.Fatalf("simulate of the plan with %s for %s: %v, pass %v; want a FAIL", tc.other, tc.op, err, res != nil && res.Pass)
				}
			})
		}
	}
}

// lowered returns the valid plan of op's fusion under policy, with a
// Pointwise step of op.
func lowered(t *testing.T, op, policy string) *plan.Plan {
	t.Helper()
	f, err := syntax.Parse(op+".yaml", []byte(elementwiseFusion(op)))
	if err != nil {
		t.Fatal(err)
	}
	p, err := lower.Lower(f, lower.Options{Policy: lower.Policy(policy)})
	if err != nil {
		t.Fatal(err)
	}
	if !hasPointwise(p, op) {
		t.Fatalf("the plan has no Pointwise step of %s: %+v", op, p.Steps)
	}
	if problems := plan.Validate(p); len(problems) > 0 {
		t.Fatalf("Validate: %v", problems)
	}
	return p
}
