package lower

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/nvcomm/nvcomm/internal/diag"
	"github.com/nvcomm/nvcomm/internal/ir"
	"github.com/nvcomm/nvcomm/internal/ops"
	"github.com/nvcomm/nvcomm/internal/reshard"
	"github.com/nvcomm/nvcomm/internal/shard"
)

// This file is the pass that makes every computing op (elementwise,
// broadcast, matmul, linear) local: as nvFuser's InsertReshardings and
// DecomposeReshardings do, an operand sharded otherwise than the op's
// output requires is first copied by a set into a tensor that is, so the op
// itself moves no data (apart from the sum of a device-split contraction).
// One set serves every operand slot that reads the same tensor (nvFuser
// collects the distinct inputs to reshard in a set). A broadcast axis asks
// for no set (broadcast.go). A single-operand op is computed in its
// operand's sharding instead and its result resharded by a set after it
// (nvFuser's rule for unary ops).

// Split is one device split of a tensor's value axis: the axis, cut in
// blocks over the mesh axis of type T; axis -1 is a contraction's summed
// axis. The layer rules below (BlockShards, OperandShards, BlockSchedule)
// are also what lower --auto prices an op's parts by (internal/auto).
type Split struct {
	Axis int
	Type ir.ParallelType
}

// insertReshardings returns f with a set inserted before (or, for a
// single-operand op, after) every computing op whose operands are not
// sharded as its output requires. Sets and reductions are left as they
// are: lowering them is what the resharding planner does.
//
// Under the optimal policy a contraction whose operands are split along its
// summed axis may instead keep them so and sum its partial products
// (rFactor), when that moves fewer bytes (choose.go); sumTypes records the
// device type of every op so decided.
func insertReshardings(f *ir.Fusion, l *lowerer) (*ir.Fusion, *inserter) {
	out := *f
	// Room for every op and tensor of f, which most fusions keep as they
	// are: grown one op at a time, 100k ops' lists were copied into fresh
	// memory some twenty times.
	out.Ops, out.Tensors = nil, slices.Clone(f.Inputs)
	if len(f.Ops) > 0 {
		out.Ops = make([]*ir.Op, 0, len(f.Ops))
		out.Tensors = append(make([]*ir.Tensor, 0, max(len(f.Tensors), len(f.Inputs))), f.Inputs...)
	}
	ins := &inserter{source: f, fusion: &out, errs: l.ledger.Errs(), planner: l.planner, trials: l.trials, sumTypes: map[*ir.Op]ir.ParallelType{}, gathered: map[*ir.Op]bool{}, failed: map[*ir.Op]bool{}, bcast: bcastAxes{}, owned: l.owned, deferred: map[*ir.Tensor]*ir.Op{}, copies: map[*ir.Tensor][]resharded{}}
	l.trials.countReaders(f)
	for _, op := range f.Ops {
		if op = ins.unalias(op); ins.savedCopy(op) {
			continue // its readers read the forward's copy
		}
		if reducesTermsFor(op) {
			ins.deferred[op.Out] = op // added with the op it serves
			continue
		}
		if op.Out.Combined != nil && op.Kind.IsReduction() {
			ins.reshardForTerms(ins.own(op))
			continue
		}
		if op.Kind == ir.OpSet || op.Kind.IsReduction() {
			if ins.hierarchical(op) {
				continue
			}
			// The planner lowers the op from what it reads.
			op = ins.afterCopy(op)
			whys := ins.reduceTerms(op, nil, false)
			readFor(ins.add(op), whys)
			continue
		}
		ins.computing(ins.own(op))
	}
	return &out, ins
}

// own is op to change: op itself when the lowerer owns the caller's
// fusion, else a copy (with its own operand list), so that f stays as the
// caller gave it.
func (ins *inserter) own(op *ir.Op) *ir.Op {
	if ins.owned {
		return op
	}
	cp := *op
	cp.Inputs = slices.Clone(op.Inputs)
	if op.Kind.PassesSums() && op.Out.Partial != "" {
		// A sum of its terms may be inserted after it (afterCopy).
		if ins.copied == nil {
			ins.copied = map[*ir.Op]*ir.Op{}
		}
		ins.copied[op] = &cp
	}
	return &cp
}

