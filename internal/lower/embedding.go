package lower

import (
	"github.com/nvcomm/nvcomm/internal/ir"
	"github.com/nvcomm/nvcomm/internal/plan"
	"github.com/nvcomm/nvcomm/internal/shard"
)

// This file lowers a lookup (embedding, gather) to its local step: each
// device reads the rows of its block of the table at its block of the
// indices, as Megatron-LM's VocabParallelEmbedding does: the indices
// outside the rows it holds give zero rows. The rest of the op — the sum
// of the devices' partial rows when the table is split on its rows,
// pending terms, the Permute into the output's order — is the
// contraction's (compute.go): a lookup is the product of the indices'
// one-hot matrix with the table.

// emitLookup appends the Lookup step of c.op into buffer out: row-major
// [Bt, N, E] from indices [Bt, N] and a table [Bt, V, E] whose rows on
// each device are the table's from that device's offset on — for
// embedding's table [vocab, e] Bt = 1, for gather's x [..., v] N = E = 1.
func (c *opCtx) emitLookup(out string) {
	op := c.op
	x := op.Kind.Entry().Indexed
	ids, table := op.Inputs[x.Indices], op.Inputs[x.Table]
	lt := table.LocalShape()
	d := x.RowsDim(len(lt))
	bt, v, e := localCount(lt[:d]), lt[d], localCount(lt[d+1:])
	n := localCount(ids.LocalShape()) / bt
	s := plan.Step{Type: plan.Lookup, Output: out, Dims: []int{bt, n, v, e}, Offsets: rowOffsets(table, d)}
	setInputs(&s, []string{c.arranged(x.Indices, shard.Identity(len(ids.Shape()))), c.arranged(x.Table, shard.Identity(len(lt)))})
	c.emitLocalOn(s, op.Out.Mesh.Devices, bt*n, bt*n*e)
}

// rowOffsets returns, for every device of t's mesh in order, the first
// index along axis a of its block of t: the sum, over the device types
// that split a (in blocks), of the device's coordinate times the stride
// of the digit it selects.
func rowOffsets(t *ir.Tensor, a int) []int {
	offsets := make([]int, len(t.Mesh.Devices))
	for _, s := range t.Shardings() {
		if s.Axis() != a {
			continue
		}
		for i := range offsets {
			offsets[i] += t.Mesh.Coord(i, s.Type) * s.Digits[0].Stride
		}
	}
	return offsets
}

// factorOf reports whether operand i of op, a contraction, enters its
// product: an operand with the contracted axis, or a lookup's indices —
// not linear's bias, which is added after the sum.
func factorOf(op *ir.Op, i int) bool {
	x := op.Kind.Entry().Indexed
	return op.ContractedAxis(i) >= 0 || (x != nil && i == x.Indices)
}

// nvFuserSums reports (after saying why not) whether the policy can sum
// op's partial results, which its output asks for: not a lookup's under
// the nvfuser policy, whose embedding_fwd output has only the indices'
// axes and the table's last (csrc/ops/composite.cpp), no reduction axis
// that a split table's rows could be summed over; nvFuser gathers the
// table instead (a set before the op, as InsertReshardings inserts one).
func (ins *inserter) nvFuserSums(op *ir.Op) bool {
	if ins.planner.Policy() != PolicyNvFuser || op.Kind.Entry().Indexed == nil {
		return true
	}
	ins.errs.AddHint(op.Pos, "leave the output's rows unsplit (no Partial, no rDID): nvFuser then gathers the table; or lower with --policy optimal, which sums the partial rows",
		"op %q cannot be lowered under --policy nvfuser: %q sums partial rows of a table split on its rows, and nvFuser's %s has no reduction axis to split", op.Expr(), op.Out.Name, nvFuserOp[op.Kind])
	return false
}

// nvFuserOp names nvFuser's op of each lookup: their outputs have the
// indices' dims (and embedding's the table's last), no reduction axis
// (csrc/ops/composite.cpp, csrc/ops/indexing.cpp).
var nvFuserOp = map[ir.OpKind]string{ir.OpEmbedding: "embedding_fwd", ir.OpGather: "gather (takeAlongAxis)"}

// emitScatter appends the ScatterAdd step of c.op (scatter_add) into
// buffer out: row-major [Bt, V, E] from indices [Bt, N] and values [Bt,
// N, E], each device adding the values of the indices within its block
// of the output's rows, from its offset on — the adjoint of a Lookup,
// local to each device's rows; a split of N leaves partial tables, which
// the contraction sums (compute.go).
func (c *opCtx) emitScatter(out string) {
	op := c.op
	x := op.Kind.Entry().Scatters
	src := op.Inputs[x.Values]
	ls := src.LocalShape()
	r := len(ls)
	block, rows := c.productBlock(r - 2)
	bt, n, e, v := localCount(ls[:r-2]), ls[r-2], ls[r-1], block.LocalShape()[rows]
	s := plan.Step{Type: plan.ScatterAdd, Output: out, Dims: []int{bt, n, v, e}, Offsets: rowOffsets(block, rows)}
	setInputs(&s, []string{c.arranged(x.Indices, shard.Identity(r-1)), c.arranged(x.Values, shard.Identity(r))})
	c.emitLocalOn(s, op.Out.Mesh.Devices, bt*n, bt*v*e)
}

// productBlock returns the tensor whose local block c.op's product is,
// and where output axis a lies in it: the output's, but for partial
// products summed along a device type, which hold the whole extent of
// the axes that type splits in the output (a ReduceScatter cuts them
// after the sum), or pending terms, which have a leading terms axis. A
// matmul's product takes its extents from its operands; a scatter's
// rows, in no operand, from this.
func (c *opCtx) productBlock(a int) (*ir.Tensor, int) {
	y := c.op.Out
	switch {
	case c.pending != nil:
		return c.pending, a + 1
	case c.summed:
		if p, err := partialProducts("", y, c.sumType); err == nil {
			return p, a + 1
		}
	}
	return y, a
}
