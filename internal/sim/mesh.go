package sim

import (
	"fmt"
	"slices"

	"github.com/nvcomm/nvcomm/internal/plan"
)

// checkMesh reports whether m is a well-formed n-D array of distinct
// device ids.
func checkMesh(name string, m plan.Mesh) error {
	n := 1
	for _, e := range m.Shape {
		if e < 1 {
			return fmt.Errorf("mesh %q: extent %d must be at least 1", name, e)
		}
		n *= e
	}
	if n != len(m.Devices) {
		return fmt.Errorf("mesh %q: shape %v holds %d devices, the mesh lists %d", name, m.Shape, n, len(m.Devices))
	}
	seen := map[int]bool{}
	for _, d := range m.Devices {
		if d < 0 || seen[d] {
			return fmt.Errorf("mesh %q: device ids must be distinct and non-negative, got %v", name, m.Devices)
		}
		seen[d] = true
	}
	return nil
}

// coords returns device's coordinates in m, row-major, or false when the
// device is not in the mesh.
func coords(m plan.Mesh, device int) ([]int, bool) {
	i := slices.Index(m.Devices, device)
	if i < 0 {
		return nil, false
	}
	c := make([]int, len(m.Shape))
	for k := len(m.Shape) - 1; k >= 0; k-- {
		c[k] = i % m.Shape[k]
		i /= m.Shape[k]
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
