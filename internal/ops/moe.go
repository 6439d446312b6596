package ops

import "strconv"

// Mixture-of-experts routing with static shapes, as GShard (Lepikhin et
// al. 2020, §2.2) and the Switch Transformer (Fedus et al. 2021) route
// tokens: the tokens are split into groups, each expert takes at most
// `capacity` tokens of a group, and the tokens' assignment is a 0/1
// dispatch mask [groups, tokens, experts, capacity], so that dispatch and
// combine are contractions (matmuls) and expert parallelism is a
// resharding of their results (an AllToAll).
//
// Two composite ops write the routing from the router's probabilities
// p [G, T, E]:
//
//   - moe_topk: the mask of each token's top_k experts, sel [G, T, E]
//     (G one dim or more, here and below):
//     expert e is selected when fewer than top_k experts rank before it,
//     e' ranking before e when p[e'] > p[e], or p[e'] = p[e] and e' < e
//     (ties to the lowest index, as torch.topk's order is not specified
//     and a plan needs one).
//   - moe_dispatch: of sel, each selected token's slot in its expert's
//     queue, the tokens of the group in order (the selected tokens before
//     it, an exclusive cumulative sum along T), and the mask [G, T, E, C]
//     with a 1 at (t, e, slot) where the slot is below capacity; a token
//     whose slot is not is dropped by that expert (its combine weight 0),
//     as GShard's and Switch's overflow tokens are.
//
// Both are written as primitive ops (comparisons, sums, tril and a
// matmul), so that their sharding follows from those ops' rules — G is a
// batch-like dim, split anywhere; T and E must be whole on a device, as
// the ranks and the queue's order read every token and expert of a group
// — the simulator computes them exactly (a selection of exact values:
// the comparisons act on the values as they are), and the exported
// program runs their torch functions. Their outputs are selections,
// constant almost everywhere in p: no gradient flows through them
// ([Op.Constant]), as none flows through torch.topk's indices. The
// combine weights, p renormalized over the selected experts (Mixtral's
// routing), are ordinary ops of p and sel, through which it does.

// The attributes of the routing ops.
const (
	// AttrTopK is moe_topk's number of experts each token goes to.
	AttrTopK Attr = "top_k"
	// AttrCapacity is moe_dispatch's number of tokens of a group each
	// expert takes.
	AttrCapacity Attr = "capacity"
)

// moeAttrSpecs are the specs of the routing ops' attributes.
var moeAttrSpecs = []AttrSpec{
	{Key: AttrTopK, Kind: IntAttr, Check: positive("top_k"),
		Doc: "moe_topk's experts a token is routed to (Mixtral's num_experts_per_tok)"},
	{Key: AttrCapacity, Kind: IntAttr, Check: positive("capacity"),
		Doc: "moe_dispatch's tokens of a group each expert takes, the extent of its output's last dim (GShard's expert capacity)"},
}

// positive checks that an integer attribute is at least 1.
func positive(what string) func(v Value) (string, string) {
	return func(v Value) (string, string) {
		if v.Int < 1 {
			return what + " " + strconv.Itoa(v.Int) + " is not positive", what + " is at least 1"
		}
		return "", ""
	}
}

// registerMoE adds moe_topk and moe_dispatch.
func registerMoE(r *Registry) {
	for _, c := range []Op{
		{Name: "moe_topk", Operands: []string{"probs"}, Attrs: []Attr{AttrTopK}, Expand: expandTopK,
			Doc: "the 0/1 mask of each token's top_k experts of probs [groups, tokens, experts], ties to the lowest index"},
		{Name: "moe_dispatch", Operands: []string{"sel"}, Attrs: []Attr{AttrCapacity}, Expand: expandDispatch,
			Doc: "the 0/1 dispatch mask [groups, tokens, experts, capacity] of a selection [groups, tokens, experts]: each selected token in its expert's next slot, tokens in order, those past capacity dropped"},
	} {
		c.Family, c.Constant = Composite, true
		r.MustRegister(c)
	}
}

// checkRouted checks that the routing op's operand is [groups...,
// tokens, experts]: one dim of groups or more (a batch written as two
// dims, each split along its own mesh axis, stays two).
func checkRouted(in [][]int) *ExpandError {
	if len(in[0]) < 3 {
		return &ExpandError{Index: 0, Msg: "has rank " + strconv.Itoa(len(in[0])) + ", want at least 3: [groups, tokens, experts]",
			Hint: "reshape the router's probabilities to [groups, tokens, experts]"}
	}
	return nil
}

