package ir

import (
	"fmt"

	"github.com/nvcomm/nvcomm/internal/diag"
	"github.com/nvcomm/nvcomm/internal/shard"
)

// This file makes an op's output that its placements declare Partial hold
// pending terms, as a DTensor does (docs/fusion.md, "placements"): the op
// splits the axis it combines over (a contraction's k, a reduction's
// axis) over the Partial placement's mesh axis and does not combine
// across those devices. The output is then a tensor like a Partial fusion
// input: a leading logical axis of the mesh axis's size, parallelized on
// its type, one term per device, and Partial set. What the op computes —
// its rule, its operands' shardings, its local steps — is read from the
// tensor it would write had it combined the terms (Tensor.Combined):
// the op's own logical domain with its reduction axis split along the
// terms' device type, nvFuser's rDID.

// Result returns the tensor the op computes: Out, or for an op whose
// output holds pending terms, Out.Combined.
func (o *Op) Result() *Tensor {
	if o.Out != nil && o.Out.Combined != nil {
		return o.Out.Combined
	}
	return o.Out
}

// outShape is the shape the op computes: Out's, without the terms axis of
// an output whose terms the op leaves pending; an op that passes sums
// computes on the terms themselves (sums.go).
func (o *Op) outShape() []int {
	if o.Out.Partial != "" && !o.Kind.PassesSums() {
		return o.Out.Shape()[1:]
	}
	return o.Out.Shape()
}

// Pend gives op, whose output holds pending terms (its Partial set, its
// logical axis 0 the terms), the output's Combined: lower.Certify calls
// it for the ops it rebuilds from a plan. The error says why the output's
// sharding cannot be that of pending terms of op.
func (o *Op) Pend() error {
	p := newBuilder()
	if o.Kind.PassesSums() {
		// It computes on its operands' terms (sums.go): no Combined.
		if !p.checkSumsOnTerms(o) {
			return p.errs.List()
		}
		return nil
	}
	if !p.checkPendingOp(o, o.Out.Partial, diag.Pos{}, fmt.Sprintf("tensor %q", o.Out.Name)) || !p.combine(o) {
		return p.errs.List()
	}
	return nil
}

// readsTerms reports whether every operand of op holds pending terms of a
// sum.
func readsTerms(op *Op) bool {
	return len(op.Inputs) > 0 && all(op.Inputs, func(x *Tensor) bool { return x.Partial == OpSum })
}

// combineOp is the op that combines the terms of op's output: sum for a
// contraction, the reduction's own op.
func combineOp(op *Op) OpKind {
	if op.Kind.IsContraction() {
		return OpSum
	}
	return op.Kind
}

// checkPendingOp checks that op may leave its output as pending terms of
// r: a contraction's (of a sum) or a reduction's (of its own op).
func (p *Source) checkPendingOp(op *Op, r OpKind, pos diag.Pos, what string) bool {
	if op.Kind.PassesSums() && readsTerms(op) {
		if r != OpSum {
			p.errs.AddHint(pos, "write Partial(sum): it adds its operands' terms of sums term by term",
				"%s: %s of terms of sums leaves terms of a sum, not %s", what, op.Kind, r)
			return false
		}
		return true
	}
	switch {
	case op.Kind.PassesSums():
		p.errs.AddHint(pos, "give every operand Partial(sum) placements alike, or leave the output's Partial out (its terms are then summed after it)",
			"%s: %s leaves pending terms only of operands that all hold terms of a sum", what, op.Kind)
	case !op.Kind.IsContraction() && !op.Kind.IsReduction():
		p.errs.AddHint(pos, "declare the partial terms as a fusion input and reduce them with a set",
			"%s: Partial is only allowed on fusion inputs, on the outputs of matmul, linear and the reductions, and on add, sub and neg of terms of sums", what)
	case r != OpSum && op.Kind.IsContraction():
		p.errs.AddHint(pos, "write Partial(sum): each device holds the sum over its slice of k",
			"%s: %s sums over its contracted axis, so its partial terms are a sum, not %s", what, op.Kind, r)
	case r != combineOp(op):
		p.errs.AddHint(pos, fmt.Sprintf("write Partial(%s)", combineOp(op)),
			"%s: %s combines its terms with %s, not %s", what, op.Kind, combineOp(op), r)
	default:
		return true
	}
	return false
}

