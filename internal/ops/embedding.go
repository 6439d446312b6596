package ops

// The lookup ops read rows of a table at integer indices: embedding
// (torch.nn.functional.embedding). Written as a contraction, a lookup is
// the product of a one-hot matrix of its indices with its table, summed
// over the table's index dimension (the vocabulary): that dimension is a
// reduction factor, as Shardy's gather rule makes a collapsed table
// dimension one (op_sharding_rule_registry.cc, addGatherScatterFactors:
// "If this dimension is sharded on the operand, we need an all-reduce on
// the result"). A table sharded along it gives each device the rows of
// the indices it owns and zeros for the others — Megatron-LM's
// VocabParallelEmbedding — whose partial rows an Allreduce (or a
// ReduceScatter) sums, as a row-parallel linear's partial products.

// registerLookupOps adds the lookup ops.
func registerLookupOps(r *Registry) {
	r.MustRegister(Op{Name: "embedding", Family: Contraction, Operands: []string{"ids", "table"}, Indexes: true,
		Rule: embeddingRule, Torch: &Torch{Func: "_embedding", Rounding: Exact},
		Doc: "the rows of table [vocab, e] at the integer ids [...]: [..., e], torch.nn.functional.embedding"})
}

// embeddingRule is embedding's: ids [...] and table [vocab, e] give
// [..., e]; ids' dims are the result's leading ones, e is shared by the
// table and the result, and vocab is a reduction factor of the table only.
func embeddingRule(in [][]int, out []int, _ Attrs) Rule {
	var b ruleBuilder
	b.resultFactors(out)
	if len(in) != 2 || len(in[1]) != 2 || len(out) != len(in[0])+1 {
		return b.r
	}
	vocab := b.factor(in[1][0], ReductionFactor)
	ids := make([]Dim, len(in[0]))
	copy(ids, b.r.Result[:len(in[0])])
	b.r.Operands = [][]Dim{ids, {vocab, b.r.Result[len(out)-1]}}
	return b.r
}
