package ops

import "slices"

// scatter_add is the adjoint of the lookups: where a lookup copies the
// rows of a table at integer indices, scatter_add adds rows of values
// into a table of zeros at integer indices — the gradient of a lookup's
// table, and a one-hot of labels. Its form is embedding's turned round,
// with leading batch dims as gather's: index [..., n] and src [..., n, e]
// give [..., rows, e], out[..., index[..., i], :] += src[..., i, :], an
// index outside [0, rows) adding nothing; torch writes it
// zeros(..., rows, e).scatter_add_(-2, index.unsqueeze(-1).expand_as(src),
// src) (torch.Tensor.scatter_add, along dim −2 with the index repeated
// along the last). Written as a contraction it is the product of the
// transposed one-hot matrix of the indices with src, summed over n, a
// reduction factor: a split of n (the tokens) leaves partial tables that
// a sum combines. The rows are the result's own factor, in no operand: a
// device that holds a block of rows adds the indices in its range,
// shifted by its first row (the ScatterAdd step's offsets, as a Lookup's)
// — Megatron-LM's vocab-parallel embedding's backward, local to each
// device's rows.

// AttrRows is scatter_add's number of rows of its output.
const AttrRows Attr = "rows"

// scatterAttrSpecs are the specs of scatter_add's attributes.
var scatterAttrSpecs = []AttrSpec{
	{Key: AttrRows, Kind: IntAttr, Doc: "scatter_add's rows: the extent of its output's dim −2, which the indices index", Check: checkRows},
}

// checkRows checks scatter_add's rows: positive.
func checkRows(v Value) (string, string) {
	if v.Int < 1 {
		return "rows is not positive", "rows is the extent of the output's rows, the table's vocab"
	}
	return "", ""
}

// Scattered says which operand of a scatter holds the indices and which
// the values it adds into the output's rows (its dim −2).
type Scattered struct {
	// Indices and Values are operand positions.
	Indices, Values int
}

// registerScatter adds scatter_add.
func registerScatter(r *Registry) {
	r.MustRegister(Op{Name: "scatter_add", Family: Contraction, Operands: []string{"index", "src"}, Attrs: []Attr{AttrRows},
		Scatters: &Scattered{Indices: 0, Values: 1},
		Rule:     scatterRule, Torch: &Torch{Func: "_scatter_add"},
		Doc: "zeros [..., rows, e] with the rows of src [..., n, e] added at the integer index [..., n], torch.Tensor.scatter_add along dim -2"})
}

// scatterRule is scatter_add's: index [..., n] and src [..., n, e] give
// [..., rows, e]; the leading dims are shared by all three, e by src and
// the result, n is a reduction factor of the operands, and rows is the
// result's alone.
func scatterRule(in [][]int, out []int, _ Attrs) Rule {
	var b ruleBuilder
	b.resultFactors(out)
	r := len(out)
	if len(in) != 2 || r < 2 || len(in[0]) != r-1 || len(in[1]) != r {
		return b.r
	}
	n := b.factor(in[0][r-2], ReductionFactor)
	index := slices.Clone(b.r.Result[:r-1])
	index[r-2] = n
	src := slices.Clone(b.r.Result)
	src[r-2] = n
	b.r.Operands = [][]Dim{index, src}
	return b.r
}

// ScatterShape is scatter_add's output shape from index [..., n], src
// [..., n, e] and rows, or false when the shapes do not fit.
func ScatterShape(index, src []int, rows int) ([]int, bool) {
	r := len(src)
	if r < 2 || len(index) != r-1 || !slices.Equal(index, src[:r-1]) {
		return nil, false
	}
	return slices.Concat(src[:r-2], []int{rows, src[r-1]}), true
}
