package sim

import (
	"fmt"

	"github.com/nvcomm/nvcomm/internal/plan"
)

// meshIndex finds a device's row-major position in a mesh in constant
// time: the simulator asks for every device of a mesh, and a linear search
// made meshes of 100,000 devices take seconds.
type meshIndex struct {
	shape []int
	n     int         // number of devices
	base  int         // position = device − base when pos is nil
	pos   map[int]int // device → position otherwise
}

// checkMesh checks that m is a well-formed n-D array of distinct device
// ids and returns its index.
func checkMesh(name string, m plan.Mesh) (*meshIndex, error) {
	n := 1
	for _, e := range m.Shape {
		if e < 1 {
			return nil, fmt.Errorf("mesh %q: extent %d must be at least 1", name, e)
		}
		n *= e
	}
	if n != len(m.Devices) {
		return nil, fmt.Errorf("mesh %q: shape %v holds %d devices, the mesh lists %d", name, m.Shape, n, len(m.Devices))
	}
	idx := &meshIndex{shape: m.Shape, n: n}
	if consecutive(m.Devices) {
		idx.base = m.Devices[0] // n ≥ 1: every extent is
		if idx.base >= 0 {
			return idx, nil
		}
	}
	idx.pos = make(map[int]int, n)
	for i, d := range m.Devices {
		if _, dup := idx.pos[d]; d < 0 || dup {
			return nil, fmt.Errorf("mesh %q: device ids must be distinct and non-negative, got %v", name, m.Devices)
		}
		idx.pos[d] = i
	}
	return idx, nil
}

// consecutive reports whether ids are n, n+1, n+2, … (so distinct).
func consecutive(ids []int) bool {
	for i, d := range ids {
		if d != ids[0]+i || d < ids[0] { // the second: no wrapping past MaxInt
			return false
		}
	}
	return true
}

// position returns device's row-major position, or false when the device is
// not in the mesh.
func (x *meshIndex) position(device int) (int, bool) {
	if x.pos != nil {
		i, ok := x.pos[device]
		return i, ok
	}
	i := device - x.base
	return i, i >= 0 && i < x.n
}

// coords returns device's coordinates in the mesh, row-major, or false
// when the device is not in the mesh.
func (x *meshIndex) coords(device int) ([]int, bool) {
	return x.coordsInto(make([]int, len(x.shape)), device)
}

// coordsInto is coords written into c, which has the mesh's rank: a shard
// is enumerated for every device, and a slice each was most of what it
// allocated.
func (x *meshIndex) coordsInto(c []int, device int) ([]int, bool) {
	i, ok := x.position(device)
	if !ok {
		return nil, false
	}
	for k := len(x.shape) - 1; k >= 0; k-- {
		c[k] = i % x.shape[k]
		i /= x.shape[k]
	}
	return c, true
}

// meshAxis returns the mesh axis a device parallel type maps to: DIDx is
// the last axis, DIDy the second-to-last, DIDz the third-to-last.
func meshAxis(m plan.Mesh, parallel string) (int, error) {
	back := map[string]int{"DIDx": 1, "DIDy": 2, "DIDz": 3}[parallel]
	a := len(m.Shape) - back
	if a < 0 {
		return 0, fmt.Errorf("%s needs a mesh of rank at least %d, the mesh has shape %v", parallel, back, m.Shape)
	}
	return a, nil
}