// afterCopy is op, a reduction that the parser inserted after an op of
// the caller's fusion (the sum of the terms an op that passes sums left,
// ir's late sums), marked inserted after that op's copy.
func (ins *inserter) afterCopy(op *ir.Op) *ir.Op {
	why := op.Inserted
	if why == nil || !why.Output {
		return op
	}
	cp, ok := ins.copied[why.For]
	if !ok {
		return op
	}
	red := *op
	red.Inserted = &ir.Insertion{For: cp, Output: true}
	return &red
}

// inserter accumulates the ops and tensors of the rewritten fusion.
type inserter struct {
	source *ir.Fusion // the caller's
	fusion *ir.Fusion
	// names counts the tensor names taken, once a tensor is inserted
	// (a fusion of sets inserts none).
	names map[string]int
	errs  *diag.List
	// planner prices the optimal policy's choices (choose.go, ways.go),
	// trials lowers the ways it prices.
	planner *reshard.Planner
	trials  *trials
	// sumTypes is, per contraction that sums partial products although its
	// output does not split its summed axis, the device type they are
	// summed over.
	sumTypes map[*ir.Op]ir.ParallelType
	// gathered are the contractions whose output splits the summed axis
	// but whose operands the optimal policy gathers whole along it.
	gathered map[*ir.Op]bool
	// failed are the ops whose errors the pass reported.
	failed map[*ir.Op]bool
	// bcast are the broadcast axes of the rewritten fusion's tensors.
	bcast bcastAxes
	// owned is lowerer.owned: the caller's ops may be changed in place.
	owned bool
	// deferred are the reductions of Partial tensors that the parser
	// inserted before the ops reading them, by their output: each is
	// added when its op is, to the sharding that op needs.
	deferred map[*ir.Tensor]*ir.Op
	// built are the tensors newTensor built, by their spec's key
	// (appendSpecKey; key is scratch): the sets inserted into a long
	// chain make a few specs, and each tensor alike one built before is
	// that one renamed (build).
	built map[string]*ir.Tensor
	key   []byte
	// copies are, under the optimal policy, the sets inserted so far by
	// what they read: an op that needs a tensor resharded as an earlier op
	// did reads that copy rather than moving the tensor again (Megatron's
	// sequence parallelism gathers a norm's output once for the three
	// projections that read it).
	copies map[*ir.Tensor][]resharded
	// copied are the copies own made of the ops that pass sums on pending
	// terms, by the caller's op: a sum inserted after one (afterCopy)
	// names the copy.
	copied map[*ir.Op]*ir.Op
	// alias are the saved copies of the backward left out, each by the
	// copy of the forward that its readers read instead, and reads the
	// number of slots of the caller's fusion that read each tensor
	// (saved.go).
	alias map[*ir.Tensor]*ir.Tensor
	reads map[*ir.Tensor]int
	// chains are the chains of two sums begun (hierarchy.go), by the
	// caller's output of their first op, which the second reads, and
	// chainList the same in the fusion's order; readers are the ops of
	// the caller's fusion that read each tensor (nil for a fusion
	// output), built when first needed.
	chains    map[*ir.Tensor]*hierChain
	chainList []*hierChain
	readers   map[*ir.Tensor][]*ir.Op
}

// build is ir.NewTensor(spec), or, when a tensor of the same spec but its
// name was built before, that tensor renamed (ir.Tensor.Renamed): the
// same tensor, in a fraction of the time and memory, sharing its domains
// as ShareAlike would. A spec NewTensor rejects is built again each time,
// so that each error names its tensor.
func (ins *inserter) build(spec ir.TensorSpec) (*ir.Tensor, error) {
	ins.key = appendSpecKey(ins.key[:0], spec)
	if first, ok := ins.built[string(ins.key)]; ok {
		return first.Renamed(spec.Name), nil
	}
	t, err := ir.NewTensor(spec)
	if err == nil {
		if ins.built == nil {
			ins.built = map[string]*ir.Tensor{}
		}
		ins.built[string(ins.key)] = t
	}
	return t, err
}

