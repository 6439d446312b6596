package ops

import (
	"fmt"
	"slices"
)

// tril is torch.tril(x, diagonal): x with the entries of its last two
// dims above the diagonal zeroed, out[..., i, j] = x[..., i, j] where
// j ≤ i + diagonal and 0 elsewhere. It is a view op — each output
// element is its input element or zero, so it never rounds — whose
// sharding rule is the pointwise one: any block of the output is the
// same block of the input, masked. What the mask of a block is depends on
// where the block lies: a device whose block of the last two dims starts
// at row r0 and column c0 keeps the entries of its block with j ≤ i +
// diagonal + r0 − c0, torch.tril of its block with that diagonal (the
// Tril step's offsets). Causal attention is built on it (sdpa.go).

// AttrDiagonal is tril's diagonal: 0 the main one, k > 0 k above it,
// k < 0 below it.
const AttrDiagonal Attr = "diagonal"

// trilAttrSpecs are the specs of tril's attributes.
var trilAttrSpecs = []AttrSpec{
	{Key: AttrDiagonal, Kind: IntAttr, Doc: "tril's diagonal: the entries with column − row above it are zeroed (0 the main diagonal, torch.tril's)"},
}

// registerTril adds tril.
func registerTril(r *Registry) {
	r.MustRegister(Op{Name: "tril", Family: View, Operands: []string{"x"}, Attrs: []Attr{AttrDiagonal},
		Rule: pointwiseRule, Shape: trilShape, Positional: lastTwo, Torch: &Torch{Func: "torch.tril", Rounding: Exact},
		Doc: "x with the entries of its last two dims above the diagonal zeroed, torch.tril"})
}

// trilShape is tril's output shape: its input's, of rank 2 or more.
func trilShape(in [][]int, a Attrs) ([]int, Values, *ShapeError) {
	if len(in[0]) < 2 {
		return nil, nil, &ShapeError{Index: -1, Msg: fmt.Sprintf("has rank %d, but tril masks the last two dims", len(in[0])),
			Hint: "tril takes a tensor of rank 2 or more: [..., rows, columns]"}
	}
	return slices.Clone(in[0]), a.Values, nil
}

// lastTwo is the last two axes of a tensor of rank dims: those tril's
// mask varies along.
func lastTwo(rank int) []int { return []int{rank - 2, rank - 1} }

// TrilKeeps reports whether tril with diagonal d keeps the entry at row
// i, column j: j − i ≤ d.
func TrilKeeps(i, j, d int) bool { return j-i <= d }
