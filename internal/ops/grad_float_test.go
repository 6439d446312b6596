package ops

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// The rules of the ops that are no polynomials (exp, log, tanh, sigmoid,
// silu, erf, sqrt, rsqrt, reciprocal, a division by a tensor, softmax and the
// norms) are checked the same way in float64: forward-mode derivatives
// (fdual, exact up to rounding) against each rule's vector-Jacobian
// product, within rounding.

// fdual is a + bε over float64.
type fdual struct{ v, d float64 }

func (a fdual) add(b fdual) fdual { return fdual{a.v + b.v, a.d + b.d} }
func (a fdual) mul(b fdual) fdual { return fdual{a.v * b.v, a.v*b.d + a.d*b.v} }
func (a fdual) neg() fdual        { return fdual{-a.v, -a.d} }
func (a fdual) inv() fdual        { return fdual{1 / a.v, -a.d / (a.v * a.v)} }
func (a fdual) less(b fdual) bool { return a.v < b.v }
func (a fdual) primal() fdual     { return fdual{v: a.v} }
func (a fdual) index() int        { return int(a.v) }
func (a fdual) tangent() fdual    { return fdual{v: a.d} }
func (a fdual) close(b fdual) bool {
	return math.Abs(a.v-b.v) <= 1e-9*max(1, math.Abs(a.v), math.Abs(b.v))
}

// apply is the function op of a, with its derivative.
func (a fdual) apply(op string) (fdual, bool) {
	sig := 1 / (1 + math.Exp(-a.v))
	f, ok := map[string][2]float64{
		"exp": {math.Exp(a.v), math.Exp(a.v)}, "log": {math.Log(a.v), 1 / a.v},
		"tanh": {math.Tanh(a.v), 1 - math.Tanh(a.v)*math.Tanh(a.v)}, "sigmoid": {sig, sig * (1 - sig)},
		"silu": {a.v * sig, sig + a.v*sig*(1-sig)}, "sqrt": {math.Sqrt(a.v), 0.5 / math.Sqrt(a.v)},
		"rsqrt": {1 / math.Sqrt(a.v), -0.5 * math.Pow(a.v, -1.5)}, "reciprocal": {1 / a.v, -1 / (a.v * a.v)},
		"gelu_tanh": geluTanhF(a.v), "gelu": geluF(a.v),
		"erf": {math.Erf(a.v), 2 / math.Sqrt(math.Pi) * math.Exp(-a.v*a.v)},
	}[op]
	return fdual{f[0], f[1] * a.d}, ok
}

// geluTanhF is gelu_tanh of x and its derivative, by central
// differences extrapolated (Richardson), independent of the rule's
// closed form: their error, O(h⁴) and the rounding's 1e-16/h, is far
// below the check's 1e-9.
func geluTanhF(x float64) [2]float64 {
	f := func(x float64) float64 { return 0.5 * x * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(x+0.044715*x*x*x))) }
	d := func(h float64) float64 { return (f(x+h) - f(x-h)) / (2 * h) }
	const h = 1e-3
	return [2]float64{f(x), (4*d(h/2) - d(h)) / 3}
}

// geluF is gelu of x, x·Φ(x) with Φ from math.Erf, and its derivative
// by extrapolated central differences, as geluTanhF: independent of the
// rule's Φ(x) + x·φ(x).
func geluF(x float64) [2]float64 {
	f := func(x float64) float64 { return 0.5 * x * (1 + math.Erf(x/math.Sqrt2)) }
	d := func(h float64) float64 { return (f(x+h) - f(x-h)) / (2 * h) }
	const h = 1e-3
	return [2]float64{f(x), (4*d(h/2) - d(h)) / 3}
}

// randomF is a tensor of values in [0.5, 1.5) (every op's domain) with
// directions in [−1, 1).
func randomF(rng *rand.Rand, shape []int) tensorOf[fdual] {
	x := tensorOf[fdual]{shape: shape}
	for range Product(shape) {
		x.data = append(x.data, fdual{0.5 + rng.Float64(), 2*rng.Float64() - 1})
	}
	return x
}