// addFailed appends op, whose errors are reported, and marks it so that
// the lowering skips it rather than report it again.
func (ins *inserter) addFailed(op *ir.Op) {
	ins.add(op)
	ins.failed[op] = true
}

// add appends op (and its output) with the next index, and returns it. A
// set or reduction of the caller's fusion whose index changes is copied
// first, unless the lowerer owns it (its operands stay: a copy need not
// own them); a computing op is the inserter's already (own).
func (ins *inserter) add(op *ir.Op) *ir.Op {
	if op.Index != len(ins.fusion.Ops) {
		if (op.Kind == ir.OpSet || op.Kind.IsReduction()) && !ins.owned {
			cp := *op
			op = &cp
		}
		op.Index = len(ins.fusion.Ops)
	}
	ins.fusion.Ops = append(ins.fusion.Ops, op)
	ins.fusion.Tensors = append(ins.fusion.Tensors, op.Out)
	ins.bcast.record(op)
	return op
}

// computing inserts the sets a computing op needs, then the op.
func (ins *inserter) computing(op *ir.Op) {
	want, ok := ins.outputShards(op)
	defer readFor(op, ins.reduceTerms(op, want, ok))
	if !ok {
		ins.addFailed(op)
		return
	}
	if op.Kind.Entry().Family == ops.View {
		ins.view(op, want)
		return
	}
	switch v, at := ins.chooseWay(op, want); {
	case v == wayAfter && at != nil:
		ins.computeIn(op, at)
		return
	case v == wayAfter:
		if _, block := BlockShards(op.In()); block {
			ins.reshardAfter(op, want)
			return
		}
	}
	if ins.reshardOperands(op, want) {
		ins.add(op)
	}
}

// reshardOperands inserts a set before op of each of its operands that is
// not sharded as op's output, split as want, requires (one per distinct
// operand and target), and points op's slots at the copies. It reports
// whether it could; when not, op is added as failed.
func (ins *inserter) reshardOperands(op *ir.Op, want []Split) bool {
	var sets []resharded
	for i, x := range op.Inputs {
		need := OperandShards(op, i, want)
		if _, ok := ins.bcast.fits(op, i, need); ok {
			continue
		}
		target := need // the optimal policy's search finds the best way to all of it
		if ins.planner.Policy() == PolicyNvFuser {
			target = ins.bcast.setTarget(op, i, need)
		}
		if k := slices.IndexFunc(sets, func(r resharded) bool { return r.from == x && SameSplits(r.target, target) }); k >= 0 {
			op.Inputs[i] = sets[k].to // the slot reads a tensor already resharded so
			sets[k].why.Operands = append(sets[k].why.Operands, i)
			continue
		}
		if r := ins.copyOf(x, op.Out.Mesh, target); r != nil {
			op.Inputs[i] = r // an earlier op's set made this copy
			continue
		}
		if ins.transposedCopy(op, i, target) {
			continue // the permute that made x permutes the copy of its operand
		}
		r, ok := ins.newTensor(op, x.Name+"/resharded", op.Out.Mesh, x.DType, x.Shape(), target)
		if !ok {
			ins.addFailed(op)
			return false
		}
		why := &ir.Insertion{For: op, Operands: []int{i}}
		ins.add(&ir.Op{Kind: ir.OpSet, Inputs: []*ir.Tensor{x}, Out: r, Axis: -1, Pos: op.Pos, Inserted: why})
		op.Inputs[i] = r
		sets = append(sets, resharded{x, target, r, why})
		if ins.planner.Policy() == PolicyOptimal {
			ins.copies[x] = append(ins.copies[x], sets[len(sets)-1])
		}
	}
	return true
}

// copyOf returns the copy of x an earlier set made on mesh with splits
// target, if one did.
func (ins *inserter) copyOf(x *ir.Tensor, mesh *ir.Mesh, target []Split) *ir.Tensor {
	for _, r := range ins.copies[x] {
		if r.to.Mesh.Equal(mesh) && SameSplits(r.target, target) {
			return r.to
		}
	}
	return nil
}

// resharded is one resharding set of an op: the tensor it reads, the
// splits it gives the copy, the copy, and the set's provenance (which
// slots of the op read the copy).
type resharded struct {
	from   *ir.Tensor
	target []Split
	to     *ir.Tensor
	why    *ir.Insertion
}

