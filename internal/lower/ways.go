package lower

import (
	"slices"

	"github.com/nvcomm/nvcomm/internal/ir"
	"github.com/nvcomm/nvcomm/internal/reshard"
)

// This file is about the ways a computing op whose operands are not
// sharded as its output is may be computed. nvFuser takes one way per
// kind of op: an op of several operands has them resharded as its output
// needs before it computes (a set before), an op of one operand computes
// in its operand's sharding and its result is resharded (a set after). A
// contraction whose operands split its summed axis may also sum partial
// products (choose.go). Which way moves fewer bytes depends on the sizes:
// add(x, w) of two row-split tensors into a column-split one moves half
// as much after as before (one tensor, not two), a broadcast far less
// before than after, a matmul whose output is smaller than its operand
// less after.
//
// Two things follow. The optimal policy takes the way that is better
// under its objective, each priced by lowering its sets on a trial ledger
// (chooseWay). And a plan's lower bound must hold whichever way a plan
// takes, so for an op that more than one way computes, both policies book
// only what every way must receive (reshard.Least of the ways' bounds),
// in place of the op's own and its inserted sets' (boundWays).

// way is one way of computing a computing op.
type way uint8

// The ways.
const (
	// wayBefore reshards the operands as the output needs, then computes.
	wayBefore way = iota
	// wayAfter computes in the splits the operands hold, into a copy, and
	// reshards the copy to the output.
	wayAfter
	// waySum multiplies the slices of a contraction's summed axis that
	// its operands hold and sums the partial products.
	waySum
	numWays
)

// ways are the ways of computing an op as the fusion gives it.
type ways struct {
	op      *ir.Op  // as the fusion gives it: its operands, its output
	want    []Split // the output's block splits
	at      []Split // wayAfter's: the splits the operands compute in
	atMesh  *ir.Mesh
	sumType ir.ParallelType // waySum's
	has     [numWays]bool
	// reshards says, per operand, whether wayBefore reshards it.
	reshards []bool
	// splitSum marks an op whose output splits its summed axis: wayBefore
	// gathers that axis on its operands (chooseGather).
	splitSum bool
}

// count is the number of ways.
func (w *ways) count() int {
	n := 0
	for _, h := range w.has {
		if h {
			n++
		}
	}
	return n
}

// waysOf returns the ways of computing op, as the fusion gives it, when
// it must move data: nil for a set or a reduction, an op whose output
// holds pending terms, and an op whose operands fit its output. A
// contraction whose output splits its summed axis has two: the sum its
// output says, and its operands resharded to hold that axis whole
// (chooseGather).
func waysOf(op *ir.Op, b bcastAxes) *ways {
	y := op.Out
	if op.Kind == ir.OpSet || op.Kind.IsReduction() || y.Combined != nil || y.Partial != "" {
		return nil
	}
	want, ok := BlockShards(y)
	if !ok {
		return nil
	}
	w := &ways{op: op, want: want}
	w.reshards = make([]bool, len(op.Inputs))
	for i := range op.Inputs {
		if _, fits := b.fits(op, i, OperandShards(op, i, want)); !fits {
			w.has[wayBefore], w.reshards[i] = true, true
		}
	}
	if !w.has[wayBefore] {
		return nil
	}
	if t, split := ContractedDevice(y); split {
		// The output splits the summed axis: its partial products are
		// summed, or the operands resharded to hold the axis whole
		// (where privateOperands allows), when propagation chose
		// that sharding (chooseGather).
		if !op.Kind.IsContraction() || !y.Propagated {
			return nil
		}
		w.has[waySum], w.sumType, w.splitSum = true, t, true
		return w
	}
	if t, ok := sumWay(op, want, b); ok {
		w.has[waySum], w.sumType = true, t
	}
	if at, mesh, ok := computeSplits(op, b); ok && !(mesh.Equal(y.Mesh) && SameSplits(at, want)) {
		w.has[wayAfter], w.at, w.atMesh = true, at, mesh
	}
	return w
}

// sumWay returns the device type that splits the summed axis of op's
// factors, when op may sum partial products over it: the devices divide
// the axis evenly, and the factors are read as they are.
func sumWay(op *ir.Op, want []Split, b bcastAxes) (ir.ParallelType, bool) {
	if !op.Kind.IsContraction() {
		return 0, false
	}
	t, ok := commonKSplit(op)
	if !ok {
		return 0, false
	}
	if i, a := op.ReducedOperand(); op.Inputs[i].Shape()[a]%op.Out.Mesh.Size(t) != 0 {
		return 0, false // a lookup's summed axis is its table's rows
	}
	withSum := append(want[:len(want):len(want)], Split{-1, t})
	for i := range 2 {
		if _, fits := b.fits(op, i, OperandShards(op, i, withSum)); !fits {
			return 0, false
		}
	}
	return t, true
}

