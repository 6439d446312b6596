package ir

import (
	"fmt"
	"slices"

	"github.com/nvcomm/nvcomm/internal/ops"
	"github.com/nvcomm/nvcomm/internal/shard"
)

// This file infers the lookup ops' outputs: embedding's ids of an integer
// dtype, of any shape, index the rows of a table [vocab, e] of a float
// dtype, which gives [..., e, vocab] — vocab a trailing reduction axis, as
// a contraction's k; gather's integer index [..., 1] selects along the last
// dim of x [..., v], which gives [..., 1, v]. The output has the table's
// dtype.

// isIntDType reports whether d holds integers, the dtypes of indices.
func isIntDType(d DType) bool { return shard.IsIntDType(string(d)) }

// indexed reports whether op is a lookup: one of its operands holds
// indices into another's rows (its entry's Indexed).
func indexed(op *Op) bool {
	e := op.Kind.Entry()
	return e != nil && e.Indexed != nil
}

// inferEmbedding checks ids [...] of an integer dtype and table [vocab, e]
// of a float dtype, and returns [..., e, vocab], vocab a reduction axis.
func (p *Source) inferEmbedding(op *Op, oi opIn) ([]int, int, bool) {
	ids, table := op.Inputs[0], op.Inputs[1]
	ts := table.Shape()
	if len(ts) != 2 {
		p.errs.AddHint(oi.inPos(1), "table is [vocab, e]: one row of e values per index",
			"ops[%d]: embedding table %q of shape %s has rank %d, expected 2", oi.idx, table.Name, fmtShape(ts), len(ts))
		return nil, -1, false
	}
	shape := append(slices.Clone(ids.Shape()), ts[1], ts[0])
	return shape, len(shape) - 1, true
}

// indexDTypes checks the dtypes of a lookup's operands: integer indices
// and a table of another, float, dtype.
func (p *Source) indexDTypes(op *Op, oi opIn) bool {
	e := op.Kind.Entry()
	var ix, tx int
	if x := e.Indexed; x != nil {
		ix, tx = x.Indices, x.Table
	} else {
		ix, tx = e.Scatters.Indices, e.Scatters.Values
	}
	ids, table := op.Inputs[ix], op.Inputs[tx]
	if !isIntDType(ids.DType) {
		p.errs.AddHint(oi.inPos(ix), fmt.Sprintf("declare %q int32 or int64: it holds row indices of %q", ids.Name, table.Name),
			"ops[%d]: %s operand %s, %q, is %s, expected an integer dtype (int32, int64)", oi.idx, op.Kind, e.Operands[ix], ids.Name, ids.DType)
		return false
	}
	if isIntDType(table.DType) {
		p.errs.AddHint(oi.inPos(tx), fmt.Sprintf("declare %q of a float dtype, or cast it", table.Name),
			"ops[%d]: %s operand %s, %q, is %s, expected a float dtype", oi.idx, op.Kind, e.Operands[tx], table.Name, table.DType)
		return false
	}
	return true
}

// valueOperand is the operand whose dtype op's output takes: the table of
// a lookup, the values of a scatter, else the first.
func valueOperand(op *Op) *Tensor {
	if indexed(op) {
		return op.Inputs[op.Kind.Entry().Indexed.Table]
	}
	if x := scatters(op); x != nil {
		return op.Inputs[x.Values]
	}
	return op.In()
}

// inferGather checks x [..., v] of a float dtype and index [..., 1] of
// x's rank and leading extents, along axis -1 (x's last dim: the one dim
// gather takes yet), and returns [..., 1, v], v a reduction axis.
func (p *Source) inferGather(op *Op, oi opIn) ([]int, int, bool) {
	x, index := op.Inputs[0], op.Inputs[1]
	xs, is := x.Shape(), index.Shape()
	r := len(xs)
	axis := oi.axis
	if axis < 0 {
		axis += r
	}
	switch {
	case r == 0:
		p.errs.AddHint(oi.inPos(0), "x is [..., v]", "ops[%d]: gather operand x, %q, has rank 0, expected at least 1", oi.idx, x.Name)
	case axis != r-1:
		p.errs.AddHint(oi.axisPos(), "gather selects along x's last dim: axis -1; permute x first to select along another",
			"ops[%d]: gather axis %d is not the last dim of %q (rank %d)", oi.idx, oi.axis, x.Name, r)
	case len(is) != r || is[r-1] != 1 || !slices.Equal(is[:r-1], xs[:r-1]):
		p.errs.AddHint(oi.inPos(1), fmt.Sprintf("index is x's shape with extent 1 on the last dim: %s", fmtShape(append(slices.Clone(xs[:r-1]), 1))),
			"ops[%d]: gather index %q has shape %s, expected %s", oi.idx, index.Name, fmtShape(is), fmtShape(append(slices.Clone(xs[:r-1]), 1)))
	default:
		op.Axis = axis
		return append(slices.Clone(is), xs[r-1]), r, true
	}
	return nil, -1, false
}

// scatters reports whether op adds values into its output's rows at
// indices (its entry's Scatters: scatter_add).
func scatters(op *Op) *ops.Scattered {
	if e := op.Kind.Entry(); e != nil {
		return e.Scatters
	}
	return nil
}

// inferScatter checks scatter_add's index [..., n] of an integer dtype,
// src [..., n, e] of a float dtype and its rows, and returns [..., rows,
// e, n], n a trailing reduction axis (the sum over the indices, as a
// contraction's k).
func (p *Source) inferScatter(op *Op, oi opIn) ([]int, int, bool) {
	index, src := op.Inputs[0], op.Inputs[1]
	is, ss := index.Shape(), src.Shape()
	want := "[..., n]"
	if len(ss) >= 2 {
		want = fmtShape(ss[:len(ss)-1])
	}
	rows := op.Attrs.Int(ops.AttrRows)
	shape, ok := ops.ScatterShape(is, ss, rows)
	switch {
	case len(ss) < 2:
		p.errs.AddHint(oi.inPos(1), "src is [..., n, e]: one row of e values per index",
			"ops[%d]: scatter_add src %q of shape %s has rank %d, expected at least 2", oi.idx, src.Name, fmtShape(ss), len(ss))
	case !ok:
		p.errs.AddHint(oi.inPos(0), fmt.Sprintf("index is src's shape without its last dim: %s", want),
			"ops[%d]: scatter_add index %q has shape %s, expected %s", oi.idx, index.Name, fmtShape(is), want)
	default:
		return append(shape, is[len(is)-1]), len(shape), true
	}
	return nil, -1, false
}
