package ops

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// ruleGrads runs tc's rule on operands of values xs and the upstream
// gradient dy (float64, no directions), and returns each operand's
// gradient.
func ruleGrads(t *testing.T, tc ruleCase, xs [][]float64, dy []float64) [][]float64 {
	t.Helper()
	lift := func(x float64) fdual { return fdual{v: x} }
	tensor := func(shape []int, vs []float64) tensorOf[fdual] {
		x := tensorOf[fdual]{shape: shape}
		for _, v := range vs {
			x.data = append(x.data, lift(v))
		}
		return x
	}
	var operands []tensorOf[fdual]
	for k, vs := range xs {
		operands = append(operands, tensor(tc.in[k], vs))
	}
	fwd := evalSteps(t, tc.fwd, operands, lift)
	y := fwd[len(fwd)-1]
	operands = append(operands, y, tensor(y.shape, dy))
	steps, grads, err := Lookup(tc.op).Grad(&GradIn{In: tc.in, DTypes: slices.Repeat([]string{"float32"}, len(xs)),
		Out: y.shape, Attrs: tc.attrs, Scalar: tc.sc, Need: slices.Repeat([]bool{true}, len(xs))})
	if err != nil {
		t.Fatal(err.Msg)
	}
	outs := evalSteps(t, steps, operands, lift)
	got := make([][]float64, len(grads))
	for k, r := range grads {
		g := operands[0]
		if i, ok := r.Operand(); ok {
			g = operands[i]
		} else {
			g = outs[r.Step()]
		}
		for _, e := range g.data {
			got[k] = append(got[k], e.v)
		}
	}
	return got
}

// TestGradRulesTies checks the selecting ops' rules where the derivative
// is not defined, against torch's choices: relu's and abs's gradient at 0
// is 0, maximum and minimum split a tie's gradient in halves, max and min
// along an axis share it evenly among the elements equal to the result.
func TestGradRulesTies(t *testing.T) {
	for _, tc := range []struct {
		rule ruleCase
		xs   [][]float64
		dy   []float64
		want [][]float64
	}{
		{ruleCase{op: "relu", in: [][]int{{4}}, fwd: step("relu", 1, nil)}, [][]float64{{-1, 0, 2, 0}}, []float64{5, 6, 7, 8},
			[][]float64{{0, 0, 7, 0}}},
		{ruleCase{op: "abs", in: [][]int{{3}}, fwd: step("abs", 1, nil)}, [][]float64{{-2, 0, 3}}, []float64{5, 6, 7},
			[][]float64{{-5, 0, 7}}},
		{ruleCase{op: "maximum", in: [][]int{{3}, {3}}, fwd: step("maximum", 2, nil)}, [][]float64{{1, 2, 3}, {1, 5, 0}},
			[]float64{4, 6, 8}, [][]float64{{2, 0, 8}, {2, 6, 0}}},
		{ruleCase{op: "minimum", in: [][]int{{3}, {3}}, fwd: step("minimum", 2, nil)}, [][]float64{{1, 2, 3}, {1, 5, 0}},
			[]float64{4, 6, 8}, [][]float64{{2, 6, 0}, {2, 0, 8}}},
		{ruleCase{op: "max", in: [][]int{{2, 4}}, attrs: Attrs{Axis: 1}, fwd: step("max", 1, func(s *ExpandStep) { s.Axis = 1 })},
			[][]float64{{3, 1, 3, 3, 0, 2, 1, 0}}, []float64{6, 4}, [][]float64{{2, 0, 2, 2, 0, 4, 0, 0}}},
		{ruleCase{op: "min", in: [][]int{{2, 2}}, attrs: Attrs{Axis: 0}, fwd: step("min", 1, func(s *ExpandStep) { s.Axis = 0 })},
			[][]float64{{1, 2, 1, 3}}, []float64{6, 4}, [][]float64{{3, 4, 3, 0}}},
	} {
		t.Run(tc.rule.op, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, ruleGrads(t, tc.rule, tc.xs, tc.dy)); diff != "" {
				t.Errorf("gradients (-want +got):\n%s", diff)
			}
		})
	}
}
