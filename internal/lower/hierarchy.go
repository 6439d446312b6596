package lower

import (
	"slices"

	"github.com/nvcomm/nvcomm/internal/ir"
	"github.com/nvcomm/nvcomm/internal/reshard"
	"github.com/nvcomm/nvcomm/internal/shard"
)

// This file lowers a chain of two sums over axes split along two device
// types hierarchically. A weight's gradient under data parallelism over
// two mesh axes (expert parallelism inside data parallelism: the batch
// written as [dp, batch/dp], split along dp and then ep) is summed over
// each axis in turn, y1 = sum(x, axis=a) with a split along T1, then
// y = sum(y1, axis=b) with b split along T2. Each sum combined where it
// is computed is an Allreduce: 2Ψ·(n1−1)/n1 + 2Ψ·(n2−1)/n2 bytes a device
// for Ψ bytes of y. Megatron-LM all-reduces such a gradient once over the
// n1·n2 devices of the data-parallel group, 2Ψ·(n1·n2−1)/(n1·n2). The same
// bytes, as collectives along one mesh axis each: reduce-scatter along
// T1 (y1 split along T1 on an axis of its values), all-reduce the 1/n1
// shard along T2, and all-gather it along T1 — (n1−1)/n1·Ψ +
// 2(n2−1)/n2·Ψ/n1 + (n1−1)/n1·Ψ, the ring Allreduce over the product
// group done in two levels, as Horovod's hierarchical allreduce
// (HOROVOD_HIERARCHICAL_ALLREDUCE) and Jia et al. 2018's "hierarchical
// all-reduce" do it. Each op changes one device type, as
// nvFuser lowers them: the first sum's output is split along T1 (a
// ReduceScatter), the second sum's output, "y/shard", keeps that split
// (an Allreduce along T2), and a set inserted after it gathers y (an
// Allgather along T1). y1 keeps its name and values; its sharding is
// propagated (the fusion does not declare it), and only its split along
// T1 changes. nvFuser's policy takes the chain wherever it applies (it
// moves fewer bytes); the optimal policy where both ways, lowered on a
// trial, price the chain lower (not for a small tensor, whose
// collectives cost their latency). The plan's bound is the least of both
// ways' (boundChains).

// hierChain is a chain of two sums this file lowers: the caller's ops
// and tensors (y1 the first's output, y the second's), the chain's own
// (mid: y1 split along the first sum's type too; shard: the second
// sum's output, y split so; gathered: y as the set after it writes it),
// whether the policy takes the chain, and the ops added for it, in order:
// the two sums, or the chain's three ops.
type hierChain struct {
	first, second        *ir.Op
	x, y1, y             *ir.Tensor
	mid, shard, gathered *ir.Tensor
	taken                bool
	added                []*ir.Op
}

// hierarchical adds op, a set or a reduction of the caller's fusion, when
// it is the first or second sum of a chain, and reports whether it did;
// false leaves op to the caller.
func (ins *inserter) hierarchical(op *ir.Op) bool {
	if c := ins.chains[op.In()]; c != nil && op.Kind == ir.OpSum {
		ins.secondSum(op, c)
		return true
	}
	c, ok := ins.chainFrom(op)
	if !ok {
		return false
	}
	c.taken = ins.planner.Policy() == PolicyNvFuser || ins.chainCheaper(c)
	first := op
	if c.taken {
		cp := *op
		cp.Out = c.mid
		first = &cp
	}
	first = ins.add(first)
	if c.taken {
		c.mid.Producer = first
	}
	c.added = append(c.added, first)
	if ins.chains == nil {
		ins.chains = map[*ir.Tensor]*hierChain{}
	}
	ins.chains[op.Out] = c
	ins.chainList = append(ins.chainList, c)
	return true
}

// secondSum adds the chain's second sum: as the fusion gives it, or
// reading the first's split output into its shard, with the set that
// gathers y from it after: y written again as the set's output, its
// values split as before.
func (ins *inserter) secondSum(op *ir.Op, c *hierChain) {
	if !c.taken {
		c.added = append(c.added, ins.add(op))
		return
	}
	if name := ins.freeName(c.shard.Name); name != c.shard.Name {
		c.shard = c.shard.Renamed(name)
	}
	second := *op
	second.Inputs = []*ir.Tensor{c.mid}
	second.Out = c.shard
	added := ins.add(&second)
	c.shard.Producer = added
	set := ins.add(&ir.Op{Kind: ir.OpSet, Inputs: []*ir.Tensor{c.shard}, Out: c.gathered, Axis: -1, Pos: op.Pos,
		Inserted: &ir.Insertion{For: added, Output: true}})
	c.gathered.Producer = set
	c.added = append(c.added, added, set)
	ins.fusion.Outputs = slices.Clone(ins.fusion.Outputs)
	for k, t := range ins.fusion.Outputs {
		if t == c.y {
			ins.fusion.Outputs[k] = c.gathered
		}
	}
}