// SameSplits reports whether a and b hold the same splits, in any order.
func SameSplits(a, b []Split) bool {
	if len(a) != len(b) {
		return false
	}
	for _, s := range a {
		if !slices.Contains(b, s) {
			return false
		}
	}
	return true
}

// reshardAfter computes a single-operand op in its operand's sharding,
// into a new tensor, and inserts the set from it to the op's output.
func (ins *inserter) reshardAfter(op *ir.Op, want []Split) {
	if _, ok := ins.bcast.fits(op, 0, OperandShards(op, 0, want)); ok {
		ins.add(op)
		return
	}
	ins.computeIn(op, mappedSplits(op))
}

// computeIn adds single-operand op computing its output with splits
// mapped into a new tensor, with the set from it to the output after.
func (ins *inserter) computeIn(op *ir.Op, mapped []Split) {
	x, y := op.In(), op.Out
	mid, ok := ins.newTensor(op, x.Name+"/"+string(op.Kind), x.Mesh, y.DType, y.Shape(), mapped)
	if !ok {
		ins.addFailed(op)
		return
	}
	op.Out = mid
	ins.add(op)
	ins.add(&ir.Op{Kind: ir.OpSet, Inputs: []*ir.Tensor{mid}, Out: y, Axis: -1, Pos: op.Pos, Inserted: &ir.Insertion{For: op, Output: true}})
}

// view inserts the sets a view op (permute, reshape, cast) needs, then
// the op. Each split of its operand must have a counterpart in its result
// (ops.Rule.ResultSplit): a split of a reshaped dim falls on its outer
// piece, which the devices divide. One that has none is an error under
// nvFuser's rules, in its words; under the optimal policy the operand is
// resharded first to the splits the output's map to (an Allgather, an
// AllToAll), as DTensor redistributes before a view it cannot shard. So
// is an operand on another mesh, or not split in even blocks, under both.
// The op then computes in the splits its operand's map to, and a set
// after it reshards that to the output when the output asks for others.
func (ins *inserter) view(op *ir.Op, want []Split) {
	if op.Kind.TakesAxis() {
		ins.alongAxis(op, want)
		return
	}
	x := op.In()
	have, block := BlockShards(x)
	reshard := !block || !x.Mesh.Equal(op.Out.Mesh)
	for _, s := range have {
		if reshard || op.Rule().ResultSplit(0, s.Axis, x.Mesh.Size(s.Type)) >= 0 {
			continue
		}
		if ins.planner.Policy() == PolicyNvFuser {
			ins.errs.AddHint(op.Pos, "shard the outer piece of the reshaped dim, by a device count that divides it, or reshard before the reshape",
				"op %q cannot be lowered under nvFuser's rules: %q splits dim %d along %s, which %s",
				op.Expr(), x.Name, s.Axis, s.Type, op.Rule().LostSplit(0, s.Axis, x.Mesh.Size(s.Type)))
			ins.addFailed(op)
			return
		}
		reshard = true
	}
	if v, _ := ins.chooseWay(op, want); v == wayBefore {
		reshard = true // the optimal policy's choice: a cast to a wider dtype moves less before
	}
	if reshard {
		r, ok := ins.newTensor(op, x.Name+"/resharded", op.Out.Mesh, x.DType, x.Shape(), OperandShards(op, 0, want))
		if !ok {
			ins.addFailed(op)
			return
		}
		ins.add(&ir.Op{Kind: ir.OpSet, Inputs: []*ir.Tensor{x}, Out: r, Axis: -1, Pos: op.Pos, Inserted: &ir.Insertion{For: op, Operands: []int{0}}})
		op.Inputs[0] = r
	}
	if mapped := mappedSplits(op); SameSplits(mapped, want) {
		ins.add(op)
	} else {
		ins.computeIn(op, mapped)
	}
}

// mappedSplits are the result's splits that op's operand's splits map to
// (ops.Rule.ResultSplit), leaving out those that map to none.
func mappedSplits(op *ir.Op) []Split {
	x := op.In()
	have, _ := BlockShards(x)
	var mapped []Split
	for _, s := range have {
		if j := op.Rule().ResultSplit(0, s.Axis, x.Mesh.Size(s.Type)); j >= 0 {
			mapped = append(mapped, Split{j, s.Type})
		}
	}
	return mapped
}

