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
// (softmaxRow, the softmax composite's definition; with causal,
// causalRow's over the keys j ≤ i) and o[b,i,c] = Σ_j p_j·v[b,j,c],
// computed from the formula with the simulator's scalar functions and
// never from the registry's expansion, which checkComposite compares
// with it. With gqa (enable_gqa) q is [..., H, s, d] and k, v
// [..., Hkv, t, ·] with H a multiple of Hkv: query head h attends with
// key/value head h / (H/Hkv), torch's pairing (its repeat_interleave
// of k and v), read in place here rather than repeated.
func sdpaDef(ins []operand, causal, gqa bool) ([]float64, error) {
	if len(ins) != 3 {
		return nil, fmt.Errorf("composite sdpa: %d operands, want q, k and v", len(ins))
	}
	q, k, v := ins[0], ins[1], ins[2]
	r := len(q.shape)
	lead := r - 2 // the dims equal in q, k and v
	if gqa {
		lead = r - 3
	}
	if lead < 0 || len(k.shape) != r || len(v.shape) != r || !slices.Equal(q.shape[:lead], k.shape[:lead]) ||
		!slices.Equal(k.shape[:r-2], v.shape[:r-2]) || k.shape[r-1] != q.shape[r-1] || v.shape[r-2] != k.shape[r-2] {
		return nil, fmt.Errorf("composite sdpa: q %v, k %v and v %v are not [..., s, d], [..., t, d], [..., t, dv]", q.shape, k.shape, v.shape)
	}
	heads, group := 1, 1 // q's heads, and the query heads of a key/value head
	if r >= 3 {
		heads = q.shape[r-3]
		if k.shape[r-3] == 0 || heads%k.shape[r-3] != 0 || !gqa && k.shape[r-3] != heads {
			return nil, fmt.Errorf("composite sdpa: q's %d heads are not a multiple of k's %d", heads, k.shape[r-3])
		}
		group = heads / k.shape[r-3]
	}
	s, d, t, dv := q.shape[r-2], q.shape[r-1], k.shape[r-2], v.shape[r-1]
	scale := scalarResidue(1 / math.Sqrt(float64(d)))
	out := make([]float64, product(q.shape[:r-2])*s*dv)
	p := make([]float64, t)
	for b := range product(q.shape[:r-2]) {
		kb := b/heads*(heads/group) + b%heads/group // the key/value head of q's head b
		for i := range s {
			for j := range t {
				var dot float64
				for l := range d {
					dot = combine("sum", dot, fnMul(q.vals[(b*s+i)*d+l], k.vals[(kb*t+j)*d+l]))
				}
				p[j] = fnMul(dot, scale)
			}
			if causal {
				causalRow(p, i)
			} else {
				softmaxRow(p, p, t, func(j int) int { return j })
			}
			for c := range dv {
				var o float64
				for j := range t {
					o = combine("sum", o, fnMul(p[j], v.vals[(kb*t+j)*dv+c]))
				}
				out[(b*s+i)*dv+c] = o
			}
		}
	}
	return out, nil
}

// causalRow is the softmax of query i's scores p over the keys it sees,
// j ≤ i (torch's is_causal, top-left aligned), in place: m = the max of
// those scores, p_j = exp(p_j − m) / Σ_{j' ≤ i} exp(p_j' − m) for j ≤ i,
// and 0 for the keys past i — torch's math reference, whose masked
// scores are −∞ and whose exp of them 0, written without the infinity.
func causalRow(p []float64, i int) {
	seen := min(i+1, len(p))
	m := p[0]
	for j := 1; j < seen; j++ {
		m = combine("max", m, p[j])
	}
	var s float64
	for j := range seen {
		p[j] = fnExp(fnSub(p[j], m), 0)
		s = combine("sum", s, p[j])
	}
	for j := range p {
		if j < seen {
			p[j] = fnDiv(p[j], s)
		} else {
			p[j] = 0
		}
	}
}
