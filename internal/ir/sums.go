package ir

import (
	"maps"
	"slices"

	"github.com/nvcomm/nvcomm/internal/diag"
	"github.com/nvcomm/nvcomm/internal/shard"
)

// This file sums pending terms late (docs/fusion.md, "placements"). An op
// that passes sums (ops.Op.PassesSums: add, sub, neg) of operands that
// each hold pending terms of a sum computes the same value on the terms
// and reduces once: Σᵢ aᵢ + Σᵢ bᵢ = Σᵢ (aᵢ + bᵢ). DTensor keeps Partial(sum)
// through such ops, and Megatron-LM adds the input gradients of the
// q, k and v projections before their one all-reduce. A fusion gets it
// where its operands' terms are
//
//   - a Partial(sum) tensor's, which build reduced before the op
//     (reducePartials): the op reads the terms instead;
//   - a contraction's that format 2's propagation combines across the
//     devices splitting its summed axis (its output holding values, the
//     summed axis a reduction axis split over a device type, nvFuser's
//     rDID) and that only this op reads: the contraction leaves them
//     pending instead, as if its output declared Partial(sum);
//   - another such op's, that only this op reads.
//
// and they are alike: one mesh, dtype and shape, split alike. The op's
// output then holds pending terms too, and where a chain of such ops ends,
// its output, "name/terms", is reduced into the tensor the fusion names
// by a sum over the terms inserted after it: the value and sharding of
// every tensor the fusion names but the pending ones stay as they were.
// Each way moves the same data per reduction, and this one makes one
// reduction of all the operands' terms.

// PassesSums reports whether k is an op of sums that is the sum of the op
// of their terms (ops.Op.PassesSums).
func (k OpKind) PassesSums() bool {
	e := k.Entry()
	return e != nil && e.PassesSums
}

// termsSuffix names the pending terms of a chain's last op: "y/terms". A
// fusion's names are identifiers, so none is taken.
const termsSuffix = "/terms"

// sumLate returns f with its ops that pass sums computing on pending
// terms where they can (this file's comment), or f itself when none can.
func sumLate(f *Fusion) *Fusion {
	s := &sums{f: f}
	for {
		s.terms, s.pended = map[*Op][]*Tensor{}, map[*Op]*Op{}
		for _, op := range f.Ops {
			if op.Kind.PassesSums() && op.Scalar == nil && !s.barred[op] {
				s.qualify(op)
			}
		}
		if len(s.terms) == 0 {
			return f
		}
		if s.endsReduce() {
			return s.rewrite()
		}
	}
}

// sums is sumLate's work on one fusion.
type sums struct {
	f *Fusion
	// terms are, by op that passes sums, the pending terms each of its
	// operands stands for.
	terms map[*Op][]*Tensor
	// pended are the contractions whose outputs are left pending, by the
	// op that replaces each.
	pended map[*Op]*Op
	// reads counts the ops that read each tensor made by a contraction or
	// an op that passes sums (once per op), and reader is the last; built
	// when first needed, as is outputs, the fusion's outputs.
	reads   map[*Tensor]int
	reader  map[*Tensor]*Op
	outputs map[*Tensor]bool
	// reduced are, by the last op of each chain, its output as the sum of
	// the chain's terms writes it (reducedInto); barred are the ops whose
	// output cannot be written so, left as they are.
	reduced map[*Op]*Tensor
	barred  map[*Op]bool
}

// continues reports whether the output of op, which passes sums, is left
// pending: the one op that reads it passes them on too.
func (s *sums) continues(op *Op) bool {
	y := op.Out
	return s.readOnlyBy(y, s.reader[y]) && s.terms[s.reader[y]] != nil
}

// endsReduce gives the last op of each chain its output as the sum of
// the chain's terms writes it (reducedInto); it bars the ops whose output
// cannot be written so and reports false when it barred any.
func (s *sums) endsReduce() bool {
	s.reduced = map[*Op]*Tensor{}
	all := true
	for op, terms := range s.terms {
		if s.continues(op) {
			continue
		}
		r, ok := reducedInto(op.Out, terms[0])
		if !ok {
			if s.barred == nil {
				s.barred = map[*Op]bool{}
			}
			s.barred[op], all = true, false
			continue
		}
		s.reduced[op] = r
	}
	return all
}

// qualify finds the pending terms each operand of op stands for; op is
// kept, and the contractions it reads left pending, when every operand
// has them, alike.
func (s *sums) qualify(op *Op) {
	var terms []*Tensor
	pended := map[*Op]*Op{}
	for _, x := range op.Inputs {
		t := s.termsOf(op, x, pended)
		if t == nil || !evenBlocks(t) || len(terms) > 0 && !alikeTerms(terms[0], t) {
			return
		}
		terms = append(terms, t)
	}
	maps.Copy(s.pended, pended)
	s.terms[op] = terms
}