// outputShards returns the block splits of op's output, including (as a
// split of axis -1) the device type that splits a contraction's summed
// axis.
func (ins *inserter) outputShards(op *ir.Op) ([]Split, bool) {
	want, ok := BlockShards(op.Result())
	if !ok {
		ins.unsupported(op, op.Result())
		return nil, false
	}
	if t, ok := ContractedDevice(op.Result()); ok {
		if !ins.evenSum(op, t) || !ins.nvFuserSums(op) {
			return nil, false
		}
		if ins.chooseGather(op) {
			ins.gathered[op] = true
			return want, true
		}
		return append(want, Split{-1, t}), true
	}
	if t, ok := ins.chooseSum(op, want); ok {
		ins.sumTypes[op] = t
		want = append(want, Split{-1, t})
	}
	return want, true
}

// evenSum reports (after saying why not) whether the devices along t divide
// the contraction's summed axis k into equal slices, as the splits of its
// operands must be.
func (ins *inserter) evenSum(op *ir.Op, t ir.ParallelType) bool {
	i, a := op.ReducedOperand()
	k := op.Inputs[i].Shape()[a]
	if n := op.Out.Mesh.Size(t); k%n != 0 {
		ins.errs.AddHint(op.Pos, "choose a summed extent that the mesh axis divides, or leave k whole on the output",
			"op %q cannot be lowered: %q splits its summed axis k of extent %d over the %d devices along %s, which do not divide it, and layer ops take even splits only",
			op.Expr(), op.Out.Name, k, n, t)
		return false
	}
	return true
}

// OperandShards maps the output's splits onto operand i: each split of an
// output axis becomes a split of the axis of i that the op's sharding rule
// cuts alike (ops.Rule.OperandSplit: the axis of the same outermost
// factor), when i has one; a split of the summed
// axis becomes a split of i's contracted axis, and the output axis split by
// that same type (a ReduceScatter) is then not i's if i enters the product
// (the bias, added to the sum, is split as the output).
func OperandShards(op *ir.Op, i int, want []Split) []Split {
	var sumType ir.ParallelType
	for _, s := range want {
		if s.Axis < 0 {
			sumType = s.Type
		}
	}
	var need []Split
	for _, s := range want {
		switch {
		case s.Axis < 0:
			if k := op.ContractedAxis(i); k >= 0 {
				need = append(need, Split{k, s.Type})
			}
		case s.Type == sumType && factorOf(op, i):
			// Summed over the devices of this type: each holds all of
			// it. Not so linear's bias, which is added after the sum and
			// so is split as the output is.
		default:
			if a := op.Rule().OperandSplit(i, s.Axis, op.Out.Mesh.Size(s.Type)); a >= 0 {
				need = append(need, Split{a, s.Type})
			}
		}
	}
	return need
}

// newTensor builds an even, row-major tensor of the given value shape with
// block splits need, named uniquely from base.
func (ins *inserter) newTensor(op *ir.Op, base string, mesh *ir.Mesh, dtype ir.DType, shape []int, need []Split) (*ir.Tensor, bool) {
	name := ins.freeName(base)
	t, err := ins.build(ir.TensorSpec{Name: name, Mesh: mesh, DType: dtype, Shape: shape, Schedule: BlockSchedule(mesh, need)})
	if err != nil {
		ins.errs.Add(op.Pos, "op %q: cannot shard operand %s as its output requires: %v", op.Expr(), base, err)
		return nil, false
	}
	if t.IsUneven() {
		ins.errs.AddHint(op.Pos, "choose extents that the mesh divides",
			"op %q: %s would be split unevenly; layer ops need even shards", op.Expr(), name)
		return nil, false
	}
	t.Pos = op.Pos
	return t, true
}

// freeName returns base, or base.N where base is taken, and takes it.
func (ins *inserter) freeName(base string) string {
	if ins.names == nil {
		ins.names = make(map[string]int, len(ins.source.Tensors))
		for _, t := range ins.source.Tensors {
			ins.names[t.Name]++
		}
	}
	name := base
	if n := ins.names[base]; n > 0 {
		name = base + "." + strconv.Itoa(n)
	}
	ins.names[base]++
	return name
}

