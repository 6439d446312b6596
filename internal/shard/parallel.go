package shard

import (
	"fmt"
	"slices"
)

// ParallelType says how a loop axis is executed: serially on every device,
// or spread over one axis of the device mesh.
type ParallelType int

// The parallel types. DIDx maps to the last mesh axis, DIDy to the
// second-to-last and DIDz to the third-to-last, as in nvFuser.
const (
	Serial ParallelType = iota
	DIDx
	DIDy
	DIDz
)

// DeviceTypes lists the device-parallel types in the order nvFuser checks
// them.
var DeviceTypes = []ParallelType{DIDx, DIDy, DIDz}

var parallelNames = []string{"Serial", "DIDx", "DIDy", "DIDz"}

func (p ParallelType) String() string {
	if int(p) >= 0 && int(p) < len(parallelNames) {
		return parallelNames[p]
	}
	return fmt.Sprintf("ParallelType(%d)", int(p))
}

// IsDevice reports whether p spreads an axis over devices.
func (p ParallelType) IsDevice() bool { return p >= DIDx && p <= DIDz }

// MeshAxis is the mesh axis that device type p spreads over on a mesh of
// the given rank (DIDx the last), or -1 when the mesh has none or p is not
// a device type.
func (p ParallelType) MeshAxis(rank int) int {
	if !p.IsDevice() || int(p) > rank {
		return -1
	}
	return rank - int(p)
}

// ParseParallelType maps a name such as "DIDx" to its type.
func ParseParallelType(s string) (ParallelType, bool) {
	i := slices.Index(parallelNames, s)
	return ParallelType(max(i, 0)), i >= 0
}

// ParallelTypeNames lists the parallel types' names, Serial first.
func ParallelTypeNames() []string { return slices.Clone(parallelNames) }

// DeviceTypeNames lists the device types' names: DIDx, DIDy, DIDz.
func DeviceTypeNames() []string { return slices.Clone(parallelNames[1:]) }