// sdpaCase is sdpa of q, k and v of these shapes.
func sdpaCase(q, k, v []int) ruleCase {
	in := [][]int{q, k, v}
	steps, _ := expandSDPA(in, Attrs{})
	return ruleCase{"sdpa " + intText(q) + intText(k) + intText(v), "sdpa", in, Attrs{}, nil, steps}
}

// gqaCase is sdpa of q, k and v of these shapes with enable_gqa (and
// causal as given): k and v of fewer heads than q.
func gqaCase(t *testing.T, q, k, v []int, causal bool) ruleCase {
	in := [][]int{q, k, v}
	a := Attrs{Values: Values{{Key: AttrCausal, Bool: causal}, {Key: AttrGQA, Bool: true}}}
	steps, err := expandSDPA(in, a)
	if err != nil {
		t.Fatal(err.Msg)
	}
	return ruleCase{"sdpa enable_gqa " + intText(q) + intText(k) + intText(v), "sdpa", in, a, nil, steps}
}

// TestGradRulesFloat checks the rules of the functions, softmax and the
// norms against forward-mode derivatives in float64.
func TestGradRulesFloat(t *testing.T) {
	norm := func(name string, in [][]int) ruleCase {
		a := Attrs{Axes: []int{-1}, Values: Values{{Key: AttrEps, Float: 1e-5}}}
		return ruleCase{name + "/" + intText(in[0]) + "x" + string(rune('0'+len(in))), name, in, a, nil, expanded(t, name, in, a)}
	}
	var cases []ruleCase
	for _, op := range []string{"exp", "log", "tanh", "sigmoid", "silu", "sqrt", "rsqrt", "reciprocal"} {
		cases = append(cases, ruleCase{op, op, [][]int{{3, 4}}, Attrs{}, nil, step(op, 1, nil)})
	}
	cases = append(cases,
		ruleCase{"div", "div", [][]int{{3, 4}, {3, 1}}, Attrs{}, nil, step("div", 2, nil)},
		ruleCase{"number over a tensor", "div", [][]int{{3, 4}}, Attrs{}, &Scalar{Slot: 0, Value: 2},
			step("div", 1, func(s *ExpandStep) { s.Scalar = &Scalar{Slot: 0, Value: 2} })},
		ruleCase{"softmax", "softmax", [][]int{{3, 5}}, Attrs{Axis: 1}, nil, expanded(t, "softmax", [][]int{{3, 5}}, Attrs{Axis: 1})},
		ruleCase{"softmax axis 0", "softmax", [][]int{{4, 2}}, Attrs{Axis: 0}, nil, expanded(t, "softmax", [][]int{{4, 2}}, Attrs{Axis: 0})},
		norm("rms_norm", [][]int{{3, 6}}), norm("rms_norm", [][]int{{3, 6}, {6}}), norm("rms_norm", [][]int{{2, 3, 6}, {6}}),
		ruleCase{"log_softmax", "log_softmax", [][]int{{3, 5}}, Attrs{Axis: 1}, nil, expanded(t, "log_softmax", [][]int{{3, 5}}, Attrs{Axis: 1})},
		ruleCase{"log_softmax axis 0", "log_softmax", [][]int{{4, 2}}, Attrs{Axis: 0}, nil, expanded(t, "log_softmax", [][]int{{4, 2}}, Attrs{Axis: 0})},
		sdpaCase([]int{2, 3, 4}, []int{2, 5, 4}, []int{2, 5, 3}), sdpaCase([]int{3, 2}, []int{4, 2}, []int{4, 5}),
		// Grouped-query attention: groups of 2, 3 and 4 query heads, with
		// batch dims before the heads and without, causal and not.
		gqaCase(t, []int{2, 4, 3, 2}, []int{2, 2, 5, 2}, []int{2, 2, 5, 3}, false),
		gqaCase(t, []int{6, 2, 3}, []int{2, 4, 3}, []int{2, 4, 2}, false),
		gqaCase(t, []int{1, 4, 4, 2}, []int{1, 1, 4, 2}, []int{1, 1, 4, 3}, true),
		gqaCase(t, []int{3, 3, 2}, []int{3, 3, 2}, []int{3, 3, 2}, true),
		norm("layer_norm", [][]int{{3, 6}}), norm("layer_norm", [][]int{{3, 6}, {6}, {6}}), norm("layer_norm", [][]int{{6}, {6}, {6}}),
	)
	// The selecting ops, on data of both signs (below).
	for _, op := range []string{"relu", "abs", "gelu_tanh", "gelu", "erf"} {
		cases = append(cases, ruleCase{"signed " + op, op, [][]int{{3, 4}}, Attrs{}, nil, step(op, 1, nil)})
	}
	for _, op := range []string{"maximum", "minimum"} {
		cases = append(cases, ruleCase{"signed " + op, op, [][]int{{3, 4}, {3, 4}}, Attrs{}, nil, step(op, 2, nil)},
			ruleCase{"signed " + op + " broadcast", op, [][]int{{3, 1}, {3, 4}}, Attrs{}, nil, step(op, 2, nil)},
			ruleCase{"signed " + op + " number", op, [][]int{{5}}, Attrs{}, &Scalar{Slot: 0, Value: 0},
				step(op, 1, func(s *ExpandStep) { s.Scalar = &Scalar{Slot: 0, Value: 0} })})
	}
	for _, op := range []string{"max", "min"} {
		for axis := range 2 {
			cases = append(cases, ruleCase{"signed " + op + " axis " + string(rune('0'+axis)), op, [][]int{{3, 5}}, Attrs{Axis: axis}, nil,
				step(op, 1, func(s *ExpandStep) { s.Axis = axis })})
		}
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(2, uint64(len(tc.name))))
			xs := make([]tensorOf[fdual], len(tc.in))
			for k, s := range tc.in {
				xs[k] = randomF(rng, s)
				if strings.HasPrefix(tc.name, "signed ") {
					xs[k] = mapped(xs[k], func(x fdual) fdual { return fdual{x.v - 1, x.d} })
				}
			}
			dy := func(shape []int) tensorOf[fdual] { return mapped(randomF(rng, shape), fdual.primal) }
			checkVJP(t, tc, xs, dy, func(x float64) fdual { return fdual{v: x} })
		})
	}
}

