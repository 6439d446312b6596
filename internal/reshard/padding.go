package reshard

import (
	"slices"

	"github.com/nvcomm/nvcomm/internal/ir"
	"github.com/nvcomm/nvcomm/internal/plan"
)

// Uneven shards (docs/lowering.md, "Uneven extents"): an axis of extent N
// whose shards tile a padded extent N' > N leaves holes, and the devices at
// the end hold fewer elements (torch.chunk's rule). Collectives need equal
// buffers, so an op over such an axis pads the producer's buffers to the
// padded shape first (a Pad step), runs its collectives on padded buffers,
// and cuts the consumer's buffers back (an Unpad step).

// isPadded reports whether some axis of a tensor (value axes mapped through
// axisMap to producer axes) is shorter than the factoring's extent.
func (c lowering) isPadded(shape, axisMap []int) bool {
	for j, n := range shape {
		if c.fact.extents[axisMap[j]] > n {
			return true
		}
	}
	return false
}

// pad returns the view to lower from: pv itself, or a padded copy that a Pad
// step writes.
func (c lowering) pad(pv *view, shape, axisMap []int) *view {
	if !c.isPadded(shape, axisMap) {
		return pv
	}
	out := &view{name: c.buffer("padded"), mesh: pv.mesh, dtype: pv.dtype, did: pv.did, stored: pv.stored}
	dims, valid := c.validBoxes(pv, shape, axisMap)
	fill := "0"
	if c.op.Kind.IsReduction() {
		fill = identityFill[c.op.Kind]
	}
	c.emitLocalOn(plan.Step{Type: plan.Pad, Input: pv.name, Output: out.name, Dims: dims, Valid: valid, Fill: new(fill)},
		pv.mesh.Devices, largestBox(valid), pv.size())
	return out
}

// identityFill is what a Pad writes into holes: the identity of the op's
// reduction, so the holes do not change it.
var identityFill = map[ir.OpKind]string{ir.OpSum: "0", ir.OpProd: "1", ir.OpMax: "-inf", ir.OpMin: "inf"}

// padded returns the view to lower into: cv itself, or a padded buffer that
// an Unpad step turns into cv.
func (c lowering) padded(cv *view, shape, axisMap []int) *view {
	if !c.isPadded(shape, axisMap) {
		return cv
	}
	return &view{name: c.buffer("unpadded"), mesh: cv.mesh, dtype: cv.dtype, did: cv.did, stored: cv.stored}
}

// unpad cuts the padded buffer src down to the consumer's buffers.
func (c lowering) unpad(src, cv *view, shape, axisMap []int) {
	dims, valid := c.validBoxes(cv, shape, axisMap)
	c.emitLocalOn(plan.Step{Type: plan.Unpad, Input: src.name, Output: cv.name, Dims: dims, Valid: valid},
		cv.mesh.Devices, cv.size(), largestBox(valid))
}

// largestBox is the elements of the box that holds every device's real box
// (the largest extent along each dim): the count of a Pad's input and an
// Unpad's output, as the tensor's local_shape gives it.
func largestBox(valid [][]int) int {
	var hull []int
	for _, box := range valid {
		if hull == nil {
			hull = make([]int, len(box))
		}
		for k, e := range box {
			hull[k] = max(hull[k], e)
		}
	}
	return extentOfInts(hull)
}

func extentOfInts(xs []int) int {
	n := 1
	for _, x := range xs {
		n *= x
	}
	return n
}

// validBoxes views a tensor's padded buffer as one dim per value axis, in
// memory order, and returns, per device of its mesh, how many leading
// entries of each dim are real elements (a device's indices along an axis
// increase with its local index, so the real ones come first).
func (c lowering) validBoxes(v *view, shape, axisMap []int) (dims []int, valid [][]int) {
	axes := c.layoutAxes(v, axisMap)
	for _, a := range axes {
		dims = append(dims, extentOf(onAxis(v.stored, a)))
	}
	trueExtent := map[int]int{}
	for j, n := range shape {
		trueExtent[axisMap[j]] = n
	}
	for _, d := range v.mesh.Devices {
		vals, _ := v.digitValues(d)
		box := make([]int, len(axes))
		for k, a := range axes {
			box[k] = validPrefix(onAxis(v.stored, a), vals, a, trueExtent[a])
		}
		valid = append(valid, box)
	}
	return dims, valid
}

// layoutAxes lists the producer axes of a tensor's view in memory order:
// those with stored digits as they come, then the fully sharded ones, which
// hold one index per device wherever they sit.
func (c lowering) layoutAxes(v *view, axisMap []int) []int {
	var axes []int
	for _, d := range v.stored {
		if !slices.Contains(axes, d.Axis) {
			axes = append(axes, d.Axis)
		}
	}
	for _, a := range axisMap {
		if !slices.Contains(axes, a) {
			axes = append(axes, a)
		}
	}
	return axes
}

// validPrefix counts the local indices along axis a (stored digits ds, most
// significant first; device digits fixed by vals) whose logical index is
// below n.
func validPrefix(ds []ir.Digit, vals map[ir.Digit]int, a, n int) int {
	base := 0
	for g, x := range vals {
		if g.Axis == a {
			base += x * g.Stride
		}
	}
	return ir.ValidPrefix(ds, base, n)
}