// termsOf returns the pending terms of a sum that operand x of op stands
// for, or nil; a contraction it would leave pending goes into pended, by
// the op that replaces it.
func (s *sums) termsOf(op *Op, x *Tensor, pended map[*Op]*Op) *Tensor {
	pr := x.Producer
	switch {
	case pr == nil:
		return nil
	case reducesTermsBefore(pr, op):
		return pr.In()
	case s.terms[pr] != nil:
		if !s.readOnlyBy(x, op) {
			return nil
		}
		return s.terms[pr][0]
	case combinedAcrossDevices(pr):
		// Counting the readers, and building the pending op, only for
		// such a contraction: a fusion of adds alone does neither.
		if !s.readOnlyBy(x, op) {
			return nil
		}
		if p, ok := pended[pr]; ok {
			return p.Out // one operand read twice
		}
		p, ok := pendingContraction(pr)
		if !ok {
			return nil
		}
		pended[pr] = p
		return p.Out
	}
	return nil
}

// combinedAcrossDevices reports whether op is a contraction whose output,
// propagated, combines its partial products across the devices that
// split its summed axis (nvFuser's rDID).
func combinedAcrossDevices(op *Op) bool {
	x := op.Out
	if !op.Kind.IsContraction() || !x.Propagated || x.Partial != "" || x.Combined != nil {
		return false
	}
	if op.Kind == OpLinear && len(op.Inputs) == 3 {
		return false // its bias would be added to every term
	}
	for _, id := range x.Loop {
		if id.Reduction && id.Parallel.IsDevice() && id.Extent > 1 {
			return true
		}
	}
	return false
}

// reducesTermsBefore reports whether pr is the reduction of a Partial(sum)
// tensor's terms that build inserted before op.
func reducesTermsBefore(pr, op *Op) bool {
	return pr.Inserted != nil && pr.Inserted.For == op && !pr.Inserted.Output &&
		pr.Kind == OpSum && pr.Axis == 0 && pr.In().Partial == OpSum
}

// readOnlyBy reports whether op is the one op that reads x, a tensor
// that is not a fusion output.
func (s *sums) readOnlyBy(x *Tensor, op *Op) bool {
	if s.reads == nil {
		s.countReads()
	}
	return s.reads[x] == 1 && s.reader[x] == op && !s.outputs[x]
}

// countReads fills reads, reader and outputs.
func (s *sums) countReads() {
	s.reads, s.reader, s.outputs = map[*Tensor]int{}, map[*Tensor]*Op{}, map[*Tensor]bool{}
	for _, op := range s.f.Ops {
		for k, x := range op.Inputs {
			pr := x.Producer
			if pr == nil || !pr.Kind.IsContraction() && !pr.Kind.PassesSums() || slices.Contains(op.Inputs[:k], x) {
				continue
			}
			s.reads[x]++
			s.reader[x] = op
		}
	}
	for _, t := range s.f.Outputs {
		s.outputs[t] = true
	}
}

// evenBlocks reports whether t is split in even blocks, stored row-major:
// what an op computing on its terms may read as they lie (the lowering
// of layer ops takes even block splits only).
func evenBlocks(t *Tensor) bool {
	if t.IsUneven() || !slices.Equal(t.Layout(), shard.Identity(len(t.Layout()))) {
		return false
	}
	for _, sh := range t.Shardings() {
		if sh.Kind != Block {
			return false
		}
	}
	return true
}

// alikeTerms reports whether pending terms a and b are split alike: an op
// that passes sums computes on them where they lie.
func alikeTerms(a, b *Tensor) bool {
	return a.Mesh.Equal(b.Mesh) && a.DType == b.DType && slices.Equal(a.Shape(), b.Shape()) &&
		slices.EqualFunc(a.Shardings(), b.Shardings(), sameSharding) && slices.Equal(a.Layout(), b.Layout()) &&
		slices.Equal(a.LocalShape(), b.LocalShape())
}

// sameSharding reports whether a and b split the same axes alike.
func sameSharding(a, b Sharding) bool {
	return a.Type == b.Type && a.Kind == b.Kind && slices.Equal(a.Digits, b.Digits)
}

