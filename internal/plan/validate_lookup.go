package plan

import (
	"slices"

	"github.com/nvcomm/nvcomm/internal/ops"
	"github.com/nvcomm/nvcomm/internal/shard"
)

// This file checks the lookups (embedding) and their local step, Lookup
// (docs/plan.md, "Step semantics"): the rows of a table at integer
// indices, a zero row for an index outside a device's rows.

// indexedOf is a lookup's Indexed (which operand holds the indices, which
// the table), a scatter's as one (its values for the table), nil for
// another op.
func indexedOf(op string) *ops.Indexed {
	e := ops.Lookup(op)
	switch {
	case e == nil:
		return nil
	case e.Scatters != nil:
		return &ops.Indexed{Indices: e.Scatters.Indices, Table: e.Scatters.Values}
	}
	return e.Indexed
}

// isScatter reports whether op adds values into its output's rows at
// indices (scatter_add).
func isScatter(op string) bool {
	e := ops.Lookup(op)
	return e != nil && e.Scatters != nil
}

// isLookup reports whether op reads rows of a table at indices.
func isLookup(op string) bool {
	e := ops.Lookup(op)
	return e != nil && e.Indexed != nil
}

// checkLookupDTypes checks a lookup's dtypes: integer indices, and an
// output of the table's dtype.
func (v *validator) checkLookupDTypes(i int, op Op, ins []*tensorInfo, out *tensorInfo) {
	names, x := op.Operands(), indexedOf(op.Op)
	if len(ins) != 2 {
		return // reported as a wrong number of inputs
	}
	if ids := ins[x.Indices].t; !shard.IsIntDType(ids.DType) {
		v.planf("op %d: %s's indices %q have dtype %s, want int32 or int64", i, op.Op, names[x.Indices], ids.DType)
	}
	if table := ins[x.Table].t; table.DType != out.t.DType {
		v.planf("op %d: output %q has dtype %s, but its table %q has %s", i, op.Output, out.t.DType, names[x.Table], table.DType)
	}
}

// gatherDomain is x [..., v] at index [..., 1] along the last dim: the
// output is [..., 1, v] with v a trailing reduction axis.
func (v *validator) gatherDomain(i int, op Op, ins []*tensorInfo) (outputDomain, bool) {
	x, index := valueShape(ins[0].t), valueShape(ins[1].t)
	r := len(x)
	switch {
	case r == 0 || op.Axis == nil || *op.Axis != r-1:
		v.planf("op %d: gather's axis must be the last dim of %q (%d), got %s", i, op.Operands()[0], r-1, AxisText(op.Axis))
	case len(index) != r || index[r-1] != 1 || !slices.Equal(index[:r-1], x[:r-1]):
		v.planf("op %d: gather's index %q %v is not x's shape %v with extent 1 on the last dim", i, op.Operands()[1], index, x)
	default:
		return outputDomain{slices.Concat(index, x[r-1:]), []int{r}, "the index's shape and x's last dim as a trailing reduction axis"}, true
	}
	return outputDomain{}, false
}

// embeddingDomain is ids[...] looking up rows of table[vocab, e]: the
// output is [..., e, vocab] with vocab a trailing reduction axis.
func (v *validator) embeddingDomain(i int, op Op, ins []*tensorInfo) (outputDomain, bool) {
	ids, table := valueShape(ins[0].t), valueShape(ins[1].t)
	if len(table) != 2 {
		v.planf("op %d: embedding's table %q has %d axes, want 2 ([vocab, e])", i, op.Operands()[1], len(table))
		return outputDomain{}, false
	}
	shape := slices.Concat(ids, []int{table[1], table[0]})
	return outputDomain{shape, []int{len(ids) + 1}, "the ids' shape, e, and the table's vocab as a trailing reduction axis"}, true
}

// checkLookup checks a Lookup: two inputs (indices, table), dims [Bt, N,
// V, E] of positive extents that count Bt·N indices in and Bt·N·E
// elements out, and one offset of at least 0 per device.
func (v *validator) checkLookup(i int, s *Step) {
	v.checkIndexed(i, s, "a Lookup reads 2 buffers (inputs [indices, table])", indexedDims{out: []int{0, 1, 3}, outWhy: "Bt·N·E", other: []int{0, 2, 3}})
}

// indexedDims are which of an indexed step's dims [Bt, N, V, E] its
// output counts (outWhy names their product), and which its other input.
type indexedDims struct {
	out    []int
	outWhy string
	other  []int
}