// declarePending makes op's output, whose logical domain the op inferred
// and whose placements pls hold a Partial, the pending terms of the op
// (rt is its declaration, nil for the builder's) and gives it its
// Combined.
func (p *Source) declarePending(op *Op, pls []placement, pos diag.Pos, sched func(*Tensor) bool) bool {
	out := op.Out
	if op.Kind.PassesSums() {
		// Its operands' terms, computed on as they are: its inferred
		// domain holds the terms axis already.
		out.Partial = OpSum
		return sched(out) && p.checkSumsOnTerms(op)
	}
	pl, i, _ := partialOf(pls)
	shape := append([]int{out.Mesh.Shape[i]}, out.Shape()...)
	if !p.checkBytes(shape, out.DType, pos, fmt.Sprintf("tensor %q", out.Name), " (with its Partial terms axis)") {
		return false
	}
	out.Logical = logicalDomain(shape, -1)
	out.Partial = pl.op()
	return sched(out) && p.combine(op)
}

// combine builds the Combined of op's output, which holds pending terms:
// the op's logical domain, sharded as the output's values are, its
// reduction axis split along the terms' device type.
func (p *Source) combine(op *Op) bool {
	out := op.Out
	what := fmt.Sprintf("tensor %q", out.Name)
	pls, ok := pendingPlacements(out)
	if !ok || len(out.Logical) == 0 {
		p.errs.AddHint(diag.Pos{}, "write its sharding as placements: Shard(d) of its values and one Partial",
			"%s: the pending terms of %s need even block splits, one of them its logical axis 0 (the terms)", what, op.Kind)
		return false
	}
	value := out.Shape()[1:]
	var shape []int
	r := len(value) // a contraction's k is its trailing reduction axis
	if op.Kind.IsReduction() {
		r = op.Axis
	}
	if r < 0 || r > len(value) || len(op.Inputs) == 0 {
		p.errs.Add(diag.Pos{}, "%s: %s has no axis to combine over", what, op.Kind)
		return false
	}
	if i, a := op.ReducedOperand(); i >= 0 {
		shape = append(append(append(shape, value[:r]...), op.Inputs[i].Shape()[a]), value[r:]...)
	} else {
		p.errs.Add(diag.Pos{}, "%s: %s has no axis to combine over", what, op.Kind)
		return false
	}
	c := &Tensor{Name: out.Name, Declared: out.Declared, Producer: op,
		TensorDomain: &TensorDomain{Mesh: out.Mesh, DType: out.DType}}
	c.Logical = logicalDomain(shape, r)
	if !p.placeSchedule(c, pls, nil) {
		return false
	}
	out.Combined = c
	return true
}

// ReducedOperand returns the first operand of o that holds the axis o
// combines over, and that axis (a non-reduction position): a reduction's
// input and axis, a contraction's first factor and its k — a lookup's
// table and its rows, which its indices do not have. It is -1, -1 for
// other ops.
func (o *Op) ReducedOperand() (i, axis int) {
	if o.Kind.IsReduction() {
		return 0, o.Axis
	}
	for i := range o.Inputs {
		if a := o.ContractedAxis(i); a >= 0 {
			return i, a
		}
	}
	return -1, -1
}

// pendingPlacements writes t's sharding, pending terms on its logical axis
// 0, as placements of its values: Partial where the terms lie, Shard(d)
// for a block split of value dim d (t's axis d+1). False when a split is
// not a block split of one axis or the terms lie on no mesh axis.
func pendingPlacements(t *Tensor) ([]placement, bool) {
	pls := make([]placement, t.Mesh.Rank())
	for i := range pls {
		pls[i] = placement{Placement: shard.Placement{Kind: shard.Replicate}}
	}
	terms := false
	for _, s := range t.Shardings() {
		if s.Kind != Block || len(s.Digits) != 1 {
			return nil, false
		}
		i := t.Mesh.Axis(s.Type)
		if s.Axis() == 0 {
			pls[i].Placement, terms = shard.Placement{Kind: shard.Partial, Op: string(t.Partial)}, true
			continue
		}
		pls[i].Placement = shard.Placement{Kind: shard.Shard, Dim: s.Axis() - 1}
	}
	return pls, terms || t.Logical[0].Extent == 1
}
