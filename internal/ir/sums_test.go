package ir

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestSumsLate checks which ops build leaves computing on pending terms
// of sums (sums.go): an add, sub or neg whose operands are all terms of
// sums alike — a Partial(sum) tensor's, a contraction's that propagation
// combines and only this op reads, another such op's — and what it does
// where a chain ends (the output "y/terms", summed into y after it).
func TestSumsLate(t *testing.T) {
	oneD := "format: 2\nmeshes:\n  m: [0, 1, 2, 3]\ntensors:\n" +
		"  a:  {mesh: m, shape: [8, 16], placements: [Shard(1)]}\n" +
		"  w1: {mesh: m, shape: [16, 8], placements: [Shard(0)]}\n" +
		"  w2: {mesh: m, shape: [16, 8], placements: [Shard(0)]}\n"
	twoD := "format: 2\nmeshes:\n  g: [[0, 1, 2, 3], [4, 5, 6, 7]]\ntensors:\n" +
		"  a1: {mesh: g, shape: [8, 16], placements: [Shard(0), Shard(1)]}\n" +
		"  w:  {mesh: g, shape: [16, 8], placements: [Replicate(), Shard(0)]}\n"
	products := "  - {op: matmul, in: [a, w1], out: p1}\n  - {op: matmul, in: [a, w2], out: p2}\n"
	for _, tc := range []struct {
		name, src string
		want      []string // the ops, what holds pending terms, what was inserted
	}{
		{"two products added", oneD + "ops:\n" + products + "  - {op: add, in: [p1, p2], out: s}\n", []string{
			"p1 = matmul(a, w1) terms [4 8 8]",
			"p2 = matmul(a, w2) terms [4 8 8]",
			"s/terms = add(p1, p2) terms [4 8 8]",
			"s = sum(s/terms, axis=0) inserted after op 2",
		}},
		{"a chain of add, sub and neg with a Partial input, then relu", oneD +
			"  p: {mesh: m, shape: [8, 8], placements: [Partial(sum)]}\nops:\n" + products +
			"  - {op: sub, in: [p1, p2], out: s}\n  - {op: add, in: [p, s], out: u}\n  - {op: neg, in: u, out: v}\n  - {op: relu, in: v, out: y}\n",
			[]string{
				"p1 = matmul(a, w1) terms [4 8 8]",
				"p2 = matmul(a, w2) terms [4 8 8]",
				"s = sub(p1, p2) terms [4 8 8]",
				"u = add(p, s) terms [4 8 8]",
				"v/terms = neg(u) terms [4 8 8]",
				"v = sum(v/terms, axis=0) inserted after op 4",
				"y = relu(v)",
			}},
		{"a product read twice keeps its sum", oneD + "ops:\n" + products +
			"  - {op: add, in: [p1, p2], out: s}\n  - {op: relu, in: p1, out: r}\n", []string{
			"p1 = matmul(a, w1)",
			"p2 = matmul(a, w2)",
			"s = add(p1, p2)",
			"r = relu(p1)",
		}},
		{"a product beside values keeps its sum while others are summed late", oneD + "  b: {mesh: m, shape: [8, 8]}\n  w3: {mesh: m, shape: [16, 8], placements: [Shard(0)]}\nops:\n" + products +
			"  - {op: add, in: [p1, p2], out: s}\n  - {op: matmul, in: [a, w3], out: p3}\n  - {op: add, in: [p3, b], out: u}\n", []string{
			"p1 = matmul(a, w1) terms [4 8 8]",
			"p2 = matmul(a, w2) terms [4 8 8]",
			"s/terms = add(p1, p2) terms [4 8 8]",
			"s = sum(s/terms, axis=0) inserted after op 2",
			"p3 = matmul(a, w3)",
			"u = add(p3, b)",
		}},
		{"an output of the fusion keeps its sum", oneD + "ops:\n" + products +
			"  - {op: add, in: [p1, p2], out: s}\noutputs: [s, p1]\n", []string{
			"p1 = matmul(a, w1)",
			"p2 = matmul(a, w2)",
			"s = add(p1, p2)",
		}},
		{"a pending operand and values are not summed late", oneD + "  b: {mesh: m, shape: [8, 8]}\nops:\n" + products +
			"  - {op: add, in: [p1, b], out: s}\n", []string{
			"p1 = matmul(a, w1)",
			"p2 = matmul(a, w2)",
			"s = add(p1, b)",
		}},
		{"terms split otherwise are not summed late", twoD + "  q: {mesh: g, shape: [8, 8], placements: [Replicate(), Partial(sum)]}\n" +
			"ops:\n  - {op: matmul, in: [a1, w], out: p1}\n  - {op: add, in: [p1, q], out: s}\n",
			[]string{
				"p1 = matmul(a1, w)",
				"q/reduced = sum(q, axis=0)",
				"s = add(p1, q/reduced)",
			}},
		{"rows split on a 2-D mesh", twoD +
			"ops:\n  - {op: matmul, in: [a1, w], out: p1}\n  - {op: matmul, in: [a1, w], out: p2}\n  - {op: sub, in: [p1, p2], out: s}\n",
			[]string{
				"p1 = matmul(a1, w) terms [4 8 8]",
				"p2 = matmul(a1, w) terms [4 8 8]",
				"s/terms = sub(p1, p2) terms [4 8 8]",
				"s = sum(s/terms, axis=0) inserted after op 2",
			}},
		{"products reduce-scattered (sequence parallelism) are summed late, then scattered", oneD +
			"  s: {mesh: m, placements: [Shard(0)]}\nops:\n" + products + "  - {op: add, in: [p1, p2], out: s}\n", []string{
			"p1 = matmul(a, w1) terms [4 8 8]",
			"p2 = matmul(a, w2) terms [4 8 8]",
			"s/terms = add(p1, p2) terms [4 8 8]",
			"s = sum(s/terms, axis=0) inserted after op 2",
		}},
		{"a product reduce-scattered and a Partial input", oneD +
			"  p: {mesh: m, shape: [8, 8], placements: [Partial(sum)]}\n  s: {mesh: m, placements: [Shard(1)]}\nops:\n" +
			"  - {op: matmul, in: [a, w1], out: p1}\n  - {op: sub, in: [p, p1], out: s}\n", []string{
			"p1 = matmul(a, w1) terms [4 8 8]",
			"s/terms = sub(p, p1) terms [4 8 8]",
			"s = sum(s/terms, axis=0) inserted after op 1",
		}},
		{"nvFuser's rDID, written in a schedule, keeps its sum", "meshes:\n  m: [0, 1]\ntensors:\n" +
			"  a: {mesh: m, shape: [4, 8], placements: [Shard(1)]}\n  w: {mesh: m, shape: [8, 4], placements: [Shard(0)]}\n" +
			"  p1: {mesh: m, schedule: [{outer_split: {axis: 2, factor: 2}}, {parallelize: {axis: 2, type: DIDx}}]}\n" +
			"  p2: {mesh: m, schedule: [{outer_split: {axis: 2, factor: 2}}, {parallelize: {axis: 2, type: DIDx}}]}\n" +
			"ops:\n  - {op: matmul, in: [a, w], out: p1}\n  - {op: matmul, in: [a, w], out: p2}\n  - {op: add, in: [p1, p2], out: s}\n",
			[]string{
				"p1 = matmul(a, w)",
				"p2 = matmul(a, w)",
				"s = add(p1, p2)",
			}},
		{"format 1: Partial inputs into a sharded output", "meshes:\n  m: [0, 1, 2, 3]\ntensors:\n" +
			"  p: {mesh: m, shape: [8, 8], placements: [Partial(sum)]}\n  q: {mesh: m, shape: [8, 8], placements: [Partial(sum)]}\n" +
			"  s: {mesh: m, placements: [Shard(0)]}\nops:\n  - {op: add, in: [p, q], out: s}\n",
			[]string{
				"s/terms = add(p, q) terms [4 8 8]",
				"s = sum(s/terms, axis=0) inserted after op 0",
			}},
		{"declared terms: DTensor's Partial(sum) through sub and neg", "meshes:\n  m: [0, 1, 2, 3]\ntensors:\n" +
			"  p: {mesh: m, shape: [8, 8], placements: [Partial(sum)]}\n  q: {mesh: m, shape: [8, 8], placements: [Partial(sum)]}\n" +
			"  s: {mesh: m, placements: [Partial(sum)]}\n  u: {mesh: m, placements: [Partial(sum)]}\n" +
			"ops:\n  - {op: sub, in: [p, q], out: s}\n  - {op: neg, in: s, out: u}\n  - {op: relu, in: u, out: y}\n",
			[]string{
				"s = sub(p, q) terms [4 8 8]",
				"u = neg(s) terms [4 8 8]",
				"u/reduced = sum(u, axis=0)",
				"y = relu(u/reduced)",
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := Parse("in.yaml", []byte(tc.src))
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for i, op := range f.Ops {
				if op.Index != i {
					t.Errorf("op %d has index %d", i, op.Index)
				}
				line := op.Expr()
				if op.Out.Partial != "" {
					line += fmt.Sprintf(" terms %v", op.Out.Shape())
				}
				if in := op.Inserted; in != nil && in.Output {
					line += fmt.Sprintf(" inserted after op %d", in.For.Index)
				}
				got = append(got, line)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ops (-want +got):\n%s", diff)
			}
		})
	}
}
