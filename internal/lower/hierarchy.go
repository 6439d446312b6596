package lower

import (
	"slices"

	"github.com/nvcomm/nvcomm/internal/checked"
	"github.com/nvcomm/nvcomm/internal/ir"
	"github.com/nvcomm/nvcomm/internal/plan"
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
// group written as the two-level one of NCCL's and Horovod's
// hierarchical allreduce (Sergeev and Del Balso 2018, §4; Jia et al.
// 2018, "hierarchical all-reduce"). Each op changes one device type, as
// nvFuser lowers them: the first sum's output is split along T1 (a
// ReduceScatter), the second sum's output, "y/shard", keeps that split
// (an Allreduce along T2), and a set inserted after it gathers y (an
// Allgather along T1). y1 keeps its name and values; its sharding is
// propagated (the fusion does not declare it), and only its split along
// T1 changes. nvFuser's policy takes the chain wherever it applies (it
// moves fewer bytes); the optimal policy where the cost model prices the
// three collectives below the two Allreduces (not for a small tensor,
// whose collectives cost their latency).

// hierChain is a chain of two sums lowered hierarchically: the first's
// output as the chain splits it (mid), and the split it gives the
// second's output (axis f of y along T1).
type hierChain struct {
	mid   *ir.Tensor
	split Split
}

// hierarchical adds op, a set or a reduction of the caller's fusion, as
// the first or second sum of a hierarchical chain, and reports whether it
// did; false leaves op to the caller.
func (ins *inserter) hierarchical(op *ir.Op) bool {
	if c, ok := ins.chains[op.In()]; ok && op.Kind == ir.OpSum {
		return ins.secondSum(op, c)
	}
	c, ok := ins.chainFrom(op)
	if !ok {
		return false
	}
	first := *op
	first.Out = c.mid
	c.mid.Producer = ins.add(&first)
	if ins.chains == nil {
		ins.chains = map[*ir.Tensor]hierChain{}
	}
	ins.chains[op.Out] = c
	return true
}

// secondSum adds the chain's second sum, reading the first's split
// output into "y/shard", and the set that gathers y from it: y written
// again as the set's output, its values split as before.
func (ins *inserter) secondSum(op *ir.Op, c hierChain) bool {
	y := op.Out
	out, _ := BlockShards(y)
	name := ins.freeName(y.Name + "/shard")
	shard, err1 := ir.NewTensor(ir.TensorSpec{Name: name, Mesh: y.Mesh, DType: y.DType, Shape: c.mid.Shape(),
		ReductionAxes: []int{op.Axis}, Placements: placementsOf(y.Mesh, append(slices.Clone(out), c.split)), Propagated: true})
	gathered, err2 := ir.NewTensor(ir.TensorSpec{Name: y.Name, Mesh: y.Mesh, DType: y.DType, Shape: y.Shape(),
		Placements: placementsOf(y.Mesh, out), Propagated: y.Propagated})
	if err1 != nil || err2 != nil {
		ins.errs.Add(op.Pos, "op %q: cannot split its output along %s to sum it hierarchically", op.Expr(), c.split.Type)
		ins.addFailed(op)
		return true
	}
	shard.Pos, gathered.Pos, gathered.Declared = op.Pos, y.Pos, y.Declared
	second := *op
	second.Inputs = []*ir.Tensor{c.mid}
	second.Out = shard
	added := ins.add(&second)
	shard.Producer = added
	set := ins.add(&ir.Op{Kind: ir.OpSet, Inputs: []*ir.Tensor{shard}, Out: gathered, Axis: -1, Pos: op.Pos,
		Inserted: &ir.Insertion{For: added, Output: true}})
	gathered.Producer = set
	ins.fusion.Outputs = slices.Clone(ins.fusion.Outputs)
	for k, t := range ins.fusion.Outputs {
		if t == y {
			ins.fusion.Outputs[k] = gathered
		}
	}
	return true
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
// that this file lowers hierarchically (its comment) and the policy takes
// it.
func (ins *inserter) chainFrom(op *ir.Op) (hierChain, bool) {
	if op.Kind != ir.OpSum || op.Inserted != nil || op.Scalar != nil || op.Axis < 0 {
		return hierChain{}, false
	}
	x, y1 := op.In(), op.Out
	if !plainValues(x) || !plainValues(y1) || !y1.Propagated || ins.deferred[x] != nil {
		return hierChain{}, false
	}
	second, ok := ins.onlyReader(y1)
	if !ok || second.Kind != ir.OpSum || second.Inserted != nil || second.Scalar != nil || second.Axis < 0 || !plainValues(second.Out) {
		return hierChain{}, false
	}
	if rs := ins.readers[second.Out]; slices.ContainsFunc(rs, func(o *ir.Op) bool { return o != nil }) {
		return hierChain{}, false // the set after it writes y anew: no op may read the old one
	}
	y := second.Out
	have, ok1 := BlockShards(x)
	mid, ok2 := BlockShards(y1)
	out, ok3 := BlockShards(y)
	if !ok1 || !ok2 || !ok3 || !x.Mesh.Equal(y1.Mesh) || !y1.Mesh.Equal(y.Mesh) {
		return hierChain{}, false
	}
	t1, ok1 := typeOn(have, op.Axis)
	t2, ok2 := typeOn(mid, second.Axis)
	if !ok1 || !ok2 || t1 == t2 || x.Mesh.Size(t1) < 2 || x.Mesh.Size(t2) < 2 {
		return hierChain{}, false
	}
	// Each sum only reduces: x's other splits are y1's, y1's but its
	// reduced axis's are y's, and neither y1 nor y is split along T1.
	if !SameSplits(dropAxis(have, op.Axis), mid) || !SameSplits(dropAxis(mid, second.Axis), out) || hasType(mid, t1) {
		return hierChain{}, false
	}
	n1 := x.Mesh.Size(t1)
	f := -1
	for a, e := range y.Shape() {
		if e%n1 == 0 && !slices.ContainsFunc(out, func(s Split) bool { return s.Axis == a }) {
			f = a
			break
		}
	}
	if f < 0 {
		return hierChain{}, false
	}
	fm := f // y's axis f in y1
	if f >= second.Axis {
		fm++
	}
	split := Split{f, t1}
	if ins.planner.Policy() == PolicyOptimal && !ins.hierCheaper(y1, y, t1, t2) {
		return hierChain{}, false
	}
	m, err := ir.NewTensor(ir.TensorSpec{Name: y1.Name, Mesh: y1.Mesh, DType: y1.DType, Shape: x.Shape(),
		ReductionAxes: []int{op.Axis}, Placements: placementsOf(y1.Mesh, append(slices.Clone(mid), Split{fm, t1})), Propagated: true})
	if err != nil || m.IsUneven() {
		return hierChain{}, false
	}
	m.Pos, m.Declared = y1.Pos, y1.Declared
	return hierChain{mid: m, split: split}, true
}

// hierCheaper reports whether the cost model prices the chain's three
// collectives (ReduceScatter of y1 along t1, Allreduce of y's shard along
// t2, Allgather of y along t1) below its two Allreduces (y1 along t1, y
// along t2).
func (ins *inserter) hierCheaper(y1, y *ir.Tensor, t1, t2 ir.ParallelType) bool {
	pl := ins.planner
	n1, n2 := int64(y.Mesh.Size(t1)), int64(y.Mesh.Size(t2))
	e1, e := localCount(y1.LocalShape()), localCount(y.LocalShape())
	b1, b := localBytes(y1), localBytes(y)
	elem := int64(y.DType.Size())
	var costs [2]reshard.Cost
	ok := true
	add := func(k int, t ir.ParallelType, typ string, count plan.Count, recv int64) {
		c, fits := pl.TeamCost(y.Mesh, t, typ, count, elem, recv)
		var sum bool
		costs[k], sum = pl.Add(costs[k], c)
		ok = ok && fits && sum
	}
	ar1, ok1 := checked.Mul(2*(n1-1), b1)
	ar2, ok2 := checked.Mul(2*(n2-1), b)
	add(0, t1, plan.Allreduce, plan.Count{Input: e1, Output: e1}, ar1/n1)
	add(0, t2, plan.Allreduce, plan.Count{Input: e, Output: e}, ar2/n2)
	rs, ok3 := checked.Mul(n1-1, b1)
	ag, ok4 := checked.Mul(n1-1, b)
	add(1, t1, plan.ReduceScatter, plan.Count{Input: e1, Output: e1 / int(n1)}, rs/n1)
	add(1, t2, plan.Allreduce, plan.Count{Input: e / int(n1), Output: e / int(n1)}, ar2/n2/n1)
	add(1, t1, plan.Allgather, plan.Count{Input: e / int(n1), Output: e}, ag/n1)
	return ok && ok1 && ok2 && ok3 && ok4 && pl.Less(costs[1], costs[0])
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
