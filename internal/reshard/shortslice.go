package reshard

import (
	"slices"

	"github.com/nvcomm/nvcomm/internal/plan"
)

// An uneven Replicate → Shard lowers, on padded buffers, as a Pad of the
// producer and a Slice of the padded buffer (then an Unpad): two passes over
// memory where one does. When the Pad writes each device's input at the
// head of the padded buffer and zeros after it, the Slice's chunks are the
// input's own chunks, the last ones cut short and completed with zeros —
// exactly a Slice of the unpadded input (docs/plan.md: a Slice may read a
// short input). fusePadSlice makes that one step, as DTensor's
// _replicate_to_shard chunks without padding.

// fusePadSlice replaces the Pad at step padAt and the Slice right after it
// by one Slice of the Pad's input, when that Slice writes the same buffer:
// see padSliceFuses. It reports whether it did.
func (c lowering) fusePadSlice(padAt int) bool {
	n := c.ledger.steps.len()
	if padAt+1 >= n {
		return false
	}
	pad, fused := *c.ledger.steps.at(padAt), *c.ledger.steps.at(padAt + 1)
	if !padSliceFuses(&pad, &fused) {
		return false
	}
	rest := make([]plan.Step, 0, n-padAt-2)
	for i := padAt + 2; i < n; i++ {
		if slices.Contains(c.ledger.steps.at(i).Operands(), pad.Output) {
			return false
		}
		rest = append(rest, *c.ledger.steps.at(i))
	}
	fused.Input, fused.Count.Input = pad.Input, pad.Count.Input
	c.ledger.steps.truncate(padAt)
	for _, s := range append([]plan.Step{fused}, rest...) {
		s.ID = c.ledger.steps.len()
		c.ledger.steps.add(s)
	}
	return true
}

// padSliceFuses reports whether Slice sl of Pad p's output equals a Slice
// of p's input: a plain Slice (no dims) of the whole padded buffer, by
// devices that each ran the Pad, which filled its holes with zeros (what a
// short Slice writes) and put one box, the same on every device, at the
// head of the buffer (so the input is the buffer's first elements, in
// order). The fused Slice's chunks, zeros included, are then the Slice's.
func padSliceFuses(p, sl *plan.Step) bool {
	switch {
	case p.Type != plan.Pad || p.Fill == nil || *p.Fill != "0" || !p.HeadBoxes() || p.Count.Input < 1:
		return false
	case sl.Type != plan.Slice || len(sl.Dims) > 0 || sl.Input != p.Output || sl.Count.Input != p.Count.Output:
		return false
	}
	for _, box := range p.Valid {
		if !slices.Equal(box, p.Valid[0]) {
			return false
		}
	}
	for _, team := range sl.Teams {
		for _, d := range team {
			if !slices.Contains(p.Devices, d) {
				return false
			}
		}
	}
	return true
}
