package plan

import (
	"fmt"
	"slices"
)

// This file replays a tensor's schedule on its shape: the one replay of a
// plan's schedules, which validate checks, and which the text form and
// explain read to say how devices share a tensor (the fusion parser has
// its own, with positions in the file; the simulator its own, as the
// oracle).

// LoopAxis is one axis of a tensor's loop domain, as the replay of its
// schedule leaves it.
type LoopAxis struct {
	Extent    int
	Reduction bool
	// Parallel is the parallel type the schedule gave the axis: "" (none),
	// Serial or a device type.
	Parallel string
	// Logical is the logical axis (a position in the tensor's shape) the
	// axis is a digit of: the axis holds the indices i of it with (i /
	// Stride) % Extent equal to its own index. It is -1 for a merge, whose
	// logical axes Merged lists.
	Logical int
	Stride  int
	Merged  []int
	// Split reports an axis made by a split (or derived from one).
	Split bool
}

// OnDevices reports whether the axis is parallelized on a device type.
func (a LoopAxis) OnDevices() bool { return slices.Contains(deviceTypes, a.Parallel) }

// Replay replays t's schedule on its shape, checking every step's
// arguments as the fusion parser does, and returns the loop domain; or,
// for a schedule that does not replay, the position of the first step
// that does not and why. With a nil mesh the device types are not checked
// against a mesh's axes.
func Replay(t *Tensor, mesh *Mesh) (loop []LoopAxis, bad int, why string) {
	// A split adds an axis, so the loop domain grows in place.
	loop = make([]LoopAxis, len(t.Shape), len(t.Shape)+len(t.Schedule))
	for k, e := range t.Shape {
		loop[k] = LoopAxis{Extent: e, Reduction: slices.Contains(t.ReductionAxes, k), Logical: k, Stride: 1}
	}
	for k, s := range t.Schedule {
		if loop, why = replayStep(loop, s, mesh); why != "" {
			return nil, k, why
		}
	}
	return loop, -1, ""
}

// replayStep applies one schedule step to loop and returns the new loop
// domain or why the step is invalid. It changes loop, Replay's own, in
// place, except for a reorder.
func replayStep(loop []LoopAxis, s ScheduleStep, mesh *Mesh) ([]LoopAxis, string) {
	if n := s.fields(); n != 1 {
		return nil, fmt.Sprintf("has %d transforms, want exactly one of split, outer_split, merge, reorder, parallelize", n)
	}
	switch {
	case s.Split != nil:
		return splitStep(loop, "split", *s.Split, false)
	case s.OuterSplit != nil:
		return splitStep(loop, "outer_split", *s.OuterSplit, true)
	case s.Merge != nil:
		return mergeStep(loop, s.Merge.Axis)
	case s.Reorder != nil:
		return reorderStep(loop, s.Reorder)
	}
	return parallelizeStep(loop, *s.Parallelize, mesh)
}

// fields counts the transforms a schedule step sets.
func (s ScheduleStep) fields() int {
	n := 0
	for _, set := range []bool{s.Split != nil, s.OuterSplit != nil, s.Merge != nil, s.Reorder != nil, s.Parallelize != nil} {
		if set {
			n++
		}
	}
	return n
}

// splitStep splits a loop axis by the factor: an inner split into [N/f,
// f], an outer one into [f, N/f], each piece a digit of the same logical
// axis (the outer one of the larger stride).
func splitStep(loop []LoopAxis, name string, a SplitArgs, outer bool) ([]LoopAxis, string) {
	if msg := checkPosition(name, a.Axis, len(loop)); msg != "" {
		return nil, msg
	}
	in := loop[a.Axis]
	switch {
	case a.Factor < 1:
		return nil, fmt.Sprintf("%s factor is %d, want >= 1", name, a.Factor)
	case in.OnDevices():
		return nil, fmt.Sprintf("%s of loop axis %d, which is parallelized on %s", name, a.Axis, in.Parallel)
	}
	inner := a.Factor
	if outer {
		inner = ceilDiv(in.Extent, a.Factor)
	}
	hi, lo := in, in // the same logical axis; not parallelized, as a split's outputs are not
	hi.Parallel, lo.Parallel = "", ""
	hi.Extent, hi.Stride, hi.Split = ceilDiv(in.Extent, inner), in.Stride*inner, true
	if outer {
		hi.Extent = a.Factor
	}
	lo.Extent, lo.Split = inner, true
	return slices.Replace(loop, a.Axis, a.Axis+1, hi, lo), ""
}

// mergeStep merges loop axes axis and axis+1 into one.
func mergeStep(loop []LoopAxis, axis int) ([]LoopAxis, string) {
	if axis < 0 || axis+1 >= len(loop) {
		return nil, fmt.Sprintf("merge axis %d has no partner in a loop domain of %d axes", axis, len(loop))
	}
	a, b := loop[axis], loop[axis+1]
	switch {
	case a.OnDevices() || b.OnDevices():
		return nil, fmt.Sprintf("merge of loop axes %d and %d, one of which is parallelized on devices", axis, axis+1)
	case a.Reduction != b.Reduction:
		return nil, fmt.Sprintf("merge of loop axes %d and %d, a reduction and a non-reduction axis", axis, axis+1)
	}
	e, ok := mul(a.Extent, b.Extent)
	if !ok {
		return nil, fmt.Sprintf("merged extent %d x %d overflows", a.Extent, b.Extent)
	}
	m := LoopAxis{Extent: e, Reduction: a.Reduction, Logical: -1, Stride: 1, Merged: slices.Concat(a.spans(), b.spans()), Split: a.Split || b.Split}
	return slices.Replace(loop, axis, axis+2, m), ""
}

// spans lists the logical axes the loop axis derives from.
func (a LoopAxis) spans() []int {
	if a.Logical < 0 {
		return a.Merged
	}
	return []int{a.Logical}
}

// reorderStep permutes the loop domain: order lists old positions in new
// order.
func reorderStep(loop []LoopAxis, order []int) ([]LoopAxis, string) {
	if !isPermutation(order, len(loop)) {
		return nil, fmt.Sprintf("reorder %v is not a permutation of the %d loop positions", order, len(loop))
	}
	out := make([]LoopAxis, len(loop))
	for i, old := range order {
		out[i] = loop[old]
	}
	return out, ""
}

// parallelizeStep gives a loop axis a parallel type.
func parallelizeStep(loop []LoopAxis, a ParallelizeArgs, mesh *Mesh) ([]LoopAxis, string) {
	if msg := checkPosition("parallelize", a.Axis, len(loop)); msg != "" {
		return nil, msg
	}
	ti := slices.Index(deviceTypes, a.Type)
	switch {
	case !slices.Contains(parallelTypes, a.Type):
		return nil, fmt.Sprintf("parallel type %q is not Serial, DIDx, DIDy or DIDz", a.Type)
	case ti >= 0 && mesh != nil && len(mesh.Shape) <= ti:
		return nil, fmt.Sprintf("parallel type %s, but the mesh has %d axes", a.Type, len(mesh.Shape))
	}
	loop[a.Axis].Parallel = a.Type
	return loop, ""
}

// checkPosition says why axis is not a position in a loop domain of rank
// axes, or "".
func checkPosition(step string, axis, rank int) string {
	if axis < 0 || axis >= rank {
		return fmt.Sprintf("%s axis %d is not a position in a loop domain of %d axes", step, axis, rank)
	}
	return ""
}

// ceilDiv is ⌈a/b⌉ for a >= 1 and b >= 1, without overflow.
func ceilDiv(a, b int) int { return (a-1)/b + 1 }
