package ops

import "math"

// The rules of the selecting ops — relu, abs, maximum, minimum and the
// max and min reductions — multiply the upstream gradient by a mask of
// where the value was taken, written with the comparison ops gt and eq
// (1 where true, 0 where false). Ties follow torch
// (tools/autograd/derivatives.yaml): relu's and abs's gradient at 0 is
// 0; maximum and minimum give each operand half the gradient where they
// are equal; max and min along an axis share it evenly among the
// elements equal to the result (amax's and amin's scale_grad_by_count).
// The simulator computes the comparisons on its exact values, so a tie
// is a tie in every device's block and in the reference alike.

// gradRelu: relu: threshold_backward(grad, result, 0), the gradient
// where x > 0 and 0 elsewhere (x = 0 included).
func gradRelu(b *gradBuilder, dy, x, _ Ref) Ref {
	return b.binary("dx", "mul", dy, b.compare("dx_mask", "gt", x, 0))
}

// gradAbs: abs: grad * self.sgn(), sgn(0) = 0: sgn(x) = (x > 0) − (0 >
// x).
func gradAbs(b *gradBuilder, dy, x, _ Ref) Ref {
	pos := b.compare("dx_pos", "gt", x, 0)
	neg := b.add(ExpandStep{Name: "dx_neg", Op: "gt", In: []Ref{x}, Scalar: &Scalar{Slot: 0, Value: 0}})
	return b.binary("dx", "mul", dy, b.binary("dx_sgn", "sub", pos, neg))
}

// compare is op (gt, eq) of x and the number c, x in slot 0.
func (b *gradBuilder) compare(name, op string, x Ref, c float64) Ref {
	return b.withScalar(name, op, x, c)
}

// gradSelect is the rule of maximum (larger true) and minimum (maximum:
// self: at::where(self == other, grad / 2, grad).masked_fill_(self <
// other, 0), and other alike; minimum with the comparisons reversed):
// operand s's mask is (s wins) + (a = b) / 2, each contribution summed
// to its operand's shape.
func gradSelect(larger bool) GradRule {
	return func(g *GradIn) ([]ExpandStep, []Ref, *ExpandError) {
		b := newGrad(g)
		tie, tied := Ref(0), false
		for s, name := range []string{"da", "db"} {
			k, ok := b.needs(s)
			if !ok {
				continue
			}
			if !tied { // the half of a tie, shared by both operands
				tie, tied = b.withScalar("d_tie", "div", b.pair("d_eq", "eq", 0, 1), 2), true
			}
			win, lose := s, 1-s
			if !larger {
				win, lose = lose, win
			}
			m := b.binary(name+"_mask", "add", b.pair(name+"_wins", "gt", win, lose), tie)
			b.give(k, name, b.binary(name+"_mul", "mul", g.DY(), m))
		}
		return b.result()
	}
}

// pair is op of the binary op's operands in slots sa and sb, a tensor
// or the number.
func (b *gradBuilder) pair(name, op string, sa, sb int) Ref {
	ka, ta := b.slot(sa)
	kb, tb := b.slot(sb)
	switch {
	case ta && tb:
		return b.binary(name, op, Ref(ka), Ref(kb))
	case ta:
		return b.add(ExpandStep{Name: name, Op: op, In: []Ref{Ref(ka)}, Scalar: &Scalar{Slot: 1, Value: b.Scalar.Value}})
	}
	return b.add(ExpandStep{Name: name, Op: op, In: []Ref{Ref(kb)}, Scalar: &Scalar{Slot: 0, Value: b.Scalar.Value}})
}

