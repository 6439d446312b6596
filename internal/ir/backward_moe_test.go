package ir

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestBackwardThroughSelection checks that a selection (moe_topk, an
// ops.Op.Constant op) carries no gradient: the backward differentiates
// the product of the probabilities and their mask through the
// probabilities alone, and asks no rule of moe_topk — which has none, so
// a backward that did would fail.
func TestBackwardThroughSelection(t *testing.T) {
	src := `format: 2
meshes:
  m: [0, 1]
tensors:
  x: {mesh: m, shape: [2, 4, 8], placements: [Shard(0)]}
  w: {mesh: m, shape: [4, 8]}
ops:
  - {op: linear, in: [x, w], out: p}
  - {op: moe_topk, in: p, out: sel, top_k: 2}
  - {op: mul, in: [p, sel], out: c}
  - {op: sum, in: c, out: c2, axis: 2}
  - {op: sum, in: c2, out: c1, axis: 1}
  - {op: sum, in: c1, out: loss, axis: 0}
backward: {seeds: {loss: 1}, wrt: [w]}
`
	f, err := Parse("in.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, op := range f.Ops {
		if op.Of != nil && op.Of.Grad && (op.Of.Output == "c" || op.Of.Output == "sel") {
			got = append(got, op.Out.Name+" = "+string(op.Kind)+"("+strings.Join(opArgs(op), ", ")+") of "+op.Of.Output)
		}
	}
	want := []string{"p.grad = mul(c.grad, sel) of c"}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("backward ops of c and sel (-want +got):\n%s", d)
	}
}
