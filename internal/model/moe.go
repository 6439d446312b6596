package model

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// A Mixtral block's MLP is a mixture of experts (docs/models.md, "Mixture
// of experts"), written with static shapes as GShard (Lepikhin et al.
// 2020, §2.2) writes it: each sequence is a group of tokens (under
// context parallelism each sequence's cp slice, as Megatron-Core routes
// each cp rank's own tokens); the router's
// probabilities choose each token's top_k experts (moe_topk), each expert
// takes at most capacity tokens of a group (moe_dispatch: the dispatch
// mask [batch, seq, experts, capacity]), and the combine weights are the
// probabilities renormalized over the chosen experts (Mixtral's
// routing), zero where the token was dropped. Dispatch and combine are
// matmuls with the mask; the experts are batched matmuls of weights
// [experts, ...] split along ep. The tokens are split along ep by
// sequence (ep is the batch's axis outside the experts), the experts'
// inputs by expert: the resharding between the two, declared on
// NAME_ein and NAME_back, is an AllToAll along ep each way.

// capacity is the tokens of a group of the given tokens (a sequence, or
// its cp slice) each expert takes: ⌈top_k·tokens/experts · factor⌉,
// GShard's and Switch's expert capacity, at most the group (a token goes
// to an expert once).
func capacity(c *Config, o Options, tokens int) int {
	even := float64(c.TopK*tokens) / float64(c.Experts)
	return min(tokens, int(math.Ceil(even*o.CapacityFactor-1e-9)))
}

// group is the tokens of a group of the routing: a sequence, or under
// context parallelism a sequence's cp slice, the tokens a cp rank holds
// (Megatron-Core's router and capacity see each cp rank's tokens: its
// MoE layer runs on the rank's local sequence, docs/models.md).
func (w *writer) group() int { return w.o.Seq / w.p.size(CP) }

// groups is the shape of the routing's leading dims, its groups: the cp
// slices under context parallelism, then the batch's dims, as the
// residual stream's leading dims are; then rest.
func (w *writer) groups(rest ...int) []int {
	g := w.batched()
	if w.cpLead > 0 {
		g = append([]int{w.p.size(CP)}, g...)
	}
	return append(g, rest...)
}

// moeTensors declares layer l's router and experts, and the tensors whose
// placements say where the tokens go: the experts' inputs split by
// expert along ep, their outputs back by sequence.
func (w *writer) moeTensors(l int, n func(string) string) {
	c, o := w.c, w.o
	e, h, f := c.Experts, c.Hidden, c.FFN
	w.weight(n("w_router"), []int{e, h}, replicated, "[experts, hidden], the router: replicated")
	w.weight(n("w_gate"), []int{e, h, f}, map[string]int{EP: 0, TP: 2}, "[experts, hidden, ffn]: experts along ep, ffn along tp")
	w.weight(n("w_up"), []int{e, h, f}, map[string]int{EP: 0, TP: 2}, "")
	w.weight(n("w_down"), []int{e, f, h}, map[string]int{EP: 0, TP: 1}, "[experts, ffn, hidden]")
	tokens := w.streamSplit(false)
	w.line("  %s: {mesh: %s, shape: %s, placements: %s}", n("probs_sum_b"), w.mesh(), ints(w.groups(w.group(), 1)), w.p.placements(tokens))
	w.line("  %s: {mesh: %s, shape: %s, placements: %s}", n("weights_b"), w.mesh(), ints(w.groups(w.group(), e, 1)), w.p.placements(tokens))
	w.line("  %s: {mesh: %s, placements: %s}   # [experts, %s, capacity, hidden]: each device's experts' tokens, an AllToAll along ep", n("ein"), w.mesh(), w.p.placements(w.expertsSplit()), w.batchText(w.expertOrder()...))
	w.line("  %s: {mesh: %s, placements: %s}   # [%s, experts, capacity, hidden]: back to the tokens' devices, an AllToAll along ep", n("back"), w.mesh(), w.p.placements(tokens), w.batchText())
	if o.Backward && w.p.size(EP) > 1 {
		// Each AllToAll's gradient is the AllToAll back (GShard,
		// Megatron-LM's MoE): the experts' outputs' gradient split by
		// expert, as the outputs are, and the dispatched tokens' by
		// sequence, as they are, each declared before the reshape that
		// merges the batch's dims (nvFuser reshards before a reshape
		// whose inner piece is split). Left to propagation, the combine's
		// gradient arrives split by sequence and the dispatch's by
		// expert, and the weight and input gradients are summed over
		// the misplaced dim instead: ReduceScatters of the experts'
		// weights' and the tokens' partial sums, more bytes than the
		// AllToAll (docs/models.md).
		w.line("  %s.grad: {placements: %s}   # the combine's backward: the gradient back to the experts' devices, an AllToAll along ep", n("eout4"), w.p.placements(w.expertsSplit()))
		w.line("  %s.grad: {placements: %s}   # the dispatch's backward: the gradient back to the tokens' devices, an AllToAll along ep", n("xin4"), w.p.placements(tokens))
	}
}

