package ir

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// recomputeFusion is FSDP's gather of a weight sharded on 2 devices, a
// linear and a tanh, with the backward section back.
func recomputeFusion(back string) string {
	return `format: 2
meshes:
  m: [0, 1]
tensors:
  x: {mesh: m, shape: [4, 8], placements: [Shard(0)]}
  w: {mesh: m, shape: [6, 8], placements: [Shard(0)]}
  w_full: {placements: [Replicate()]}
  dy: {mesh: m, shape: [4, 6], placements: [Shard(0)]}
ops:
  - {op: set, in: w, out: w_full}
  - {op: linear, in: [x, w_full], out: h}
  - {op: tanh, in: h, out: a}
` + back + "\n"
}

// TestBackwardRecompute checks the ops the backward appends with a
// recompute list or reshard_after_forward: the copy made again before
// its first reader, named for that reader's op, read by every later rule
// in place of the forward's tensor, and sharded as the forward's tensor
// (w_full replicated although its operand is split: not propagated).
func TestBackwardRecompute(t *testing.T) {
	const (
		tanhGrad  = "a.grad/dx_square = square(a) of a"
		linGrad   = "x.grad = matmul(h.grad, w_full) of h"
		linGradRe = "h.grad/recomputed_w_full = set(w) [m: 0 splits] of h|x.grad = matmul(h.grad, h.grad/recomputed_w_full) of h"
	)
	for _, tc := range []struct {
		name, back string
		want       string // the backward's ops that read or make the recomputed tensors, |-separated
	}{
		{"kept", "backward: {seeds: {a: dy}, wrt: [x, w]}", tanhGrad + "|" + linGrad},
		{"recompute the gather", "backward: {seeds: {a: dy}, wrt: [x, w], recompute: [w_full]}", tanhGrad + "|" + linGradRe},
		{"reshard_after_forward", "backward: {seeds: {a: dy}, wrt: [x, w], reshard_after_forward: true}", tanhGrad + "|" + linGradRe},
		{"reshard_after_forward, gather listed too", "backward: {seeds: {a: dy}, wrt: [x, w], recompute: [w_full], reshard_after_forward: true}", tanhGrad + "|" + linGradRe},
		{"reshard_after_forward false", "backward: {seeds: {a: dy}, wrt: [x, w], reshard_after_forward: false}", tanhGrad + "|" + linGrad},
		{"checkpoint the tanh", "backward: {seeds: {a: dy}, wrt: [x, w], recompute: [a]}",
			"a.grad/recomputed_a = tanh(h) [m: 1 splits] of a|a.grad/dx_square = square(a.grad/recomputed_a) of a|" + linGrad},
		{"both", "backward: {seeds: {a: dy}, wrt: [x, w], recompute: [a, w_full]}",
			"a.grad/recomputed_a = tanh(h) [m: 1 splits] of a|a.grad/dx_square = square(a.grad/recomputed_a) of a|" + linGradRe},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := Parse("in.yaml", []byte(recomputeFusion(tc.back)))
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, op := range f.Ops {
				if op.Of == nil || !op.Of.Grad {
					continue
				}
				line := op.Out.Name + " = " + string(op.Kind) + "(" + strings.Join(opArgs(op), ", ") + ")"
				if IsRecomputed(op.Out.Name) {
					line += fmt.Sprintf(" [%s: %d splits]", op.Out.Mesh.Name, len(op.Out.Shardings()))
				}
				reads := slices.ContainsFunc(op.Inputs, func(in *Tensor) bool { return in.Name == "a" || in.Name == "w_full" || IsRecomputed(in.Name) })
				if reads || IsRecomputed(op.Out.Name) {
					got = append(got, line+" of "+op.Of.Output)
				}
			}
			if d := cmp.Diff(strings.Split(tc.want, "|"), got); d != "" {
				t.Errorf("backward ops (-want +got):\n%s", d)
			}
		})
	}
}

