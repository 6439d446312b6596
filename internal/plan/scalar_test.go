package plan

import (
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nvcomm/nvcomm/internal/diag"
	"github.com/nvcomm/nvcomm/internal/ops"
)

// scalarPlan is layersPlan with f = add(e, 0.5), an op of a number
// operand, recorded as part of a softmax of e (validate checks that of
// names tensors, as many as the composite takes, integer labels where it
// reads some; simulate checks the rest).
func scalarPlan() *Plan {
	p := layersPlan()
	p.Tensors = append(p.Tensors, replicatedTensor("f", []int{2, 2, 3}))
	p.Ops = append(p.Ops, Op{Index: 4, Op: "add", Input: "e", Output: "f", Scalar: &ops.Scalar{Slot: 1, Value: 0.5},
		Of: &Of{Op: "softmax", Inputs: []string{"e"}, Output: "f", Axis: new(2)}})
	p.Steps = append(p.Steps, Step{ID: 4, Op: 4, Expr: "f = add(e, 0.5)", Kind: KindLocal, Type: Pointwise, Devices: []int{0, 1},
		Func: new("add"), Scalar: &ops.Scalar{Slot: 1, Value: 0.5}, Input: "e", Output: "f", Count: Count{Input: 12, Output: 12},
		Dims: []int{2, 2, 3}, InputDims: [][]int{{2, 2, 3}}})
	p.Summary.LocalSteps = 5
	return p
}

// scalarCases break the rules of number operands and of an expansion's
// record of its composite.
func scalarCases() []validateCase {
	return []validateCase{
		{name: "scalar valid", base: scalarPlan},
		{name: "scalar on a unary op", base: scalarPlan, mutate: func(p *Plan) { p.Ops[2].Scalar = &ops.Scalar{Slot: 1, Value: 1} },
			want: []diag.Diagnostic{pp("op 2: scalar: relu takes no number as an operand (only the binary elementwise ops do)"),
				pp("op 2: relu takes 1 input, got 2")}},
		{name: "scalar slot", base: scalarPlan, mutate: func(p *Plan) { p.Ops[4].Scalar.Slot = 2; p.Steps[4].Scalar.Slot = 2 },
			want: []diag.Diagnostic{pp("op 4: scalar: slot 2 is not an operand of add (0 or 1)"),
				sp(4, Pointwise, "scalar: slot 2 is not an operand of add (0 or 1)")}},
		{name: "scalar infinite", base: scalarPlan, mutate: func(p *Plan) { p.Ops[4].Scalar.Value = math.Inf(1) },
			want: []diag.Diagnostic{pp("op 4: scalar: value +Inf is not a finite number")}},
		{name: "scalar missing on the step", base: scalarPlan, mutate: func(p *Plan) { p.Steps[4].Scalar = nil },
			want: []diag.Diagnostic{sp(4, Pointwise, "func add takes 2 inputs, got 1")}},
		{name: "scalar on a Permute", base: linearPlan, mutate: func(p *Plan) { p.Steps[0].Scalar = &ops.Scalar{Value: 1} },
			want: []diag.Diagnostic{sp(0, Permute, "scalar is set, but only a Pointwise takes one")}},
		{name: "of a primitive op", base: scalarPlan, mutate: func(p *Plan) { p.Ops[4].Of.Op = "sum" },
			want: []diag.Diagnostic{pp(`op 4: of names op "sum", which is not a composite op (softmax, mean, rms_norm, layer_norm, sdpa, log_softmax, cross_entropy, moe_topk, moe_dispatch)`)}},
		{name: "of an unknown tensor", base: scalarPlan, mutate: func(p *Plan) { p.Ops[4].Of.Inputs = []string{"nope"} },
			want: []diag.Diagnostic{pp(`op 4: of names "nope", which is not a tensor of the plan`)}},
		{name: "of with an operand too many", base: scalarPlan, mutate: func(p *Plan) { p.Ops[4].Of.Inputs = []string{"e", "e"} },
			want: []diag.Diagnostic{pp(`op 4: of: softmax takes 1 input, got 2`)}},
		{name: "of cross_entropy with float labels", base: scalarPlan, mutate: func(p *Plan) {
			p.Ops[4].Of = &Of{Op: "cross_entropy", Inputs: []string{"e", "e"}, Output: "f"}
		}, want: []diag.Diagnostic{pp(`op 4: of: cross_entropy's labels "e" have dtype float32, want int32 or int64`)}},
		{name: "composite op in a plan", base: scalarPlan, mutate: func(p *Plan) { p.Ops[2].Op = "softmax" },
			want: []diag.Diagnostic{pp(`op 2: op "softmax" is not one of set, sum, prod, max, min, add, sub, mul, maximum, minimum, gt, eq, relu, neg, abs, ` +
				`div, exp, log, tanh, sigmoid, silu, gelu, gelu_tanh, erf, sqrt, rsqrt, reciprocal, square, broadcast, matmul, linear, embedding, gather, scatter_add, permute, reshape, cast, slice, cat, tril`)}},
	}
}

// TestScalarArgs checks where Args puts the number among an op's
// operands, and Expr with it.
func TestScalarArgs(t *testing.T) {
	for _, tc := range []struct {
		op   Op
		want string
	}{
		{Op{Op: "add", Input: "v", Output: "w", Scalar: &ops.Scalar{Slot: 1, Value: 1e-5}}, "w = add(v, 1e-05)"},
		{Op{Op: "sub", Input: "v", Output: "w", Scalar: &ops.Scalar{Slot: 0, Value: 2}}, "w = sub(2, v)"},
		{Op{Op: "div", Input: "v", Output: "w", Scalar: &ops.Scalar{Slot: 1, Value: -0.125}}, "w = div(v, -0.125)"},
	} {
		if got := tc.op.Expr(); got != tc.want {
			t.Errorf("%+v.Expr() = %q, want %q", tc.op, got, tc.want)
		}
	}
}

// TestTextComposites checks the text form's list of composite ops: each
// with the ops and steps of its expansion, after the steps.
func TestTextComposites(t *testing.T) {
	for _, tc := range []struct {
		name string
		plan func() *Plan
		want string
	}{
		{"one composite", scalarPlan, "\ncomposite ops, written as primitive ops:\n  f = softmax(e, axis=2)  ops 4, steps 4\n"},
		{"none", layersPlan, ""},
		{"ops apart", func() *Plan {
			p := scalarPlan()
			p.Ops[2].Of = p.Ops[4].Of
			return p
		}, "\ncomposite ops, written as primitive ops:\n  f = softmax(e, axis=2)  ops 2, 4, steps 2, 4\n"},
	} {
		var b strings.Builder
		if err := writeComposites(&b, tc.plan()); err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(tc.want, b.String()); d != "" {
			t.Errorf("%s: (-want +got):\n%s", tc.name, d)
		}
	}
}
