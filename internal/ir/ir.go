// Package ir is nvcomm's in-memory form of a fusion: device meshes, tensors
// with logical, loop and allocation domains, and the ops between them.
//
// A fusion file's front end (internal/syntax, which alone reads YAML)
// hands a [Source] what the file declares, each part with its position,
// and [Source.Build] checks it and builds the [Fusion]; every
// user-written part keeps its position so later phases can blame the
// right line (docs/fusion.md). [NewMesh], [NewTensor], [NewOp] and
// [NewFusion] build the same values without a file, through the same
// checks (construct.go). The
// analyses (sharded-axis resolution, local shapes, layouts;
// docs/lowering.md, "The digit model") live beside the types in
// sharding.go.
package ir

import (
	"slices"
	"sync"

	"github.com/nvcomm/nvcomm/internal/diag"
	"github.com/nvcomm/nvcomm/internal/shard"
)

// ParallelType says how a loop axis is executed (shard.ParallelType).
type ParallelType = shard.ParallelType

// The parallel types. DIDx maps to the last mesh axis, DIDy to the
// second-to-last and DIDz to the third-to-last, as in nvFuser.
const (
	Serial = shard.Serial
	DIDx   = shard.DIDx
	DIDy   = shard.DIDy
	DIDz   = shard.DIDz
)

// DeviceTypes lists the device-parallel types in the order nvFuser checks
// them (a copy of shard's, so that no caller changes the vocabulary's).
var DeviceTypes = slices.Clone(shard.DeviceTypes)

// ParseParallelType maps a name such as "DIDx" to its type.
func ParseParallelType(s string) (ParallelType, bool) { return shard.ParseParallelType(s) }

// DType is an element type.
type DType string

// DTypeNames lists the supported element types, sorted.
func DTypeNames() []string { return shard.DTypeNames() }

// Size is the element size in bytes, 0 for an unknown type.
func (d DType) Size() int { return shard.DTypeSize(string(d)) }

// Mesh is a named n-D array of device ids. Devices must not change once
// Index or Contains has been called: the device → position index is built
// on first use.
type Mesh struct {
	Name    string
	Shape   []int // extent of each mesh axis, outermost first
	Devices []int // device ids in row-major order
	Pos     diag.Pos

	// The index makes Index O(1): meshes of a million devices are looked up
	// once per device, and a linear search there is quadratic.
	indexOnce sync.Once
	base      int         // when Devices is base, base+1, …: no map needed
	index     map[int]int // device → position otherwise
}

// Rank is the number of mesh axes.
func (m *Mesh) Rank() int { return len(m.Shape) }

// Axis is the mesh axis that t spreads over, or -1 when the mesh has no such axis.
func (m *Mesh) Axis(t ParallelType) int { return t.MeshAxis(m.Rank()) }

// Has reports whether the mesh has an axis for t.
func (m *Mesh) Has(t ParallelType) bool { return m.Axis(t) >= 0 }

// Size is the number of devices along t, 1 when the mesh has no axis for t.
func (m *Mesh) Size(t ParallelType) int {
	if a := m.Axis(t); a >= 0 {
		return m.Shape[a]
	}
	return 1
}

// Equal reports whether two meshes have the same shape and the same devices
// in the same order; names do not matter.
func (m *Mesh) Equal(o *Mesh) bool {
	return slices.Equal(m.Shape, o.Shape) && slices.Equal(m.Devices, o.Devices)
}

// Contains reports whether device d is in the mesh.
func (m *Mesh) Contains(d int) bool { return m.Index(d) >= 0 }

// Index returns the row-major position of device d in the mesh, or -1 when
// d is not in it. It takes constant time.
func (m *Mesh) Index(d int) int {
	m.indexOnce.Do(m.buildIndex)
	if m.index == nil {
		if i := d - m.base; i >= 0 && i < len(m.Devices) {
			return i
		}
		return -1
	}
	if i, ok := m.index[d]; ok {
		return i
	}
	return -1
}

// buildIndex prepares Index. Most meshes list consecutive ids, whose
// position is an offset; the others get a map (the first position of a
// repeated id, as a linear search would find).
func (m *Mesh) buildIndex() {
	if consecutive(m.Devices) {
		if len(m.Devices) > 0 {
			m.base = m.Devices[0]
		}
		return
	}
	m.index = make(map[int]int, len(m.Devices))
	for i, d := range m.Devices {
		if _, dup := m.index[d]; !dup {
			m.index[d] = i
		}
	}
}