// BlockSchedule is the schedule that splits each axis of need in blocks
// over its type's mesh axis: DTensor's Shard, nvFuser's DID loop split.
// Axes are split from the last, so earlier positions do not move.
func BlockSchedule(mesh *ir.Mesh, need []Split) []ir.ScheduleStep {
	sorted := slices.Clone(need)
	slices.SortFunc(sorted, func(a, b Split) int { return b.Axis - a.Axis })
	var steps []ir.ScheduleStep
	for _, s := range sorted {
		steps = append(steps,
			ir.ScheduleStep{Kind: ir.StepOuterSplit, Axis: s.Axis, Factor: mesh.Size(s.Type)},
			ir.ScheduleStep{Kind: ir.StepParallelize, Axis: s.Axis, Type: s.Type})
	}
	return steps
}

// BlockShards returns t's splits when every one is an even block split of
// one value axis by one device type, the only kind layer ops take yet.
func BlockShards(t *ir.Tensor) ([]Split, bool) {
	if t.IsUneven() {
		return nil, false
	}
	var out []Split
	for _, s := range t.Shardings() {
		if s.Kind != ir.Block || len(s.Digits) != 1 {
			return nil, false
		}
		out = append(out, Split{s.Axis(), s.Type})
	}
	return out, true
}

// ContractedDevice returns the device type that splits t's trailing
// reduction axis (a contraction's summed axis k), if one does.
func ContractedDevice(t *ir.Tensor) (ir.ParallelType, bool) {
	if len(t.Logical) == 0 || !t.Logical[len(t.Logical)-1].Reduction {
		return 0, false
	}
	for _, id := range t.Loop {
		if id.Reduction && id.Parallel.IsDevice() && id.Extent > 1 {
			return id.Parallel, true
		}
	}
	return 0, false
}

// unsupported reports a tensor of a layer op whose sharding the layer
// lowering does not take yet.
func (ins *inserter) unsupported(op *ir.Op, t *ir.Tensor) {
	ins.errs.AddHint(op.Pos, "shard the outputs of layer ops with placements (Shard(d)) or outer_split by the mesh size, on extents the mesh divides",
		"op %q cannot be lowered: %q %s, and layer ops take even block splits only", op.Expr(), t.Name, whyNotBlock(t))
}

// whyNotBlock says how t's sharding differs from even block splits.
func whyNotBlock(t *ir.Tensor) string {
	if t.IsUneven() {
		return fmt.Sprintf("is split unevenly (shape %v, shards of up to %v)", t.Shape(), t.LocalShape())
	}
	for _, s := range t.Shardings() {
		if s.Kind != ir.Block {
			return fmt.Sprintf("is split %s along %s", s.Kind, s.Type)
		}
	}
	return "is split on one axis by several device types"
}

// reducesTermsFor reports whether op is a reduction of a Partial tensor's
// terms that the parser inserted before an op reading it
// (docs/fusion.md, "placements"); not one inserted after an op that left
// its output's terms pending, whose output is sharded as the fusion says.
func reducesTermsFor(op *ir.Op) bool {
	return op.Inserted != nil && !op.Inserted.Output && op.Kind.IsReduction() && op.In().Partial != ""
}

// reduceTerms adds the deferred reductions of the Partial tensors op
// reads, each into the sharding op needs of the slots that read it (when
// want, op's output splits, is known and the reduction lies on op's mesh):
// DTensor's redistribution of a Partial operand, so that an Allreduce
// becomes a ReduceScatter where op needs a shard.
func (ins *inserter) reduceTerms(op *ir.Op, want []Split, known bool) []termsRead {
	var whys []termsRead
	for i, x := range op.Inputs {
		red, ok := ins.deferred[x]
		if !ok {
			continue
		}
		delete(ins.deferred, x)
		out := x
		if have, block := BlockShards(x); known && block && x.Mesh.Equal(op.Out.Mesh) {
			if need := ins.termsTarget(red, have, OperandShards(op, i, want)); !SameSplits(have, need) {
				if t, ok := ins.reducedAs(x, need); ok {
					out = t
				}
			}
		}
		cp := *red
		cp.Out = out
		cp.Inserted = &ir.Insertion{For: op, Operands: slices.Clone(red.Inserted.Operands)}
		for _, k := range cp.Inserted.Operands {
			op.Inputs[k] = out
		}
		whys = append(whys, termsRead{ins.add(&cp)})
	}
	return whys
}

