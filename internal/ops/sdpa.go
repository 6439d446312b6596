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

// AttrCausal is sdpa's causal flag: the keys past the query's index
// (top-left aligned, as torch's is_causal: query i sees keys j ≤ i)
// masked out of the softmax.
const AttrCausal Attr = "causal"

// AttrGQA is sdpa's grouped-query attention flag, torch's enable_gqa:
// q [..., H, s, d] attends with k [..., Hkv, t, d] and v [..., Hkv, t,
// dv] whose heads (the dim before the sequence, −3) are H/Hkv times
// fewer, query head h reading key/value head h / (H/Hkv), as torch's
// repeat_interleave of k and v along dim −3 pairs them. Left out, q, k
// and v have equal heads.
const AttrGQA Attr = "enable_gqa"

// AttrCP is sdpa's form under context parallelism (q, k, v and the
// output split on the sequence), which the optimal policy otherwise
// chooses by its objective: ring (ring attention, Megatron-LM's
// cp_comm_type p2p), allgather (k and v gathered whole, each device's
// queries against every key: Llama 3's context parallelism, Megatron-LM's
// cp_comm_type all_gather) or expansion (the expansion's ops, each planned
// on its own). nvFuser has no context parallelism: its policy ignores it.
const AttrCP Attr = "cp"

// The values of AttrCP.
const (
	CPRing      = "ring"
	CPAllgather = "allgather"
	CPExpansion = "expansion"
)

// sdpaAttrSpecs are the specs of sdpa's attributes.
var sdpaAttrSpecs = []AttrSpec{
	{Key: AttrCausal, Kind: BoolAttr, Doc: "sdpa's causal mask: query i attends to keys 0 to i (torch's is_causal, top-left aligned)"},
	{Key: AttrCP, Kind: NameAttr, Names: []string{CPRing, CPAllgather, CPExpansion}, Optional: true,
		Doc: "sdpa's form under context parallelism, policy optimal: ring (ring attention), allgather (k and v gathered whole) or expansion (its ops planned one by one); left out, the objective chooses"},
	{Key: AttrGQA, Kind: BoolAttr, Optional: true,
		Doc: "sdpa's grouped-query attention (torch's enable_gqa): k and v have H/Hkv times fewer heads (dim -3) than q, query head h reading key/value head h / (H/Hkv)"},
}