// placementsOf writes splits as placements on mesh: Shard(d) for a split
// of value axis d, Replicate() elsewhere.
func placementsOf(mesh *ir.Mesh, splits []Split) []shard.Placement {
	pls := make([]shard.Placement, mesh.Rank())
	for i := range pls {
		pls[i] = shard.Placement{Kind: shard.Replicate}
	}
	for _, s := range splits {
		pls[mesh.Axis(s.Type)] = shard.Placement{Kind: shard.Shard, Dim: s.Axis}
	}
	return pls
}

// chainFrom returns the chain op begins, when op is the first sum of two
// that this file lowers hierarchically (its comment), whether or not the
// policy takes it.
func (ins *inserter) chainFrom(op *ir.Op) (*hierChain, bool) {
	if op.Kind != ir.OpSum || op.Inserted != nil || op.Scalar != nil || op.Axis < 0 {
		return nil, false
	}
	x, y1 := op.In(), op.Out
	if !plainValues(x) || !plainValues(y1) || !y1.Propagated || ins.deferred[x] != nil {
		return nil, false
	}
	second, ok := ins.onlyReader(y1)
	if !ok || second.Kind != ir.OpSum || second.Inserted != nil || second.Scalar != nil || second.Axis < 0 || !plainValues(second.Out) {
		return nil, false
	}
	if rs := ins.readers[second.Out]; slices.ContainsFunc(rs, func(o *ir.Op) bool { return o != nil }) {
		return nil, false // the set after it writes y anew: no op may read the old one
	}
	y := second.Out
	have, ok1 := BlockShards(x)
	mid, ok2 := BlockShards(y1)
	out, ok3 := BlockShards(y)
	if !ok1 || !ok2 || !ok3 || !x.Mesh.Equal(y1.Mesh) || !y1.Mesh.Equal(y.Mesh) {
		return nil, false
	}
	t1, ok1 := typeOn(have, op.Axis)
	t2, ok2 := typeOn(mid, second.Axis)
	if !ok1 || !ok2 || t1 == t2 || x.Mesh.Size(t1) < 2 || x.Mesh.Size(t2) < 2 {
		return nil, false
	}
	// Each sum only reduces: x's other splits are y1's, y1's but its
	// reduced axis's are y's, and neither y1 nor y is split along T1.
	if !SameSplits(dropAxis(have, op.Axis), mid) || !SameSplits(dropAxis(mid, second.Axis), out) || hasType(mid, t1) {
		return nil, false
	}
	n1 := x.Mesh.Size(t1)
	f := -1 // the first axis of y that its sharding leaves whole and T1 divides
	for a, e := range y.Shape() {
		if e%n1 == 0 && !slices.ContainsFunc(out, func(s Split) bool { return s.Axis == a }) {
			f = a
			break
		}
	}
	if f < 0 {
		return nil, false
	}
	fm := f // y's axis f in y1
	if f >= second.Axis {
		fm++
	}
	m, err1 := ir.NewTensor(ir.TensorSpec{Name: y1.Name, Mesh: y1.Mesh, DType: y1.DType, Shape: x.Shape(),
		ReductionAxes: []int{op.Axis}, Placements: placementsOf(y1.Mesh, append(slices.Clone(mid), Split{fm, t1})), Propagated: true})
	sh, err2 := ir.NewTensor(ir.TensorSpec{Name: y.Name + "/shard", Mesh: y.Mesh, DType: y.DType, Shape: y1.Shape(),
		ReductionAxes: []int{second.Axis}, Placements: placementsOf(y.Mesh, append(slices.Clone(out), Split{f, t1})), Propagated: true})
	g, err3 := ir.NewTensor(ir.TensorSpec{Name: y.Name, Mesh: y.Mesh, DType: y.DType, Shape: y.Shape(),
		Placements: placementsOf(y.Mesh, out), Propagated: y.Propagated})
	if err1 != nil || err2 != nil || err3 != nil || m.IsUneven() || sh.IsUneven() {
		return nil, false
	}
	m.Pos, m.Declared = y1.Pos, y1.Declared
	sh.Pos, g.Pos, g.Declared = second.Pos, y.Pos, y.Declared
	return &hierChain{first: op, second: second, x: x, y1: y1, y: y, mid: m, shard: sh, gathered: g}, true
}

// ways are the chain's two ways as ops to lower on a trial: the two sums
// as the fusion gives them, and the chain's three ops.
func (c *hierChain) ways() (given, chain []*ir.Op) {
	sum := func(o *ir.Op, in, out *ir.Tensor) *ir.Op {
		return &ir.Op{Index: o.Index, Kind: ir.OpSum, Inputs: []*ir.Tensor{in}, Out: out, Axis: o.Axis, Pos: o.Pos}
	}
	given = []*ir.Op{sum(c.first, c.x, c.y1), sum(c.second, c.y1, c.y)}
	chain = []*ir.Op{sum(c.first, c.x, c.mid), sum(c.second, c.mid, c.shard),
		{Index: c.second.Index, Kind: ir.OpSet, Inputs: []*ir.Tensor{c.shard}, Out: c.gathered, Axis: -1, Pos: c.second.Pos}}
	return given, chain
}

