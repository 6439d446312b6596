package ops_test

import (
	"bytes"
	"cmp"
	"os"
	"strings"
	"testing"

	"github.com/nvcomm/nvcomm/internal/export"
	"github.com/nvcomm/nvcomm/internal/lower"
	"github.com/nvcomm/nvcomm/internal/ops"
	"github.com/nvcomm/nvcomm/internal/plan"
	"github.com/nvcomm/nvcomm/internal/sim"
	"github.com/nvcomm/nvcomm/internal/syntax"
)

// TestMain adds an elementwise op, sign, to the registry before any
// test runs: the registry alone must make it an op of every phase.
func TestMain(m *testing.M) {
	ops.Default.MustRegister(ops.Op{
		Name: "sign", Family: ops.Unary, Operands: []string{"x"},
		Rule:   ops.Lookup("relu").Rule, // elementwise: the pointwise rule
		Kernel: &ops.Kernel{Value: func(a, _ float64) float64 { return float64(cmp.Compare(a, 0)) }},
		Torch:  &ops.Torch{Func: "torch.sign", Rounding: ops.Exact},
		Doc:    "−1, 0 or 1",
	})
	registerLeaky()
	os.Exit(m.Run())
}

// signFusion takes the sign of a row-sharded tensor, adds it to a column-sharded
// one and gathers the sum: resharding before the add and after it.
const signFusion = `format: 2
name: sign_extension
meshes:
  m: [0, 1, 2, 3]
tensors:
  x: {mesh: m, shape: [8, 12], placements: [Shard(0)]}
  w: {mesh: m, shape: [8, 12], placements: [Shard(1)]}
  z: {mesh: m, placements: [Replicate()]}
ops:
  - {op: sign, in: x, out: y}
  - {op: add, in: [y, w], out: s}
  - {op: set, in: s, out: z}
`

// TestRegisteredOpEndToEnd lowers, validates, certifies, simulates and
// exports a fusion that uses the op TestMain registered, under both
// policies.
func TestRegisteredOpEndToEnd(t *testing.T) {
	for _, policy := range lower.Policies {
		t.Run(policy, func(t *testing.T) {
			f, err := syntax.Parse("sign.yaml", []byte(signFusion))
			if err != nil {
				t.Fatal(err)
			}
			p, err := lower.Lower(f, lower.Options{Policy: lower.Policy(policy)})
			if err != nil {
				t.Fatal(err)
			}
			if !hasPointwise(p, "sign") {
				t.Fatalf("the plan has no Pointwise step of sign: %+v", p.Steps)
			}
			if problems := plan.Validate(p); len(problems) > 0 {
				t.Fatalf("Validate: %v", problems)
			}
			if problems, unproven := lower.Certify(p); len(problems) > 0 || len(unproven) > 0 {
				t.Fatalf("Certify: %v, unproven ops %v", problems, unproven)
			}
			res, err := sim.Run(p, sim.Options{Seed: 7})
			if err != nil || !res.Pass {
				t.Fatalf("simulate: %v, %+v", err, res)
			}
			var b bytes.Buffer
			if err := export.Torch(&b, p, export.Options{}); err != nil {
				t.Fatal(err)
			}
			for _, want := range []string{"torch.sign(", `"sign": torch.sign`, `"sign": 1`, `"sign": "exact"`} {
				if !strings.Contains(b.String(), want) {
					t.Errorf("the exported program has no %q", want)
				}
			}
		})
	}
}

// hasPointwise reports whether p has a Pointwise step applying fn.
func hasPointwise(p *plan.Plan, fn string) bool {
	for _, s := range p.Steps {
		if s.Type == plan.Pointwise && s.Func != nil && *s.Func == fn {
			return true
		}
	}
	return false
}
