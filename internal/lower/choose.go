package lower

import (
	"slices"

	"github.com/nvcomm/nvcomm/internal/checked"
	"github.com/nvcomm/nvcomm/internal/ir"
	"github.com/nvcomm/nvcomm/internal/plan"
	"github.com/nvcomm/nvcomm/internal/reshard"
)

// This file is the optimal policy's one choice in lowering a layer: where
// a contraction's operands arrive split along the summed axis k and its
// output does not split k, nvFuser gathers k on every operand before a
// local product (a set before the op: it does not rFactor such an op);
// the optimal policy may keep the operands as they are, multiply the
// local slices of k and sum the partial products (an Allreduce, or a
// ReduceScatter when the output is split along the same device type), as
// Megatron-LM's row-parallel linear does. It takes the way that is better
// under the objective — the gathers or the sum, priced by the cost model
// (the collectives only: both ways add a few Permutes) — nvFuser's way on
// a tie.

// chooseSum returns the device type over which op should sum partial
// products instead of gathering its operands, if the optimal policy
// prefers that. want is the output's block splits.
func (ins *inserter) chooseSum(op *ir.Op, want []Split) (ir.ParallelType, bool) {
	if ins.planner.Policy() != PolicyOptimal {
		return 0, false
	}
	t, ok := sumWay(op, want, ins.bcast)
	if !ok {
		return 0, false // the operands would move either way: keep nvFuser's plan
	}
	pl := ins.planner
	gather := reshard.Cost{}
	for i, x := range op.Inputs[:2] {
		g, priced := gatherCost(pl, x, t)
		if op.ContractedAxis(i) < 0 {
			// A lookup's ids: the rows of a split table are summed, not
			// gathered; but where the output is split further than the ids
			// are, gathering the table means cutting the ids to the output's
			// blocks first, a local Slice that summing does without.
			g, priced = idsCost(pl, op, i, want, t, ins.bcast)
		}
		var fits bool
		gather, fits = pl.Add(gather, g)
		ok = ok && priced && fits
	}
	sum, fits := sumCost(pl, op.Out, t, want)
	return t, ok && fits && pl.Less(sum, gather)
}

// chooseGather reports whether the optimal policy computes op, a
// contraction whose output splits its summed axis, from operands
// resharded to hold that axis whole (the output's other splits, want),
// rather than summing partial products over the devices that split it, as
// the output's sharding says: the two ways lowered on a trial ledger and
// priced (ways.go), the sum on a tie (nvFuser's plan), never for an
// output whose terms stay pending. Only for an output whose sharding
// propagation chose (format 2): a sharding the fusion gives is followed
// as written, nvFuser's rFactor. The sum is a collective of the
// output; the other way moves the operands. Where the output is much
// larger than what it is computed from (an embedding table's gradient,
// scatter-added from the tokens' gradients that sequence parallelism
// splits), gathering those and adding each device's own rows moves far
// less: Megatron-LM gathers the embedding output's gradient so.
func (ins *inserter) chooseGather(op *ir.Op) bool {
	if ins.planner.Policy() != PolicyOptimal || op.Out.Combined != nil || op.Out.Partial != "" || !op.Out.Propagated {
		return false
	}
	w := waysOf(op, ins.bcast)
	if w == nil {
		return true // the operands hold the summed axis whole already: no sum
	}
	if !w.has[waySum] || !w.has[wayBefore] || !ins.trials.privateOperands(w) {
		return false
	}
	tr := ins.trials
	key := tr.memoKey(op, ins.bcast)
	gather, ok := tr.gathers[string(key)]
	if !ok {
		_, before, ok1 := tr.run(w, wayBefore, ins.planner, ins.bcast)
		_, sum, ok2 := tr.run(w, waySum, ins.planner, ins.bcast)
		gather = ok1 && ok2 && ins.planner.Less(before, sum)
		tr.gathers[string(key)] = gather
	}
	return gather
}

