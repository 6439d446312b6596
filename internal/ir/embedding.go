package ir

import (
	"fmt"
	"slices"
)

// This file infers the lookup ops' outputs (embedding): ids of an integer
// dtype, of any shape, index the rows of a table [vocab, e] of a float
// dtype, which gives the output [..., e, vocab] — vocab a trailing
// reduction axis, as a contraction's k — and its dtype.

// isIntDType reports whether d holds integers (int32, int64), the dtypes
// of indices.
func isIntDType(d DType) bool { return d == "int32" || d == "int64" }

// indexed reports whether op's first operand holds indices into its
// second (its entry's Indexes).
func indexed(op *Op) bool {
	e := op.Kind.Entry()
	return e != nil && e.Indexes
}

// inferEmbedding checks ids [...] of an integer dtype and table [vocab, e]
// of a float dtype, and returns [..., e, vocab], vocab a reduction axis.
func (p *parser) inferEmbedding(op *Op, oi opIn) ([]int, int, bool) {
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
func (p *parser) indexDTypes(op *Op, oi opIn) bool {
	ids, table := op.Inputs[0], op.Inputs[1]
	if !isIntDType(ids.DType) {
		p.errs.AddHint(oi.inPos(0), fmt.Sprintf("declare %q int32 or int64: it holds row indices of %q", ids.Name, table.Name),
			"ops[%d]: %s operand %s, %q, is %s, expected an integer dtype (int32, int64)", oi.idx, op.Kind, op.Kind.Entry().Operands[0], ids.Name, ids.DType)
		return false
	}
	if isIntDType(table.DType) {
		p.errs.AddHint(oi.inPos(1), fmt.Sprintf("declare %q of a float dtype, or cast it", table.Name),
			"ops[%d]: %s operand %s, %q, is %s, expected a float dtype", oi.idx, op.Kind, op.Kind.Entry().Operands[1], table.Name, table.DType)
		return false
	}
	return true
}

// valueOperand is the operand whose dtype op's output takes: the table of
// a lookup, else the first.
func valueOperand(op *Op) *Tensor {
	if indexed(op) {
		return op.Inputs[1]
	}
	return op.In()
}
