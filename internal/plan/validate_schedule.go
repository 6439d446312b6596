package plan

import (
	"fmt"
	"slices"

	"github.com/nvcomm/nvcomm/internal/shard"
)

// parallelTypes are the parallel types a schedule may name, as in the
// fusion format: Serial, or one of the device types.
var parallelTypes = shard.ParallelTypeNames()

// loopAxis is one axis of a replayed loop domain: enough to check the
// schedule's positions and the device axes, not the analyses (which lower's
// certificate check runs through nvcomm's own).
type loopAxis struct {
	extent    int
	reduction bool
	parallel  string // "" or Serial: not on devices
}

func (a loopAxis) onDevices() bool { return slices.Contains(deviceTypes, a.parallel) }

// checkSchedule replays a tensor's schedule on its shape, checking every
// step's arguments, then checks the device axes and the allocation, and
// returns the loop domain, nil when the schedule is invalid. The shape and
// reduction axes must be valid. mesh is nil when unknown; the device-axis
// extents are then not checked.
func (v *validator) checkSchedule(what tensorRef, t *Tensor, mesh *Mesh) []loopAxis {
	// A split adds an axis, so the loop domain grows in place.
	loop := make([]loopAxis, len(t.Shape), len(t.Shape)+len(t.Schedule))
	for k, e := range t.Shape {
		loop[k] = loopAxis{extent: e, reduction: slices.Contains(t.ReductionAxes, k)}
	}
	for k, s := range t.Schedule {
		var msg string
		loop, msg = replayStep(loop, s, mesh)
		if msg != "" {
			v.planf("%s: schedule[%d]: %s", what, k, msg)
			return nil
		}
	}
	if !v.checkDeviceAxes(what, loop, mesh) {
		return nil
	}
	v.checkAllocation(what, t.Allocation, loop)
	return loop
}

// replayStep applies one schedule step to loop, as the fusion parser does,
// and returns the new loop domain or why the step is invalid. It changes
// loop, checkSchedule's own, in place, except for a reorder.
func replayStep(loop []loopAxis, s ScheduleStep, mesh *Mesh) ([]loopAxis, string) {
	if n := s.fields(); n != 1 {
		return nil, fmt.Sprintf("has %d transforms, want exactly one of split, outer_split, merge, reorder, parallelize", n)
	}
	switch {
	case s.Split != nil:
		return splitStep(loop, "split", *s.Split, false)
	case s.OuterSplit != nil:
		return splitStep(loop, "outer_split", *s.OuterSplit, true)
	case s.Merge != nil:
		return mergeStep(loop, s.Merge.Axis)
	case s.Reorder != nil:
		return reorderStep(loop, s.Reorder)
	}
	return parallelizeStep(loop, *s.Parallelize, mesh)
}

// fields counts the transforms a schedule step sets.
func (s ScheduleStep) fields() int {
	n := 0
	for _, set := range []bool{s.Split != nil, s.OuterSplit != nil, s.Merge != nil, s.Reorder != nil, s.Parallelize != nil} {
		if set {
			n++
		}
	}
	return n
}

func splitStep(loop []loopAxis, name string, a SplitArgs, outer bool) ([]loopAxis, string) {
	if msg := checkPosition(name, a.Axis, len(loop)); msg != "" {
		return nil, msg
	}
	in := loop[a.Axis]
	switch {
	case a.Factor < 1:
		return nil, fmt.Sprintf("%s factor is %d, want >= 1", name, a.Factor)
	case in.onDevices():
		return nil, fmt.Sprintf("%s of loop axis %d, which is parallelized on %s", name, a.Axis, in.parallel)
	}
	inner := a.Factor
	if outer {
		inner = ceilDiv(in.extent, a.Factor)
	}
	o := loopAxis{extent: ceilDiv(in.extent, inner), reduction: in.reduction}
	if outer {
		o.extent = a.Factor
	}
	i := loopAxis{extent: inner, reduction: in.reduction}
	return slices.Replace(loop, a.Axis, a.Axis+1, o, i), ""
}

func mergeStep(loop []loopAxis, axis int) ([]loopAxis, string) {
	if axis < 0 || axis+1 >= len(loop) {
		return nil, fmt.Sprintf("merge axis %d has no partner in a loop domain of %d axes", axis, len(loop))
	}
	a, b := loop[axis], loop[axis+1]
	switch {
	case a.onDevices() || b.onDevices():
		return nil, fmt.Sprintf("merge of loop axes %d and %d, one of which is parallelized on devices", axis, axis+1)
	case a.reduction != b.reduction:
		return nil, fmt.Sprintf("merge of loop axes %d and %d, a reduction and a non-reduction axis", axis, axis+1)
	}
	e, ok := mul(a.extent, b.extent)
	if !ok {
		return nil, fmt.Sprintf("merged extent %d x %d overflows", a.extent, b.extent)
	}
	return slices.Replace(loop, axis, axis+2, loopAxis{extent: e, reduction: a.reduction}), ""
}

