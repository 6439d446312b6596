package plan

import "slices"

// This file gives the output domains of the layer ops (elementwise,
// broadcast, matmul, linear) from their operands' non-reduction shapes, as
// the fusion parser infers them (docs/plan.md, "ops"), and reports operands
// whose shapes do not fit together.

// elementwiseDomain is a binary elementwise op's output: operands of equal
// rank whose extents agree or are 1 (torch's broadcasting), the larger
// extent on each axis.
func (v *validator) elementwiseDomain(i int, op Op, ins []*tensorInfo) (outputDomain, bool) {
	names := op.Operands()
	a, b := valueShape(ins[0].t), valueShape(ins[1].t)
	if len(a) != len(b) {
		v.planf("op %d: operands %q %v and %q %v differ in rank; elementwise operands have equal rank (broadcast adds axes)",
			i, names[0], a, names[1], b)
		return outputDomain{}, false
	}
	shape := make([]int, len(a))
	for k := range a {
		if a[k] != b[k] && a[k] != 1 && b[k] != 1 {
			v.planf("op %d: operands %q %v and %q %v do not broadcast: axis %d has extents %d and %d, and neither is 1",
				i, names[0], a, names[1], b, k, a[k], b[k])
			return outputDomain{}, false
		}
		shape[k] = max(a[k], b[k])
	}
	return outputDomain{shape, nil, "the operands' shape, extent-1 axes broadcast"}, true
}

// broadcastDomain is a broadcast's output: the input's axes with new ones
// at positions axes, whose extents the output's shape gives. It is false
// when axes are invalid, which checkOpAxes reports.
func broadcastDomain(axes, in, declared []int) (outputDomain, bool) {
	rank := len(in) + len(axes)
	if !increasing(axes, rank) {
		return outputDomain{}, false
	}
	shape := make([]int, 0, rank)
	for k, next := 0, 0; k < rank; k++ {
		switch {
		case !slices.Contains(axes, k):
			shape = append(shape, in[next])
			next++
		case k < len(declared):
			shape = append(shape, declared[k]) // a new axis takes the extent the output declares
		default:
			shape = append(shape, 1)
		}
	}
	return outputDomain{shape, nil, "the input's non-reduction shape, new axes at axes with the output's extents"}, true
}

// matmulDomain is a[..., m, k] @ b[..., k, n]: a of rank 2 or more, b of
// rank 2 or a's with the same batch extents; the output is [...batch, m,
// n, k] with k a trailing reduction axis.
func (v *validator) matmulDomain(i int, op Op, ins []*tensorInfo) (outputDomain, bool) {
	names := op.Operands()
	a, b := valueShape(ins[0].t), valueShape(ins[1].t)
	ra, rb := len(a), len(b)
	switch {
	case ra < 2:
		v.planf("op %d: matmul's first operand %q has %d axes, want at least 2 ([..., m, k])", i, names[0], ra)
	case rb != 2 && rb != ra:
		v.planf("op %d: matmul's second operand %q has %d axes, want 2 or %d (the first operand's)", i, names[1], rb, ra)
	case rb == ra && !slices.Equal(a[:ra-2], b[:rb-2]):
		v.planf("op %d: matmul's operands %q %v and %q %v differ in their batch extents", i, names[0], a, names[1], b)
	case a[ra-1] != b[rb-2]:
		v.planf("op %d: matmul's operands %q %v and %q %v do not contract: the first's last extent %d is not the second's second-to-last %d",
			i, names[0], a, names[1], b, a[ra-1], b[rb-2])
	default:
		shape := slices.Concat(a[:ra-1], []int{b[rb-1], a[ra-1]})
		return outputDomain{shape, []int{ra}, "[...batch, m, n] and the contracted k as a trailing reduction axis"}, true
	}
	return outputDomain{}, false
}

// linearDomain is x @ wᵀ (+ bias): x[..., k], w[n, k], bias[n]; the output
// is [..., n, k] with k a trailing reduction axis.
func (v *validator) linearDomain(i int, op Op, ins []*tensorInfo) (outputDomain, bool) {
	names := op.Operands()
	x, w := valueShape(ins[0].t), valueShape(ins[1].t)
	rx := len(x)
	switch {
	case rx < 1:
		v.planf("op %d: linear's input %q has no axes, want at least 1 ([..., k])", i, names[0])
	case len(w) != 2:
		v.planf("op %d: linear's weight %q has %d axes, want 2 ([n, k])", i, names[1], len(w))
	case x[rx-1] != w[1]:
		v.planf("op %d: linear's input %q %v and weight %q %v do not contract: the input's last extent %d is not the weight's second %d",
			i, names[0], x, names[1], w, x[rx-1], w[1])
	case len(ins) == 3 && !slices.Equal(valueShape(ins[2].t), w[:1]):
		v.planf("op %d: linear's bias %q has shape %v, want [%d] (the weight's n)", i, names[2], valueShape(ins[2].t), w[0])
	default:
		shape := slices.Concat(x[:rx-1], []int{w[0], x[rx-1]})
		return outputDomain{shape, []int{rx}, "[..., n] and the contracted k as a trailing reduction axis"}, true
	}
	return outputDomain{}, false
}