// computeSplits returns the splits of op's output that its operands'
// splits map to (ops.Rule.ResultSplit) and their mesh, when every operand
// is on that mesh and fits them as it is: where op computes without
// moving an operand.
func computeSplits(op *ir.Op, b bcastAxes) ([]Split, *ir.Mesh, bool) {
	mesh := op.In().Mesh
	var at []Split
	for i, x := range op.Inputs {
		have, ok := BlockShards(x)
		if !ok || !x.Mesh.Equal(mesh) {
			return nil, nil, false
		}
		for _, s := range have {
			if j := op.Rule().ResultSplit(i, s.Axis, mesh.Size(s.Type)); j >= 0 && !slices.Contains(at, Split{j, s.Type}) {
				at = append(at, Split{j, s.Type})
			}
		}
	}
	mid, err := blockTensorOf(op.Out.Name+"/at", mesh, op.Out.DType, op.Out.Shape(), at)
	if err != nil {
		return nil, nil, false
	}
	there := *op
	there.Out = mid
	for i := range op.Inputs {
		if _, fits := b.fits(&there, i, OperandShards(&there, i, at)); !fits {
			return nil, nil, false
		}
	}
	return at, mesh, true
}

// blockTensorOf builds a tensor split in blocks as need says.
func blockTensorOf(name string, mesh *ir.Mesh, dtype ir.DType, shape []int, need []Split) (*ir.Tensor, error) {
	return ir.NewTensor(ir.TensorSpec{Name: name, Mesh: mesh, DType: dtype, Shape: shape, Schedule: BlockSchedule(mesh, need)})
}

// trials lowers ways on ledgers kept for trials: one per planner, as a
// ledger's kept searches are its planner's.
type trials struct {
	f       *ir.Fusion
	ledgers map[*reshard.Planner]*reshard.Ledger
	// bounds is the optimal policy's planner, which books every bound,
	// made when the bound pass first needs it (boundsPlanner): making one
	// parses the built-in topology, and a lowering without ops computed
	// more than one way, or one that skips the bounds, needs none.
	bounds *reshard.Planner
	// chosen, gathers and least keep chooseWay's, chooseGather's and
	// leastOfWays's answers by the op's key (waysKey): a long chain has few distinct ops, and each is
	// tried once. key is scratch.
	chosen  map[string]chosenWay
	gathers map[string]bool
	least   map[string]leastBound
	// chainTaken and chainLeast keep chainCheaper's and boundChains's
	// answers by a chain's key (hierChain.key).
	chainTaken map[string]bool
	chainLeast map[string]leastBound
	key        []byte
	// private answers privateOperands, for the fusion it last counted
	// (countReaders).
	private privacy
}

// chosenWay is chooseWay's answer.
type chosenWay struct {
	v  way
	at []Split
}

// leastBound is leastOfWays's answer.
type leastBound struct {
	b  reshard.Bounds
	ok bool
}

// waysKey appends to b what the ways of op and their trials depend on:
// its kind and attributes, and per tensor its alike key (everything but
// its name and positions), the earlier slot it repeats, and its broadcast
// axes.
func waysKey(b []byte, op *ir.Op, bc bcastAxes) []byte {
	b = ir.AppendKeyString(b, string(op.Kind))
	b = ir.AppendKeyInts(b, []int{op.Axis})
	b = ir.AppendKeyInts(b, op.Axes)
	b = ir.AppendKeyString(b, op.Attrs.Key())
	b = op.Out.AppendAlikeKey(b)
	for i, x := range op.Inputs {
		b = x.AppendAlikeKey(b)
		b = ir.AppendKeyInts(b, []int{slices.Index(op.Inputs[:i], x)})
		b = ir.AppendKeyLen(b, bc[x] == nil, len(bc[x]))
		for _, a := range bc[x] {
			b = ir.AppendKeyBool(b, a)
		}
	}
	return b
}

// memoKey is waysKey of op in the trials' scratch.
func (tr *trials) memoKey(op *ir.Op, bc bcastAxes) []byte {
	tr.key = waysKey(tr.key[:0], op, bc)
	return tr.key
}

// newTrials returns the trials of the ways of f's ops.
func newTrials(f *ir.Fusion) *trials {
	return &trials{f: f, ledgers: map[*reshard.Planner]*reshard.Ledger{},
		chosen: map[string]chosenWay{}, gathers: map[string]bool{}, least: map[string]leastBound{},
		chainTaken: map[string]bool{}, chainLeast: map[string]leastBound{}}
}