func reorderStep(loop []loopAxis, order []int) ([]loopAxis, string) {
	if !isPermutation(order, len(loop)) {
		return nil, fmt.Sprintf("reorder %v is not a permutation of the %d loop positions", order, len(loop))
	}
	out := make([]loopAxis, len(loop))
	for i, old := range order {
		out[i] = loop[old]
	}
	return out, ""
}

func parallelizeStep(loop []loopAxis, a ParallelizeArgs, mesh *Mesh) ([]loopAxis, string) {
	if msg := checkPosition("parallelize", a.Axis, len(loop)); msg != "" {
		return nil, msg
	}
	ti := slices.Index(deviceTypes, a.Type)
	switch {
	case !slices.Contains(parallelTypes, a.Type):
		return nil, fmt.Sprintf("parallel type %q is not Serial, DIDx, DIDy or DIDz", a.Type)
	case ti >= 0 && mesh != nil && len(mesh.Shape) <= ti:
		return nil, fmt.Sprintf("parallel type %s, but the mesh has %d axes", a.Type, len(mesh.Shape))
	}
	loop[a.Axis].parallel = a.Type
	return loop, ""
}

// checkPosition says why axis is not a position in a loop domain of rank
// axes, or "".
func checkPosition(step string, axis, rank int) string {
	if axis < 0 || axis >= rank {
		return fmt.Sprintf("%s axis %d is not a position in a loop domain of %d axes", step, axis, rank)
	}
	return ""
}

// checkDeviceAxes checks that every device-parallel loop axis spans its
// mesh axis exactly and that no device type parallelizes two non-reduction
// axes, and reports whether both hold.
func (v *validator) checkDeviceAxes(what tensorRef, loop []loopAxis, mesh *Mesh) bool {
	ok := true
	seen := map[string]int{}
	for k, a := range loop {
		if !a.onDevices() {
			continue
		}
		if size, known := meshSize(mesh, a.parallel); known && a.extent != size {
			v.planf("%s: loop axis %d is parallelized on %s with extent %d, but the mesh has %d devices along %s", what, k, a.parallel, a.extent, size, a.parallel)
			ok = false
		}
		if a.reduction {
			continue
		}
		if j, dup := seen[a.parallel]; dup {
			v.planf("%s: loop axes %d and %d are both parallelized on %s", what, j, k, a.parallel)
			ok = false
		}
		seen[a.parallel] = k
	}
	return ok
}

// meshSize returns the extent of mesh's axis for device type typ, and false
// when the mesh or its axis is unknown.
func meshSize(mesh *Mesh, typ string) (int, bool) {
	ti := slices.Index(deviceTypes, typ)
	if mesh == nil || ti < 0 || len(mesh.Shape) <= ti || len(mesh.Shape) > maxMeshRank {
		return 0, false
	}
	return mesh.Shape[len(mesh.Shape)-1-ti], true
}

// checkAllocation checks that an allocation lists every stored loop axis
// (neither on devices nor a reduction) exactly once.
func (v *validator) checkAllocation(what tensorRef, alloc []int, loop []loopAxis) {
	if alloc == nil {
		return
	}
	seen := make([]bool, len(loop))
	for k, a := range alloc {
		var msg string
		switch {
		case a < 0 || a >= len(loop):
			msg = fmt.Sprintf("%d is not a position in a loop domain of %d axes", a, len(loop))
		case loop[a].reduction:
			msg = fmt.Sprintf("loop axis %d is a reduction axis, which is not stored", a)
		case loop[a].onDevices():
			msg = fmt.Sprintf("loop axis %d is parallelized on %s, which is not stored", a, loop[a].parallel)
		case seen[a]:
			msg = fmt.Sprintf("loop axis %d is listed twice", a)
		}
		if msg != "" {
			v.planf("%s: allocation[%d]: %s", what, k, msg)
			return
		}
		seen[a] = true
	}
	for a, l := range loop {
		if !seen[a] && !l.reduction && !l.onDevices() {
			v.planf("%s: allocation lacks loop axis %d; it must list every stored loop axis once", what, a)
			return
		}
	}
}

// ceilDiv is ⌈a/b⌉ for a >= 1 and b >= 1, without overflow.
func ceilDiv(a, b int) int { return (a-1)/b + 1 }