// TestBackwardRecomputeErrors checks the positioned errors of the
// recompute and regather lists and of reshard_after_forward.
func TestBackwardRecomputeErrors(t *testing.T) {
	for _, tc := range []struct {
		name, back, want string
	}{
		{"an input", "backward: {seeds: {a: dy}, wrt: [x, w], recompute: [x]}",
			`in.yaml:13:53: error: backward recompute: "x" is an input of the fusion, which no op makes; list tensors that an op of the forward makes; an input is held for the whole step`},
		{"a contraction", "backward: {seeds: {a: dy}, wrt: [x, w], recompute: [h]}",
			`in.yaml:13:53: error: backward recompute: "h" is made by linear, which the backward does not make again; list the output of a set (a gather) or of an elementwise op: ` + strings.Join(remakeableOps(), ", ")},
		{"unknown", "backward: {seeds: {a: dy}, wrt: [x, w], recompute: [w_ful]}",
			`in.yaml:13:53: error: backward recompute: unknown tensor "w_ful"; did you mean "w_full"?`},
		{"twice", "backward: {seeds: {a: dy}, wrt: [x, w], recompute: [a, a]}",
			`in.yaml:13:56: error: backward recompute: "a" is listed twice; list it once`},
		{"read by no rule", "backward: {seeds: {a: dy}, wrt: [w], recompute: [w_full]}",
			`in.yaml:13:50: error: backward recompute: no gradient rule reads "w_full"; leave it out of recompute: the forward's tensor is not kept for the backward anyway`},
		{"no gather of a weight", "backward: {seeds: {a: dy}, wrt: [x], reshard_after_forward: true}",
			`in.yaml:13:61: error: backward reshard_after_forward: no set gathers a weight of wrt; write each weight's gather as a set of the weight (a tensor of wrt that no op makes) into a copy, and read the copy`},
		{"reshard_after_forward not a boolean", "backward: {seeds: {a: dy}, wrt: [x, w], reshard_after_forward: 1}",
			`in.yaml:13:64: error: backward reshard_after_forward: expected true or false, got integer 1`},
		{"regather, nothing gathered", "backward: {seeds: {a: dy}, wrt: [x, w], regather: [x]}",
			`in.yaml:13:52: error: backward regather: no gradient rule reads a gathered copy of "x"; list an operand that a linear or matmul of the forward reads gathered (split where the operand is not), and whose gradient rule reads it`},
		{"regather, unknown", "backward: {seeds: {a: dy}, wrt: [x, w], regather: [xx]}",
			`in.yaml:13:52: error: backward regather: unknown tensor "xx"; did you mean "x"?`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("in.yaml", []byte(recomputeFusion(tc.back)))
			got := ""
			if err != nil {
				got = err.Error()
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("Parse diagnostics mismatch (-want +got):\n%s", d)
			}
		})
	}
}

// TestReshardAfterForwardTwoAxes checks reshard_after_forward on a weight
// sharded over two mesh axes and gathered along one, then the other (FSDP
// over dp_shard × cp, as nvcomm model writes it): both gathers are made
// again, so the backward keeps neither of the forward's copies.
func TestReshardAfterForwardTwoAxes(t *testing.T) {
	src := `format: 2
meshes:
  m: [[0, 1], [2, 3]]
tensors:
  x: {mesh: m, shape: [4, 8], placements: [Shard(0), Replicate()]}
  w: {mesh: m, shape: [8, 8], placements: [Shard(0), Shard(0)]}
  w_half: {placements: [Shard(0), Replicate()]}
  w_full: {placements: [Replicate(), Replicate()]}
  dy: {mesh: m, shape: [4, 8], placements: [Shard(0), Replicate()]}
ops:
  - {op: set, in: w, out: w_half}
  - {op: set, in: w_half, out: w_full}
  - {op: linear, in: [x, w_full], out: h}
backward: {seeds: {h: dy}, wrt: [x, w], reshard_after_forward: true}
`
	f, err := Parse("in.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, op := range f.Ops {
		if op.Of != nil && op.Of.Grad && IsRecomputed(op.Out.Name) {
			got = append(got, op.Out.Name+" = "+string(op.Kind)+"("+strings.Join(opArgs(op), ", ")+")")
		}
	}
	want := []string{"h.grad/recomputed_w_half = set(w)", "h.grad/recomputed_w_full = set(h.grad/recomputed_w_half)"}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("the backward's gathers (-want +got):\n%s", d)
	}
}