// termsRead is a set (or a reduction of terms) inserted before an op, as
// added to the rewritten fusion.
type termsRead struct {
	set *ir.Op
}

// readFor points the provenance of the sets inserted before op at op as it
// is in the rewritten fusion (a set or reduction of the caller's fusion is
// copied when added), at the slots that read their outputs once the op's
// resharding sets are inserted. A reduction of terms that op reads only
// through a resharding set of its own is no longer inserted for op: it is
// an op of the fusion, as the set from a Partial tensor written in a file.
func readFor(op *ir.Op, whys []termsRead) {
	for _, w := range whys {
		var slots []int
		for k, x := range op.Inputs {
			if x == w.set.Out {
				slots = append(slots, k)
			}
		}
		w.set.Inserted = &ir.Insertion{For: op, Operands: slots}
		if slots == nil {
			w.set.Inserted = nil
		}
	}
}

// termsTarget is the sharding the reduction red of a Partial tensor's
// terms gives its output, which holds have, for an op that needs need: need
// itself, or under the nvfuser policy, which changes one device type per
// op, have with only the split along the terms' device type taken from
// need (a ReduceScatter), the rest left to a set.
func (ins *inserter) termsTarget(red *ir.Op, have, need []Split) []Split {
	if ins.planner.Policy() != PolicyNvFuser {
		return need
	}
	var terms ir.ParallelType
	if splits, ok := BlockShards(red.In()); ok {
		for _, s := range splits {
			if s.Axis == 0 {
				terms = s.Type
			}
		}
	}
	out := slices.DeleteFunc(slices.Clone(have), func(s Split) bool { return s.Type == terms })
	for _, s := range need {
		if s.Type == terms {
			out = append(out, s)
		}
	}
	return out
}

// reducedAs is x, the output of a reduction of terms over axis 0 (its
// reduction axis, at position 0), split as need says of its values.
func (ins *inserter) reducedAs(x *ir.Tensor, need []Split) (*ir.Tensor, bool) {
	value := x.ValueAxes()
	at := make([]Split, len(need)) // positions in the logical domain
	for k, s := range need {
		at[k] = Split{value[s.Axis], s.Type}
	}
	t, err := ins.build(ir.TensorSpec{Name: x.Name, Mesh: x.Mesh, DType: x.DType, Shape: x.LogicalExtents(),
		ReductionAxes: []int{0}, Schedule: BlockSchedule(x.Mesh, at)})
	if err != nil || t.IsUneven() {
		return nil, false
	}
	t.Pos = x.Pos
	return t, true
}

// reshardForTerms inserts before op, a reduction whose output holds
// pending terms, a set that gives its operand the slices the terms are
// of, stored row-major, when it does not hold them so; then op. Each
// device then reduces its block locally (compute.go).
func (ins *inserter) reshardForTerms(op *ir.Op) {
	whys := ins.reduceTerms(op, nil, false)
	x := op.In()
	need, ok := termsOperand(op)
	if !ok {
		ins.unsupported(op, op.Out)
		ins.addFailed(op)
		return
	}
	have, block := BlockShards(x)
	if !block || !SameSplits(have, need) || !x.Mesh.Equal(op.Out.Mesh) || !slices.Equal(x.Layout(), shard.Identity(len(x.Shape()))) {
		r, ok := ins.newTensor(op, x.Name+"/resharded", op.Out.Mesh, x.DType, x.Shape(), need)
		if !ok {
			ins.addFailed(op)
			return
		}
		set := ins.add(&ir.Op{Kind: ir.OpSet, Inputs: []*ir.Tensor{x}, Out: r, Axis: -1, Pos: op.Pos})
		op.Inputs[0] = r
		whys = append(whys, termsRead{set})
	}
	readFor(ins.add(op), whys)
}
