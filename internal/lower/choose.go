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
	if ins.planner.Policy() != PolicyOptimal || !op.Kind.IsContraction() {
		return 0, false
	}
	t, ok := commonKSplit(op)
	if !ok {
		return 0, false
	}
	withSum := append(want[:len(want):len(want)], Split{-1, t})
	pl := ins.planner
	gather, ok := reshard.Cost{}, true
	for i, x := range op.Inputs[:2] {
		if _, fits := ins.bcast.fits(op, i, OperandShards(op, i, withSum)); !fits {
			return 0, false // the operands would move either way: keep nvFuser's plan
		}
		if op.ContractedAxis(i) < 0 {
			continue // a lookup's ids: the rows of a split table are summed, not gathered
		}
		g, priced := gatherCost(pl, x, t)
		var fits bool
		gather, fits = pl.Add(gather, g)
		ok = ok && priced && fits
	}
	sum, fits := sumCost(pl, op.Out, t, want)
	return t, ok && fits && pl.Less(sum, gather)
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

// The fusion's lower bound must hold for every plan, whichever way it
// computes such a contraction, but lowering books the bound of the way it
// takes: the gathers' (nvFuser's sets), or the sum's. So the ledger books,
// for each contraction that either way computes, only what both must
// receive (reshard.Least), under both policies alike: the gathers' bound
// and the sum's, each found by lowering that way on a trial ledger.

// kChoice is a contraction that either way computes: its operands as the
// fusion gives them (before any set inserted to gather them), the device
// type that splits their summed axis, and its output's block splits.
type kChoice struct {
	op      *ir.Op // the op as the fusion gives it: reads its operands
	lowered *ir.Op // the op as lowered: may read gathered copies
	t       ir.ParallelType
	want    []Split
}

// boundChoices is the pass that finds the contractions either way
// computes, and the sets inserted to gather their operands, whose bounds
// the op's then stand for (lowerOp).
func (l *lowerer) boundChoices() {
	gathering := map[*ir.Tensor]*ir.Op{} // by its output, a set inserted to reshard an operand
	for _, op := range l.f.Ops {
		if ch, ok := l.choiceOf(op, gathering); ok {
			if l.choices == nil {
				l.choices, l.gathers, l.setBounds = map[*ir.Op]*kChoice{}, map[*ir.Op]bool{}, map[*ir.Tensor]reshard.Bounds{}
			}
			l.choices[op] = ch
			for _, x := range op.Inputs[:2] {
				if set := gathering[x]; set != nil {
					l.gathers[set] = true
				}
			}
		}
		// Not a set inserted to reduce a Partial tensor's terms, which
		// every way needs.
		if op.Kind == ir.OpSet && op.Inserted != nil && !op.Inserted.Output && op.In().Partial == "" {
			gathering[op.Out] = op
		}
	}
}

// choiceOf returns op's choice, if either way computes it: a contraction
// whose output neither splits its summed axis nor holds pending terms,
// whose operands as the fusion gives them (read through the gathering
// sets inserted before it) are split along that axis by
// one device type that divides it evenly, and read as they are by the sum
// of partial products.
func (l *lowerer) choiceOf(op *ir.Op, gathering map[*ir.Tensor]*ir.Op) (*kChoice, bool) {
	if !op.Kind.IsContraction() || l.failed[op] || op.Out.Combined != nil {
		return nil, false
	}
	if _, split := ContractedDevice(op.Out); split {
		return nil, false
	}
	given := *op
	given.Inputs = slices.Clone(op.Inputs)
	for i, x := range given.Inputs[:2] {
		if set := gathering[x]; set != nil {
			given.Inputs[i] = set.In()
		}
	}
	t, ok := commonKSplit(&given)
	want, block := BlockShards(op.Out)
	if !ok || !block {
		return nil, false
	}
	if i, a := given.ReducedOperand(); given.Inputs[i].Shape()[a]%op.Out.Mesh.Size(t) != 0 {
		return nil, false // a lookup's is its table's
	}
	withSum := append(want[:len(want):len(want)], Split{-1, t})
	for i := range 2 {
		if _, fits := l.bcast.fits(&given, i, OperandShards(&given, i, withSum)); !fits {
			return nil, false
		}
	}
	return &kChoice{op: &given, lowered: op, t: t, want: want}, true
}