// consecutive reports whether ids are n, n+1, n+2, … (an empty list is).
func consecutive(ids []int) bool {
	for i, d := range ids {
		if d != ids[0]+i || d < ids[0] { // the second: no wrapping past MaxInt
			return false
		}
	}
	return true
}

// Coords returns the mesh coordinates of the device at row-major index i.
func (m *Mesh) Coords(i int) []int { return shard.Coords(i, m.Shape) }

// Coord returns the coordinate along t of the device at row-major index i,
// 0 when the mesh has no axis for t.
func (m *Mesh) Coord(i int, t ParallelType) int {
	if a := m.Axis(t); a >= 0 {
		return m.axisCoord(i, a)
	}
	return 0
}

// axisCoord is Coords(i)[a] without building the slice: callers ask for
// every device of a mesh.
func (m *Mesh) axisCoord(i, a int) int {
	for k := m.Rank() - 1; k > a; k-- {
		i /= m.Shape[k]
	}
	return i % m.Shape[a]
}

// Teams returns the teams along t: for every combination of the other
// coordinates, in row-major order, the devices that vary along t's axis.
// A mesh without an axis for t gives one team per device.
func (m *Mesh) Teams(t ParallelType) [][]int {
	a := m.Axis(t)
	if a < 0 {
		teams := make([][]int, len(m.Devices))
		for i, d := range m.Devices {
			teams[i] = []int{d}
		}
		return teams
	}
	stride := 1
	for _, e := range m.Shape[a+1:] {
		stride *= e
	}
	var teams [][]int
	for i := range m.Devices {
		if m.axisCoord(i, a) != 0 {
			continue
		}
		team := make([]int, m.Shape[a])
		for k := range team {
			team[k] = m.Devices[i+k*stride]
		}
		teams = append(teams, team)
	}
	return teams
}

// IterDomain is one axis of a tensor's logical or loop domain.
type IterDomain struct {
	Extent    int
	Reduction bool
	Parallel  ParallelType
	ParPos    diag.Pos   // where Parallel was set
	Def       *Transform // the split or merge that produced it; nil for a logical axis
	Logical   int        // position in the logical domain; -1 for derived axes
}

// TransformKind is split or merge.
type TransformKind int

// The transforms between logical and loop domains.
const (
	Split TransformKind = iota
	Merge
)

// Transform is a split or merge in a tensor's schedule. A split has one
// input and two outputs [outer, inner]; a merge two inputs [outer, inner]
// and one output.
type Transform struct {
	Kind TransformKind
	In   []*IterDomain
	Out  []*IterDomain
	Pos  diag.Pos
	// Step and Factor are the schedule step as the user wrote it (split or
	// outer_split, and its factor), for messages.
	Step   StepKind
	Factor int
}

// StepKind names a schedule step.
type StepKind string

// The schedule steps of format 1.
const (
	StepSplit       StepKind = "split"
	StepOuterSplit  StepKind = "outer_split"
	StepMerge       StepKind = "merge"
	StepReorder     StepKind = "reorder"
	StepParallelize StepKind = "parallelize"
)

// ScheduleStep is one schedule entry as written, with positions normalized to
// be non-negative.
type ScheduleStep struct {
	Kind   StepKind
	Axis   int
	Factor int
	Order  []int
	Type   ParallelType
	Pos    diag.Pos
}

// Tensor is a tensor of the fusion: its own name, position and producer,
// and its domains (TensorDomain), which tensors alike share.
type Tensor struct {
	Name     string
	Pos      diag.Pos // the declaration, or the first op that names it
	Producer *Op
	// Combined is, for an op's output that holds pending terms (Partial
	// set on a produced tensor), the tensor its op would write had it
	// combined the terms across their devices: the op's own logical
	// domain, sharded as the output's values are, its reduction axis
	// split along the terms' device type (nvFuser's rDID). The op's rule,
	// propagation and lowering read it (Op.Result); nil for any other
	// tensor.
	Combined *Tensor
	Declared bool // listed under tensors
	// read marks, while the parser makes the fusion's default outputs
	// (endpoints), a tensor that an op reads; false at any other time.
	read bool

	// The domains are behind a pointer that tensors alike share
	// (ShareAlike, Renamed): a chain of 100k tensors has a few distinct
	// ones, and a tensor of its own is then 64 bytes where it was 208.
	// Every tensor has one; nothing changes it once the tensor is built.
	*TensorDomain
}

