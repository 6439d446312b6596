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
	// DP splits the batch (data parallelism): every device of the axis
	// holds the whole of each weight it holds.
	DP = "dp"
	// FSDP splits the batch as DP does and shards every weight as well
	// (PyTorch FSDP2, torchtitan's dp_shard; ZeRO-3): each weight is
	// gathered before its use, and with the backward each gradient is
	// reduce-scattered into the shard its device keeps. dp and fsdp
	// together are HSDP.
	FSDP = "fsdp"
	// CP splits the sequence (context parallelism, Llama 3's all-gather
	// variant): q, k, v and the residual stream hold a slice of the
	// tokens each, and attention gathers k and v whole.
	CP = "cp"
	// EP is expert parallelism: it splits a mixture of experts' experts,
	// and the batch everywhere else, as data parallelism does (DeepSpeed-
	// MoE's and Megatron-LM's expert parallelism within the data-parallel
	// group): each MoE layer sends every token to its experts' devices and
	// back by AllToAll.
	EP = "ep"
	// TP splits heads, the MLP's inner width and the vocabulary
	// (Megatron-LM's tensor parallelism), and with SP the sequence between
	// them.
	TP = "tp"
)

// axisNames are the parallelisms nvcomm writes.
var axisNames = []string{DP, FSDP, CP, EP, TP}

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
			return nil, fmt.Errorf("mesh axis %q: nvcomm writes dp, fsdp, cp, ep and tp parallelism (pipeline parallelism, pp, is not written yet)", name)
		case slices.ContainsFunc(axes, func(a Axis) bool { return a.Name == name }):
			return nil, fmt.Errorf("mesh axis %q is given twice", name)
		}
		axes = append(axes, Axis{name, n})
	}
	if len(axes) > 3 {
		return nil, fmt.Errorf("mesh %q has %d axes: a mesh has at most 3 (nvFuser's DIDz, DIDy, DIDx); leave out an axis of 1 device, or fold two parallelisms into one", s, len(axes))
	}
	at := func(name string) int { return slices.IndexFunc(axes, func(a Axis) bool { return a.Name == name }) }
	if c, f := at(CP), at(FSDP); c >= 0 && f > c {
		// fsdp shards every weight over fsdp × cp, fsdp's split
		// outermost (the batch's sum comes before the cp slices'), and
		// placements nest in the mesh's order.
		return nil, fmt.Errorf("mesh %q: write fsdp before cp, as torchtitan's mesh orders dp_shard and cp: fsdp shards every weight over fsdp × cp, its split outermost", s)
	}
	if e := at(EP); e >= 0 && len(axes) > 1 && slices.ContainsFunc(axes, func(a Axis) bool { return a.Name != EP && a.Name != TP }) {
		// ep splits the batch outside the experts, as dp does; with dp,
		// fsdp or cp the batch or the sequence would be split twice over
		// the routing's groups.
		return nil, fmt.Errorf("mesh %q: ep combines with tp only (ep=8,tp=8): ep is the data-parallel axis of the layers outside the experts", s)
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

// split is the product of the sizes of the axes of s that split a
// tensor's dims at all (s maps an axis to the dim it splits).
func (p Parallel) split(s map[string]int) int {
	n := 1
	for name := range s {
		n *= p.size(name)
	}
	return n
}

// meshYAML writes the mesh's device ids, row-major: a list for one axis,
// lists nested one deep for each further axis.
func (p Parallel) meshYAML() string {
	next := 0
	var nest func(axes []Axis) string
	nest = func(axes []Axis) string {
		s := make([]string, axes[0].Size)
		for i := range s {
			if len(axes) == 1 {
				s[i] = strconv.Itoa(next)
				next++
			} else {
				s[i] = nest(axes[1:])
			}
		}
		return "[" + strings.Join(s, ", ") + "]"
	}
	return nest(p.Mesh)
}