// expertsSplit is the sharding of the experts' inputs and outputs,
// [experts, groups..., ...] with the groups' dims in expertOrder: the
// experts along ep, under context parallelism the cp slices along cp,
// and where the batch is written as two dims the one that ep does not
// split along its axis (dp or fsdp with ep: each data-parallel group's
// experts take its own tokens, Megatron-LM's expert-data-parallel
// groups). (ParseMesh refuses cp with a two-dim batch: its two splits
// would be merged into one dim of the experts' tokens.)
func (w *writer) expertsSplit() map[string]int {
	m := map[string]int{EP: 0}
	if w.cpLead > 0 {
		m[CP] = 1
	}
	if w.lead > 0 {
		for _, a := range w.p.batchAxes() {
			if a != EP {
				m[a] = 1
			}
		}
	}
	return m
}

// expertOrder is the order of the groups' dims in the experts' inputs:
// the dim ep does not split first, so that the reshape that merges them
// with the slots keeps its split on the outer piece (the one that
// propagates, and nvFuser's rule); the cp slices, split along cp, first
// of all.
func (w *writer) expertOrder() []int {
	order := []int{0}
	switch {
	case w.lead > 0 && w.p.batchAxes()[0] == EP:
		order = []int{1, 0}
	case w.lead > 0:
		order = []int{0, 1}
	}
	if w.cpLead == 0 {
		return order
	}
	for i := range order {
		order[i]++
	}
	return append([]int{0}, order...)
}

// batchText names the groups' dims in a comment, in the order of dims:
// batch, or dp, batch/dp (in expertOrder, batch/ep, ep), after cp under
// context parallelism.
func (w *writer) batchText(dims ...int) string {
	names := []string{"batch"}
	if w.lead > 0 {
		outer := w.p.batchAxes()[0]
		names = []string{outer, "batch/" + outer}
	}
	if w.cpLead > 0 {
		names = append([]string{"cp"}, names...)
	}
	if len(dims) == 0 {
		for d := range names {
			dims = append(dims, d)
		}
	}
	text := make([]string, len(dims))
	for i, d := range dims {
		text[i] = names[d]
	}
	return strings.Join(text, ", ")
}

// isExpertWeight reports whether weight name is a mixture of experts'
// expert weight [experts, ...], of which each token multiplies top_k.
func isExpertWeight(name string) bool {
	for _, s := range []string{"_w_gate", "_w_up", "_w_down"} {
		if strings.HasSuffix(name, s) {
			return true
		}
	}
	return false
}

