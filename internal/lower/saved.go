package lower

import (
	"slices"

	"github.com/nvcomm/nvcomm/internal/ir"
	"github.com/nvcomm/nvcomm/internal/ops"
)

// This file is the optimal policy's "one copy per (mesh, target)" rule
// (reshard_insert.go's copies) carried into the backward. A gradient
// rule reads an operand that the forward resharded before a contraction
// as the forward read it, through a set of the backward into a saved
// copy (internal/ir/saved.go); the forward's inserted set made that copy
// already, so the backward's set is dropped and its readers read the
// forward's copy, kept alive until then (Megatron-LM saves the
// sequence-split input instead and gathers it again: one Allgather per
// column-parallel linear, against the memory of its gathered output).
// And a row-parallel linear's output gradient, gathered for the input
// gradient, is read by the weight gradient transposed: a permute of the
// gradient, then gathered again; the permute reads the gathered copy
// instead, so that one Allgather serves both, as in Megatron's backward.
// The copies a backward section asks to be made again (ir's recompute
// and regather: y.grad/recomputed_t, y.grad/regathered_x) are no saved
// copies: their sets stay, so that the forward's copy is not kept alive
// for the backward.

// savedCopy reports whether op, the set of the backward that makes a
// saved copy (ir.IsSavedCopy), makes a copy that an earlier set made
// already on the same mesh with the same splits: the op is then left
// out, and its readers read that copy.
func (ins *inserter) savedCopy(op *ir.Op) bool {
	if ins.planner.Policy() != PolicyOptimal || op.Kind != ir.OpSet || op.Inserted != nil || !ir.IsSavedCopy(op.Out.Name) {
		return false
	}
	x, y := op.In(), op.Out
	target, ok := BlockShards(y)
	if !ok || x.DType != y.DType {
		return false
	}
	c := ins.copyOf(x, y.Mesh, target)
	if c == nil || !slices.Equal(c.Layout(), y.Layout()) || slices.Contains(ins.source.Outputs, y) {
		return false
	}
	if ins.alias == nil {
		ins.alias = map[*ir.Tensor]*ir.Tensor{}
	}
	ins.alias[y] = c
	return true
}

// unalias points op's operands that are dropped saved copies at the
// copies they stand for; op itself when none is, else the op to change
// (own).
func (ins *inserter) unalias(op *ir.Op) *ir.Op {
	if len(ins.alias) == 0 || !slices.ContainsFunc(op.Inputs, func(t *ir.Tensor) bool { return ins.alias[t] != nil }) {
		return op
	}
	cp := ins.own(op)
	for i, t := range cp.Inputs {
		if c := ins.alias[t]; c != nil {
			cp.Inputs[i] = c
		}
	}
	return cp
}

// transposedCopy reshards operand i of op, x = permute(y), to target by
// permuting the copy of y an earlier set made with the splits target
// maps to, when there is one: the permute that made x, whose output only
// op reads, reads that copy instead and makes x's copy. It reports
// whether it did.
func (ins *inserter) transposedCopy(op *ir.Op, i int, target []Split) bool {
	x := op.Inputs[i]
	if ins.planner.Policy() != PolicyOptimal || x.Producer == nil || x.Producer.Kind != ir.OpPermute ||
		!x.Mesh.Equal(op.Out.Mesh) || ins.copyOf(x.Producer.In(), op.Out.Mesh, permutedSplits(x.Producer, target)) == nil {
		return false // cheap tests first: no search of the ops for most operands
	}
	k := slices.IndexFunc(ins.fusion.Ops, func(o *ir.Op) bool { return o.Out == x })
	if k < 0 || ins.fusion.Ops[k].Kind != ir.OpPermute || !ins.readOnlyBy(x, k) || slices.Contains(ins.source.Outputs, x) {
		return false
	}
	p := ins.fusion.Ops[k]
	c := ins.copyOf(p.In(), op.Out.Mesh, permutedSplits(p, target))
	if c == nil {
		return false
	}
	r, ok := ins.newTensor(op, x.Name+"/resharded", op.Out.Mesh, x.DType, x.Shape(), target)
	if !ok {
		return false
	}
	p.Inputs[0], p.Out = c, r
	ins.fusion.Tensors[slices.Index(ins.fusion.Tensors, x)] = r
	ins.bcast.record(p)
	op.Inputs[i] = r
	return true
}

