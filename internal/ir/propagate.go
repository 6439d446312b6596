package ir

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/nvcomm/nvcomm/internal/diag"
)

// This file is format 2's sharding propagation (docs/fusion.md, "format 2:
// propagation"), after nvFuser's PropagateShardingsPass
// (csrc/preseg_passes/propagate_shardings.cpp, with shardLoopLike in
// csrc/multidevice/propagation.cpp). A tensor that declares no mesh,
// schedule or placements takes its mesh and device splits from the
// tensors around it; given tensors never change. A forward sweep over the
// ops in topological order shards each propagated output like its
// operands, tried in nvFuser's reference order; a backward sweep in
// reverse order then gives each propagated operand its consumer's mesh
// and, unless it is a fusion input, the device types it still lacks.
//
// Propagation decides device splits of logical axes only; each propagated
// tensor is then built by the parser's own replay and analyses
// (scheduleSteps), so that the lowering sees an ordinary tensor, the same
// as if the file had written that schedule.

// deviceSplit is a device split that propagation replays: logical axis pos
// parallelized on typ, either directly (split false: its extent is the
// mesh size, a logical DID) or through an even outer split by the mesh
// size whose outer part is on typ (a DID loop split, what Shard(d)
// writes).
type deviceSplit struct {
	pos       int
	typ       ParallelType
	split     bool
	reduction bool     // pos is a reduction axis
	at        diag.Pos // the op whose propagation made it, for messages
}

// deviceSplits lists t's device splits that propagation replays, in loop
// order. A device axis that is the inner part of a split, a split of a
// split (nested), a merge, or an uneven split is skipped: propagating
// these is not supported yet, and the tensors around t are then sharded by
// its other splits, or by other references.
func (t *Tensor) deviceSplits() []deviceSplit {
	var out []deviceSplit
	for _, id := range t.Loop {
		if !id.Parallel.IsDevice() {
			continue
		}
		logical, split := id, false
		if tr := id.Def; tr != nil {
			in := tr.In[0]
			even := tr.Kind == Split && tr.Out[0].Extent*tr.Out[1].Extent == in.Extent
			if !even || tr.Out[0] != id || in.Def != nil {
				continue
			}
			logical, split = in, true
		}
		out = append(out, deviceSplit{pos: logical.Logical, typ: id.Parallel, split: split, reduction: logical.Reduction})
	}
	return out
}

// propagator holds the device splits propagation has given each
// propagated tensor.
type propagator struct {
	p      *Source
	splits map[*Tensor][]deviceSplit
}

func newPropagator(p *Source) *propagator {
	return &propagator{p: p, splits: map[*Tensor][]deviceSplit{}}
}

// forward shards op's output, when it is propagated, like its operands in
// reference order, and builds it.
func (pr *propagator) forward(op *Op) bool {
	if handled, ok := pr.savedShards(op); handled {
		return ok
	}
	if handled, ok := pr.recomputedShards(op); handled {
		return ok
	}
	out := op.Out
	if !out.Propagated {
		return true
	}
	for _, i := range referenceOrder(op) {
		ref := op.Inputs[i]
		toOut := func(pos, parts int) int { return op.outputPos(i, valueIndex(ref, pos), parts) }
		pr.shardLike(ref, out, toOut, false, op.Pos)
	}
	return pr.build(out)
}

// backward runs the backward sweep over f's ops, in reverse topological
// order: each propagated operand is sharded like the op's output, or, for
// an output of pending terms, like what the op computes (Op.Result).
func (pr *propagator) backward(f *Fusion) bool {
	for k := len(f.Ops) - 1; k >= 0; k-- {
		op := f.Ops[k]
		for i, in := range op.Inputs {
			if !in.Propagated {
				continue
			}
			toIn := func(pos, parts int) int { return logicalPos(in, op.inputAxisOf(i, pos, parts)) }
			if !pr.shardLike(op.Result(), in, toIn, true, op.Pos) {
				continue
			}
			in.ownDomain() // build shares it with the tensors alike it
			if !pr.build(in) {
				return false
			}
		}
	}
	return true
}

