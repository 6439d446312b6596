package lower_test

import (
	"testing"

	"github.com/nvcomm/nvcomm/internal/ir"
	"github.com/nvcomm/nvcomm/internal/lower"
)

// TestBoundEitherWay checks the bound of a contraction whose operands are
// split along its summed axis, which a plan computes by gathering them
// (nvFuser's way) or by summing partial products (docs/lowering.md, "An op
// computed either of two ways"): every policy and objective reports the
// same bound, which no plan of any of them beats, and each plan certifies
// and simulates.
func TestBoundEitherWay(t *testing.T) {
	linear := "  - {op: linear, in: [x, w], out: y}"
	tests := map[string]struct {
		tensors string
		ops     string
		bound   int64
	}{
		"the sum is cheaper: the sum's bound, under nvfuser too": {
			tensors: "  x: {mesh: m, shape: [8, 16], placements: [Shard(1)]}\n  w: {mesh: m, shape: [4, 16], placements: [Shard(1)]}\n  y: {mesh: m, placements: [Replicate()]}",
			ops:     linear, bound: 192,
		},
		"the gathers are cheaper: their bound": {
			tensors: "  x: {mesh: m, shape: [8, 4], placements: [Shard(1)]}\n  w: {mesh: m, shape: [8, 4], placements: [Shard(1)]}\n  y: {mesh: m, placements: [Replicate()]}",
			ops:     linear, bound: 192,
		},
		"an output split along the same type: a ReduceScatter or gathers": {
			tensors: "  x: {mesh: m, shape: [8, 16], placements: [Shard(1)]}\n  w: {mesh: m, shape: [4, 16], placements: [Shard(1)]}\n  y: {mesh: m, placements: [Shard(0)]}",
			ops:     linear, bound: 96,
		},
		"a batched matmul": {
			tensors: "  a: {mesh: m, shape: [2, 8, 16], placements: [Shard(2)]}\n  b: {mesh: m, shape: [16, 4], placements: [Shard(0)]}\n  y: {mesh: m, placements: [Replicate()]}",
			ops:     "  - {op: matmul, in: [a, b], out: y}", bound: 384,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f, err := ir.Parse("f.yaml", []byte(fusion4(tc.tensors, tc.ops)))
			if err != nil {
				t.Fatal(err)
			}
			least := int64(-1)
			for _, policy := range []lower.Policy{lower.PolicyOptimal, lower.PolicyNvFuser} {
				for _, obj := range []lower.Objective{lower.ObjectiveTime, lower.ObjectiveBytes} {
					p, err := lower.Lower(f, lower.Options{Policy: policy, Objective: obj})
					if err != nil {
						t.Fatal(err)
					}
					if problems, _ := lower.Certify(p); len(problems) > 0 {
						t.Errorf("%s, %s: certify: %v", policy, obj, problems)
					}
					if got := p.Summary.BytesLowerBound; got != tc.bound {
						t.Errorf("%s, %s: bytes_lower_bound %d, want %d", policy, obj, got, tc.bound)
					}
					if least < 0 || p.Summary.BytesReceivedMax < least {
						least = p.Summary.BytesReceivedMax
					}
					proveOnDevices(t, p)
				}
			}
			if least < tc.bound {
				t.Errorf("a plan receives %d B, below the bound %d B", least, tc.bound)
			}
		})
	}
}