// pendingContraction returns op, a contraction whose output combines its
// partial products across the devices that split its summed axis, with
// an output that leaves them pending instead: the same tensor but for its
// Partial(sum) terms axis, whose Combined is the output op had.
func pendingContraction(op *Op) (*Op, bool) {
	x := op.Out
	if len(x.Allocation) > 0 {
		return nil, false
	}
	pls, t, ok := combinedPlacements(x)
	if !ok {
		return nil, false
	}
	b := newBuilder()
	p, ok := b.newOp(OpSpec{Index: op.Index, Kind: op.Kind, Inputs: op.Inputs, Axis: op.Axis, Axes: op.Axes,
		Attrs: op.Attrs, Scalar: op.Scalar, Of: op.Of,
		Out: TensorSpec{Name: x.Name, Mesh: x.Mesh, DType: x.DType, Placements: pls}})
	if !ok || p.Out.Combined == nil || !sameProducts(p.Out.Combined, x, t) {
		return nil, false
	}
	p.Pos, p.Out.Pos, p.Out.Declared, p.Out.Propagated = op.Pos, x.Pos, x.Declared, x.Propagated
	return p, true
}

// combinedPlacements writes x's sharding as placements of its values,
// Partial(sum) along the device type t that splits its summed axis (its
// one reduction axis): false when none does, or a split is not a block
// split of one axis. Where t also splits a value axis of x (its products
// are reduce-scattered: sequence parallelism's row-parallel layers), the
// terms hold the whole values along t, and the reduction that ends the
// chain scatters them.
func combinedPlacements(x *Tensor) (pls []shard.Placement, t ParallelType, ok bool) {
	pls, ok = valuePlacements(x)
	if !ok {
		return nil, 0, false
	}
	for _, id := range x.Loop {
		if id.Reduction && id.Parallel.IsDevice() && id.Extent > 1 {
			if i := x.Mesh.Axis(id.Parallel); i >= 0 {
				pls[i] = shard.Placement{Kind: shard.Partial, Op: string(OpSum)}
				return pls, id.Parallel, true
			}
		}
	}
	return nil, 0, false
}

// sameProducts reports whether c, the Combined of a contraction whose
// terms are left pending along t, is what the contraction computed into
// x on each device: x's splits, but for a split of x's values along t,
// which the sum of x's products made (a ReduceScatter) and which c leaves
// to the reduction that ends the chain.
func sameProducts(c, x *Tensor, t ParallelType) bool {
	if _, scattered := x.ShardingOf(t); !scattered {
		return sameSplits(c, x)
	}
	identity := func(u *Tensor) bool { return slices.Equal(u.Layout(), shard.Identity(len(u.Layout()))) }
	other := slices.DeleteFunc(slices.Clone(x.Shardings()), func(s Sharding) bool { return s.Type == t })
	return c.Mesh.Equal(x.Mesh) && slices.Equal(c.LogicalExtents(), x.LogicalExtents()) && evenBlocks(x) && identity(c) &&
		slices.EqualFunc(c.Shardings(), other, sameSharding)
}

// valuePlacements writes t's sharding as placements of its values: false
// when a split is not a block split of one axis.
func valuePlacements(t *Tensor) ([]shard.Placement, bool) {
	pls := make([]shard.Placement, t.Mesh.Rank())
	for i := range pls {
		pls[i] = shard.Placement{Kind: shard.Replicate}
	}
	for _, sh := range t.Shardings() {
		i := t.Mesh.Axis(sh.Type)
		if sh.Kind != Block || len(sh.Digits) != 1 || i < 0 {
			return nil, false
		}
		pls[i] = shard.Placement{Kind: shard.Shard, Dim: sh.Axis()}
	}
	return pls, true
}

// reducedInto returns y, an op's output, as the output of a sum of its
// pending terms (terms, whose axis 0 they are): the same values split
// alike, under a logical reduction axis 0 of the terms' extent, as a set
// from a Partial tensor writes. False when y's sharding is not placements
// of its values or does not survive the change.
func reducedInto(y, terms *Tensor) (*Tensor, bool) {
	pls, ok := valuePlacements(y)
	if !ok || len(y.Allocation) > 0 {
		return nil, false
	}
	r, err := NewTensor(TensorSpec{Name: y.Name, Mesh: y.Mesh, DType: y.DType, Shape: append([]int{terms.Shape()[0]}, y.Shape()...),
		ReductionAxes: []int{0}, Placements: pls, Propagated: y.Propagated})
	if err != nil || !slices.Equal(r.LocalShape(), y.LocalShape()) || !slices.EqualFunc(r.Shardings(), y.Shardings(), sameSharding) ||
		!slices.Equal(r.Layout(), y.Layout()) {
		return nil, false
	}
	r.Pos, r.Declared = y.Pos, y.Declared
	return r, true
}