// shardLike is nvFuser's shardLoopLike: it gives target, a propagated
// tensor, ref's mesh if it has none, then ref's device splits of the types
// target lacks on its non-reduction axes, each on the logical axis of
// target that toTarget maps ref's split axis to (-1: none). A split is
// skipped where the target's mesh lacks its type or has another size
// along it, and where the target's axis is split already: propagation
// never overwrites a split. A fusion input receives the mesh only, as in
// nvFuser: it is replicated. shardLike reports whether it added a split.
func (pr *propagator) shardLike(ref, target *Tensor, toTarget func(pos, parts int) int, backward bool, at diag.Pos) bool {
	if target.Mesh == nil {
		target.Mesh = ref.Mesh
	}
	if target.Producer == nil || target.Mesh == nil || ref.Mesh == nil {
		return false
	}
	free := pr.freeTypes(target)
	added := false
	for _, s := range refSplits(ref, backward) {
		if !free[s.typ] || !target.Mesh.Has(s.typ) || target.Mesh.Size(s.typ) != ref.Mesh.Size(s.typ) {
			continue
		}
		q := toTarget(s.pos, ref.Mesh.Size(s.typ))
		if q < 0 || pr.splitAt(target, q) {
			continue
		}
		pr.splits[target] = append(pr.splits[target], deviceSplit{
			pos: q, typ: s.typ, split: s.split, reduction: target.Logical[q].Reduction, at: at})
		free[s.typ] = false // a reference gives each type once
		added = true
	}
	return added
}

// refSplits returns the splits of ref that shardLike tries. Backward from
// an output whose reduction axis is split over a device type, that type's
// split of a non-reduction axis is left out: each device of the type sums
// its slice of the reduced axis, so an operand's slice of an output axis
// split by the same type (a ReduceScatter's) is not what it reads.
// nvFuser would give the operand both, two axes of one type.
func refSplits(ref *Tensor, backward bool) []deviceSplit {
	all := ref.deviceSplits()
	if !backward {
		return all
	}
	summed := map[ParallelType]bool{}
	for _, s := range all {
		if s.reduction {
			summed[s.typ] = true
		}
	}
	return slices.DeleteFunc(all, func(s deviceSplit) bool { return !s.reduction && summed[s.typ] })
}

// freeTypes returns the device types target may still receive: those none
// of its non-reduction axes is split by. A split reduction axis does not
// take its type, so that an output may be summed over the devices of a
// type and split along another axis by the same type, a ReduceScatter.
func (pr *propagator) freeTypes(target *Tensor) map[ParallelType]bool {
	free := map[ParallelType]bool{}
	for _, t := range DeviceTypes {
		free[t] = true
	}
	for _, s := range pr.splits[target] {
		if !s.reduction {
			free[s.typ] = false
		}
	}
	return free
}

// splitAt reports whether propagation has split target's logical axis pos.
func (pr *propagator) splitAt(target *Tensor, pos int) bool {
	return slices.ContainsFunc(pr.splits[target], func(s deviceSplit) bool { return s.pos == pos })
}

// build replays t's propagated splits as a schedule and analyzes t.
// Splitting the last logical axes first keeps the positions of the others:
// the schedule placements would write.
func (pr *propagator) build(t *Tensor) bool {
	if t.Mesh == nil {
		// Still without a mesh, and so without splits: the backward sweep
		// gives it one, or checkMeshes reports it.
		return pr.p.scheduleSteps(t, nil)
	}
	splits := slices.SortedFunc(slices.Values(pr.splits[t]), func(a, b deviceSplit) int { return cmp.Compare(b.pos, a.pos) })
	var steps []ScheduleStep
	for _, s := range splits {
		if s.split {
			steps = append(steps, blockSplit(t.Mesh, s.pos, s.typ, s.at)...)
		} else {
			steps = append(steps, ScheduleStep{Kind: StepParallelize, Axis: s.pos, Type: s.typ, Pos: s.at})
		}
	}
	return pr.p.scheduleSteps(t, steps)
}

// checkMeshes reports the tensors that neither declare a mesh nor received
// one: no tensor connected to them by ops has one.
func (pr *propagator) checkMeshes(f *Fusion) {
	for _, t := range f.Tensors {
		if t.Mesh == nil {
			pr.p.errs.AddHint(t.Pos, fmt.Sprintf("give %q, or a tensor an op connects it to, a mesh", t.Name),
				"tensor %q has no mesh: it declares none, and format 2 found none to propagate to it", t.Name)
		}
	}
}