// boundsPlanner returns the planner that books every bound.
func (tr *trials) boundsPlanner() *reshard.Planner {
	if tr.bounds == nil {
		tr.bounds, _ = reshard.NewPlanner(reshard.PolicyOptimal, reshard.ObjectiveBytes, nil, reshard.Debug{})
	}
	return tr.bounds
}

// run lowers way v of w with planner pl (b: the fusion's broadcast axes) on a trial ledger and returns its
// bound and cost; false when it cannot be lowered or priced.
func (tr *trials) run(w *ways, v way, pl *reshard.Planner, b bcastAxes) (reshard.Bounds, reshard.Cost, bool) {
	led := tr.ledgers[pl]
	if led == nil {
		led = reshard.NewLedger(tr.f.File)
		tr.ledgers[pl] = led
	}
	op, y := w.op, w.op.Out
	var priced func(elem int64)
	set := func(x *ir.Tensor, name string, mesh *ir.Mesh, need []Split, to *ir.Tensor) {
		if to == nil {
			r, err := blockTensorOf(name, mesh, x.DType, x.Shape(), need)
			if err != nil {
				led.Errs().Add(op.Pos, "%v", err)
				return
			}
			to = r
		}
		pl.Job(led, tr.f, &ir.Op{Index: op.Index, Kind: ir.OpSet, Inputs: []*ir.Tensor{x}, Out: to, Axis: -1, Pos: op.Pos}).Lower()
		priced(int64(x.DType.Size()))
	}
	operandSets := func(want []Split) {
		var done []resharded // one set per operand and target, as reshardOperands makes them
		for i, x := range op.Inputs {
			need := OperandShards(op, i, want)
			made := slices.ContainsFunc(done, func(r resharded) bool { return r.from == x && SameSplits(r.target, need) })
			if _, fits := b.fits(op, i, need); fits || made {
				continue
			}
			done = append(done, resharded{from: x, target: need})
			set(x, x.Name+"/resharded", y.Mesh, need, nil)
		}
	}
	return led.Trial(pl, func(p func(elem int64)) {
		priced = p
		switch v {
		case wayBefore:
			operandSets(w.want)
		case wayAfter:
			mid, err := blockTensorOf(y.Name+"/at", w.atMesh, y.DType, y.Shape(), w.at)
			if err != nil {
				led.Errs().Add(op.Pos, "%v", err)
				return
			}
			set(mid, "", nil, nil, y)
		case waySum:
			operandSets(append(w.want[:len(w.want):len(w.want)], Split{-1, w.sumType}))
			p, err := partialProducts(y.Name+"/partial", y, w.sumType)
			if err != nil {
				led.Errs().Add(op.Pos, "%v", err)
				return
			}
			sum := &ir.Op{Index: op.Index, Kind: ir.OpSum, Inputs: []*ir.Tensor{p}, Out: y, Axis: 0, Pos: op.Pos}
			pl.Job(led, tr.f, op).Reshard(sum, partialAxes(op, len(y.Shape())))
			priced(int64(y.DType.Size()))
		}
	})
}

// chooseWay returns the way op is computed by when its operands do not
// fit its output, with wayAfter the splits it computes in: the optimal
// policy's, the better of before and after under its objective (lowered
// on a trial ledger and priced); nvFuser's — after for an op of one
// operand (with nil splits: its operand's, mapped), before for others —
// under nvFuser's policy, on a tie, for a contraction (after is not
// lowered for one yet), and where a way cannot be priced.
func (ins *inserter) chooseWay(op *ir.Op, want []Split) (way, []Split) {
	nv := wayBefore
	if len(op.Inputs) == 1 {
		nv = wayAfter
	}
	// A contraction's output holds its summed axis as a reduction axis,
	// which a set after it would have to drop: not lowered yet.
	if _, summed := ins.sumTypes[op]; summed || ins.planner.Policy() != PolicyOptimal || op.Kind.IsContraction() {
		return nv, nil
	}
	tr := ins.trials
	key := tr.memoKey(op, ins.bcast)
	c, ok := tr.chosen[string(key)]
	if !ok {
		c = ins.priceWays(op, nv)
		tr.chosen[string(key)] = c
	}
	return c.v, c.at
}

