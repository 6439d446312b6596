package ops

import (
	"fmt"
	"slices"
	"strconv"
)

// The view ops move data without computing: permute reorders the dims,
// reshape reads the elements row-major into another shape. Their sharding
// rules follow Shardy's (op_sharding_rule_registry.cc): a permutation
// shares each dim's factor with the dim it moves to; a reshape's dims are
// products of factors found by walking both shapes outermost first, so
// that [s, h·d] -> [s, h, d] is ([s, hd]) -> ([s], [h], [d]) with the
// operand's second dim the product of h and d.

// ShapeError is what is wrong with a view op's operands and attributes.
type ShapeError struct {
	// Attr is the attribute at fault, "" for the operand; Index the entry
	// of a list at fault, -1 for the whole value.
	Attr  Attr
	Index int
	Msg   string
	Hint  string
}

// permuteShape is permute's output shape: the input's extents in dims'
// order, dims normalized.
func permuteShape(in [][]int, a Attrs) ([]int, Values, *ShapeError) {
	x, dims := in[0], slices.Clone(a.Values.Ints(AttrDims))
	rank := len(x)
	if len(dims) != rank {
		return nil, nil, &ShapeError{Attr: AttrDims, Index: -1,
			Msg:  fmt.Sprintf("dims %s has %d entries, but the input has rank %d", intText(dims), len(dims), rank),
			Hint: "list every dim of the input once, in the output's order"}
	}
	seen := make([]bool, rank)
	for k, d := range dims {
		if d < -rank || d >= rank {
			return nil, nil, &ShapeError{Attr: AttrDims, Index: k,
				Msg: fmt.Sprintf("dim %d is out of range for rank %d", d, rank), Hint: "dims count from 0, or from -1 at the end"}
		}
		if d < 0 {
			d += rank
		}
		if seen[d] {
			return nil, nil, &ShapeError{Attr: AttrDims, Index: k,
				Msg:  fmt.Sprintf("dims %s is not a permutation: dim %d appears twice", intText(a.Values.Ints(AttrDims)), d),
				Hint: "list every dim of the input once, in the output's order"}
		}
		seen[d], dims[k] = true, d
	}
	out := make([]int, rank)
	for j, d := range dims {
		out[j] = x[d]
	}
	return out, Values{{Key: AttrDims, Ints: dims}}, nil
}

// castShape is cast's output shape: its input's.
func castShape(in [][]int, a Attrs) ([]int, Values, *ShapeError) {
	return slices.Clone(in[0]), a.Values, nil
}

// permuteRule is permute's rule: output dim j is input dim dims[j].
func permuteRule(in [][]int, out []int, a Attrs) Rule {
	var b ruleBuilder
	b.resultFactors(out)
	dims := a.Values.Ints(AttrDims)
	if len(in) == 0 || len(dims) != len(out) || len(in[0]) != len(out) {
		return b.r
	}
	ds := make([]Dim, len(in[0]))
	for j, d := range dims {
		if d < 0 {
			d += len(out)
		}
		if d >= 0 && d < len(ds) {
			ds[d] = b.r.Result[j]
		}
	}
	b.r.Operands = [][]Dim{ds}
	return b.r
}

// reshapeShape is reshape's output shape: shape, its -1 inferred from the
// input's element count, which must be the output's.
func reshapeShape(in [][]int, a Attrs) ([]int, Values, *ShapeError) {
	shape := slices.Clone(a.Values.Ints(AttrShape))
	n := Product(in[0])
	known, free := 1, -1
	for k, e := range shape {
		if e == -1 {
			free = k
			continue
		}
		known *= e
	}
	switch {
	case free >= 0 && (known == 0 || n%known != 0):
		return nil, nil, &ShapeError{Attr: AttrShape, Index: -1,
			Msg:  fmt.Sprintf("shape %s does not fit the input's %d elements: %d is not a multiple of %d", intText(shape), n, n, known),
			Hint: fmt.Sprintf("the input %s has %d elements", intText(in[0]), n)}
	case free >= 0:
		shape[free] = n / known
	case known != n:
		return nil, nil, &ShapeError{Attr: AttrShape, Index: -1,
			Msg:  fmt.Sprintf("shape %s has %d elements, but the input %s has %d", intText(shape), known, intText(in[0]), n),
			Hint: "a reshape keeps the element count; write -1 for the extent to infer"}
	}
	return shape, Values{{Key: AttrShape, Ints: shape}}, nil
}

