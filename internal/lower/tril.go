package lower

import (
	"slices"

	"github.com/nvcomm/nvcomm/internal/ops"
	"github.com/nvcomm/nvcomm/internal/plan"
	"github.com/nvcomm/nvcomm/internal/shard"
)

// This file lowers tril to its local step, Tril. Its sharding rule is
// the pointwise one, so the resharding pass has made the operand's blocks
// the output's, each a contiguous block (BlockShards): a device whose
// block of the last two dims starts at row r0 and column c0 keeps the
// entries with j ≤ i + diagonal + r0 − c0 of its block, i and j counted
// in it — torch.tril of the block with its own diagonal, as Lookup's
// offsets are each device's first row. A block sharding is the only kind
// a computing op's output may have, so a strided or uneven split (whose
// block is no window of rows and columns) is resharded before the op or
// refused as every computing op's is.

// emitTril appends the Tril step of c.op: the operand's block read
// row-major as [Bt, R, C], masked with each device's diagonal into the
// output's block, then put in the output's order where it is stored
// otherwise.
func (c *opCtx) emitTril() {
	y := c.op.Out
	identity := shard.Identity(len(y.Shape()))
	local := y.LocalShape()
	r := len(local)
	in := c.arranged(0, identity)
	out := y.Name
	if !slices.Equal(y.Layout(), identity) {
		out = c.buffer("masked")
	}
	s := plan.Step{Type: plan.Tril, Input: in, Output: out, Dims: []int{localCount(local[:r-2]), local[r-2], local[r-1]},
		Offsets: blockDiagonals(c.op.Attrs.Int(ops.AttrDiagonal), rowOffsets(y, r-2), rowOffsets(y, r-1))}
	n := localCount(local)
	c.emitLocalOn(s, y.Mesh.Devices, n, n)
	if out != y.Name {
		c.permuteInto(out, local, identity, y.Layout(), y.Name)
	}
}

// blockDiagonals is each device's diagonal of its block: d + r0 − c0,
// for its first row r0 and first column c0.
func blockDiagonals(d int, rows, cols []int) []int {
	out := make([]int, len(rows))
	for k := range out {
		out[k] = d + rows[k] - cols[k]
	}
	return out
}