// priceWays is chooseWay's answer for op, found by trials; nv is
// nvFuser's way.
func (ins *inserter) priceWays(op *ir.Op, nv way) chosenWay {
	w := waysOf(op, ins.bcast)
	if w == nil || !w.has[wayAfter] || !sameShapes(op) {
		return chosenWay{v: nv}
	}
	_, before, ok := ins.trials.run(w, wayBefore, ins.planner, ins.bcast)
	_, after, ok2 := ins.trials.run(w, wayAfter, ins.planner, ins.bcast)
	switch {
	case !ok || !ok2:
		return chosenWay{v: nv}
	case ins.planner.Less(after, before):
		return chosenWay{wayAfter, w.at}
	case ins.planner.Less(before, after):
		return chosenWay{v: wayBefore}
	}
	return chosenWay{v: nv}
}

// MayComputeAfter reports whether the optimal policy weighs computing op,
// an op of several operands whose tensors have no broadcast axes, where
// its operands are and resharding its result after, against resharding
// its operands before: its lowering then depends on both ways' prices, and
// internal/auto lowers it whole rather than by parts.
func MayComputeAfter(op *ir.Op) bool {
	if op.Kind.IsContraction() {
		return false // chooseWay computes a contraction before
	}
	w := waysOf(op, nil)
	return w != nil && w.has[wayAfter]
}

// boundWays is the pass that books, for each op that more than one way
// computes, what every way must receive: it finds the op as the fusion
// gave it (its operands before the sets inserted to reshard them, its
// output after the set inserted to reshard its result), lowers each of
// its ways on a trial ledger, and keeps the least of their bounds for
// lowerOp, which books it in place of the op's and those sets' own. The
// sets are found by what they read and write, so that Certify, which
// lowers a plan's fusion with its inserted sets, finds the same.
func (l *lowerer) boundWays() {
	l.trials.countReaders(l.f)        // the fusion as lowered: its operands are copies now
	before := map[*ir.Tensor]*ir.Op{} // by its output, a set inserted to reshard an operand
	after := map[*ir.Tensor]*ir.Op{}  // by its input, a set inserted to reshard a result
	for _, op := range l.f.Ops {
		if why := op.Inserted; op.Kind == ir.OpSet && why != nil && op.In().Partial == "" {
			if why.Output {
				after[op.In()] = op
			} else {
				before[op.Out] = op
			}
		}
	}
	for _, op := range l.f.Ops {
		if l.failed[op] || op.Kind == ir.OpSet || op.Kind.IsReduction() {
			continue
		}
		given := *op
		given.Inputs = slices.Clone(op.Inputs)
		var sets []*ir.Op
		for i, x := range op.Inputs {
			if set := before[x]; set != nil && set.Inserted.For.Index == op.Index {
				given.Inputs[i] = set.In()
				sets = append(sets, set)
			}
		}
		if set := after[op.Out]; set != nil {
			given.Out = set.Out
			sets = append(sets, set)
		}
		if b, ok := l.leastOfWays(&given); ok {
			l.opBounds[op] = b
			for _, set := range sets {
				l.discard[set] = true
			}
		}
	}
	l.boundCopies()
	l.boundChains()
}

// leastOfWays returns what every way of computing op, as the fusion gives
// it, must receive, when more than one way computes it and each can be
// lowered.
func (l *lowerer) leastOfWays(op *ir.Op) (reshard.Bounds, bool) {
	key := l.trials.memoKey(op, l.bcast)
	r, ok := l.trials.least[string(key)]
	if !ok {
		r.b, r.ok = l.tryWays(op)
		l.trials.least[string(key)] = r
	}
	return r.b, r.ok
}

// tryWays is leastOfWays's answer for op, found by trials.
func (l *lowerer) tryWays(op *ir.Op) (reshard.Bounds, bool) {
	w := waysOf(op, l.bcast)
	if w == nil || w.count() < 2 || w.splitSum && !l.trials.privateOperands(w) {
		return reshard.Bounds{}, false
	}
	var least reshard.Bounds
	first := true
	for v, has := range w.has {
		if !has {
			continue
		}
		b, _, ok := l.trials.run(w, way(v), l.trials.boundsPlanner(), l.bcast)
		if !ok {
			return reshard.Bounds{}, false
		}
		if first {
			least, first = b, false
		} else {
			least = reshard.Least(least, b)
		}
	}
	return least, true
}

// sameShapes reports whether op's operands all have its output's shape,
// or it has one operand: the ops chooseWay computes after. An operand
// broadcast against the output (an extent-1 axis) is read by local steps
// that the lowering of an op computed after does not make yet (the soak
// found such an op rejected).
func sameShapes(op *ir.Op) bool {
	if len(op.Inputs) == 1 {
		return true
	}
	for _, x := range op.Inputs {
		if !slices.Equal(x.Shape(), op.Out.Shape()) {
			return false
		}
	}
	return true
}