// registerSDPA adds sdpa.
func registerSDPA(r *Registry) {
	r.MustRegister(Op{Name: "sdpa", Family: Composite, Operands: []string{"q", "k", "v"}, Attrs: []Attr{AttrCausal, AttrCP, AttrGQA},
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
// scaled over its last dim (t), the softmax composite's own expansion,
// or with causal the masked softmax of causalSoftmax; o = probs @ v.
// With enable_gqa and fewer key/value heads, k and v are first repeated
// for the query heads of their group (repeatHeads), as torch's
// enable_gqa repeats them: the forward is the repeated attention's, and
// the gradient rule (gradSDPA) sums each group inside its contractions.
func expandSDPA(in [][]int, a Attrs) ([]ExpandStep, *ExpandError) {
	gqa, _ := a.Values.Get(AttrGQA)
	if err := checkSDPAShapes(in, gqa.Bool); err != nil {
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
	k, v := Ref(1), Ref(2)
	g := sdpaGroup(in)
	if g > 1 {
		k = e.repeatHeads("k_rep", k, in[1], g)
	}
	kt := e.add(ExpandStep{Name: "kt", Op: "permute", In: []Ref{k}, Values: Values{{Key: AttrDims, Ints: dims}}})
	scores := e.binary("scores", "matmul", 0, kt)
	scaled := e.withScalar("scaled", "mul", scores, sdpaScale(q[r-1]))
	var probs Ref
	if causal, _ := a.Values.Get(AttrCausal); causal.Bool {
		probs = e.causalSoftmax(scaled, r-1, "probs")
	} else {
		probs = e.softmax(scaled, r-1, "probs")
	}
	if g > 1 {
		// v is repeated where it is read, after the softmax, so that the
		// repeated copy is not live across it: lower --auto's search
		// holds each live intermediate's sharding in its state.
		v = e.repeatHeads("v_rep", v, in[2], g)
	}
	e.binary("", "matmul", probs, v)
	return e.done(), nil
}

// SDPAGroup checks sdpa's operands of shapes in (q, k, v, their
// non-reduction dims) as its expansion does, with enable_gqa gqa, and
// returns the query heads that share a key/value head, H/Hkv (1 for
// equal heads): what the context-parallel forms that read the key/value
// heads unrepeated (ring attention, the all-gather form) group q's rows
// by. An error names the operand at fault.
func SDPAGroup(in [][]int, gqa bool) (int, *ExpandError) {
	if len(in) != 3 {
		return 0, &ExpandError{Index: -1, Msg: "sdpa takes q, k and v, got " + strconv.Itoa(len(in)) + " operands", Hint: "write in: [q, k, v]"}
	}
	if err := checkSDPAShapes(in, gqa); err != nil {
		return 0, err
	}
	return sdpaGroup(in), nil
}

// sdpaGroup is the number of query heads that share a key/value head,
// H/Hkv of q [..., H, s, d] and k [..., Hkv, t, d]: 1 where their heads
// are equal (or q has none). The shapes are checked already.
func sdpaGroup(in [][]int) int {
	r := len(in[0])
	if r < 3 || in[1][r-3] == 0 {
		return 1
	}
	return in[0][r-3] / in[1][r-3]
}

// repeatHeads is x [..., Hkv, t, c] (shape) with each head repeated g
// times in a row, [..., Hkv·g, t, c]: a broadcast to [..., Hkv, g, t, c]
// and a reshape merging the heads with their copies, torch's
// repeat_interleave(g, dim=-3). Heads split over a mesh axis stay split
// in whole groups: the reshape's outer factor is the key/value heads.
func (e *expansion) repeatHeads(name string, x Ref, shape []int, g int) Ref {
	r := len(shape)
	wide := slices.Concat(shape[:r-2], []int{g}, shape[r-2:])
	b := e.add(ExpandStep{Name: name + "_b", Op: "broadcast", In: []Ref{x}, Axes: []int{r - 2}, Shape: wide})
	rep := slices.Concat(shape[:r-3], []int{shape[r-3] * g}, shape[r-2:])
	return e.add(ExpandStep{Name: name, Op: "reshape", In: []Ref{b}, Values: Values{{Key: AttrShape, Ints: rep}}})
}

// causalSoftmax is the softmax of the scores x [..., s, t] over the keys
// (axis, the last) that each query sees, query i keys 0 to i, as torch's
// math reference of is_causal computes it (the masked scores' max, then
// exp(x − max) over the visible keys, normalized) but with no infinity,
// which has no exact value for exp to take:
//
//	low  = min_t x                        a row statistic ≤ every score
//	m    = max_t (tril(x − low) + low)    = the max over the visible keys
//	kept = tril(exp(x − m))
//	p    = kept / Σ_t kept
//
// Each visible entry of tril(x − low) + low is x itself (exactly, modulo
// the simulator's prime too), each masked one low, which never exceeds
// the visible max (key 0 is visible to every query): so m is the max of
// the visible scores, exactly, in real numbers and on the simulator's
// representatives. Over keys split across devices (context parallelism)
// min, max and sum are each one small Allreduce of a value per query, and
// tril is local with each device's column offset.
func (e *expansion) causalSoftmax(x Ref, axis int, name string) Ref {
	low := e.back("low_b", e.reduce("low", "min", x, axis), axis)
	lifted := e.binary("lifted", "add", e.tril("masked", e.binary("shifted", "sub", x, low)), low)
	m := e.back("max_b", e.reduce("max", "max", lifted, axis), axis)
	ex := e.unary("exp", "exp", e.binary("sub", "sub", x, m))
	return e.normalize(e.tril("kept", ex), axis, name)
}

// tril is tril(x) of the main diagonal (query i keeps keys 0 to i).
func (e *expansion) tril(name string, x Ref) Ref {
	return e.add(ExpandStep{Name: name, Op: "tril", In: []Ref{x}, Values: Values{{Key: AttrDiagonal, Int: 0}}})
}

// checkSDPAShapes checks q [..., s, d], k [..., t, d], v [..., t, dv]:
// equal ranks of at least 2, equal leading dims, k's d q's and v's t
// k's; with gqa (enable_gqa) the heads (dim −3, rank at least 3) may
// differ: k's and v's equal, q's a multiple of them. An error names the
// operand at fault.
func checkSDPAShapes(in [][]int, gqa bool) *ExpandError {
	q, k, v := in[0], in[1], in[2]
	bad := func(i int, msg, hint string) *ExpandError { return &ExpandError{Index: i, Msg: msg, Hint: hint} }
	const ranks = "q, k and v have the same rank: [..., s, d], [..., t, d], [..., t, dv]"
	switch {
	case len(q) < 2:
		return bad(0, "q has rank "+strconv.Itoa(len(q))+", want at least 2 ([..., s, d])", "q is [..., s, d]: batch and heads dims, then the sequence and the head dim")
	case gqa && len(q) < 3:
		return bad(0, "q has rank "+strconv.Itoa(len(q))+", but enable_gqa needs a heads dim ([..., H, s, d])", "q is [..., H, s, d] and k, v [..., Hkv, t, d]; leave enable_gqa out for attention without heads")
	case len(k) != len(q):
		return bad(1, "k has rank "+strconv.Itoa(len(k))+", q "+strconv.Itoa(len(q)), ranks)
	case len(v) != len(q):
		return bad(2, "v has rank "+strconv.Itoa(len(v))+", q "+strconv.Itoa(len(q)), ranks)
	}
	r := len(q)
	lead := func(x []int) []int { return x[:r-2] }
	hint := "batch and heads dims are equal in q, k and v; for grouped-query attention (fewer key/value heads) write enable_gqa: true"
	if gqa {
		// The heads (dim −3) may differ; the dims before them may not.
		lead = func(x []int) []int { return x[:r-3] }
		hint = "with enable_gqa, q [..., H, s, d], k [..., Hkv, t, d] and v [..., Hkv, t, dv] have equal dims before the heads"
	}
	switch {
	case !slices.Equal(lead(k), lead(q)):
		return bad(1, "k's leading dims "+intText(lead(k))+" differ from q's "+intText(lead(q)), hint)
	case !slices.Equal(lead(v), lead(q)):
		return bad(2, "v's leading dims "+intText(lead(v))+" differ from q's "+intText(lead(q)), hint)
	case gqa && v[r-3] != k[r-3]:
		return bad(2, "v's heads (dim -3) are "+strconv.Itoa(v[r-3])+", k's "+strconv.Itoa(k[r-3]), "with enable_gqa, k and v have the same key/value heads Hkv")
	case gqa && (k[r-3] == 0 || q[r-3]%k[r-3] != 0):
		return bad(1, "q's "+strconv.Itoa(q[r-3])+" heads (dim -3) are not a multiple of k's "+strconv.Itoa(k[r-3]),
			"with enable_gqa, each of k's heads serves a group of H/Hkv query heads: H is a multiple of Hkv")
	case k[r-1] != q[r-1]:
		return bad(1, "k's head dim is "+strconv.Itoa(k[r-1])+", q's "+strconv.Itoa(q[r-1]), "q [..., s, d] and k [..., t, d] share their last dim d")
	case v[r-2] != k[r-2]:
		return bad(2, "v has "+strconv.Itoa(v[r-2])+" keys, k "+strconv.Itoa(k[r-2]), "k [..., t, d] and v [..., t, dv] share their key dim t")
	}
	return nil
}