// expandTopK is moe_topk(p; k) of p [G..., T, E] of rank r: with pe =
// p[g, t, e] along a new last axis r and po = p[g, t, e'] along axis
// r−1 (each broadcast to [G..., T, E, E']),
//
//	before = gt(po, pe) + tril(eq(po, pe), −1)   e' ranks before e
//	rank   = Σ_e' before                         [G, T, E]
//	sel    = gt(k, rank)                         rank < k
//
// tril of diagonal −1 keeps the entries with e' < e: the tie-break.
func expandTopK(in [][]int, a Attrs) ([]ExpandStep, *ExpandError) {
	if err := checkRouted(in); err != nil {
		return nil, err
	}
	k, _ := a.Values.Get(AttrTopK)
	var e expansion
	r := len(in[0])
	pe := e.add(ExpandStep{Name: "pe", Op: "broadcast", In: []Ref{0}, Axes: []int{r}})
	po := e.add(ExpandStep{Name: "po", Op: "broadcast", In: []Ref{0}, Axes: []int{r - 1}})
	tie := e.add(ExpandStep{Name: "tie", Op: "tril", In: []Ref{e.binary("eq", "eq", po, pe)}, Values: Values{{Key: AttrDiagonal, Int: -1}}})
	before := e.binary("before", "add", e.binary("gt", "gt", po, pe), tie)
	rank := e.reduce("rank", "sum", before, r)
	e.add(ExpandStep{Name: "sel", Op: "gt", In: []Ref{rank}, Scalar: &Scalar{Slot: 0, Value: float64(k.Int)}})
	return e.done(), nil
}

// expandDispatch is moe_dispatch(sel; C) for sel [G..., T, E] (G one dim
// or more): ones made of sel (sel·0 + 1, summed over what is not
// needed), then
//
//	U    = ones[G, T', T] − tril(ones)          1 where t' < t
//	slot = permute(permute(sel)[G, E, T'] @ U)  Σ_{t'<t} sel, [G, T, E]
//	c    = Σ_c' tril(ones[G, C, C'], −1)        0 … C−1, [G, C]
//	mask = sel[G, T, E, 1] · eq(slot[G, T, E, 1], c[G, 1, 1, C])
//
// A slot of C or more equals no c: the token is dropped.
func expandDispatch(in [][]int, a Attrs) ([]ExpandStep, *ExpandError) {
	if err := checkRouted(in); err != nil {
		return nil, err
	}
	r := len(in[0])
	groups, t := in[0][:r-2], in[0][r-2]
	capacity, _ := a.Values.Get(AttrCapacity)
	c := capacity.Int
	// swap exchanges the last two dims.
	swap := make([]int, r)
	for i := range swap {
		swap[i] = i
	}
	swap[r-2], swap[r-1] = r-1, r-2
	with := func(a, b int) []int { return append(append([]int(nil), groups...), a, b) }
	var e expansion
	zeros := e.withScalar("zeros", "mul", 0, 0)
	onesGT := e.withScalar("ones_gt", "add", e.reduce("zeros_gt", "sum", zeros, r-1), 1)
	ones := e.add(ExpandStep{Name: "ones", Op: "broadcast", In: []Ref{onesGT}, Axes: []int{r - 1}, Shape: with(t, t)})
	upper := e.binary("upper", "sub", ones, e.tril("lower", ones))
	selT := e.add(ExpandStep{Name: "sel_t", Op: "permute", In: []Ref{0}, Values: Values{{Key: AttrDims, Ints: swap}}})
	slotT := e.binary("slot_t", "matmul", selT, upper)
	slot := e.add(ExpandStep{Name: "slot", Op: "permute", In: []Ref{slotT}, Values: Values{{Key: AttrDims, Ints: swap}}})
	onesG := e.withScalar("ones_g", "add", e.reduce("zeros_g", "sum", e.reduce("zeros_g2", "sum", zeros, r-1), r-2), 1)
	square := e.add(ExpandStep{Name: "square", Op: "broadcast", In: []Ref{onesG}, Axes: []int{r - 2, r - 1}, Shape: with(c, c)})
	below := e.add(ExpandStep{Name: "below", Op: "tril", In: []Ref{square}, Values: Values{{Key: AttrDiagonal, Int: -1}}})
	index := e.add(ExpandStep{Name: "index_b", Op: "broadcast", In: []Ref{e.reduce("index", "sum", below, r-1)}, Axes: []int{r - 2, r - 1}})
	slotB := e.add(ExpandStep{Name: "slot_b", Op: "broadcast", In: []Ref{slot}, Axes: []int{r}})
	selB := e.add(ExpandStep{Name: "sel_b", Op: "broadcast", In: []Ref{0}, Axes: []int{r}})
	e.binary("mask", "mul", selB, e.binary("onehot", "eq", slotB, index))
	return e.done(), nil
}