// bookChoice books the bound of ch, whose op lower computes by running:
// the least of the gathers' bound and the sum's, or, when a trial of
// either fails, the bound of the way taken (with its gathering sets').
func (l *lowerer) bookChoice(ch *kChoice, lower func()) {
	taken := l.ledger.CaptureBounds(lower)
	for x, b := range l.gatherBounds(ch) {
		taken = taken.Add(b)
		delete(l.setBounds, x)
	}
	gather, gok := l.trialGathers(ch)
	sum, sok := l.trialSum(ch)
	if gok && sok {
		taken = reshard.Least(gather, sum)
	}
	l.ledger.Book(taken)
}

// gatherBounds are the bounds of the sets that gathered ch's operands
// (lowerOp), by the copies they wrote.
func (l *lowerer) gatherBounds(ch *kChoice) map[*ir.Tensor]reshard.Bounds {
	out := map[*ir.Tensor]reshard.Bounds{}
	for _, x := range ch.lowered.Inputs[:2] {
		if b, ok := l.setBounds[x]; ok {
			out[x] = b
		}
	}
	return out
}

// trial returns the ledger and planner the bound of a way not taken is
// found with: the optimal policy's, whose lowering of a set or a sum
// always books its bound (nvFuser's refuses some), with the objective of
// bytes; bounds depend on neither.
func (l *lowerer) trial() (*reshard.Ledger, *reshard.Planner) {
	if l.trialLedger == nil {
		l.trialLedger = reshard.NewLedger(l.f.File)
		l.trialPlanner, _ = reshard.NewPlanner(reshard.PolicyOptimal, reshard.ObjectiveBytes, nil, reshard.Debug{})
	}
	return l.trialLedger, l.trialPlanner
}

// trialGathers is the bound of gathering ch's operands along the summed
// axis: a set of each that is not split as the output needs into a copy
// that is.
func (l *lowerer) trialGathers(ch *kChoice) (reshard.Bounds, bool) {
	led, pl := l.trial()
	op := ch.op
	return led.Trial(func() {
		var done []*ir.Tensor
		for i, x := range op.Inputs[:2] {
			need := OperandShards(op, i, ch.want)
			if _, fits := l.bcast.fits(op, i, need); fits || slices.Contains(done, x) {
				continue
			}
			done = append(done, x)
			r, err := ir.NewTensor(ir.TensorSpec{Name: x.Name + "/gathered", Mesh: op.Out.Mesh, DType: x.DType, Shape: x.Shape(), Schedule: BlockSchedule(op.Out.Mesh, need)})
			if err != nil {
				led.Errs().Add(op.Pos, "%v", err)
				return
			}
			set := &ir.Op{Index: op.Index, Kind: ir.OpSet, Inputs: []*ir.Tensor{x}, Out: r, Axis: -1, Pos: op.Pos}
			pl.Job(led, l.f, set).Lower()
		}
	})
}

// trialSum is the bound of summing ch's partial products over the devices
// along its summed axis's device type.
func (l *lowerer) trialSum(ch *kChoice) (reshard.Bounds, bool) {
	led, pl := l.trial()
	op, y := ch.op, ch.op.Out
	return led.Trial(func() {
		p, err := partialProducts(y.Name+"/partial", y, ch.t)
		if err != nil {
			led.Errs().Add(op.Pos, "%v", err)
			return
		}
		sum := &ir.Op{Index: op.Index, Kind: ir.OpSum, Inputs: []*ir.Tensor{p}, Out: y, Axis: 0, Pos: op.Pos}
		pl.Job(led, l.f, op).Reshard(sum, partialAxes(op, len(y.Shape())))
	})
}