// moe writes the mixture of experts of x [groups..., tokens, hidden] into
// out: the groups the batch (one dim, or two: [outer, batch/outer]),
// after the cp slices under context parallelism, and the tokens a
// sequence's, or its cp slice's.
func (w *writer) moe(n func(string) string, x, out string) {
	c := w.c
	s, e, h := w.group(), c.Experts, c.Hidden
	slots := capacity(c, w.o, s)
	bd := w.groups()
	L := len(bd)
	lead := func(rest ...int) []int { return append(slices.Clone(bd), rest...) }
	upTo := func(n int) []int { // 0 … n−1
		d := make([]int, n)
		for i := range d {
			d[i] = i
		}
		return d
	}
	dims := func(d ...int) string { return "dims: " + ints(d) }
	w.comment(fmt.Sprintf("the router: softmax of [%s, %s, experts] logits, the top %d experts of each token; each expert takes %d tokens of %s (capacity factor %g), the rest dropped",
		w.batchText(), map[bool]string{false: "seq", true: "seq/cp"}[w.cpLead > 0], c.TopK, slots, w.groupText(), w.o.CapacityFactor))
	w.op("linear", []string{x, w.use(n("w_router"))}, n("logits"), "")
	w.op("softmax", []string{n("logits")}, n("probs"), "axis: -1")
	w.op("moe_topk", []string{n("probs")}, n("sel"), fmt.Sprintf("top_k: %d", c.TopK))
	w.op("moe_dispatch", []string{n("sel")}, n("mask"), fmt.Sprintf("capacity: %d", slots))
	w.comment("the combine weights: the chosen experts' probabilities renormalized (Mixtral's), in each token's slot")
	w.op("mul", []string{n("probs"), n("sel")}, n("chosen"), "")
	w.op("sum", []string{n("chosen")}, n("probs_sum"), fmt.Sprintf("axis: %d", L+1))
	w.op("broadcast", []string{n("probs_sum")}, n("probs_sum_b"), fmt.Sprintf("axes: [%d]", L+1))
	w.op("div", []string{n("chosen"), n("probs_sum_b")}, n("weights"), "")
	w.op("broadcast", []string{n("weights")}, n("weights_b"), fmt.Sprintf("axes: [%d]", L+2))
	w.op("mul", []string{n("mask"), n("weights_b")}, n("combine"), "")
	w.comment("dispatch: each expert's slots of each " + strings.TrimPrefix(w.groupText(), "a ") + ", Σ_seq mask·x, sent to the expert's device (AllToAll along ep)")
	w.op("permute", []string{n("mask")}, n("mask_t"), dims(append(upTo(L), L+1, L+2, L)...))
	w.op("reshape", []string{n("mask_t")}, n("mask_r"), "shape: "+ints(lead(e*slots, s)))
	w.op("matmul", []string{n("mask_r"), x}, n("xin"), "")
	w.op("reshape", []string{n("xin")}, n("xin4"), "shape: "+ints(lead(e, slots, h)))
	order := w.expertOrder()
	w.op("permute", []string{n("xin4")}, n("ein"), dims(append(append([]int{L}, order...), L+1, L+2)...))
	w.op("reshape", []string{n("ein")}, n("ein3"), "shape: "+ints([]int{e, w.o.Batch * w.p.size(CP) * slots, h}))
	w.comment("the experts: SwiGLU, batched over each device's experts, ffn split along tp")
	w.op("matmul", []string{n("ein3"), w.use(n("w_gate"))}, n("gate"), "")
	w.op("silu", []string{n("gate")}, n("act"), "")
	w.op("matmul", []string{n("ein3"), w.use(n("w_up"))}, n("up"), "")
	w.op("mul", []string{n("act"), n("up")}, n("gated"), "")
	w.op("matmul", []string{n("gated"), w.use(n("w_down"))}, n("eout"), "")
	w.comment("combine: the experts' outputs back to their tokens' devices (AllToAll along ep), Σ_{experts, slots} combine·out")
	back := []int{e} // eout4's shape: ein's
	for _, d := range order {
		back = append(back, bd[d])
	}
	w.op("reshape", []string{n("eout")}, n("eout4"), "shape: "+ints(append(back, slots, h)))
	inverse := make([]int, L+3) // ein's permute, inverted
	for i, d := range append(append([]int{L}, order...), L+1, L+2) {
		inverse[d] = i
	}
	w.op("permute", []string{n("eout4")}, n("back"), dims(inverse...))
	w.op("reshape", []string{n("back")}, n("back3"), "shape: "+ints(lead(e*slots, h)))
	w.op("reshape", []string{n("combine")}, n("combine_r"), "shape: "+ints(lead(s, e*slots)))
	w.op("matmul", []string{n("combine_r"), n("back3")}, out, "")
}

// groupText names a group of the routing in a comment: a sequence, or its
// cp slice.
func (w *writer) groupText() string {
	if w.cpLead > 0 {
		return "a sequence's cp slice"
	}
	return "a sequence"
}
