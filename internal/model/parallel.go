package model

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Axis is one axis of the device mesh: its kind of parallelism and its
// number of devices.
type Axis struct {
	Name string
	Size int
}

// The parallelisms a mesh axis may carry.
const (
	// DP splits the batch (data parallelism).
	DP = "dp"
	// TP splits heads, the MLP's inner width and the vocabulary
	// (Megatron-LM's tensor parallelism), and with SP the sequence between
	// them.
	TP = "tp"
)

// axisNames are the parallelisms nvcomm writes, in the order a mesh lists
// them when given both.
var axisNames = []string{DP, TP}

// Parallel is a parallelism plan: the mesh's axes, outermost first, and
// whether tensor parallelism splits the sequence outside the blocks'
// matmuls (Megatron-LM's sequence parallelism).
type Parallel struct {
	Mesh []Axis
	SP   bool
}

// ParseMesh reads a mesh written "dp=2,tp=4": axes outermost first, each
// a parallelism and its number of devices.
func ParseMesh(s string) ([]Axis, error) {
	var axes []Axis
	for part := range strings.SplitSeq(s, ",") {
		name, size, ok := strings.Cut(strings.TrimSpace(part), "=")
		n, err := strconv.Atoi(size)
		switch {
		case !ok || err != nil || n < 1:
			return nil, fmt.Errorf("mesh axis %q: want NAME=DEVICES, as dp=2 or tp=4", part)
		case !slices.Contains(axisNames, name):
			return nil, fmt.Errorf("mesh axis %q: nvcomm writes %s parallelism (cp, pp, ep and fsdp are not written yet)", name, strings.Join(axisNames, " and "))
		case slices.ContainsFunc(axes, func(a Axis) bool { return a.Name == name }):
			return nil, fmt.Errorf("mesh axis %q is given twice", name)
		}
		axes = append(axes, Axis{name, n})
	}
	return axes, nil
}

// size returns the devices along the axis called name, 1 when the mesh
// has none.
func (p Parallel) size(name string) int {
	if i := slices.IndexFunc(p.Mesh, func(a Axis) bool { return a.Name == name }); i >= 0 {
		return p.Mesh[i].Size
	}
	return 1
}

// devices is the number of devices of the mesh.
func (p Parallel) devices() int {
	n := 1
	for _, a := range p.Mesh {
		n *= a.Size
	}
	return n
}

// placements writes a tensor's DTensor placements on the mesh: shard maps
// a mesh axis's name to the dim it splits; every other axis replicates.
func (p Parallel) placements(shard map[string]int) string {
	parts := make([]string, len(p.Mesh))
	for i, a := range p.Mesh {
		parts[i] = "Replicate()"
		if d, ok := shard[a.Name]; ok && a.Size > 1 {
			parts[i] = fmt.Sprintf("Shard(%d)", d)
		}
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// meshYAML writes the mesh's device ids, row-major: a list for one axis,
// nested lists for two.
func (p Parallel) meshYAML() string {
	ids := func(from, n int) string {
		s := make([]string, n)
		for i := range s {
			s[i] = strconv.Itoa(from + i)
		}
		return "[" + strings.Join(s, ", ") + "]"
	}
	if len(p.Mesh) == 1 {
		return ids(0, p.Mesh[0].Size)
	}
	inner := p.Mesh[len(p.Mesh)-1].Size
	rows := make([]string, p.devices()/inner)
	for r := range rows {
		rows[r] = ids(r*inner, inner)
	}
	return "[" + strings.Join(rows, ", ") + "]"
}