// TestGradRuleCrossEntropy checks cross_entropy's rule, (softmax −
// onehot(labels)) times the per-token upstream gradient, against
// forward-mode derivatives of its expansion in float64, under both
// reductions, with the labels fixed (they get no gradient).
func TestGradRuleCrossEntropy(t *testing.T) {
	for _, tc := range []struct {
		name   string
		logits []int
		reduce string
	}{
		{"mean", []int{4, 5}, ReductionMean}, {"none", []int{4, 5}, ReductionNone},
		{"mean 3-D", []int{2, 3, 6}, ReductionMean}, {"none 3-D", []int{2, 3, 6}, ReductionNone},
		{"one token", []int{7}, ReductionMean},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := [][]int{tc.logits, tc.logits[:len(tc.logits)-1]}
			a := Attrs{Values: Values{{Key: AttrReduction, Str: tc.reduce}}}
			rc := ruleCase{"cross_entropy " + tc.name, "cross_entropy", in, a, nil, expanded(t, "cross_entropy", in, a)}
			rng := rand.New(rand.NewPCG(4, uint64(len(tc.name))))
			labels := tensorOf[fdual]{shape: in[1]}
			for range Product(in[1]) {
				labels.data = append(labels.data, fdual{v: float64(rng.IntN(tc.logits[len(tc.logits)-1]))})
			}
			xs := []tensorOf[fdual]{mapped(randomF(rng, in[0]), func(x fdual) fdual { return fdual{4*x.v - 4, x.d} }), labels}
			dy := func(shape []int) tensorOf[fdual] { return mapped(randomF(rng, shape), fdual.primal) }
			checkVJPOf(t, rc, xs, []bool{true, false}, dy, func(x float64) fdual { return fdual{v: x} })
		})
	}
}
