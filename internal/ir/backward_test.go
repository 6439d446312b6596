package ir

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// backwardHead is a fusion of a linear, tanh and a sum to a rank-0
// loss, to which each case adds its backward section and declarations.
const backwardHead = `format: 2
meshes:
  m: [0, 1]
tensors:
  x: {mesh: m, shape: [4, 8], placements: [Shard(0)]}
  w: {mesh: m, shape: [6, 8]}
  dy: {mesh: m, shape: [4, 6]}
`

const backwardOps = `ops:
  - {op: linear, in: [x, w], out: h}
  - {op: tanh, in: h, out: a}
  - {op: sum, in: a, out: r, axis: 1}
  - {op: sum, in: r, out: loss, axis: 0}
`

// TestBackwardErrors checks the positioned errors of a backward section.
func TestBackwardErrors(t *testing.T) {
	for _, tc := range []struct {
		name, decls, ops, back, want string
	}{
		{"unknown wrt", "", backwardOps, "backward: {seeds: {loss: 1}, wrt: [ww]}",
			`in.yaml:13:36: error: backward wrt: unknown tensor "ww"; did you mean "w"?`},
		{"unknown seed", "", backwardOps, "backward: {seeds: {los: 1}, wrt: [w]}",
			`in.yaml:13:20: error: backward seeds: unknown tensor "los"; did you mean "loss"?`},
		{"seed of a rank-1 tensor", "", backwardOps, "backward: {seeds: {r: 1}, wrt: [w]}",
			`in.yaml:13:23: error: backward seeds: 1 is the upstream gradient of a rank-0 tensor, but "r" has shape [4]; sum it to a rank-0 loss first, or give the name of a declared input of its shape as its upstream gradient`},
		{"seed of the wrong shape", "", backwardOps, "backward: {seeds: {r: dy}, wrt: [w]}",
			`in.yaml:13:23: error: backward seeds: "dy", of shape [4, 6] and dtype float32, is not of the shape and dtype of "r", [4] and float32; declare "dy" of shape [4] and dtype float32`},
		{"seed not an input", "", backwardOps, "backward: {seeds: {loss: h}, wrt: [w]}",
			`in.yaml:13:26: error: backward seeds: the upstream gradient of "loss", "h", is not a declared input; declare it under tensors with the seed's shape (and a mesh): an input of the fusion`},
		{"wrt off the chain", "  v: {mesh: m, shape: [4]}\n", backwardOps + "  - {op: add, in: [r, v], out: q}\n", "backward: {seeds: {loss: 1}, wrt: [w, v]}",
			`in.yaml:15:39: error: backward wrt: no chain of ops leads from "v" to a seed (loss); list tensors that the seeds are computed from`},
		{"no rule", "", strings.Replace(backwardOps, "{op: tanh, in: h,", "{op: gt, in: [h, h],", 1), "backward: {seeds: {loss: 1}, wrt: [w]}",
			`in.yaml:10:5: error: ops[1]: gt has no gradient rule, and the backward needs the gradient of its operand "h"; ops with a gradient rule: ` +
				strings.Join(GradOps(), ", ") + `; keep this op off the chains from wrt to the seeds`},
		{"gradient without a backward", "  w.grad: {placements: [Shard(0)]}\n", backwardOps, "",
			`in.yaml:8:3: error: tensor "w.grad": a name ending in .grad is a gradient, which only a backward section computes; add backward: {seeds: {loss: 1}, wrt: [w]}, or rename the tensor`},
		{"gradient not computed", "  x.grad: {placements: [Shard(0)]}\n", backwardOps, "backward: {seeds: {loss: 1}, wrt: [w]}",
			`in.yaml:8:3: error: tensor "x.grad": the backward computes no gradient of "x"; list x under backward wrt, on a chain of ops to a seed, or remove the declaration`},
		{"missing wrt", "", backwardOps, "backward: {seeds: {loss: 1}}",
			`in.yaml:13:11: error: backward: missing key "wrt"; backward: {seeds: {loss: 1}, wrt: [w1, w2]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := backwardHead + tc.decls + tc.ops + tc.back + "\n"
			_, err := Parse("in.yaml", []byte(src))
			got := ""
			if err != nil {
				got = err.Error()
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("Parse diagnostics mismatch (-want +got):\n%s\n%s", d, src)
			}
		})
	}
}

// TestBackwardOps checks the ops a backward section appends: their
// names, the accumulation of a tensor read twice, and the op each is
// part of the gradient of.
func TestBackwardOps(t *testing.T) {
	for _, tc := range []struct {
		name, decls, ops, back string
		want                   []string
	}{
		{"loss", "", backwardOps, "backward: {seeds: {loss: 1}, wrt: [w]}", []string{
			"loss.grad/zero = mul(loss, 0) of loss", "loss.grad = add(loss.grad/zero, 1) of loss",
			"r.grad = broadcast(loss.grad) of loss", "a.grad = broadcast(r.grad) of r",
			"a.grad/dx_square = square(a) of a", "a.grad/dx_1m = sub(1, a.grad/dx_square) of a", "h.grad = mul(a.grad, a.grad/dx_1m) of a",
			"h.grad/dw_dyt = permute(h.grad) of h", "w.grad = matmul(h.grad/dw_dyt, x) of h"}},
		{"pending seed", "  p: {placements: [Partial(sum)]}\n", "ops:\n  - {op: linear, in: [y2, w], out: p}\n",
			"backward: {seeds: {p: dy}, wrt: [w]}", []string{
				"p.grad = set(dy) of p", "p.grad/dw_dyt = permute(p.grad) of p", "w.grad = matmul(p.grad/dw_dyt, y2) of p"}},
		{"read twice", "", "ops:\n  - {op: mul, in: [x, x], out: y}\n", "backward: {seeds: {y: y2}, wrt: [x]}", []string{
			"y.grad = set(y2) of y", "y.grad/da_mul = mul(y.grad, x) of y", "y.grad/db_mul = mul(y.grad, x) of y",
			"x.grad = add(y.grad/da_mul, y.grad/db_mul) of y"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := backwardHead + "  y2: {mesh: m, shape: [4, 8], placements: [Shard(1)]}\n" + tc.decls + tc.ops + tc.back + "\n"
			f, err := Parse("in.yaml", []byte(src))
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, op := range f.Ops {
				if op.Of != nil && op.Of.Grad {
					got = append(got, op.Out.Name+" = "+string(op.Kind)+"("+strings.Join(opArgs(op), ", ")+") of "+op.Of.Output)
				}
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("backward ops (-want +got):\n%s", d)
			}
		})
	}
}

// opArgs are op's operands' names, its number in its slot.
func opArgs(op *Op) []string {
	var names []string
	for _, in := range op.Inputs {
		names = append(names, in.Name)
	}
	return op.Scalar.Args(names)
}

// TestBackwardSavedCopies checks which operands of a linear its gradient
// reads as a saved copy (saved.go): one the forward gathers (sequence
// parallelism's input of a column-parallel linear), not one it reads as
// it is (a row-parallel linear's, split along the summed axis, which the
// forward may also sum rather than gather) or one it slices further (a
// replicated input of an output split by rows).
func TestBackwardSavedCopies(t *testing.T) {
	for _, tc := range []struct {
		name, x, w, y string
		want          []string // the saved copies and their splits
	}{
		{"column-parallel, sequence-split input", "[Shard(0)]", "[Shard(0)]", "", []string{"y.grad/saved_x = set(x): 0 splits"}},
		{"row-parallel", "[Shard(1)]", "[Shard(1)]", "", nil},
		{"row-parallel, output replicated", "[Shard(1)]", "[Shard(1)]", "  y: {placements: [Replicate()]}\n", nil}, // summed or gathered
		{"replicated input, rows split", "[Replicate()]", "[Replicate()]", "  y: {placements: [Shard(0)]}\n", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := "format: 2\nmeshes:\n  m: [0, 1]\ntensors:\n" +
				"  x: {mesh: m, shape: [4, 8], placements: " + tc.x + "}\n" +
				"  w: {mesh: m, shape: [6, 8], placements: " + tc.w + "}\n" +
				"  dy: {mesh: m, shape: [4, 6]}\n" + tc.y +
				"ops:\n  - {op: linear, in: [x, w], out: y}\nbackward: {seeds: {y: dy}, wrt: [w]}\n"
			f, err := Parse("in.yaml", []byte(src))
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, op := range f.Ops {
				if IsSavedCopy(op.Out.Name) {
					got = append(got, fmt.Sprintf("%s = %s(%s): %d splits", op.Out.Name, op.Kind, op.In().Name, len(op.Out.Shardings())))
				}
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("saved copies (-want +got):\n%s", d)
			}
		})
	}
}
