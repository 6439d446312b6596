package ir

import (
	"fmt"
	"slices"
	"strconv"

	"go.yaml.in/yaml/v3"

	"github.com/nvcomm/nvcomm/internal/diag"
)

// This file builds meshes and tensors from values rather than from a
// fusion file: what a plan records (docs/plan.md), so that lower can
// recompute what a plan claims about them. A tensor goes through the
// parser's own checks, replay and analyses (scheduleWith), fed with the
// YAML nodes a fusion file would give it, so a plan's tensor is accepted
// and analyzed exactly as the same tensor in a fusion file.

// NewMesh returns the mesh name of the given shape (outermost axis first)
// and row-major device ids, or an error when they do not make one: 1 to 3
// axes of extent >= 1 whose product is the number of devices, and distinct
// non-negative ids.
func NewMesh(name string, shape, devices []int) (*Mesh, error) {
	if len(shape) < 1 || len(shape) > 3 {
		return nil, fmt.Errorf("mesh %q: %d axes, expected 1 to 3 (DIDz, DIDy, DIDx)", name, len(shape))
	}
	n := 1
	for _, e := range shape {
		if e < 1 || e > len(devices) {
			return nil, fmt.Errorf("mesh %q: shape %s does not hold its %d devices", name, fmtShape(shape), len(devices))
		}
		n *= e // at most len(devices) squared: no overflow
		if n > len(devices) {
			break
		}
	}
	if n != len(devices) {
		return nil, fmt.Errorf("mesh %q: shape %s does not hold its %d devices", name, fmtShape(shape), len(devices))
	}
	seen := make(map[int]bool, len(devices))
	for _, d := range devices {
		if d < 0 || seen[d] {
			return nil, fmt.Errorf("mesh %q: device id %d is negative or listed twice", name, d)
		}
		seen[d] = true
	}
	return &Mesh{Name: name, Shape: slices.Clone(shape), Devices: slices.Clone(devices)}, nil
}

// TensorSpec is a tensor given by value: its logical domain, schedule and
// allocation, as a plan records them.
type TensorSpec struct {
	Name  string
	Mesh  *Mesh // from NewMesh or Parse
	DType DType
	// Shape is the logical domain, reduction axes included.
	Shape []int
	// ReductionAxes are the positions in Shape that are reduction axes.
	ReductionAxes []int
	// Schedule is replayed on Shape; positions are non-negative.
	Schedule []ScheduleStep
	// Allocation is the memory order as loop positions; nil means the
	// default order.
	Allocation []int
	// Propagated is the tensor's Propagated: whether format 2 chose its
	// mesh and schedule. It changes nothing else.
	Propagated bool
}

// NewTensor builds the tensor spec describes and analyzes it: it replays
// the schedule and the allocation on the logical domain and resolves the
// shardings, local shape and layout, with the checks Parse makes of a
// fusion file's tensor (positions, factors, device axes, allocation,
// uneven splits, sizes that fit in int64). The error, a *diag.List without
// positions, says what is wrong; NewTensor never panics.
func NewTensor(spec TensorSpec) (*Tensor, error) {
	errs := &errList{}
	p := &parser{errs: errs, w: walker{errs: errs}}
	what := fmt.Sprintf("tensor %q", spec.Name)
	switch {
	case spec.Mesh == nil || len(spec.Mesh.Devices) == 0:
		errs.Add(diag.Pos{}, "%s: no mesh", what)
	case spec.DType.Size() == 0:
		errs.Add(diag.Pos{}, "%s: unknown dtype %q (expected one of %s)", what, spec.DType, joinNames(DTypeNames()))
	}
	if errs.Count() > 0 {
		return nil, errs.List()
	}
	shape, ok := p.extents(intList(spec.Shape), what+" shape")
	if !ok || !p.checkBytes(shape, spec.DType, diag.Pos{}, what+" shape", "") {
		return nil, errs.List()
	}
	reduction, ok := reductionFlags(spec.ReductionAxes, len(shape))
	if !ok {
		errs.Add(diag.Pos{}, "%s: reduction axes %v are not distinct positions in a shape of %d axes", what, spec.ReductionAxes, len(shape))
		return nil, errs.List()
	}
	t := &Tensor{Name: spec.Name, Mesh: spec.Mesh, DType: spec.DType, Declared: true, Propagated: spec.Propagated}
	for i, e := range shape {
		t.Logical = append(t.Logical, &IterDomain{Extent: e, Logical: i, Reduction: reduction[i]})
	}
	rt := &rawTensor{name: spec.Name, sched: scheduleNode(spec.Schedule)}
	if spec.Allocation != nil {
		rt.alloc = intList(spec.Allocation)
	}
	if !p.scheduleWith(t, rt, nil) {
		return nil, errs.List()
	}
	return t, nil
}

// reductionFlags marks the reduction axes among rank positions, and false
// when an axis is out of range or repeated.
func reductionFlags(axes []int, rank int) ([]bool, bool) {
	flags := make([]bool, rank)
	for _, a := range axes {
		if a < 0 || a >= rank || flags[a] {
			return nil, false
		}
		flags[a] = true
	}
	return flags, true
}

// scheduleNode writes steps as a fusion file's schedule list.
func scheduleNode(steps []ScheduleStep) *yaml.Node {
	list := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
	for _, s := range steps {
		var args *yaml.Node
		switch s.Kind {
		case StepSplit, StepOuterSplit:
			args = mapNode(kv{"axis", intNode(s.Axis)}, kv{"factor", intNode(s.Factor)})
		case StepMerge:
			args = mapNode(kv{"axis", intNode(s.Axis)})
		case StepReorder:
			args = intList(s.Order)
		default: // parallelize, or a kind the parser reports as unknown
			args = mapNode(kv{"axis", intNode(s.Axis)}, kv{"type", strNode(typeName(s.Type))})
		}
		list.Content = append(list.Content, mapNode(kv{string(s.Kind), args}))
	}
	return list
}

// typeName names a parallel type as a fusion file does; a value no type
// has gets a name the parser rejects.
func typeName(t ParallelType) string {
	if t < Serial || t > DIDz {
		return fmt.Sprintf("ParallelType(%d)", int(t))
	}
	return t.String()
}

// intList is a YAML list of integers.
func intList(xs []int) *yaml.Node {
	list := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
	for _, x := range xs {
		list.Content = append(list.Content, intNode(x))
	}
	return list
}

func intNode(x int) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!int", Value: strconv.Itoa(x)}
}

func strNode(s string) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s}
}

// kv is one key of a YAML mapping and its value.
type kv struct {
	key   string
	value *yaml.Node
}

// mapNode is a YAML mapping of the given keys, in order.
func mapNode(fields ...kv) *yaml.Node {
	m := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
	for _, f := range fields {
		m.Content = append(m.Content, strNode(f.key), f.value)
	}
	return m
}
