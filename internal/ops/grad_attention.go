package ops

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
func gradSDPA(g *GradIn) ([]ExpandStep, []Ref, *ExpandError) {
	b := newGrad(g)
	r := len(g.In[0])
	last := r - 1
	p := g.SavedRef("probs")
	if g.Need[2] {
		b.grads[2] = b.binary("dv", "matmul", b.transpose("dv_pt", p, r), g.DY())
	}
	if !g.Need[0] && !g.Need[1] {
		return b.result()
	}
	dp := b.binary("dp", "matmul", g.DY(), b.transpose("dp_vt", 2, r))
	delta := b.reduce("ds_delta", "sum", b.binary("ds_dyo", "mul", g.DY(), g.Y()), last)
	ds := b.softmaxBack("ds_scaled", p, dp, delta, last)
	ds = b.withScalar("ds", "mul", ds, sdpaScale(g.In[0][last]))
	if g.Need[0] {
		b.grads[0] = b.binary("dq", "matmul", ds, 1)
	}
	if g.Need[1] {
		b.grads[1] = b.binary("dk", "matmul", b.transpose("dk_dst", ds, r), 0)
	}
	return b.result()
}
