package ops

import "slices"

// The rules of the composites built on softmax's expansion, log_softmax
// and sdpa, read the forward's saved intermediates (the exponentials and
// their sum, the probabilities) rather than differentiating the
// expansion step by step: the row max that shifts the scores has a
// gradient that cancels in total, and the rules below never compute it.

// gradLogSoftmax is log_softmax's rule (_log_softmax:
// _log_softmax_backward_data(grad, output, dim) = grad − exp(output) ·
// Σ_dim grad), with exp(output), the softmax, read as the forward's
// exponentials over their sum (y/exp, y/sum).
func gradLogSoftmax(g *GradIn) ([]ExpandStep, []Ref, *ExpandError) {
	b := newGrad(g)
	if g.Need[0] {
		ax := g.Attrs.Axis
		p := b.binary("dx_p", "div", g.SavedRef("exp"), b.back("dx_p_sum_b", g.SavedRef("sum"), ax))
		s := b.back("dx_dysum_b", b.reduce("dx_dysum", "sum", g.DY(), ax), ax)
		b.grads[0] = b.binary("dx", "sub", g.DY(), b.binary("dx_ps", "mul", p, s))
	}
	return b.result()
}

// gradSDPA is sdpa's rule, the math of flash attention's backward
// (Dao, "FlashAttention-2", Algorithm 2; torch's
// _scaled_dot_product_flash_attention_backward): with P the forward's
// probabilities (y/probs), O its output and dO the upstream gradient,
// dV = Pᵀ·dO, dP = dO·Vᵀ, dS = P ⊙ (dP − rowsum(dO ⊙ O)) (softmax's
// backward, whose row sum Σ dP·P equals rowsum(dO ⊙ O)), scaled by
// 1/√d, then dQ = dS·K and dK = dSᵀ·Q. The softmax piece is
// softmaxBack, which a masked sdpa's rule can take as it is.
//
// Under enable_gqa with groups of g = H/Hkv query heads, K and V are
// the repeated keys and values (repeatHeads, recomputed from k and v:
// a broadcast, which the backward need not keep), and dK and dV sum
// each group's products inside their one contraction, as FlashAttention
// with grouped-query heads accumulates a key/value head's gradient over
// its query heads: dK[.., j, t] = Σ over the group's heads and the
// queries of dS·Q, the group's heads merged with the queries
// (groupRows, groupCols) into one contracted dim of s·g. A device
// holding some of the queries (context parallelism) so sums its
// queries and its group's heads before any reduction, which then moves
// the unrepeated key/value heads' bytes — the forward's gather's.
func gradSDPA(g *GradIn) ([]ExpandStep, []Ref, *ExpandError) {
	b := newGrad(g)
	r := len(g.In[0])
	last := r - 1
	p := g.SavedRef("probs")
	grp := sdpaGroup(g.In)
	scores := slices.Concat(g.In[0][:last], []int{g.In[1][r-2]}) // P and dS, [..., H, s, t]
	k, v := Ref(1), Ref(2)
	if grp > 1 && (g.Need[0] || g.Need[1]) {
		// dQ reads the repeated keys, dP the repeated values.
		k = b.repeatHeads("k_rep", k, g.In[1], grp)
		v = b.repeatHeads("v_rep", v, g.In[2], grp)
	}
	if g.Need[2] {
		if grp > 1 {
			b.grads[2] = b.binary("dv", "matmul", b.groupCols("dv_pt", p, scores, grp), b.groupRows("dv_dy", g.DY(), g.Out, grp))
		} else {
			b.grads[2] = b.binary("dv", "matmul", b.transpose("dv_pt", p, r), g.DY())
		}
	}
	if !g.Need[0] && !g.Need[1] {
		return b.result()
	}
	dp := b.binary("dp", "matmul", g.DY(), b.transpose("dp_vt", v, r))
	delta := b.reduce("ds_delta", "sum", b.binary("ds_dyo", "mul", g.DY(), g.Y()), last)
	ds := b.softmaxBack("ds_scaled", p, dp, delta, last)
	ds = b.withScalar("ds", "mul", ds, sdpaScale(g.In[0][last]))
	if g.Need[0] {
		b.grads[0] = b.binary("dq", "matmul", ds, k)
	}
	if g.Need[1] {
		if grp > 1 {
			b.grads[1] = b.binary("dk", "matmul", b.groupCols("dk_dst", ds, scores, grp), b.groupRows("dk_q", 0, g.In[0], grp))
		} else {
			b.grads[1] = b.binary("dk", "matmul", b.transpose("dk_dst", ds, r), 0)
		}
	}
	return b.result()
}

// groupShape is the shape [..., H, s, c] of q, dO, P or dS as
// [..., H/g, g, s, c]: each group of g query heads an axis of its own.
func groupShape(shape []int, g int) []int {
	r := len(shape)
	return slices.Concat(shape[:r-3], []int{shape[r-3] / g, g}, shape[r-2:])
}

// groupRows is x [..., H, s, c] (shape) as [..., H/g, s·g, c]: the g heads of a
// group merged into the rows, each query's g heads in a row (query
// outer, head inner), so that a split of the queries over a mesh axis
// stays a split in blocks of the merged dim.
func (b *gradBuilder) groupRows(name string, x Ref, shape []int, g int) Ref {
	r := len(shape)
	five := b.reshape(name+"_g", x, groupShape(shape, g))
	dims := identity(r + 1)
	dims[r-2], dims[r-1] = r-1, r-2 // [..., H/g, s, g, c]
	t := b.permute(name+"_t", five, dims)
	return b.reshape(name, t, slices.Concat(shape[:r-3], []int{shape[r-3] / g, shape[r-2] * g, shape[r-1]}))
}

// groupCols is x [..., H, s, t] (shape) transposed with its heads grouped as
// groupRows groups them, [..., H/g, t, s·g]: the left operand of a
// contraction over the group's heads and queries at once.
func (b *gradBuilder) groupCols(name string, x Ref, shape []int, g int) Ref {
	r := len(shape)
	five := b.reshape(name+"_g", x, groupShape(shape, g))
	dims := identity(r + 1)
	dims[r-2], dims[r-1], dims[r] = r, r-1, r-2 // [..., H/g, t, s, g]
	t := b.permute(name+"_t", five, dims)
	return b.reshape(name, t, slices.Concat(shape[:r-3], []int{shape[r-3] / g, shape[r-1], shape[r-2] * g}))
}

// identity is the permutation 0, 1, ..., n−1.
func identity(n int) []int {
	dims := make([]int, n)
	for j := range dims {
		dims[j] = j
	}
	return dims
}
