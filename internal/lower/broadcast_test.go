package lower_test

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nvcomm/nvcomm/internal/lower"
	"github.com/nvcomm/nvcomm/internal/plan"
	"github.com/nvcomm/nvcomm/internal/sim"
	"github.com/nvcomm/nvcomm/internal/syntax"
)

// fusion4 is a fusion on a mesh of 4 devices, m, with the tensors and ops
// given (YAML lines, indented).
func fusion4(tensors, ops string) string {
	return "format: 2\nmeshes:\n  m: [0, 1, 2, 3]\ntensors:\n" + tensors + "\nops:\n" + ops + "\n"
}

// broadcastReplicated is a broadcast input [4, 8, 6] left replicated, read
// by an op whose output is split along the broadcast axis: the core of
// nvFuser's test_linear_logical_split (conformance M-12).
const broadcastReplicated = `  inp: {mesh: m, shape: [8, 6]}
  xb:  {mesh: m, shape: [4, 8, 6], placements: [Replicate()]}
  w:   {mesh: m, shape: [4, 6, 6], placements: [Shard(0)]}
  y:   {mesh: m, shape: [4, 8, 6], placements: [Shard(0)]}`

// TestReshardingSets checks the two rules of the resharding pass that
// nvFuser's tests hold nvcomm to: one set per distinct operand tensor, and
// no communication for a broadcast axis. Each plan is validated,
// certified and simulated.
func TestReshardingSets(t *testing.T) {
	tests := map[string]struct {
		src    string
		policy lower.Policy
		// want lists each op and its steps' types.
		want  []string
		bytes int64
	}{
		"an operand read twice as it is: no set": {
			src:    fusion4(`  tv0: {mesh: m, shape: [2, 4, 5], placements: [Shard(1)]}`, `  - {op: mul, in: [tv0, tv0], out: tv1}`),
			policy: lower.PolicyNvFuser,
			want:   []string{"tv1 = mul(tv0, tv0): Pointwise"},
		},
		"mul(tv0, tv0) into a split output, nvfuser: one Scatter read by both slots": {
			src: fusion4(`  tv0: {mesh: m, shape: [2, 4, 5]}
  tv1: {mesh: m, shape: [2, 4, 5], placements: [Shard(1)]}`, `  - {op: mul, in: [tv0, tv0], out: tv1}`),
			policy: lower.PolicyNvFuser,
			want: []string{"tv0/resharded = set(tv0): Permute Scatter",
				"tv1 = mul(tv0/resharded, tv0/resharded): Pointwise"},
			bytes: 40,
		},
		"mul(tv0, tv0) into a split output, optimal: one Slice read by both slots": {
			src: fusion4(`  tv0: {mesh: m, shape: [2, 4, 5]}
  tv1: {mesh: m, shape: [2, 4, 5], placements: [Shard(1)]}`, `  - {op: mul, in: [tv0, tv0], out: tv1}`),
			policy: lower.PolicyOptimal,
			want: []string{"tv0/resharded = set(tv0): Slice",
				"tv1 = mul(tv0/resharded, tv0/resharded): Pointwise"},
		},
		"matmul(x, x): one set for the slot that needs another sharding, none for the other": {
			src:    fusion4(`  x: {mesh: m, shape: [8, 8], placements: [Shard(1)]}`, `  - {op: matmul, in: [x, x], out: y}`),
			policy: lower.PolicyNvFuser,
			want:   []string{"x/resharded = set(x): Allgather Permute", "y = matmul(x/resharded, x): Matmul"},
			bytes:  192,
		},
		"a replicated broadcast operand of a matmul split along the broadcast axis, nvfuser": {
			src: fusion4(broadcastReplicated, `  - {op: broadcast, in: inp, out: xb, axes: [0]}
  - {op: matmul, in: [xb, w], out: y}`),
			policy: lower.PolicyNvFuser,
			want:   []string{"xb = broadcast(inp, axes=[0]): Pointwise", "y = matmul(xb, w): Slice Matmul"},
		},
		"a replicated broadcast operand of a matmul split along the broadcast axis, optimal": {
			src: fusion4(broadcastReplicated, `  - {op: broadcast, in: inp, out: xb, axes: [0]}
  - {op: matmul, in: [xb, w], out: y}`),
			policy: lower.PolicyOptimal,
			want:   []string{"xb = broadcast(inp, axes=[0]): Pointwise", "y = matmul(xb, w): Slice Matmul"},
		},
		"the broadcast operand is the second factor": {
			src: fusion4(`  a:  {mesh: m, shape: [4, 8, 6], placements: [Shard(0)]}
  v:  {mesh: m, shape: [6, 5]}
  vb: {mesh: m, shape: [4, 6, 5], placements: [Replicate()]}`, `  - {op: broadcast, in: v, out: vb, axes: [0]}
  - {op: matmul, in: [a, vb], out: y}`),
			policy: lower.PolicyNvFuser,
			want:   []string{"vb = broadcast(v, axes=[0]): Pointwise", "y = matmul(a, vb): Slice Matmul"},
		},
		"linear's weight broadcast along n, the output split along n": {
			src: fusion4(`  x:  {mesh: m, shape: [8, 6]}
  w0: {mesh: m, shape: [6]}
  w:  {mesh: m, shape: [12, 6], placements: [Replicate()]}
  y:  {shape: [8, 12], placements: [Shard(1)]}`, `  - {op: broadcast, in: w0, out: w, axes: [0]}
  - {op: linear, in: [x, w], out: y}`),
			policy: lower.PolicyNvFuser,
			want:   []string{"w = broadcast(w0, axes=[0]): Pointwise", "y = linear(x, w): Slice Matmul"},
		},
		"an inner broadcast axis of an elementwise operand, and a unary op": {
			src: fusion4(`  inp: {mesh: m, shape: [8, 6]}
  xb:  {mesh: m, shape: [8, 4, 6], placements: [Replicate()]}
  y:   {mesh: m, shape: [8, 4, 6], placements: [Shard(1)]}
  r:   {shape: [8, 4, 6], placements: [Shard(1)]}`, `  - {op: broadcast, in: inp, out: xb, axes: [1]}
  - {op: sub, in: [y, xb], out: z}
  - {op: neg, in: xb, out: r}`),
			policy: lower.PolicyNvFuser,
			want: []string{"xb = broadcast(inp, axes=[1]): Pointwise", "z = sub(y, xb): Slice Pointwise",
				"r = neg(xb): Slice Pointwise"},
		},
		"a broadcast axis split one element per device, read whole by an elementwise op and a matmul": {
			src: fusion4(`  inp: {mesh: m, shape: [8, 6]}
  xb:  {mesh: m, shape: [4, 8, 6], placements: [Shard(0)]}
  y:   {mesh: m, shape: [4, 8, 6]}
  w:   {mesh: m, shape: [4, 6, 3]}
  z:   {shape: [4, 8, 6], placements: [Replicate()]}
  p:   {shape: [4, 8, 3], placements: [Replicate()]}`, `  - {op: broadcast, in: inp, out: xb, axes: [0]}
  - {op: add, in: [xb, y], out: z}
  - {op: matmul, in: [xb, w], out: p}`),
			policy: lower.PolicyNvFuser,
			// The add broadcasts xb's one row; the matmul first copies
			// it into the block it multiplies.
			want: []string{"xb = broadcast(inp, axes=[0]): Pointwise", "z = add(xb, y): Pointwise",
				"p = matmul(xb, w): Pointwise Matmul"},
		},
		"2-D mesh, nvfuser: one Scatter for the other axis, the broadcast axis sliced": {
			src: `format: 2
meshes:
  g: [[0, 1], [2, 3]]
tensors:
  inp: {mesh: g, shape: [8, 6]}
  xb:  {mesh: g, shape: [2, 8, 6], placements: [Replicate(), Replicate()]}
  y:   {mesh: g, shape: [2, 8, 6], placements: [Shard(0), Shard(1)]}
ops:
  - {op: broadcast, in: inp, out: xb, axes: [0]}
  - {op: add, in: [xb, y], out: z}
`,
			policy: lower.PolicyNvFuser,
			want: []string{"xb = broadcast(inp, axes=[0]): Pointwise", "xb/resharded = set(xb): Permute Scatter Scatter",
				"z = add(xb/resharded, y): Slice Pointwise"},
			bytes: 192,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f, err := syntax.Parse("f.yaml", []byte(tc.src))
			if err != nil {
				t.Fatal(err)
			}
			p, err := lower.Lower(f, lower.Options{Policy: tc.policy})
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, opSteps(p)); d != "" {
				t.Errorf("ops and their steps (-want +got):\n%s", d)
			}
			if p.Summary.BytesReceivedMax != tc.bytes {
				t.Errorf("bytes_received_max %d, want %d", p.Summary.BytesReceivedMax, tc.bytes)
			}
			proveOnDevices(t, p)
		})
	}
}

// opSteps renders each op of p with its steps' types: "y = f(x): T1 T2".
func opSteps(p *plan.Plan) []string {
	var out []string
	last := -1
	for _, s := range p.Steps {
		if s.Op != last {
			out = append(out, s.Expr+":")
			last = s.Op
		}
		out[len(out)-1] += " " + s.Type
	}
	return out
}

// proveOnDevices validates and certifies p and runs it on virtual devices:
// it must compute every op's output.
func proveOnDevices(t *testing.T, p *plan.Plan) {
	t.Helper()
	if problems := plan.Validate(p); len(problems) > 0 {
		t.Fatalf("invalid plan: %v", problems)
	}
	if problems, unproven := lower.Certify(p); len(problems) > 0 || len(unproven) > 0 {
		t.Fatalf("uncertified plan: %v, unproven ops %v", problems, unproven)
	}
	res, err := sim.Run(p, sim.Options{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Pass {
		t.Fatalf("simulation mismatch: %s", fmt.Sprintf("%+v", *res.Mismatch))
	}
}
