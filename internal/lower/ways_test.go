package lower_test

import (
	"testing"

	"github.com/nvcomm/nvcomm/internal/lower"
	"github.com/nvcomm/nvcomm/internal/syntax"
)

// TestBoundOfWays checks the bound of ops that a plan may compute more
// than one way (docs/lowering.md, "An op computed more than one way"):
// with their operands resharded before, their result resharded after, or
// a contraction's partial products summed. Every policy and objective
// reports the same bound, which no plan of any of them beats; the
// optimal policy's plan under the bytes objective receives optimal bytes;
// and each plan certifies and simulates.
func TestBoundOfWays(t *testing.T) {
	linear := "  - {op: linear, in: [x, w], out: y}"
	tests := map[string]struct {
		tensors string
		ops     string
		bound   int64
		optimal int64 // bytes the optimal policy's plan receives under the bytes objective
	}{
		"the sum is cheaper: the sum's bound, under nvfuser too": {
			tensors: "  x: {mesh: m, shape: [8, 16], placements: [Shard(1)]}\n  w: {mesh: m, shape: [4, 16], placements: [Shard(1)]}\n  y: {mesh: m, placements: [Replicate()]}",
			ops:     linear, bound: 192, optimal: 192,
		},
		"the gathers are cheaper: their bound": {
			tensors: "  x: {mesh: m, shape: [8, 4], placements: [Shard(1)]}\n  w: {mesh: m, shape: [8, 4], placements: [Shard(1)]}\n  y: {mesh: m, placements: [Replicate()]}",
			ops:     linear, bound: 192, optimal: 192,
		},
		"an output split along the same type: a ReduceScatter or gathers": {
			tensors: "  x: {mesh: m, shape: [8, 16], placements: [Shard(1)]}\n  w: {mesh: m, shape: [4, 16], placements: [Shard(1)]}\n  y: {mesh: m, placements: [Shard(0)]}",
			ops:     linear, bound: 96, optimal: 96,
		},
		"a batched matmul": {
			tensors: "  a: {mesh: m, shape: [2, 8, 16], placements: [Shard(2)]}\n  b: {mesh: m, shape: [16, 4], placements: [Shard(0)]}\n  y: {mesh: m, placements: [Replicate()]}",
			ops:     "  - {op: matmul, in: [a, b], out: y}", bound: 384, optimal: 384,
		},
		"an add of two row-split tensors into a column-split one: one moves after, two before": {
			tensors: "  x: {mesh: m, shape: [8, 64], placements: [Shard(0)]}\n  w: {mesh: m, shape: [8, 64], placements: [Shard(0)]}\n  z: {mesh: m, placements: [Shard(1)]}",
			ops:     "  - {op: add, in: [x, w], out: z}", bound: 384, optimal: 384,
		},
		"a broadcast of a split vector: its input moves before, far less than its output after": {
			tensors: "  v: {mesh: m, shape: [64], placements: [Shard(0)]}\n  z: {mesh: m, shape: [64, 32], placements: [Shard(1)]}",
			ops:     "  - {op: broadcast, in: v, out: z, axes: [1]}", bound: 192, optimal: 192,
		},
		"a cast to a wider dtype: its input moves before, half the bytes of its output after": {
			tensors: "  x: {mesh: m, dtype: bfloat16, shape: [8, 64], placements: [Shard(0)]}\n  y: {mesh: m, placements: [Shard(1)]}",
			ops:     "  - {op: cast, in: x, out: y, dtype: float32}", bound: 192, optimal: 192,
		},
		"two ops read one operand resharded alike: one copy's bound, under nvfuser (a copy per op) too": {
			tensors: "  x: {mesh: m, shape: [8, 16], placements: [Shard(0)]}\n  w1: {mesh: m, shape: [16, 16], placements: [Shard(0)]}\n  w2: {mesh: m, shape: [16, 16], placements: [Shard(0)]}",
			ops:     "  - {op: linear, in: [x, w1], out: a}\n  - {op: linear, in: [x, w2], out: b}\n  - {op: add, in: [a, b], out: y}", bound: 384, optimal: 384,
		},
		"a matmul whose output is smaller than its split operand: gathering the output is the bound, not yet planned": {
			tensors: "  a: {mesh: m, shape: [8, 64], placements: [Shard(0)]}\n  b: {mesh: m, shape: [64, 2]}\n  y: {mesh: m, placements: [Replicate()]}",
			ops:     "  - {op: matmul, in: [a, b], out: y}", bound: 48, optimal: 1536,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f, err := syntax.Parse("f.yaml", []byte(fusion4(tc.tensors, tc.ops)))
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
					if policy == lower.PolicyOptimal && obj == lower.ObjectiveBytes && p.Summary.BytesReceivedMax != tc.optimal {
						t.Errorf("the optimal policy's plan under bytes receives %d B, want %d", p.Summary.BytesReceivedMax, tc.optimal)
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
