package reshard

import (
	"encoding/binary"

	"github.com/nvcomm/nvcomm/internal/ir"
	"github.com/nvcomm/nvcomm/internal/ops"
	"github.com/nvcomm/nvcomm/internal/shard"
)

// The planner lowers a pair of tensors on a common factoring whose axes
// are the producer's; the consumer's axes lie among them as the op's
// sharding rule places its factors (opPairing). An op's rule depends on
// its kind, axis and axes and its tensors' extents only, and a fusion's
// ops repeat a few of those, so the pairings are kept by them: building a
// rule allocates, and lowering a chain of 100,000 sets would build one
// per op.

// pairAxes places a pair's value axes among the producer's, which number
// the axes of the pair's common factoring.
type pairAxes struct{ producer, consumer valueAxes }

// opPairing pairs the axes of an op's first operand, producer, with its
// result's, consumer, along the factors of the op's rule r: each result
// dimension lies where its factors lie in the operand (ops.Rule.ResultWithin)
// — for a set the same axis, for a reduction the operand's axes without the
// reduced one, for a reshape's split part of a compound dimension. It
// fails when a result dimension lies in no one operand dimension (a
// merge's).
func opPairing(r *ops.Rule, producer, consumer *ir.Tensor) (pairAxes, bool) {
	m := shard.Identity(producer.NumValueAxes())
	n := consumer.NumValueAxes()
	same, whole := n == len(m), true
	for j := range n {
		d, stride := r.ResultWithin(0, j)
		if d < 0 || d >= len(m) {
			return pairAxes{}, false
		}
		same = same && d == j
		whole = whole && stride == 1 && dimSize(r, r.Result[j]) == dimSize(r, r.Operands[0][d])
	}
	if same && whole {
		return pairAxes{valueAxes{to: m}, valueAxes{to: m}}, true // a set's: one slice
	}
	to := make([]int, n)
	var at []int
	if !whole {
		at = make([]int, n)
	}
	for j := range to {
		d, stride := r.ResultWithin(0, j)
		to[j] = d
		if at != nil {
			at[j] = stride
		}
	}
	return pairAxes{valueAxes{to: m}, valueAxes{to: to, at: at}}, true
}

// dimSize is the extent of a dimension of r: the product of its factors'
// sizes.
func dimSize(r *ops.Rule, dim ops.Dim) int {
	n := 1
	for _, f := range dim {
		n *= r.Factors[f].Size
	}
	return n
}

// copyPairing pairs the axes of a copy of t with t's own.
func copyPairing(t *ir.Tensor) pairAxes {
	m := shard.Identity(t.NumValueAxes())
	return pairAxes{valueAxes{to: m}, valueAxes{to: m}}
}

// pairings keeps the pairings of a lowering's ops by what their rules
// depend on. The maps it returns are shared: no one writes them.
type pairings struct {
	byKey map[string]pairing
	// key is the buffer keyOf writes into, reused: the map is read with
	// it as is, and a key is copied only when a pairing is stored.
	key []byte
}

// pairing is an op's pairing of its first operand's axes with its
// result's, or ok false when its rule has none.
type pairing struct {
	axes pairAxes
	ok   bool
}

// of returns the pairing of op's first operand and result (opPairing),
// building op's rule only for the first op of its kind, axes and extents.
func (ps *pairings) of(op *ir.Op) (pairAxes, bool) {
	ps.key = pairingKey(ps.key[:0], op)
	if p, ok := ps.byKey[string(ps.key)]; ok {
		return p.axes, p.ok
	}
	axes, ok := opPairing(op.Rule(), op.In(), op.Out)
	if ps.byKey == nil {
		ps.byKey = map[string]pairing{}
	}
	ps.byKey[string(ps.key)] = pairing{axes, ok}
	return axes, ok
}

// pairingKey appends to b what op's rule depends on: its kind, axis,
// axes and other attributes, and the extents of its operands and result.
func pairingKey(b []byte, op *ir.Op) []byte {
	b = binary.AppendUvarint(b, uint64(len(op.Kind)))
	b = append(b, op.Kind...)
	b = binary.AppendVarint(b, int64(op.Axis))
	b = binary.AppendUvarint(b, uint64(len(op.Axes)))
	for _, a := range op.Axes {
		b = binary.AppendVarint(b, int64(a))
	}
	if len(op.Attrs) > 0 {
		attrs := op.Attrs.Key()
		b = append(binary.AppendUvarint(b, uint64(len(attrs))), attrs...)
	}
	b = binary.AppendUvarint(b, uint64(len(op.Inputs)))
	for _, t := range op.Inputs {
		b = appendExtents(b, t)
	}
	return appendExtents(b, op.Out)
}

// appendExtents appends t's shape (its value axes' extents) to b.
func appendExtents(b []byte, t *ir.Tensor) []byte {
	b = binary.AppendUvarint(b, uint64(t.NumValueAxes()))
	for _, id := range t.Logical {
		if !id.Reduction {
			b = binary.AppendUvarint(b, uint64(id.Extent))
		}
	}
	return b
}
