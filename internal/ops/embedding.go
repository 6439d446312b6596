package ops

import "slices"

// The lookup ops read rows of a table at integer indices: embedding
// (torch.nn.functional.embedding), and gather (torch.gather along the
// last dim), the index primitive of a vocab-parallel cross-entropy: the
// target logit t[i] = logits[i, labels[i]]. Written as a contraction, a lookup is
// the product of a one-hot matrix of its indices with its table, summed
// over the table's index dimension (the vocabulary): that dimension is a
// reduction factor, as Shardy's gather rule makes a collapsed table
// dimension one (op_sharding_rule_registry.cc, addGatherScatterFactors:
// "If this dimension is sharded on the operand, we need an all-reduce on
// the result"). A table sharded along it gives each device the rows of
// the indices it owns and zeros for the others — Megatron-LM's
// VocabParallelEmbedding — whose partial rows an Allreduce (or a
// ReduceScatter) sums, as a row-parallel linear's partial products.

// Indexed says which operand of a lookup holds the indices and which the
// table, and which dim of the table holds the rows they index.
type Indexed struct {
	// Indices and Table are operand positions.
	Indices, Table int
	// Rows is the table's dim of the rows, negative from its last.
	Rows int
}

// RowsDim is the table's dim of the rows for a table of rank rank.
func (x *Indexed) RowsDim(rank int) int {
	if x.Rows < 0 {
		return x.Rows + rank
	}
	return x.Rows
}

// registerLookupOps adds the lookup ops.
func registerLookupOps(r *Registry) {
	r.MustRegister(Op{Name: "embedding", Family: Contraction, Operands: []string{"ids", "table"},
		Indexed: &Indexed{Indices: 0, Table: 1, Rows: 0},
		Rule:    embeddingRule, Torch: &Torch{Func: "_embedding", Rounding: Exact},
		Doc: "the rows of table [vocab, e] at the integer ids [...]: [..., e], torch.nn.functional.embedding"})
	r.MustRegister(Op{Name: "gather", Family: Contraction, Operands: []string{"x", "index"}, Attrs: []Attr{AttrAxis},
		Indexed: &Indexed{Indices: 1, Table: 0, Rows: -1},
		Rule:    gatherRule, Torch: &Torch{Func: "_gather", Rounding: Exact},
		Doc: "x [..., v] at the integer index [..., 1] along the last dim: [..., 1], torch.gather(x, -1, index)"})
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

// gatherRule is gather's along the last dim: x [..., v] and index [..., 1]
// give [..., 1]; the leading dims are shared by all three, the index's
// last (extent 1) is the result's, and v is a reduction factor of x only.
func gatherRule(in [][]int, out []int, _ Attrs) Rule {
	var b ruleBuilder
	b.resultFactors(out)
	r := len(out)
	if len(in) != 2 || r == 0 || len(in[0]) != r || len(in[1]) != r {
		return b.r
	}
	v := b.factor(in[0][r-1], ReductionFactor)
	x := make([]Dim, r)
	copy(x, b.r.Result[:r-1])
	x[r-1] = v
	b.r.Operands = [][]Dim{x, slices.Clone(b.r.Result)}
	return b.r
}