// referenceOrder returns the operands of op in the order propagation tries
// them, nvFuser's getOrderedReferenceInputs: linear's weight, bias, then
// input; matmul's b, then a, as the weight decides how a layer is sharded;
// other ops' operands by the number of non-reduction device axes, most
// first, then by mesh rank, highest first, ties in operand order
// (sortTvsByParallelDims).
func referenceOrder(op *Op) []int {
	switch {
	case op.Kind == OpLinear && len(op.Inputs) == 3:
		return []int{1, 2, 0}
	case op.Kind == OpLinear, op.Kind == OpMatmul:
		return []int{1, 0}
	}
	order := make([]int, len(op.Inputs))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(i, j int) int {
		a, b := op.Inputs[i], op.Inputs[j]
		if c := cmp.Compare(deviceAxes(b), deviceAxes(a)); c != 0 {
			return c
		}
		return cmp.Compare(meshRank(b), meshRank(a))
	})
	return order
}

// deviceAxes counts t's non-reduction device-parallel loop axes.
func deviceAxes(t *Tensor) int {
	n := 0
	for _, id := range t.Loop {
		if id.Parallel.IsDevice() && !id.Reduction {
			n++
		}
	}
	return n
}

// meshRank is the rank of t's mesh, 0 when it has none yet.
func meshRank(t *Tensor) int {
	if t.Mesh == nil {
		return 0
	}
	return t.Mesh.Rank()
}

// valueIndex returns the position among t's non-reduction logical axes of
// its logical axis pos, or -1 when pos is a reduction axis: a producer's
// reduction axis maps to nothing in its consumers, as in nvFuser.
func valueIndex(t *Tensor, pos int) int {
	if pos < 0 || pos >= len(t.Logical) || t.Logical[pos].Reduction {
		return -1
	}
	return countBelow(t.ValueAxes(), pos)
}

// logicalPos returns the logical position of t's non-reduction axis a,
// or -1 for a = -1.
func logicalPos(t *Tensor, a int) int {
	if vals := t.ValueAxes(); a >= 0 && a < len(vals) {
		return vals[a]
	}
	return -1
}

// outputPos maps a block split into parts of operand i's non-reduction
// axis a forward to the logical position of Out that it splits alike, or
// -1: the output axis of the op's rule that shares a's outermost factor
// (ops.Rule.ResultSplit); for a contraction, the contracted axis k to
// Out's trailing reduction axis; for a reduction, the reduced axis to
// Out's reduction axis (nvFuser's rDID: the sum over it is split over the
// devices).
func (o *Op) outputPos(i, a, parts int) int {
	if a < 0 {
		return -1
	}
	if j := o.Rule().ResultSplit(i, a, parts); j >= 0 {
		return logicalPos(o.Out, j)
	}
	last := len(o.Out.Logical) - 1
	switch {
	case o.Kind.IsContraction() && !indexed(o) && a == o.ContractedAxis(i) && last >= 0 && o.Out.Logical[last].Reduction:
		// Not a lookup's rows: nvFuser's embedding_fwd has no reduction
		// axis to carry their split (csrc/ops/composite.cpp); the
		// lowering chooses between gathering the table and summing.
		return last
	case o.Kind.IsReduction() && i == 0 && a == o.Axis && a <= last && o.Out.Logical[a].Reduction:
		return a
	}
	return -1
}

// inputAxisOf maps a block split into parts of the logical axis pos of
// what the op computes (Result) backward to operand i's non-reduction
// axis, or -1: outputPos in reverse.
func (o *Op) inputAxisOf(i, pos, parts int) int {
	out := o.Result() // what the op computes, its pending terms' Combined
	if j := valueIndex(out, pos); j >= 0 {
		return o.Rule().OperandSplit(i, j, parts)
	}
	last := len(out.Logical) - 1
	switch {
	case pos < 0 || pos > last:
	case o.Kind.IsContraction() && pos == last:
		return o.ContractedAxis(i)
	case o.Kind.IsReduction() && i == 0 && pos == o.Axis:
		return o.Axis
	}
	return -1
}
