package ir

import (
	"fmt"
	"slices"

	"github.com/nvcomm/nvcomm/internal/diag"
	"github.com/nvcomm/nvcomm/internal/shard"
)

// This file builds meshes and tensors from values rather than from a
// fusion file: what a plan records (docs/plan.md), so that lower can
// recompute what a plan claims about them. A tensor goes through a
// file's own checks, replay and analyses (replaySchedule), given the
// values that the front end decodes from a fusion file, so a plan's
// tensor is accepted and analyzed exactly as the same tensor in a fusion
// file.

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
// allocation, as a plan records them, or its placements, as a fusion file
// may give them.
type TensorSpec struct {
	Name  string
	Mesh  *Mesh // from NewMesh or a parsed fusion
	DType DType
	// Shape is the logical domain, reduction axes included, and a Partial
	// tensor's terms axis (its axis 0).
	Shape []int
	// ReductionAxes are the positions in Shape that are reduction axes.
	ReductionAxes []int
	// Schedule is replayed on Shape as a fusion file's is: a negative
	// position counts from the end of the loop domain.
	Schedule []ScheduleStep
	// Placements, instead of a schedule, stand for one as a fusion file's
	// placements do (docs/fusion.md, "placements"): one per mesh axis,
	// Shard(d) splitting value dim d. A Partial placement splits the
	// tensor's one reduction axis (an op's output: the op sums its partial
	// results over the devices), or on a tensor without reduction axes
	// makes it Partial, its axis 0 the terms, one per device along that
	// mesh axis.
	Placements []shard.Placement
	// Allocation is the memory order as loop positions; nil means the
	// default order.
	Allocation []int
	// Partial makes the tensor the pending terms of this reduce op (sum,
	// prod, max or min) on its logical axis 0, which its schedule
	// parallelizes directly over a mesh axis (Tensor.Partial); a Partial
	// placement sets it.
	Partial OpKind
	// Propagated is the tensor's Propagated: whether format 2 chose its
	// mesh and schedule. It changes nothing else.
	Propagated bool
	// Combine, on an op's output whose placements hold a Partial, makes
	// the op combine its terms across the devices (nvFuser's rDID): the
	// Partial splits the axis the op combines over and the output holds
	// values, not pending terms. NewOp reads it; the auto-sharder prices
	// such outputs.
	Combine bool
}

// NewTensor builds the tensor spec describes and analyzes it: it replays
// the schedule (or the placements) and the allocation on the logical
// domain and resolves the shardings, local shape and layout, with the
// checks Source.Build makes of a fusion file's tensor (positions,
// factors, device axes, allocation, uneven splits, sizes that fit in
// int64): the replay is a file's own (replaySchedule). The error, a *diag.List
// without positions, says what is wrong; NewTensor never panics.
func NewTensor(spec TensorSpec) (*Tensor, error) {
	p := newBuilder()
	reduction, ok := p.checkSpec(spec)
	if !ok {
		return nil, p.errs.List()
	}
	t := &Tensor{Name: spec.Name, Declared: true,
		TensorDomain: &TensorDomain{Mesh: spec.Mesh, DType: spec.DType, Propagated: spec.Propagated}}
	ids := make([]IterDomain, len(spec.Shape))
	t.Logical = make([]*IterDomain, len(spec.Shape))
	for i, e := range spec.Shape {
		ids[i] = IterDomain{Extent: e, Logical: i, Reduction: reduction[i]}
		t.Logical[i] = &ids[i]
	}
	if !p.declare(t, spec, nil) {
		return nil, p.errs.List()
	}
	return t, nil
}

// newBuilder is a Source without a file, for the builder's checks.
func newBuilder() *Source {
	errs := &diag.Collector{}
	return &Source{errs: errs}
}