// idsCost is what the gathering way costs lookup op's ids (operand i)
// beyond the summing way: a local Slice of them to the output's blocks
// when the output, split as want, needs them split further than they are
// and summing along t needs them as they are; else nothing.
func idsCost(pl *reshard.Planner, op *ir.Op, i int, want []Split, t ir.ParallelType, b bcastAxes) (reshard.Cost, bool) {
	withSum := append(want[:len(want):len(want)], Split{-1, t})
	_, gathered := b.fits(op, i, OperandShards(op, i, want))
	_, summed := b.fits(op, i, OperandShards(op, i, withSum))
	if gathered || !summed {
		return reshard.Cost{}, true
	}
	x := op.Inputs[i]
	cut, err := blockTensorOf(x.Name+"/cut", x.Mesh, x.DType, x.Shape(), OperandShards(op, i, want))
	if err != nil {
		return reshard.Cost{}, true
	}
	return pl.LocalCost(plan.Slice, plan.Count{Input: localCount(x.LocalShape()), Output: localCount(cut.LocalShape())}, int64(x.DType.Size()))
}

// gatherCost is the cost of the Allgather of operand x along t.
func gatherCost(pl *reshard.Planner, x *ir.Tensor, t ir.ParallelType) (reshard.Cost, bool) {
	n := x.Mesh.Size(t)
	elems := localCount(x.LocalShape())
	recv, ok := checked.Mul(int64(n-1), localBytes(x))
	c, fits := pl.TeamCost(x.Mesh, t, plan.Allgather, plan.Count{Input: elems, Output: n * elems}, int64(x.DType.Size()), recv)
	return c, ok && fits
}

// sumCost is the cost of summing y's partial products over the devices
// along t: an Allreduce, or a ReduceScatter when y is split along t too.
func sumCost(pl *reshard.Planner, y *ir.Tensor, t ir.ParallelType, want []Split) (reshard.Cost, bool) {
	n := y.Mesh.Size(t)
	elems := localCount(y.LocalShape())
	typ, count := plan.Allreduce, plan.Count{Input: elems, Output: elems}
	if slices.ContainsFunc(want, func(s Split) bool { return s.Type == t }) {
		typ, count = plan.ReduceScatter, plan.Count{Input: n * elems, Output: elems}
	}
	return pl.TeamCost(y.Mesh, t, typ, count, int64(y.DType.Size()), sumBytes(y, t, want))
}

// commonKSplit returns the device type that splits the contracted axis of
// both of op's factors in blocks (of a lookup, its table's), if one does.
func commonKSplit(op *ir.Op) (ir.ParallelType, bool) {
	var found []ir.ParallelType
	factors := 0
	for i := range 2 {
		have, ok := BlockShards(op.Inputs[i])
		if !ok {
			return 0, false
		}
		if op.ContractedAxis(i) >= 0 {
			factors++
		}
		for _, s := range have {
			if s.Axis == op.ContractedAxis(i) {
				found = append(found, s.Type)
			}
		}
	}
	if len(found) == 0 || len(found) != factors || found[0] != found[len(found)-1] {
		return 0, false
	}
	return found[0], true
}

// sumBytes is what the busiest device receives in summing partial products
// of the output over the n devices along t, as the plan counts it: an
// Allreduce receives 2(n-1)/n of the partial products, a ReduceScatter
// (the output split along t too) (n-1)/n of them.
func sumBytes(y *ir.Tensor, t ir.ParallelType, want []Split) int64 {
	n := int64(y.Mesh.Size(t))
	partial := localBytes(y)
	for _, s := range want {
		if s.Type == t {
			return (n - 1) * partial // partial holds n of y's blocks
		}
	}
	return 2 * (n - 1) * partial / n
}

// localBytes is the size of a device's block of t.
func localBytes(t *ir.Tensor) int64 {
	return int64(localCount(t.LocalShape())) * int64(t.DType.Size())
}
