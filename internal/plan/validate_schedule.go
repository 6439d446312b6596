package plan

import (
	"fmt"
	"slices"

	"github.com/nvcomm/nvcomm/internal/shard"
)

// parallelTypes are the parallel types a schedule may name, as in the
// fusion format: Serial, or one of the device types.
var parallelTypes = shard.ParallelTypeNames()

// checkSchedule replays a tensor's schedule on its shape, checking every
// step's arguments, then checks the device axes and the allocation, and
// returns the loop domain, nil when the schedule is invalid. The shape and
// reduction axes must be valid. mesh is nil when unknown; the device-axis
// extents are then not checked.
func (v *validator) checkSchedule(what tensorRef, t *Tensor, mesh *Mesh) []LoopAxis {
	loop, k, msg := Replay(t, mesh)
	if msg != "" {
		v.planf("%s: schedule[%d]: %s", what, k, msg)
		return nil
	}
	if !v.checkDeviceAxes(what, loop, mesh) {
		return nil
	}
	v.checkAllocation(what, t.Allocation, loop)
	return loop
}

// checkDeviceAxes checks that every device-parallel loop axis spans its
// mesh axis exactly and that no device type parallelizes two non-reduction
// axes, and reports whether both hold.
func (v *validator) checkDeviceAxes(what tensorRef, loop []LoopAxis, mesh *Mesh) bool {
	ok := true
	seen := map[string]int{}
	for k, a := range loop {
		if !a.OnDevices() {
			continue
		}
		if size, known := meshSize(mesh, a.Parallel); known && a.Extent != size {
			v.planf("%s: loop axis %d is parallelized on %s with extent %d, but the mesh has %d devices along %s", what, k, a.Parallel, a.Extent, size, a.Parallel)
			ok = false
		}
		if a.Reduction {
			continue
		}
		if j, dup := seen[a.Parallel]; dup {
			v.planf("%s: loop axes %d and %d are both parallelized on %s", what, j, k, a.Parallel)
			ok = false
		}
		seen[a.Parallel] = k
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
func (v *validator) checkAllocation(what tensorRef, alloc []int, loop []LoopAxis) {
	if alloc == nil {
		return
	}
	seen := make([]bool, len(loop))
	for k, a := range alloc {
		var msg string
		switch {
		case a < 0 || a >= len(loop):
			msg = fmt.Sprintf("%d is not a position in a loop domain of %d axes", a, len(loop))
		case loop[a].Reduction:
			msg = fmt.Sprintf("loop axis %d is a reduction axis, which is not stored", a)
		case loop[a].OnDevices():
			msg = fmt.Sprintf("loop axis %d is parallelized on %s, which is not stored", a, loop[a].Parallel)
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
		if !seen[a] && !l.Reduction && !l.OnDevices() {
			v.planf("%s: allocation lacks loop axis %d; it must list every stored loop axis once", what, a)
			return
		}
	}
}
