package difftest

import (
	"fmt"
	"slices"
)

// The lookups the layer generator draws (gen_layers.go): embedding and
// gather.

// embedding looks up rows of cur, when it is a [vocab, e] table, or else
// of a new table (the chain goes on from the lookup), at new integer
// indices of rank 1 or 2; a chain of an integer dtype, which no table
// has, gets a unary op instead. The output contracts the vocabulary (k),
// which its declaration may split: each device then looks up the indices
// in its rows and the partial rows are summed. Now and then the table is
// not of rank 2, on purpose.
func (l *layerGen) embedding(cur lt) lt {
	if isIntDType(l.dtype) {
		return l.unary(cur)
	}
	table := operand{t: &cur, shape: cur.shape}
	if len(cur.shape) != 2 {
		table = operand{shape: []int{l.extent(cur.mesh), l.extent(cur.mesh)}}
	}
	vocab, e := table.shape[0], table.shape[1]
	ids := make([]int, 1+l.r.IntN(2))
	for i := range ids {
		ids[i] = l.extent(cur.mesh)
	}
	sure := true
	if l.r.IntN(50) == 0 {
		sure = false
		l.deliberate = append(l.deliberate, "an embedding table not of rank 2")
		table = operand{shape: []int{vocab, e, 2}, kAxis: -1}
	}
	shape := append(slices.Clone(ids), e)
	R := len(shape)
	idx := operand{shape: ids, dtype: []string{"int32", "int64"}[l.r.IntN(2)], kAxis: -1, mapAxis: func(j int) int {
		if j < R-1 {
			return j
		}
		return -1
	}}
	table.kAxis, table.mapAxis = 0, func(j int) int {
		if j == R-1 {
			return 1
		}
		return -1
	}
	return l.emit("embedding", []operand{idx, table}, shape, vocab, "", false, sure)
}

// gather selects from cur [..., v], a float chain's, along its last dim
// at a new integer index [..., 1] (the axis written from the start or the
// end); a chain of an integer dtype gets a unary op instead. The output
// contracts v, which its declaration may split, as a vocab-parallel
// cross-entropy's target logit. Now and then the index is not of x's
// shape with extent 1 last, on purpose.
func (l *layerGen) gather(cur lt) lt {
	r := len(cur.shape)
	if isIntDType(l.dtype) || r == 0 {
		return l.unary(cur)
	}
	shape := append(slices.Clone(cur.shape[:r-1]), 1)
	index := operand{shape: shape, dtype: []string{"int32", "int64"}[l.r.IntN(2)], kAxis: -1, mapAxis: identityMap}
	sure := true
	if l.r.IntN(50) == 0 {
		sure = false
		l.deliberate = append(l.deliberate, "a gather index not of x's shape")
		index.shape = append(slices.Clone(cur.shape[:r-1]), 2)
	}
	x := operand{t: &cur, shape: cur.shape, kAxis: r - 1, mapAxis: func(j int) int {
		if j < r-1 {
			return j
		}
		return -1
	}}
	axis := fmt.Sprintf(", axis: %d", l.signed(r-1, r))
	return l.emit("gather", []operand{x, index}, shape, cur.shape[r-1], axis, false, sure)
}

// isIntDType reports whether d is an integer dtype.
func isIntDType(d string) bool { return d == "int32" || d == "int64" }