// TensorDomain is what a tensor is apart from its name, position and
// producer: its mesh, dtype, domains, schedule, allocation and analyses
// (nvFuser's TensorDomain with the tensor's mesh and dtype). Tensors alike
// share one (ShareAlike), so it must not change once its tensor is built.
type TensorDomain struct {
	Mesh       *Mesh
	DType      DType
	Logical    []*IterDomain
	Loop       []*IterDomain
	Schedule   []ScheduleStep
	Allocation []int // loop positions, outermost first; nil means the default order
	AllocPos   diag.Pos
	// Propagated reports that the tensor's mesh and sharding were not
	// given but propagated from the tensors around it (format 2, which
	// propagates to every tensor that declares none of mesh, schedule and
	// placements; docs/fusion.md, "format 2: propagation"). Its Schedule
	// is then the one propagation chose, as if written in the file.
	Propagated bool
	// Auto reports `placements: auto` (syntax.ParseAuto): a sharding for the
	// auto-sharder to choose. The tensor is parsed as if it declared no
	// placements.
	Auto bool
	// Partial is the op of a Partial placement of a fusion input or of an
	// op's output (pending terms, docs/fusion.md "placements"), "" for a
	// tensor that holds values: the tensor's logical axis 0 holds the
	// terms of that op, one per device along a mesh axis, and only a set
	// reads it, which is then the reduction of its terms over axis 0.
	Partial OpKind

	// an is what analyze resolved, nil before.
	an *tensorAnalysis
}

// tensorAnalysis is what analyze resolves of a tensor's domains.
type tensorAnalysis struct {
	shardings []Sharding
	rootPad   map[int]int // value axis -> extent its uneven first split pads it to
	layout    []int       // value axes in memory order
}

// unanalyzed is the analysis of a tensor not analyzed: none.
var unanalyzed tensorAnalysis

// analyzed is t's analysis, empty before analyze.
func (t *Tensor) analyzed() *tensorAnalysis {
	if t.an == nil {
		return &unanalyzed
	}
	return t.an
}

// ValueAxes returns the positions of the non-reduction logical axes: the
// tensor's actual dimensions.
func (t *Tensor) ValueAxes() []int {
	var axes []int // nil when there are none
	for i, id := range t.Logical {
		if !id.Reduction {
			if axes == nil {
				axes = make([]int, 0, len(t.Logical)) // one allocation
			}
			axes = append(axes, i)
		}
	}
	return axes
}

// NumValueAxes is len(ValueAxes()), without building the list.
func (t *Tensor) NumValueAxes() int {
	n := 0
	for _, id := range t.Logical {
		if !id.Reduction {
			n++
		}
	}
	return n
}

// Shape returns the extents of the non-reduction logical axes.
func (t *Tensor) Shape() []int {
	var shape []int // nil when there are none
	for _, id := range t.Logical {
		if !id.Reduction {
			if shape == nil {
				shape = make([]int, 0, len(t.Logical)) // one allocation
			}
			shape = append(shape, id.Extent)
		}
	}
	return shape
}

// LogicalExtents returns the extents of every logical axis, reductions included.
func (t *Tensor) LogicalExtents() []int {
	ext := make([]int, len(t.Logical))
	for i, id := range t.Logical {
		ext[i] = id.Extent
	}
	return ext
}

// Fusion is a parsed and checked fusion file.
type Fusion struct {
	Name    string
	File    string
	Meshes  []*Mesh   // sorted by name
	Tensors []*Tensor // inputs first, then in the order ops produce them
	Ops     []*Op     // topologically sorted, ties in file order
	Inputs  []*Tensor
	Outputs []*Tensor
	// Pipeline is the fusion's pipeline section, nil for none: its ops
	// are then written once per micro-batch and ordered per its schedule
	// (pipeline.go).
	Pipeline *Pipeline
}

// Tensor returns the tensor called name, or nil.
func (f *Fusion) Tensor(name string) *Tensor {
	for _, t := range f.Tensors {
		if t.Name == name {
			return t
		}
	}
	return nil
}

// NewReplicated returns a tensor of the given shape replicated on every
// device of mesh, stored in row-major order: the lowering's stand-in for a
// buffer that holds a whole tensor on each device.
func NewReplicated(name string, mesh *Mesh, dtype DType, shape []int) *Tensor {
	t := &Tensor{Name: name, TensorDomain: &TensorDomain{Mesh: mesh, DType: dtype}}
	for i, e := range shape {
		t.Logical = append(t.Logical, &IterDomain{Extent: e, Logical: i})
	}
	t.Loop = t.Logical
	t.analyze() // cannot fail: no schedule, no allocation
	return t
}
