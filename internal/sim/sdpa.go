package sim

import (
	"fmt"
	"math"
	"slices"
)

// sdpaDef is the simulator's own definition of sdpa (scaled dot-product
// attention) on its unsharded operands q [..., s, d], k [..., t, d] and
// v [..., t, dv]: for every batch and head b and query i, the scores
// σ_j = (Σ_l q[b,i,l]·k[b,j,l]) · 1/√d over the keys j, their softmax
// (softmaxRow, the softmax composite's definition) and o[b,i,c] =
// Σ_j p_j·v[b,j,c], computed from the formula with the simulator's
// scalar functions and never from the registry's expansion, which
// checkComposite compares with it.
func sdpaDef(ins []operand) ([]float64, error) {
	if len(ins) != 3 {
		return nil, fmt.Errorf("composite sdpa: %d operands, want q, k and v", len(ins))
	}
	q, k, v := ins[0], ins[1], ins[2]
	r := len(q.shape)
	if r < 2 || len(k.shape) != r || len(v.shape) != r || !slices.Equal(q.shape[:r-2], k.shape[:r-2]) ||
		!slices.Equal(q.shape[:r-2], v.shape[:r-2]) || k.shape[r-1] != q.shape[r-1] || v.shape[r-2] != k.shape[r-2] {
		return nil, fmt.Errorf("composite sdpa: q %v, k %v and v %v are not [..., s, d], [..., t, d], [..., t, dv]", q.shape, k.shape, v.shape)
	}
	s, d, t, dv := q.shape[r-2], q.shape[r-1], k.shape[r-2], v.shape[r-1]
	scale := scalarResidue(1 / math.Sqrt(float64(d)))
	out := make([]float64, product(q.shape[:r-2])*s*dv)
	p := make([]float64, t)
	for b := range product(q.shape[:r-2]) {
		for i := range s {
			for j := range t {
				var dot float64
				for l := range d {
					dot = combine("sum", dot, fnMul(q.vals[(b*s+i)*d+l], k.vals[(b*t+j)*d+l]))
				}
				p[j] = fnMul(dot, scale)
			}
			softmaxRow(p, p, t, func(j int) int { return j })
			for c := range dv {
				var o float64
				for j := range t {
					o = combine("sum", o, fnMul(p[j], v.vals[(b*t+j)*dv+c]))
				}
				out[(b*s+i)*dv+c] = o
			}
		}
	}
	return out, nil
}
