package ops_test

import (
	"slices"
	"testing"

	"github.com/nvcomm/nvcomm/internal/lower"
	"github.com/nvcomm/nvcomm/internal/ops"
	"github.com/nvcomm/nvcomm/internal/plan"
	"github.com/nvcomm/nvcomm/internal/sim"
	"github.com/nvcomm/nvcomm/internal/syntax"
)

// shapeOpFusions use each op that moves or converts data, with operands
// and outputs sharded so that the op is local, or needs a resharding
// before or after it; mutate breaks the plan's numbers or its op.
var shapeOpFusions = []struct {
	name, src string
	mutate    func(p *plan.Plan) bool
}{
	{"permute", `format: 2
meshes:
  m: [0, 1, 2, 3]
tensors:
  x: {mesh: m, shape: [8, 12, 6], placements: [Shard(1)]}
  y: {placements: [Shard(0)]}
  w: {placements: [Shard(2)]}
  z: {placements: [Replicate()]}
ops:
  - {op: permute, in: x, out: y, dims: [1, -1, 0]}
  - {op: permute, in: x, out: w, dims: [2, 1, 0]}
  - {op: add, in: [y, y], out: s}
  - {op: set, in: s, out: z}
`, func(p *plan.Plan) bool { // a Permute that moves the wrong dims
		for i, s := range p.Steps {
			if s.Type == plan.Permute && len(s.Perm) == 3 {
				p.Steps[i].Perm = []int{s.Perm[1], s.Perm[0], s.Perm[2]}
				p.Steps[i].Dims = []int{s.Dims[1], s.Dims[0], s.Dims[2]}
				return true
			}
		}
		return false
	}},
	{"reshape", `format: 2
meshes:
  m: [0, 1]
tensors:
  x: {mesh: m, shape: [8, 24], placements: [Shard(1)]}
  q: {placements: [Shard(1)]}
  r: {placements: [Shard(0)]}
  u: {mesh: m, shape: [3, 10], placements: [Shard(1)]}
  v: {placements: [Shard(0)]}
ops:
  - {op: reshape, in: x, out: q, shape: [8, 4, -1]}
  - {op: reshape, in: q, out: r, shape: [192]}
  - {op: reshape, in: u, out: v, shape: [30]}
`, func(p *plan.Plan) bool { // the heads read as [8, 6, 4]
		return setAttr(p, "reshape", ops.Value{Key: ops.AttrShape, Ints: []int{8, 6, 4}})
	}},
	{"cast", `format: 2
meshes:
  m: [0, 1]
tensors:
  x: {mesh: m, shape: [4, 6], placements: [Shard(1)]}
  b: {mesh: m, shape: [4, 6], dtype: bfloat16, placements: [Shard(0)]}
  z: {placements: [Replicate()]}
ops:
  - {op: cast, in: x, out: xb, dtype: bfloat16}
  - {op: add, in: [xb, b], out: s}
  - {op: set, in: s, out: z}
`, func(p *plan.Plan) bool { // a cast to another dtype than its output's
		return setAttr(p, "cast", ops.Value{Key: ops.AttrDType, Str: "float16"})
	}},
	{"slice", `format: 2
meshes:
  m: [0, 1, 2, 3]
tensors:
  x: {mesh: m, shape: [8, 12], placements: [Shard(1)]}
  a: {placements: [Shard(0)]}
  b: {placements: [Replicate()]}
ops:
  - {op: slice, in: x, out: a, axis: 1, start: 2, end: -2}
  - {op: slice, in: x, out: b, axis: 0, start: -4, end: 8}
`, func(p *plan.Plan) bool { // the window one entry further
		return moveWindow(p)
	}},
	{"cat", `format: 2
meshes:
  m: [0, 1, 2, 3]
tensors:
  x: {mesh: m, shape: [4, 8], placements: [Shard(0)]}
  w: {mesh: m, shape: [4, 4]}
  z: {placements: [Shard(1)]}
ops:
  - {op: cat, in: [w, x, w], out: y, axis: -1}
  - {op: set, in: y, out: z}
`, func(p *plan.Plan) bool { // the operands joined in another order
		for i, s := range p.Steps {
			if s.Type == plan.Concat && len(s.Inputs) == 3 {
				p.Steps[i].Inputs = []string{s.Inputs[1], s.Inputs[0], s.Inputs[2]}
				p.Steps[i].Windows = [][]int{s.Windows[1], s.Windows[0], s.Windows[2]}
				p.Steps[i].Count.Input = s.Count.Input / s.Windows[0][0] * s.Windows[1][0]
				return true
			}
		}
		return false
	}},
}

// moveWindow moves the window of the first Concat of one input that has
// room by one entry.
func moveWindow(p *plan.Plan) bool {
	for i, s := range p.Steps {
		if w := s.Windows; s.Type == plan.Concat && len(w) == 1 && w[0][1]+w[0][2] < w[0][0] {
			p.Steps[i].Windows = [][]int{{w[0][0], w[0][1] + 1, w[0][2]}}
			return true
		}
	}
	return false
}

// setAttr sets attribute v of the first op of kind op.
func setAttr(p *plan.Plan, op string, v ops.Value) bool {
	for i, o := range p.Ops {
		if o.Op == op {
			p.Ops[i].Attrs = ops.Values{v}
			return true
		}
	}
	return false
}

// TestShapeOpsEndToEnd lowers each shape op's fusion under both policies
// and checks that the plan validates, certifies and simulates PASS, and
// that its mutation is caught: validate or certify reports it, or the
// simulation fails.
func TestShapeOpsEndToEnd(t *testing.T) {
	for _, tc := range shapeOpFusions {
		for _, policy := range lower.Policies {
			t.Run(tc.name+"/"+policy, func(t *testing.T) {
				f, err := syntax.Parse(tc.name+".yaml", []byte(tc.src))
				if err != nil {
					t.Fatal(err)
				}
				p, err := lower.Lower(f, lower.Options{Policy: lower.Policy(policy)})
				if tc.name == "reshape" && policy == string(lower.PolicyNvFuser) {
					if err == nil {
						t.Fatal("nvFuser's rules accepted a reshape that puts a shard on an inner piece")
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				if !slices.ContainsFunc(p.Ops, func(o plan.Op) bool { return o.Op == tc.name }) {
					t.Fatalf("the plan has no %s op", tc.name)
				}
				if !proven(t, p) {
					t.Fatal("the plan is not proven")
				}
				if !tc.mutate(p) {
					t.Fatal("nothing to mutate")
				}
				if proven(t, p) {
					t.Error("the mutated plan is proven too")
				}
			})
		}
	}
}

// proven reports whether p validates, certifies and simulates PASS.
func proven(t *testing.T, p *plan.Plan) bool {
	t.Helper()
	if problems := plan.Validate(p); len(problems) > 0 {
		t.Logf("Validate: %v", problems)
		return false
	}
	if problems, unproven := lower.Certify(p); len(problems) > 0 || len(unproven) > 0 {
		t.Logf("Certify: %v, unproven ops %v", problems, unproven)
		return false
	}
	res, err := sim.Run(p, sim.Options{Seed: 5})
	if err != nil || !res.Pass {
		t.Logf("simulate: %v, %+v", err, res.Mismatch)
		return false
	}
	return true
}
