package sim

import (
	"fmt"

	"github.com/nvcomm/nvcomm/internal/plan"
)

// The simulator's own definitions of the routing ops (docs/fusion.md,
// "Mixture of experts"), from their definitions, token by token: the
// registry writes them as comparisons, sums, tril and a matmul, which the
// reference computes op by op; these count ranks and queue slots
// directly, so that a wrong expansion (a tie broken the other way, a slot
// one off, a capacity not applied) fails as a wrong plan does. The
// comparisons act on the values as they are (docs/simulate.md,
// "Exactness"): a selection of exact values is exact.

var fnGt, fnEq = pointwiseFuncOf("gt"), pointwiseFuncOf("eq")

// moeTopKDef is moe_topk(p; k) of p [G..., T, E]: 1 where fewer than k
// experts rank before e — e' before e when p[e'] > p[e], or they are
// equal and e' < e — else 0.
func moeTopKDef(of *plan.Of, ins []operand) ([]float64, error) {
	p := ins[0]
	if len(p.shape) < 3 || of.TopK < 1 {
		return nil, fmt.Errorf("moe_topk: want probs [groups, tokens, experts] and top_k ≥ 1, got %v and %d", p.shape, of.TopK)
	}
	e := p.shape[len(p.shape)-1]
	rows := len(p.vals) / e
	out := make([]float64, len(p.vals))
	k := scalarResidue(float64(of.TopK))
	for r := range rows {
		row := p.vals[r*e : (r+1)*e]
		for i := range e {
			rank := fnMul(row[i], 0) // a zero of p's sort, as the sum of comparisons is
			for j := range e {
				before := fnGt(row[j], row[i])
				if j < i {
					before = fnAdd(before, fnEq(row[j], row[i]))
				}
				rank = fnAdd(rank, before)
			}
			out[r*e+i] = fnGt(k, rank)
		}
	}
	return out, nil
}

// moeDispatchDef is moe_dispatch(sel; C) of sel [G..., T, E]: [G..., T, E, C],
// 1 at (g, t, e, c) where sel[g, t, e] is 1 and c, the number of tokens
// before t in the group that selected e, is below C; else 0.
func moeDispatchDef(of *plan.Of, ins []operand) ([]float64, error) {
	s := ins[0]
	r := len(s.shape)
	if r < 3 || of.Capacity < 1 {
		return nil, fmt.Errorf("moe_dispatch: want sel [groups, tokens, experts] and capacity ≥ 1, got %v and %d", s.shape, of.Capacity)
	}
	t, e, c := s.shape[r-2], s.shape[r-1], of.Capacity
	g := len(s.vals) / (t * e) // the groups, one dim or more
	out := make([]float64, g*t*e*c)
	capacity := scalarResidue(float64(c))
	for gi := range g {
		for ei := range e {
			at := func(ti int) int { return (gi*t+ti)*e + ei }
			slot := fnMul(s.vals[at(0)], 0)
			for ti := range t {
				sel := s.vals[at(ti)]
				keep := fnMul(sel, fnGt(capacity, slot))
				for ci := range c {
					out[at(ti)*c+ci] = fnMul(keep, fnEq(slot, scalarResidue(float64(ci))))
				}
				slot = fnAdd(slot, sel)
			}
		}
	}
	return out, nil
}