// gradExtreme is the rule of max and min along an axis (amax, amin:
// scale_grad_by_count(grad, result == self, dim)): the gradient, broadcast
// back along the axis, where x equals the result, divided by the number
// of such elements in its row.
func gradExtreme(g *GradIn) ([]ExpandStep, []Ref, *ExpandError) {
	b := newGrad(g)
	if g.Need[0] {
		ax := g.Attrs.Axis
		m := b.binary("dx_mask", "eq", 0, b.backTo("dx_y_b", g.Y(), ax, g.In[0]))
		count := b.backTo("dx_count_b", b.reduce("dx_count", "sum", m, ax), ax, g.In[0])
		share := b.binary("dx_share", "div", m, count)
		b.grads[0] = b.binary("dx", "mul", b.backTo("dx_dy_b", g.DY(), ax, g.In[0]), share)
	}
	return b.result()
}

// gradGelu: gelu (the exact form, x·Φ(x)): gelu_backward(grad, self,
// "none") = dy·(Φ(x) + x·φ(x)), with Φ(x) = ½(1 + erf(x/√2)) and φ(x) =
// e^(−x²/2)/√(2π), as aten's GeluBackward writes it (kAlpha = 1/√2,
// kBeta = 1/√(2π)). It computes Φ from erf and φ from exp, never from
// the forward's output: the simulator's gelu is a fixed map of its own.
func gradGelu(b *gradBuilder, dy, x, _ Ref) Ref {
	erf := b.unary("dx_erf", "erf", b.withScalar("dx_xa", "mul", x, 1/math.Sqrt2))
	cdf := b.withScalar("dx_cdf", "mul", b.withScalar("dx_1perf", "add", erf, 1), 0.5)
	gauss := b.unary("dx_exp", "exp", b.withScalar("dx_mhx2", "mul", b.unary("dx_x2", "square", x), -0.5))
	pdf := b.withScalar("dx_pdf", "mul", gauss, 1/math.Sqrt(2*math.Pi))
	slope := b.binary("dx_slope", "add", cdf, b.binary("dx_xpdf", "mul", x, pdf))
	return b.binary("dx", "mul", dy, slope)
}

// gradErf: erf: 2/√π · e^(−x²) · grad.
func gradErf(b *gradBuilder, dy, x, _ Ref) Ref {
	gauss := b.unary("dx_exp", "exp", b.unary("dx_neg", "neg", b.unary("dx_x2", "square", x)))
	return b.binary("dx", "mul", dy, b.withScalar("dx_slope", "mul", gauss, 2/math.Sqrt(math.Pi)))
}

// geluTanhC and geluTanhA are the constants of gelu's tanh
// approximation, 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))).
var geluTanhC, geluTanhA = math.Sqrt(2 / math.Pi), 0.044715

// gradGeluTanh: gelu(approximate='tanh'): gelu_backward(grad, self,
// "tanh"), whose derivative aten writes out: with u = c·(x + a·x³) and t
// = tanh(u), dx = dy·(0.5·(1 + t) + 0.5·x·(1 − t²)·c·(1 + 3a·x²)). It
// recomputes t from the tanh op (the simulator's gelu_tanh is a fixed map
// of its own, unrelated to tanh's, so the forward's output cannot give
// it).
func gradGeluTanh(b *gradBuilder, dy, x, _ Ref) Ref {
	x2 := b.unary("dx_x2", "square", x)
	inner := b.withScalar("dx_inner", "add", b.withScalar("dx_ax2", "mul", x2, geluTanhA), 1) // 1 + a·x²
	u := b.withScalar("dx_u", "mul", b.binary("dx_xinner", "mul", x, inner), geluTanhC)
	t := b.unary("dx_t", "tanh", u)
	left := b.withScalar("dx_left", "mul", b.withScalar("dx_1pt", "add", t, 1), 0.5)
	du := b.withScalar("dx_du", "mul", b.withScalar("dx_inner3", "add", b.withScalar("dx_3ax2", "mul", x2, 3*geluTanhA), 1), geluTanhC)
	sech2 := b.oneMinus("dx_sech2", b.unary("dx_t2", "square", t))
	right := b.withScalar("dx_right", "mul", b.binary("dx_xs", "mul", x, b.binary("dx_sdu", "mul", sech2, du)), 0.5)
	return b.binary("dx", "mul", dy, b.binary("dx_slope", "add", left, right))
}