// reshapeRule is reshape's rule, from the factors of a walk over both
// shapes outermost first: while the extents left of the current input
// and output dims have a common divisor, it is a factor of both; an
// extent-1 dim has none. Once they have none (3x2 -> 2x3), the rest of
// each dim is a factor of its own, which no dim of the other side shares.
func reshapeRule(in [][]int, out []int, _ Attrs) Rule {
	var b ruleBuilder
	if len(in) == 0 {
		return b.r
	}
	x := in[0]
	xs, ys := make([]Dim, len(x)), make([]Dim, len(out))
	i, j := skipOnes(x, 0), skipOnes(out, 0)
	ri, rj := extentAt(x, i), extentAt(out, j)
	for i < len(x) && j < len(out) {
		g := gcd(ri, rj)
		if g == 1 {
			break
		}
		f := b.factor(g, PassThrough)
		xs[i], ys[j] = append(xs[i], f[0]), append(ys[j], f[0])
		if ri /= g; ri == 1 {
			i = skipOnes(x, i+1)
			ri = extentAt(x, i)
		}
		if rj /= g; rj == 1 {
			j = skipOnes(out, j+1)
			rj = extentAt(out, j)
		}
	}
	own := func(dims []Dim, shape []int, k, rest int) {
		for ; k < len(shape); k, rest = k+1, extentAt(shape, k+1) {
			if rest > 1 {
				dims[k] = append(dims[k], b.factor(rest, PassThrough)[0])
			}
		}
	}
	own(xs, x, i, ri)
	own(ys, out, j, rj)
	b.r.Operands, b.r.Result = [][]Dim{xs}, ys
	return b.r
}

// skipOnes returns the first position from k of an extent other than 1.
func skipOnes(shape []int, k int) int {
	for k < len(shape) && shape[k] == 1 {
		k++
	}
	return k
}

// extentAt is shape[k], 1 past the end.
func extentAt(shape []int, k int) int {
	if k < len(shape) {
		return shape[k]
	}
	return 1
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// Product is the product of xs, 1 for none: the elements of a shape.
// Its callers' shapes are a fusion's, whose elements fit an int.
func Product(xs []int) int {
	n := 1
	for _, x := range xs {
		n *= x
	}
	return n
}

// intText writes xs as fusion files do, [0, 2].
func intText(xs []int) string {
	b := []byte{'['}
	for k, x := range xs {
		if k > 0 {
			b = append(b, ", "...)
		}
		b = strconv.AppendInt(b, int64(x), 10)
	}
	return string(append(b, ']'))
}

// LostSplit says why a block split of operand i's dim d into parts has no
// counterpart in the result (ResultSplit is -1), in nvFuser's words
// (csrc/multidevice/propagation.cpp, tests/cpp/test_sharding.cpp): the
// shard would fall on an inner piece of a reshaped dim, or split a piece
// unevenly.
func (r *Rule) LostSplit(i, d, parts int) string {
	if i < 0 || i >= len(r.Operands) || d < 0 || d >= len(r.Operands[i]) || len(r.Operands[i][d]) == 0 {
		return "the op does not keep"
	}
	f := r.Operands[i][d][0]
	for _, dim := range r.Result {
		if len(dim) > 0 && dim[0] == f {
			return fmt.Sprintf("becomes a dim whose outer piece has extent %d, which %d devices do not divide (nvFuser: \"Require the sharded ID to be divisible by the split factor\")",
				r.Factors[f].Size, parts)
		}
	}
	return "becomes an inner piece of a reshaped dim (nvFuser: \"Expected the sharding to be on the outer reshaped id\")"
}