// key appends to b what the chain's ways and their trials depend on: the
// two sums as given (waysKey), from which the chain's ops follow.
func (c *hierChain) key(b []byte) []byte {
	given, _ := c.ways()
	for _, op := range given {
		b = waysKey(b, op, nil)
	}
	return b
}

// chainCheaper reports whether the optimal policy's planner prices the
// chain's three ops, lowered on a trial, below the two sums as given
// (once for chains alike: a model's layers repeat them).
func (ins *inserter) chainCheaper(c *hierChain) bool {
	tr := ins.trials
	tr.key = c.key(tr.key[:0])
	if v, ok := tr.chainTaken[string(tr.key)]; ok {
		return v
	}
	key := string(tr.key)
	given, chain := c.ways()
	_, a, ok1 := tr.runOps(ins.planner, given)
	_, b, ok2 := tr.runOps(ins.planner, chain)
	v := ok1 && ok2 && ins.planner.Less(b, a)
	tr.chainTaken[key] = v
	return v
}

// runOps lowers ops with planner pl on a trial ledger and returns their
// bound and cost; false when one cannot be lowered or priced.
func (tr *trials) runOps(pl *reshard.Planner, ops []*ir.Op) (reshard.Bounds, reshard.Cost, bool) {
	led := tr.ledgers[pl]
	if led == nil {
		led = reshard.NewLedger(tr.f.File)
		tr.ledgers[pl] = led
	}
	return led.Trial(pl, func(priced func(elem int64)) {
		for _, op := range ops {
			pl.Job(led, tr.f, op).Lower()
			priced(int64(op.Out.DType.Size()))
		}
	})
}

// boundChains books, for each chain of two sums, what either way must
// receive — the least of the two ways' bounds, lowered on a trial — at
// its first op, and discards the bounds of the others: the plan's bound
// is the fusion's, whichever way the policy took.
func (l *lowerer) boundChains() {
	for _, c := range l.chains {
		if slices.ContainsFunc(c.added, func(o *ir.Op) bool { return l.failed[o] }) {
			continue
		}
		tr := l.trials
		tr.key = c.key(tr.key[:0])
		r, ok := tr.chainLeast[string(tr.key)]
		if !ok {
			key := string(tr.key)
			given, chain := c.ways()
			a, _, ok1 := tr.runOps(tr.boundsPlanner(), given)
			b, _, ok2 := tr.runOps(tr.boundsPlanner(), chain)
			r = leastBound{reshard.Least(a, b), ok1 && ok2}
			tr.chainLeast[key] = r
		}
		if !r.ok {
			continue
		}
		l.opBounds[c.added[0]] = r.b
		for _, o := range c.added[1:] {
			l.discard[o] = true
		}
	}
}

// onlyReader returns the one op of the caller's fusion that reads t, when
// one op does (once) and t is not a fusion output.
func (ins *inserter) onlyReader(t *ir.Tensor) (*ir.Op, bool) {
	if ins.readers == nil {
		ins.readers = map[*ir.Tensor][]*ir.Op{}
		for _, op := range ins.source.Ops {
			for _, x := range op.Inputs {
				if rs := ins.readers[x]; len(rs) == 0 || rs[len(rs)-1] != op {
					ins.readers[x] = append(rs, op)
				}
			}
		}
		for _, o := range ins.source.Outputs {
			ins.readers[o] = append(ins.readers[o], nil)
		}
	}
	rs := ins.readers[t]
	if len(rs) != 1 || rs[0] == nil || len(slices.DeleteFunc(slices.Clone(rs[0].Inputs), func(x *ir.Tensor) bool { return x != t })) != 1 {
		return nil, false
	}
	return rs[0], true
}

// plainValues reports whether t holds values (no pending terms) in an
// order the chain may change the splits of.
func plainValues(t *ir.Tensor) bool {
	return t.Partial == "" && t.Combined == nil && len(t.Allocation) == 0
}

// typeOn returns the device type that splits axis a, if one does.
func typeOn(splits []Split, a int) (ir.ParallelType, bool) {
	for _, s := range splits {
		if s.Axis == a {
			return s.Type, true
		}
	}
	return 0, false
}

// hasType reports whether t splits an axis of splits.
func hasType(splits []Split, t ir.ParallelType) bool {
	return slices.ContainsFunc(splits, func(s Split) bool { return s.Type == t })
}

// dropAxis is splits without axis a's, the axes after it one lower: the
// splits of a reduction over a that only reduces.
func dropAxis(splits []Split, a int) []Split {
	var out []Split
	for _, s := range splits {
		switch {
		case s.Axis < a:
			out = append(out, s)
		case s.Axis > a:
			out = append(out, Split{s.Axis - 1, s.Type})
		}
	}
	return out
}
