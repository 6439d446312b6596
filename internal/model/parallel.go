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
	// PP splits the layers (pipeline parallelism): each group of
	// devices along it, a stage, holds consecutive blocks, and the batch
	// is cut into micro-batches (docs/pipeline.md). It is the outermost
	// axis, outside a stage's mesh.
	PP = "pp"
)

// axisNames are the parallelisms nvcomm writes.
var axisNames = []string{PP, DP, FSDP, CP, EP, TP}

// Parallel is a parallelism plan: the axes of a stage's mesh, outermost
// first, whether tensor parallelism splits the sequence outside the
// blocks' matmuls (Megatron-LM's sequence parallelism), and the pipeline
// stages' device groups (pp; 1 without a pipeline).
type Parallel struct {
	Mesh []Axis
	SP   bool
	PP   int
}

// NewParallel is the plan of mesh axes (ParseMesh's), pp taken out of
// the stage's mesh, with sequence parallelism when sp.
func NewParallel(axes []Axis, sp bool) Parallel {
	p := Parallel{SP: sp, PP: 1}
	for _, a := range axes {
		if a.Name == PP {
			p.PP = a.Size
			continue
		}
		p.Mesh = append(p.Mesh, a)
	}
	if len(p.Mesh) == 0 {
		p.Mesh = []Axis{{DP, 1}} // a stage of one device: a mesh of one axis
	}
	return p
}

// stageGroups is the number of pipeline device groups: pp, 1 without.
func (p Parallel) stageGroups() int { return max(p.PP, 1) }

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
			return nil, fmt.Errorf("mesh axis %q: nvcomm writes pp, dp, fsdp, cp, ep and tp parallelism", name)
		case name == PP && len(axes) > 0:
			return nil, fmt.Errorf("mesh axis %q: write pp first: the pipeline's stages are the outermost groups of devices, as torchtitan's and Megatron-LM's meshes place them", name)
		case slices.ContainsFunc(axes, func(a Axis) bool { return a.Name == name }):
			return nil, fmt.Errorf("mesh axis %q is given twice", name)
		}
		axes = append(axes, Axis{name, n})
	}
	besides := ""
	stage := len(axes)
	if len(axes) > 0 && axes[0].Name == PP {
		besides, stage = " besides pp", stage-1
	}
	if stage > 3 {
		return nil, fmt.Errorf("mesh %q has %d axes%s: a mesh has at most 3 (nvFuser's DIDz, DIDy, DIDx); leave out an axis of 1 device, or fold two parallelisms into one", s, stage, besides)
	}
	at := func(name string) int { return slices.IndexFunc(axes, func(a Axis) bool { return a.Name == name }) }
	if c, f := at(CP), at(FSDP); c >= 0 && f > c {
		// fsdp shards every weight over fsdp × cp, fsdp's split
		// outermost (the batch's sum comes before the cp slices'), and
		// placements nest in the mesh's order.
		return nil, fmt.Errorf("mesh %q: write fsdp before cp, as torchtitan's mesh orders dp_shard and cp: fsdp shards every weight over fsdp × cp, its split outermost", s)
	}
	if e := at(EP); e >= 0 {
		switch {
		case at(CP) >= 0 && (at(DP) >= 0 || at(FSDP) >= 0):
			// The experts' tokens merge the cp slices with the batch:
			// with a two-dim batch, cp's split and dp's (fsdp's) would
			// both be in the merged dim, and a dim carries one split.
			return nil, fmt.Errorf("mesh %q: ep with cp combines with tp alone, not with dp or fsdp: the experts' tokens would be split along cp and along dp or fsdp in one dim; leave dp (fsdp) out, as cp=2,ep=4,tp=8", s)
		case at(CP) >= 0 && at(PP) >= 0:
			// The experts' tokens [experts, cp·batch·capacity] merge
			// the cp slices, split along cp and so outermost, with the
			// batch, which the pipeline cuts into micro-batches: a
			// micro-batch's rows are no block of the merged dim.
			return nil, fmt.Errorf("mesh %q: ep with cp combines with tp alone, not with pp: the experts' tokens merge the cp slices (outermost, split along cp) with the batch, whose micro-batches are then no block of them; leave pp or cp out (cp=2,ep=4,tp=8, or pp=4,dp=2,ep=8)", s)
		case at(DP) >= 0 && at(FSDP) >= 0:
			// The batch is written as two dims at most, one an axis.
			return nil, fmt.Errorf("mesh %q: ep combines with dp or fsdp, not both: ep splits the batch as they do, and the batch is split over two axes at most", s)
		}
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

// meshYAML writes the mesh's device ids, row-major, from device first: a
// list for one axis, lists nested one deep for each further axis.
func (p Parallel) meshYAML(first int) string {
	next := first
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
	if len(p.Mesh) == 0 {
		return "[" + strconv.Itoa(first) + "]" // a stage of one device
	}
	return nest(p.Mesh)
}