// sameSplits reports whether a and b, of one logical domain, are split
// and stored alike.
func sameSplits(a, b *Tensor) bool {
	return a.Mesh.Equal(b.Mesh) && slices.Equal(a.LogicalExtents(), b.LogicalExtents()) &&
		slices.EqualFunc(a.Shardings(), b.Shardings(), sameSharding) && slices.Equal(a.Layout(), b.Layout()) &&
		slices.Equal(a.LocalShape(), b.LocalShape())
}

// rewrite returns the fusion with the ops qualify kept computing on
// pending terms: the contractions they read leave their terms pending,
// the reductions build inserted for them are dropped, and each chain's
// last op writes "name/terms", reduced into name by a sum inserted after
// it. The fusion's ops and tensors are rewritten in place where nothing
// changes.
func (s *sums) rewrite() *Fusion {
	f := *s.f
	f.Ops, f.Tensors = make([]*Op, 0, len(s.f.Ops)+len(s.terms)), make([]*Tensor, 0, len(s.f.Tensors)+len(s.terms))
	dropped := map[*Tensor]bool{}
	for op := range s.terms {
		for _, x := range op.Inputs {
			if reducesTermsBefore(x.Producer, op) {
				dropped[x] = true
			}
		}
	}
	// now maps a tensor of s.f to the one that replaces it.
	now := map[*Tensor]*Tensor{}
	for _, t := range s.f.Tensors {
		if t.Producer == nil {
			f.Tensors = append(f.Tensors, t)
		}
	}
	emit := func(op *Op) {
		op.Index = len(f.Ops)
		f.Ops = append(f.Ops, op)
		f.Tensors = append(f.Tensors, op.Out)
	}
	for _, op := range s.f.Ops {
		switch {
		case dropped[op.Out]:
		case s.pended[op] != nil:
			p := s.pended[op]
			remap(p.Inputs, now)
			now[op.Out] = p.Out
			p.Out.Producer = p
			emit(p)
		case s.terms[op] != nil:
			s.rewriteOp(op, now, emit)
		default:
			remap(op.Inputs, now)
			emit(op)
		}
	}
	f.Inputs = s.f.Inputs
	f.Outputs = slices.Clone(s.f.Outputs)
	for k, t := range f.Outputs {
		if y, ok := now[t]; ok {
			f.Outputs[k] = y
		}
	}
	return &f
}

// rewriteOp emits op, which passes sums, computing on its operands'
// pending terms: into pending terms of its output when the only op that
// reads it passes them on too, else into "name/terms" and a sum of them
// into its output.
func (s *sums) rewriteOp(op *Op, now map[*Tensor]*Tensor, emit func(*Op)) {
	y := op.Out
	inputs := make([]*Tensor, len(op.Inputs))
	for k, x := range op.Inputs {
		if reducesTermsBefore(x.Producer, op) {
			x = x.Producer.In()
		}
		if r, ok := now[x]; ok {
			x = r
		}
		inputs[k] = x
	}
	continues := s.continues(op)
	name := y.Name
	if !continues {
		name += termsSuffix
	}
	domain := *s.terms[op][0].TensorDomain
	domain.Propagated = y.Propagated
	out := &Tensor{Name: name, Pos: y.Pos, Declared: continues && y.Declared, TensorDomain: &domain}
	p := &Op{Kind: op.Kind, Inputs: inputs, Out: out, Axis: -1, Pos: op.Pos, Of: op.Of}
	out.Producer = p
	emit(p)
	if continues {
		now[y] = out
		return
	}
	r := s.reduced[op]
	now[y] = r
	red := &Op{Kind: OpSum, Inputs: []*Tensor{out}, Out: r, Axis: 0, Pos: op.Pos, Inserted: &Insertion{For: p, Output: true}}
	r.Producer = red
	emit(red)
}

// remap replaces each tensor of ts that now maps.
func remap(ts []*Tensor, now map[*Tensor]*Tensor) {
	for k, x := range ts {
		if y, ok := now[x]; ok {
			ts[k] = y
		}
	}
}

// checkSumsOnTerms checks that op, which passes sums and writes pending
// terms, reads pending terms of a sum alike its output's.
func (p *Source) checkSumsOnTerms(op *Op) bool {
	for _, x := range op.Inputs {
		if x.Partial != OpSum || op.Out.Partial != OpSum || op.Scalar != nil || !alikeTerms(x, op.Out) {
			p.errs.AddHint(diag.Pos{}, "give every operand and the output the same Partial(sum) placements, or reduce the operands first",
				"tensor %q: %s leaves pending terms only from operands that hold terms of a sum alike them, and %q does not", op.Out.Name, op.Kind, x.Name)
			return false
		}
	}
	return true
}
