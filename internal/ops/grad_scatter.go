package ops

// The rules of the lookups and of cross_entropy scatter: a lookup copies
// rows of its table, so its table's gradient adds the output gradient's
// rows back into the rows they were read from — a scatter_add into
// zeros, which under a table split on its rows each device computes for
// its own rows, as Megatron-LM's vocab-parallel embedding's backward
// does. Indices get no gradient (torch's are integers).

// scatterInto is scatter_add(index [..., n], src [..., n, e], rows).
func (b *gradBuilder) scatterInto(name string, index, src Ref, rows int) Ref {
	return b.add(ExpandStep{Name: name, Op: "scatter_add", In: []Ref{index, src}, Values: Values{{Key: AttrRows, Int: rows}}})
}

// gradEmbedding is embedding's rule (embedding: weight:
// embedding_backward(grad, indices, num_weights, ...), the rows of grad
// summed into a table of zeros at the indices): dtable =
// scatter_add(ids, dy, vocab) along the ids' last dim, their leading
// dims kept apart and summed after, as the batch products of matmul's
// rule are. torch's embedding_dense_backward flattens the ids instead;
// a flattening merges dims that a data-parallel batch and a
// sequence-parallel split cut on two mesh axes, which would need a
// resharding (and nvFuser's rules refuse an inner split of a reshape).
// The price is a table of partial rows per leading index until the sum:
// the ids' longest dim is the one scattered along (moved last by a
// permute of the ids and dy where it is not), so that the fewest such
// tables are made — one per sequence of a [batch, seq] step, two for
// Megatron's [seq, batch] of two.
func gradEmbedding(g *GradIn) ([]ExpandStep, []Ref, *ExpandError) {
	b := newGrad(g)
	if !g.Need[1] {
		return b.result()
	}
	ids, dy, rank := Ref(0), g.DY(), len(g.In[0])
	vocab, e := g.In[1][0], g.In[1][1]
	if rank == 0 { // one id: one row
		ids, dy, rank = b.reshape("dtable_ids", 0, []int{1}), b.reshape("dtable_dy", g.DY(), []int{1, e}), 1
	}
	if rank == 1 {
		b.grads[1] = b.scatterInto("dtable", ids, dy, vocab)
		return b.result()
	}
	if long := longest(g.In[0]); long != rank-1 {
		dims := make([]int, 0, rank+1)
		for d := range rank {
			if d != long {
				dims = append(dims, d)
			}
		}
		dims = append(dims, long)
		ids = b.permute("dtable_ids", ids, dims)
		dy = b.permute("dtable_dy", dy, append(dims, rank))
	}
	rows := b.scatterInto("dtable_rows", ids, dy, vocab)
	b.grads[1] = b.leading("dtable", rows, rank+1, 2)
	return b.result()
}

// gradGather is gather's rule (gather: self: gather_backward(grad, self,
// dim, index) = zeros_like(self).scatter_add(dim, index, grad)): dx =
// scatter_add of dy at index along x's last dim.
func gradGather(g *GradIn) ([]ExpandStep, []Ref, *ExpandError) {
	b := newGrad(g)
	if g.Need[0] {
		x := g.In[0]
		b.grads[0] = b.scatterLast("dx", 1, g.DY(), x)
	}
	return b.result()
}

// scatterLast is zeros of shape x [..., v] with src [..., 1] added at
// index [..., 1] along the last dim: scatter_add with n = 1 and e = 1,
// its extent-1 e dropped by a reshape.
func (b *gradBuilder) scatterLast(name string, index, src Ref, x []int) Ref {
	r := len(x)
	ones := append(append([]int{}, x[:r-1]...), 1, 1)
	s := b.scatterInto(name+"_scatter", index, b.reshape(name+"_src", src, ones), x[r-1])
	return b.reshape(name, s, x)
}

// gradCrossEntropy is cross_entropy's rule (derivatives.yaml's
// cross_entropy decomposes into log_softmax and nll_loss, whose
// backwards compose to (softmax(logits) − onehot(labels)) · g): g the
// per-token upstream gradient — dy itself for reduction none, dy / N
// broadcast to every token for mean — and the onehot's product the
// scatter of g into zeros at the labels. The softmax is the forward's
// saved exponentials over their sum; under logits split on the
// vocabulary every piece is local (the scatter adds into each device's
// own rows). labels get no gradient.
func gradCrossEntropy(g *GradIn) ([]ExpandStep, []Ref, *ExpandError) {
	b := newGrad(g)
	if !g.Need[0] {
		return b.result()
	}
	x := g.In[0]
	last := len(x) - 1
	tokens := x[:last]
	per := g.DY()
	if ReductionOf(g.Attrs.Values) == ReductionMean && last > 0 {
		n := Product(tokens)
		per = b.withScalar("dx_mean", "div", g.DY(), float64(n))
		axes := make([]int, last)
		for k := range axes {
			axes[k] = k
		}
		per = b.add(ExpandStep{Name: "dx_tokens", Op: "broadcast", In: []Ref{per}, Axes: axes, Shape: tokens})
	}
	p := b.binary("dx_p", "div", g.SavedRef("exp"), b.back("dx_p_sum_b", g.SavedRef("sum"), last))
	pg := b.binary("dx_pg", "mul", p, b.back("dx_g_b", per, last))
	labels := b.reshape("dx_labels", 1, append(append([]int{}, tokens...), 1))
	b.grads[0] = b.binary("dx", "sub", pg, b.scatterLast("dx_onehot", labels, per, x))
	return b.result()
}

// longest is the position of shape's largest extent, the last of equals.
func longest(shape []int) int {
	at := 0
	for d, e := range shape {
		if e >= shape[at] {
			at = d
		}
	}
	return at
}