// declare gives t, whose logical domain is built, the schedule or the
// placements of spec and its allocation, and analyzes it, with the checks
// of a fusion file's declaration. op is t's producer when NewOp builds
// t, nil for NewTensor.
func (p *Source) declare(t *Tensor, spec TensorSpec, op *Op) bool {
	what := func() string { return fmt.Sprintf("tensor %q", t.Name) }
	var alloc *AllocDecl
	if spec.Allocation != nil {
		alloc = &AllocDecl{Order: spec.Allocation}
	}
	if spec.Placements != nil {
		if spec.Schedule != nil {
			p.errs.AddHint(diag.Pos{}, "placements are sugar for a schedule; keep one of them", "%s: both placements and schedule are given", what())
			return false
		}
		pls, ok := p.specPlacements(t, spec, op, what()+" placements")
		return ok && p.placeSchedule(t, pls, alloc)
	}
	if spec.Partial != "" && !p.specPartial(t, spec.Partial, op, what()) {
		return false
	}
	if !p.checkStepCount(t.Name, len(spec.Schedule), diag.Pos{}) {
		return false
	}
	steps := make([]StepDecl, len(spec.Schedule))
	for i, s := range spec.Schedule {
		steps[i] = StepDecl{ScheduleStep: s, OrderLen: len(s.Order)}
	}
	if !p.replaySchedule(t, steps, alloc) {
		return false
	}
	if t.Partial != "" && !t.Logical[0].Parallel.IsDevice() {
		p.errs.AddHint(diag.Pos{}, "parallelize logical axis 0 on the mesh axis whose devices hold the terms",
			"%s: Partial(%s) terms lie on logical axis 0, which its schedule does not spread over a mesh axis", what(), t.Partial)
		return false
	}
	return true
}

// specPlacements checks spec's placements as a fusion file's are, and
// makes t Partial when one is and t has no reduction axis for it to
// split: the terms of a fusion input, on its logical axis 0.
func (p *Source) specPlacements(t *Tensor, spec TensorSpec, op *Op, what string) ([]placement, bool) {
	if !p.checkPlacementCount(t.Mesh, len(spec.Placements), diag.Pos{}, what) {
		return nil, false
	}
	pls := make([]placement, 0, len(spec.Placements))
	for _, v := range spec.Placements {
		pl := placement{Placement: v}
		if back, err := shard.ParsePlacement(v.String()); err != nil || back != v {
			p.errs.Add(diag.Pos{}, "%s: %+v is not a placement (Shard(d), Replicate() or Partial(op))", what, v)
			return nil, false
		}
		if !p.checkPartials(pls, pl, what) {
			return nil, false
		}
		pls = append(pls, pl)
	}
	pl, i, ok := partialOf(pls)
	switch {
	case op != nil:
		return pls, p.checkOutputPartial(op, pls, what) && (spec.Partial == "" || p.specPartial(t, spec.Partial, op, what))
	case ok && hasReduction(t):
		// It splits the reduction axis, as on an op's output.
		return pls, spec.Partial == "" || p.specPartial(t, spec.Partial, op, what)
	case spec.Partial != "" && (!ok || spec.Partial != pl.op()):
		p.errs.Add(diag.Pos{}, "%s: the tensor is Partial(%s), but none of its placements is", what, spec.Partial)
		return nil, false
	case !ok:
		return pls, true
	}
	if !p.specPartial(t, pl.op(), op, what) {
		return nil, false
	}
	if n := t.Mesh.Shape[i]; t.Logical[0].Extent != n {
		p.errs.Add(diag.Pos{}, "%s: Partial(%s) on mesh axis %d holds %d terms on logical axis 0, of extent %d",
			what, pl.Op, i, n, t.Logical[0].Extent)
		return nil, false
	}
	return pls, true
}

// specPartial makes t the Partial terms of op r, and reports whether t
// can be: a fusion input (no op builds it) without reduction axes, with
// a logical axis 0 for the terms, of a reduce op.
func (p *Source) specPartial(t *Tensor, r OpKind, op *Op, what string) bool {
	switch {
	case !r.IsReduction():
		p.errs.Add(diag.Pos{}, "%s: Partial(%s): the terms combine with sum, prod, max or min", what, r)
	case op != nil:
		p.errs.AddHint(diag.Pos{}, "declare the partial terms as a fusion input and reduce them with a set",
			"%s: an op's output holds its values, not Partial terms", what)
	case len(t.Logical) == 0 || hasReduction(t):
		p.errs.Add(diag.Pos{}, "%s: Partial(%s) terms need a logical axis 0 and no reduction axes", what, r)
	default:
		t.Partial = r
		return true
	}
	return false
}

// hasReduction reports whether t has a reduction axis.
func hasReduction(t *Tensor) bool {
	return slices.ContainsFunc(t.Logical, func(id *IterDomain) bool { return id.Reduction })
}

// checkSpec checks spec's mesh, dtype, shape and reduction axes, and
// returns which axes are reductions. Its messages are formatted only for
// an error: Certify builds every tensor of a plan.
func (p *Source) checkSpec(spec TensorSpec) (reduction []bool, ok bool) {
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
