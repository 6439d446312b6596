package ir

import (
	"fmt"
	"slices"

	"github.com/nvcomm/nvcomm/internal/diag"
)

// This file builds meshes and tensors from values rather than from a
// fusion file: what a plan records (docs/plan.md), so that lower can
// recompute what a plan claims about them. A tensor goes through the
// parser's own checks, replay and analyses (replaySchedule), given the
// values that the parser decodes from a fusion file, so a plan's tensor
// is accepted and analyzed exactly as the same tensor in a fusion file.

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
// uneven splits, sizes that fit in int64): the replay is the parser's
// own (replaySchedule). The error, a *diag.List without positions, says
// what is wrong; NewTensor never panics.
func NewTensor(spec TensorSpec) (*Tensor, error) {
	errs := &errList{}
	p := &parser{errs: errs, w: walker{errs: errs}}
	reduction, ok := p.checkSpec(spec)
	if !ok {
		return nil, errs.List()
	}
	t := &Tensor{Name: spec.Name, Mesh: spec.Mesh, DType: spec.DType, Declared: true, Propagated: spec.Propagated}
	ids := make([]IterDomain, len(spec.Shape))
	t.Logical = make([]*IterDomain, len(spec.Shape))
	for i, e := range spec.Shape {
		ids[i] = IterDomain{Extent: e, Logical: i, Reduction: reduction[i]}
		t.Logical[i] = &ids[i]
	}
	if !p.checkStepCount(spec.Name, len(spec.Schedule), diag.Pos{}) {
		return nil, errs.List()
	}
	steps := make([]stepIn, len(spec.Schedule))
	for i, s := range spec.Schedule {
		steps[i] = stepIn{ScheduleStep: s, orderLen: len(s.Order)}
	}
	var alloc *allocIn
	if spec.Allocation != nil {
		alloc = &allocIn{order: spec.Allocation}
	}
	if !p.replaySchedule(t, steps, alloc) {
		return nil, errs.List()
	}
	return t, nil
}

// checkSpec checks spec's mesh, dtype, shape and reduction axes, and
// returns which axes are reductions. Its messages are formatted only for
// an error: Certify builds every tensor of a plan.
func (p *parser) checkSpec(spec TensorSpec) (reduction []bool, ok bool) {
	what := func() string { return fmt.Sprintf("tensor %q", spec.Name) }
	switch {
	case spec.Mesh == nil || len(spec.Mesh.Devices) == 0:
		p.errs.Add(diag.Pos{}, "%s: no mesh", what())
		return nil, false
	case spec.DType.Size() == 0:
		p.errs.Add(diag.Pos{}, "%s: unknown dtype %q (expected one of %s)", what(), spec.DType, joinNames(DTypeNames()))
		return nil, false
	}
	if len(spec.Shape) > MaxRank || !all(spec.Shape, isPositive) {
		p.checkExtents(spec.Shape, nil, diag.Pos{}, what()+" shape")
		return nil, false
	}
	if _, fits := Bytes(spec.Shape, spec.DType); !fits {
		return nil, p.checkBytes(spec.Shape, spec.DType, diag.Pos{}, what()+" shape", "")
	}
	if reduction, ok = reductionFlags(spec.ReductionAxes, len(spec.Shape)); !ok {
		p.errs.Add(diag.Pos{}, "%s: reduction axes %v are not distinct positions in a shape of %d axes", what(), spec.ReductionAxes, len(spec.Shape))
	}
	return reduction, ok
}

// all reports whether f holds for every x of xs.
func all[T any](xs []T, f func(T) bool) bool {
	for _, x := range xs {
		if !f(x) {
			return false
		}
	}
	return true
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