// checkIndexed checks a Lookup or a ScatterAdd (what says what it reads):
// two inputs, dims [Bt, N, V, E] of positive extents whose products fit
// in an int, Bt·N indices in and the dims' output count out, and one
// offset of at least 0 per device.
func (v *validator) checkIndexed(i int, s *Step, what string, d indexedDims) {
	if n := len(s.Operands()); n != 2 {
		v.stepf(i, "%s, got %d", what, n)
	}
	if len(s.Offsets) != len(s.Devices) {
		v.stepf(i, "offsets has %d entries for %d devices", len(s.Offsets), len(s.Devices))
	}
	if slices.ContainsFunc(s.Offsets, func(o int) bool { return o < 0 }) {
		v.stepf(i, "offsets %v has a negative row", s.Offsets)
	}
	if len(s.Dims) != 4 || !positive(s.Dims) {
		v.stepf(i, "dims %v are not [Bt, N, V, E], four positive extents", s.Dims)
		return
	}
	pick := func(at []int) []int {
		out := make([]int, len(at))
		for k, a := range at {
			out[k] = s.Dims[a]
		}
		return out
	}
	in, okIn := product(pick([]int{0, 1}))
	out, okOut := product(pick(d.out))
	if _, okOther := product(pick(d.other)); !okIn || !okOut || !okOther {
		v.stepf(i, "dims %v hold more elements than an int counts", s.Dims)
		return
	}
	if s.Count.Input != in {
		v.stepf(i, "count.input is %d, want Bt·N = %d (dims %v)", s.Count.Input, in, s.Dims)
	}
	if s.Count.Output != out {
		v.stepf(i, "count.output is %d, want %s = %d (dims %v)", s.Count.Output, d.outWhy, out, s.Dims)
	}
}

// lookupTableRead is what a Lookup reads from its table, Bt·V·E of its
// dims, and whether its dims are valid.
func lookupTableRead(s *Step) read {
	if len(s.Dims) != 4 || !positive(s.Dims) {
		return read{}
	}
	n, ok := product([]int{s.Dims[0], s.Dims[2], s.Dims[3]})
	return read{n: n, why: "Bt·V·E of dims " + intList(s.Dims), ok: ok}
}

// valueOperand is the operand whose dtype an op's collectives move: the
// output of a lookup or a scatter, whose only collective sums its partial
// rows or tables (its operands are resharded by sets of their own), else
// the first operand, whose dtype every operand shares.
func valueOperand(op *Op) string {
	if isLookup(op.Op) || isScatter(op.Op) {
		return op.Output
	}
	return op.Operands()[0]
}

// lookupSumAxis is the axis the collective that sums a lookup's partial
// rows names: the table's rows dim when the table is the first operand
// (gather's x), else none (embedding's ids have no such dim).
func (v *validator) lookupSumAxis(op *Op) *int {
	x := indexedOf(op.Op)
	if x.Table != 0 {
		return nil
	}
	t := v.tensor(op.Operands()[0])
	if t == nil || t.rank < 1 {
		return nil
	}
	d := x.RowsDim(t.rank)
	return &d
}

// scatterDomain is scatter_add's index [..., n] and src [..., n, e] with
// rows: the output is [..., rows, e, n] with n a trailing reduction axis.
func (v *validator) scatterDomain(i int, op Op, ins []*tensorInfo) (outputDomain, bool) {
	index, src := valueShape(ins[0].t), valueShape(ins[1].t)
	shape, ok := ops.ScatterShape(index, src, op.Attrs.Int(ops.AttrRows))
	if !ok || op.Attrs.Int(ops.AttrRows) < 1 {
		v.planf("op %d: scatter_add's index %q %v and src %q %v are not [..., n] and [..., n, e] with rows > 0", i, op.Operands()[0], index, op.Operands()[1], src)
		return outputDomain{}, false
	}
	return outputDomain{append(shape, index[len(index)-1]), []int{len(shape)}, "src's leading dims, rows, e, and the index's n as a trailing reduction axis"}, true
}

// checkScatterAdd checks a ScatterAdd: two inputs (indices, values), dims
// [Bt, N, V, E] of positive extents that count Bt·N indices in and
// Bt·V·E elements out, and one offset of at least 0 per device.
func (v *validator) checkScatterAdd(i int, s *Step) {
	v.checkIndexed(i, s, "a ScatterAdd reads 2 buffers (inputs [indices, values])", indexedDims{out: []int{0, 2, 3}, outWhy: "Bt·V·E", other: []int{0, 1, 3}})
}

// scatterValuesRead is what a ScatterAdd reads from its values, Bt·N·E of
// its dims, and whether its dims are valid.
func scatterValuesRead(s *Step) read {
	if len(s.Dims) != 4 || !positive(s.Dims) {
		return read{}
	}
	n, ok := product([]int{s.Dims[0], s.Dims[1], s.Dims[3]})
	return read{n: n, why: "Bt·N·E of dims " + intList(s.Dims), ok: ok}
}
