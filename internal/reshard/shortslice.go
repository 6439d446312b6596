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
func (c *opCtx) fusePadSlice(padAt int) bool {
	if padAt+1 >= len(c.steps) || !padSliceFuses(&c.steps[padAt], &c.steps[padAt+1]) ||
		readsAfter(c.steps[padAt+2:], c.steps[padAt].Output) {
		return false
	}
	pad, fused := c.steps[padAt], c.steps[padAt+1]
	fused.Input, fused.Count.Input = pad.Input, pad.Count.Input
	c.steps = slices.Delete(c.steps, padAt, padAt+1)
	c.steps[padAt] = fused
	for i := padAt; i < len(c.steps); i++ {
		c.steps[i].ID = i
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

// readsAfter reports whether one of steps reads buffer name.
func readsAfter(steps []plan.Step, name string) bool {
	return slices.ContainsFunc(steps, func(s plan.Step) bool { return slices.Contains(s.Operands(), name) })
}

// holdSearched holds back what the search tells its test hook (searched)
// until release, which tells it with every step index shifted down by
// shift: the steps a fused Pad left. Without a hook it does nothing.
func holdSearched() (release func(shift int)) {
	hook := searched
	if hook == nil {
		return func(int) {}
	}
	type report struct {
		c          pathCost
		first, end int
	}
	var held []report
	searched = func(c pathCost, first, end int) { held = append(held, report{c, first, end}) }
	return func(shift int) {
		searched = hook
		for _, r := range held {
			hook(r.c, r.first-shift, r.end-shift)
		}
	}
}
