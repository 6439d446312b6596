package ops

import (
	"math"
	"slices"
	"strconv"
)

// sdpa is scaled dot-product attention, a composite op written as the
// math reference of torch.nn.functional.scaled_dot_product_attention and
// of nvFuser's sdpa decomposition: of q [..., s, d], k [..., t, d] and
// v [..., t, dv] (the leading dims, batch and heads, equal in all three),
// o = softmax(q @ kᵀ · 1/√d, over t) @ v, [..., s, dv]. Being primitive
// ops once expanded, it is planned as they are: heads or q's sequence
// sharded is local; k and v sharded on t (context parallelism) makes the
// softmax over t a sharded one (its two statistics' Allreduces) and the
// second matmul a sum of partial products, or, under the optimal policy,
// k and v gathered, whichever is faster.

// AttrCausal is sdpa's causal flag: the upper triangle of the scores
// (key index past the query's) masked out before the softmax.
const AttrCausal Attr = "causal"

// sdpaAttrSpecs are the specs of sdpa's attributes.
var sdpaAttrSpecs = []AttrSpec{
	{Key: AttrCausal, Kind: BoolAttr, Doc: "sdpa's causal mask; only false is supported", Check: checkCausal},
}

// checkCausal rejects a causal mask: no primitive op masks by index yet,
// and the simulator's exact values have no exp(−inf) = 0 (an infinity
// becomes NaN in its field), so a masked softmax could not be proven.
func checkCausal(v Value) (string, string) {
	if v.Bool {
		return "causal attention is not supported yet",
			"write causal: false; a causal mask needs a masking op of exact semantics, which nvcomm does not have"
	}
	return "", ""
}

// registerSDPA adds sdpa.
func registerSDPA(r *Registry) {
	r.MustRegister(Op{Name: "sdpa", Family: Composite, Operands: []string{"q", "k", "v"}, Attrs: []Attr{AttrCausal},
		Expand: expandSDPA,
		Doc:    "softmax(q @ kᵀ / √d) @ v over the keys, torch.nn.functional.scaled_dot_product_attention"})
}

// sdpaScale is the factor of sdpa's scores for a head dim d: 1/√d,
// torch's default. The simulator's and the exported program's
// definitions compute it on their own, so that a wrong scale here fails
// them.
func sdpaScale(d int) float64 { return 1 / math.Sqrt(float64(d)) }

// expandSDPA is sdpa(q, k, v): kt = permute(k) (its last two dims
// swapped); scores = q @ kt; scaled = scores · 1/√d; probs = softmax of
// scaled over its last dim (t), the softmax composite's own expansion;
// o = probs @ v.
func expandSDPA(in [][]int, _ Attrs) ([]ExpandStep, *ExpandError) {
	if err := checkSDPAShapes(in); err != nil {
		return nil, err
	}
	q := in[0]
	r := len(q)
	dims := make([]int, r)
	for j := range dims {
		dims[j] = j
	}
	dims[r-2], dims[r-1] = r-1, r-2
	var e expansion
	kt := e.add(ExpandStep{Name: "kt", Op: "permute", In: []Ref{1}, Attrs: Values{{Key: AttrDims, Ints: dims}}})
	scores := e.binary("scores", "matmul", 0, kt)
	scaled := e.withScalar("scaled", "mul", scores, sdpaScale(q[r-1]))
	e.binary("", "matmul", e.softmax(scaled, r-1, "probs"), 2)
	return e.done(), nil
}

// checkSDPAShapes checks q [..., s, d], k [..., t, d], v [..., t, dv]:
// equal ranks of at least 2, equal leading dims, k's d q's and v's t
// k's; an error names the operand at fault.
func checkSDPAShapes(in [][]int) *ExpandError {
	q, k, v := in[0], in[1], in[2]
	bad := func(i int, msg, hint string) *ExpandError { return &ExpandError{Index: i, Msg: msg, Hint: hint} }
	switch {
	case len(q) < 2:
		return bad(0, "q has rank "+strconv.Itoa(len(q))+", want at least 2 ([..., s, d])", "q is [..., s, d]: batch and heads dims, then the sequence and the head dim")
	case len(k) != len(q):
		return bad(1, "k has rank "+strconv.Itoa(len(k))+", q "+strconv.Itoa(len(q)), "q, k and v have the same rank: [..., s, d], [..., t, d], [..., t, dv]")
	case len(v) != len(q):
		return bad(2, "v has rank "+strconv.Itoa(len(v))+", q "+strconv.Itoa(len(q)), "q, k and v have the same rank: [..., s, d], [..., t, d], [..., t, dv]")
	}
	r := len(q)
	switch {
	case !slices.Equal(k[:r-2], q[:r-2]):
		return bad(1, "k's leading dims "+intText(k[:r-2])+" differ from q's "+intText(q[:r-2]), "batch and heads dims are equal in q, k and v; for grouped-query attention repeat k's heads (broadcast, then reshape)")
	case !slices.Equal(v[:r-2], q[:r-2]):
		return bad(2, "v's leading dims "+intText(v[:r-2])+" differ from q's "+intText(q[:r-2]), "batch and heads dims are equal in q, k and v; for grouped-query attention repeat v's heads (broadcast, then reshape)")
	case k[r-1] != q[r-1]:
		return bad(1, "k's head dim is "+strconv.Itoa(k[r-1])+", q's "+strconv.Itoa(q[r-1]), "q [..., s, d] and k [..., t, d] share their last dim d")
	case v[r-2] != k[r-2]:
		return bad(2, "v has "+strconv.Itoa(v[r-2])+" keys, k "+strconv.Itoa(k[r-2]), "k [..., t, d] and v [..., t, dv] share their key dim t")
	}
	return nil
}
