package reshard

import (
	"fmt"

	"github.com/nvcomm/nvcomm/internal/ir"
)

// This file lowers the one copy a layer op makes of an operand for itself
// rather than through a resharding set: the slice of a broadcast axis. An
// axis along which an operand's values are all equal (one that broadcast
// added) never needs communication, in nvFuser as here: its pairwise maps
// skip broadcast axes, so no resharding set is inserted for them. Where the
// operand holds such an axis whole and the op's output splits it, each
// device keeps its block of the axis with a local Slice, under either
// policy (docs/layers.md).

// Slice lowers op, a set within the job's op from an operand to a copy of
// it on the same mesh that splits, besides the operand's own splits, axes
// the operand holds whole along their device types: each device keeps its
// block with a Slice, and nothing moves between devices. toOpAxis maps the
// operand's axes to the job's op's first input's, which the steps name (-1
// where none is: the step then names no axis); nil when they are the same.
// A pair that would need anything but slicing is a failure: the caller
// gives none.
func (j *Job) Slice(op *ir.Op, toOpAxis []int) {
	c := j.ctx(op, toOpAxis)
	producer, consumer := op.In(), op.Out
	var fact *factoring
	m, ok := c.ledger.pairings.of(op)
	if ok {
		fact, ok = c.factor(producer, consumer, m, copyChange)
	}
	if !ok || !producer.Mesh.Equal(consumer.Mesh) {
		c.fail("slicing an operand's broadcast axis needs no other change of its sharding",
			"this is a bug in nvcomm's layer lowering; please report it with the input")
		return
	}
	if !c.factoringFits(fact, producer.DType) {
		return
	}
	c.factored(fact, producer).sliceSet(fact.tensorView(producer, m.producer), fact.tensorView(consumer, m.consumer))
}

// sliceSet lowers a copy from src to dst, on the same mesh, where every
// device type along which they differ splits dst and not src: one Slice
// over those types (a Copy or a Permute when none does).
func (c lowering) sliceSet(src, dst *view) {
	var mask uint8
	for _, t := range changedTypes(src, dst) {
		if src.sharded(t) || !dst.sharded(t) {
			c.fail(fmt.Sprintf("slicing an operand along %s would gather or move it", t),
				"this is a bug in nvcomm's layer lowering; please report it with the input")
			return
		}
		mask |= maskOf(t)
	}
	if mask == 0 {
		c.local(src, dst)
		return
	}
	c.sliceAlong(src, dst, mask)
}
