package difftest

import "slices"

// The lookups the layer generator draws (gen_layers.go): embedding.

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

// isIntDType reports whether d is an integer dtype.
func isIntDType(d string) bool { return d == "int32" || d == "int64" }
