package ir

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestReducePartials checks the reductions the parser inserts before an
// op other than set that reads a Partial tensor: one per op, serving every
// slot that reads the tensor, named "name/reduced", marked inserted for
// those slots, and held as the terms' values are (format 1) or propagated
// (format 2).
func TestReducePartials(t *testing.T) {
	head := "meshes:\n  g: [[0, 1], [2, 3]]\ntensors:\n" +
		"  x: {mesh: g, shape: [4, 8], placements: [Shard(0), Shard(1)]}\n" +
		"  w: {mesh: g, shape: [6, 8], placements: [Replicate(), Shard(1)]}\n"
	for _, tc := range []struct {
		name, src string
		want      []string // the ops, their insertions and their outputs' placements
	}{
		{"a pending output read by mul twice", head + `  y: {placements: [Shard(0), Partial(sum)]}
ops:
  - {op: linear, in: [x, w], out: y}
  - {op: mul, in: [y, y], out: z}
`, []string{
			"y = linear(x, w) Partial sum, schedule [outer_split(1, 2) parallelize(1, DIDy) parallelize(0, DIDx)]",
			"y/reduced = sum(y, axis=0) inserted for op 2 at [0 1], schedule [outer_split(1, 2) parallelize(1, DIDy)]",
			"z = mul(y/reduced, y/reduced), schedule []",
		}},
		{"a Partial input read by two ops", head + `  p: {mesh: g, shape: [4, 6], placements: [Partial(max), Replicate()]}
ops:
  - {op: relu, in: p, out: a}
  - {op: neg, in: p, out: b}
`, []string{
			"p/reduced = max(p, axis=0) inserted for op 1 at [0], schedule []",
			"a = relu(p/reduced), schedule []",
			"p/reduced.1 = max(p, axis=0) inserted for op 3 at [0], schedule []",
			"b = neg(p/reduced.1), schedule []",
		}},
		{"propagated in format 2", "format: 2\n" + head + `  y: {mesh: g, placements: [Replicate(), Partial(sum)]}
ops:
  - {op: linear, in: [x, w], out: y}
  - {op: relu, in: y, out: z}
`, []string{
			"y = linear(x, w) Partial sum, schedule [parallelize(0, DIDx)]",
			"y/reduced = sum(y, axis=0) inserted for op 2 at [0], schedule [parallelize(0, DIDx)]",
			"z = relu(y/reduced), schedule []",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := Parse("in.yaml", []byte(tc.src))
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, op := range f.Ops {
				if op.Kind == OpLinear && op.Out.Partial == "" {
					continue
				}
				why := ""
				if in := op.Inserted; in != nil {
					why = fmt.Sprintf(" inserted for op %d at %v", in.For.Index, in.Operands)
				}
				if op.Out.Partial != "" {
					why = " Partial " + string(op.Out.Partial)
				}
				got = append(got, fmt.Sprintf("%s%s, schedule %v", op.Expr(), why, stepsText(op.Out.Schedule)))
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ops (-want +got):\n%s", diff)
			}
		})
	}
}

// stepsText writes schedule steps as "outer_split(1, 2)", "parallelize(0, DIDx)".
func stepsText(steps []ScheduleStep) []string {
	out := []string{}
	for _, s := range steps {
		if s.Kind == StepParallelize {
			out = append(out, fmt.Sprintf("parallelize(%d, %s)", s.Axis, s.Type))
		} else {
			out = append(out, fmt.Sprintf("%s(%d, %d)", s.Kind, s.Axis, s.Factor))
		}
	}
	return out
}