// permutedSplits maps splits of permute p's output to the splits of its
// operand that p carries to them.
func permutedSplits(p *ir.Op, splits []Split) []Split {
	dims := p.Attrs.Ints(ops.AttrDims)
	from := make([]Split, len(splits))
	for j, s := range splits {
		from[j] = Split{(dims[s.Axis] + len(dims)) % len(dims), s.Type}
	}
	return from
}

// readOnlyBy reports whether the op being added is the one reader of x,
// the output of the rewritten fusion's op k, in one slot: no op added
// since reads it, and one slot of the caller's fusion does. The slots are
// counted once for all tensors, at the first call; a count that the pass
// lowered since, pointing a slot at a copy, only makes it refuse more.
func (ins *inserter) readOnlyBy(x *ir.Tensor, k int) bool {
	if slices.ContainsFunc(ins.fusion.Ops[k+1:], func(o *ir.Op) bool { return slices.Contains(o.Inputs, x) }) {
		return false
	}
	if ins.reads == nil {
		ins.reads = map[*ir.Tensor]int{}
		for _, op := range ins.source.Ops {
			for _, in := range op.Inputs {
				ins.reads[in]++
			}
		}
	}
	return ins.reads[x] == 1
}

// boundCopies discards the bounds of the sets that a copy made before may
// stand for: the saved copies of the backward (ir.IsSavedCopy), which
// the forward's resharding made, a set of an operand to the mesh and
// splits an earlier set gave it, and a set of x = permute(y) to splits
// whose counterparts in y an earlier set gave y. A plan without them
// exists (the optimal policy's), so what they receive is no part of what
// every plan must; a plan that keeps them (nvFuser's policy, which makes
// one copy per op) books the same bound. They are found by what they read
// and write, so that Certify, which lowers a plan's fusion, finds the
// same.
func (l *lowerer) boundCopies() {
	made := map[*ir.Tensor][]*ir.Op{}   // inserted sets of operands, by what they read
	permuted := map[*ir.Tensor]*ir.Op{} // permutes, by their output
	for _, op := range l.f.Ops {
		switch {
		case op.Kind == ir.OpPermute:
			permuted[op.Out] = op
		case op.Kind != ir.OpSet:
		case ir.IsSavedCopy(op.Out.Name) && op.Inserted == nil:
			l.discard[op] = true
		case op.Inserted != nil && !op.Inserted.Output:
			if p := permuted[op.In()]; p != nil && transposeOfMade(made[p.In()], p, op) || copyMade(made[op.In()], op) {
				l.discard[op] = true
			}
			made[op.In()] = append(made[op.In()], op)
		}
	}
}

// copyMade reports whether one of sets, which reshard set's operand,
// made the copy set makes: on its mesh, with its splits.
func copyMade(sets []*ir.Op, set *ir.Op) bool {
	target, ok := BlockShards(set.Out)
	return ok && madeWith(sets, set.Out.Mesh, target)
}

// transposeOfMade reports whether one of sets, which reshard p's operand,
// gives it the splits that set, a resharding of p's output, maps to
// through p, on set's mesh.
func transposeOfMade(sets []*ir.Op, p, set *ir.Op) bool {
	target, ok := BlockShards(set.Out)
	return ok && madeWith(sets, set.Out.Mesh, permutedSplits(p, target))
}

// madeWith reports whether one of sets makes a copy on mesh with splits.
func madeWith(sets []*ir.Op, mesh *ir.Mesh, splits []Split) bool {
	return slices.ContainsFunc(sets, func(m *ir.Op) bool {
		have, ok := BlockShards(m.Out)
		return ok && m.Out.Mesh.Equal(mesh) && SameSplits(have, splits)
	})
}
