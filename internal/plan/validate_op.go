package plan

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/nvcomm/nvcomm/internal/ops"
	"github.com/nvcomm/nvcomm/internal/shard"
)

// The ops a plan may name are the registry's (docs/plan.md, "ops").

// isKnownOp reports whether op is an op of the registry.
func isKnownOp(op string) bool { return ops.InPlan(op) != nil }

// isReductionOp reports whether op reduces one axis of its input.
func isReductionOp(op string) bool { return ops.Is(op, ops.Reduction) }

// isBinaryOp reports whether op is an elementwise op of two operands.
func isBinaryOp(op string) bool { return ops.Is(op, ops.Binary) }

// isUnaryOp reports whether op is an elementwise op of one operand.
func isUnaryOp(op string) bool { return ops.Is(op, ops.Unary) }

// isContraction reports whether op multiplies two operands and sums over
// their shared axis k.
func isContraction(op string) bool { return ops.Is(op, ops.Contraction) }

// axisOr is *axis, or or when axis is nil.
func axisOr(axis *int, or int) int {
	if axis == nil {
		return or
	}
	return *axis
}

// takesAxis reports whether op takes an axis: a reduction, slice, cat.
func takesAxis(op string) bool {
	o := ops.Lookup(op)
	return o != nil && o.Takes(ops.AttrAxis)
}

// opArity returns the fewest and the most operands op takes; 1, 1 for an
// op the registry does not have.
func opArity(op string) (lo, hi int) {
	if o := ops.Lookup(op); o != nil {
		return o.Arity()
	}
	return 1, 1
}

// checkOps checks every op (rule 3) and records which tensors ops write.
func (v *validator) checkOps() {
	v.opOK = make([]bool, len(v.p.Ops))
	v.opOutputs = make([]*nameInfo, len(v.p.Ops))
	for i, op := range v.p.Ops {
		v.checkOp(i, op)
		e := v.entry(op.Output)
		if !e.written {
			e.written, e.writer = true, i
		}
		v.opOutputs[i] = e
	}
}

func (v *validator) checkOp(i int, op Op) {
	before := v.probs.Count()
	defer func() { v.opOK[i] = v.probs.Count() == before }()
	if op.Index != i {
		v.planf("op %d: index is %d", i, op.Index)
	}
	known := isKnownOp(op.Op)
	if !known {
		v.planf("op %d: op %q is not one of %s", i, op.Op, strings.Join(ops.PlanNames(), ", "))
	}
	ins := v.checkOperands(i, op, known)
	if v.tensor(op.Output) == nil {
		v.planf("op %d: output %q is not a tensor", i, op.Output)
	}
	if e := v.lookup(op.Output); e != nil && e.written {
		v.planf("op %d: output %q is also the output of op %d", i, op.Output, e.writer)
	}
	v.checkOpAxis(i, op, ins[0])
	v.checkOpAxes(i, op, ins[0])
	v.checkOpAttrs(i, op)
	v.checkOpOutput(i, op, ins)
	v.checkInserted(i, op)
	v.checkOf(i, op)
	v.checkWithin(i, op)
}

// checkWithin checks an op computed within another's steps: that op, N,
// is a later op that ends a composite's expansion (its output the
// composite's), and this op is of the same expansion or a set inserted
// for an op within N. N's steps may then read the composite's operands
// (checkInput); this op has no steps (checkCoverage).
func (v *validator) checkWithin(i int, op Op) {
	if op.Within == nil {
		return
	}
	n := *op.Within
	if n <= i || n >= len(v.p.Ops) {
		v.planf("op %d: within op %d, which is not a later op of the plan", i, n)
		return
	}
	last := v.p.Ops[n]
	if last.Of == nil && (last.Op == "linear" || last.Op == "matmul") && last.Within == nil {
		// A decomposed collective computes the set that gathers its first
		// operand, or a linear's weight (docs/overlap.md).
		ins := last.Operands()
		if op.Op != "set" || op.Inserted == nil || op.Inserted.For != n || len(ins) < 1 ||
			ins[0] != op.Output && (last.Op != "linear" || len(ins) != 2 || ins[1] != op.Output) {
			v.planf("op %d: within op %d, a %s, but it is not the set inserted to gather its first operand or a linear's weight", i, n, last.Op)
			return
		}
		v.markWithin(n)
		return
	}
	if last.Of == nil || last.Of.Grad || last.Of.Output != last.Output || last.Within != nil {
		v.planf("op %d: within op %d, which is not the last op of a composite's expansion", i, n)
		return
	}
	ofLast := op.Of != nil && !op.Of.Grad && op.Of.Output == last.Of.Output
	forWithin := false
	if in := op.Inserted; in != nil && in.For >= 0 && in.For < len(v.p.Ops) {
		f := v.p.Ops[in.For].Within
		forWithin = in.For == n || f != nil && *f == n
	}
	if !ofLast && !forWithin {
		v.planf("op %d: within op %d, but it is neither an op of %s's expansion nor a set inserted for one", i, n, last.Of.Output)
		return
	}
	v.markWithin(n)
}

// markWithin records that other ops are computed within op n.
func (v *validator) markWithin(n int) {
	if v.computesWithin == nil {
		v.computesWithin = map[int]bool{}
	}
	v.computesWithin[n] = true
}

// checkOf checks the composite op an op's expansion comes from: a
// composite of the registry, between tensors of the plan, and never on an
// op nvcomm inserted.
func (v *validator) checkOf(i int, op Op) {
	of := op.Of
	if of == nil {
		return
	}
	e := ops.Lookup(of.Op)
	switch {
	case of.Grad && (e == nil || e.Grad == nil):
		v.planf("op %d: of names op %q as the op it is part of the gradient of, which has no gradient rule", i, of.Op)
		e = nil
	case !of.Grad && (e == nil || e.Family != ops.Composite):
		v.planf("op %d: of names op %q, which is not a composite op (%s)", i, of.Op, strings.Join(ops.FamilyNames(ops.Composite), ", "))
		e = nil
	}
	if op.Inserted != nil {
		v.planf("op %d: is marked both inserted and of composite %s", i, of.Op)
	}
	for _, name := range append(slices.Clone(of.Inputs), of.Output) {
		if v.tensor(name) == nil {
			v.planf("op %d: of names %q, which is not a tensor of the plan", i, name)
		}
	}
	if e != nil && !of.Grad {
		v.checkOfOperands(i, of, e)
	}
	if of.Causal && (e == nil || !e.Takes(ops.AttrCausal)) {
		v.planf("op %d: of: %s is marked causal, but only sdpa takes causal", i, of.Op)
	}
	if of.CP != "" && (e == nil || !e.Takes(ops.AttrCP)) {
		v.planf("op %d: of: %s has cp %q, but only sdpa takes cp", i, of.Op, of.CP)
	} else if of.CP != "" && of.CP != ops.CPRing && of.CP != ops.CPAllgather && of.CP != ops.CPExpansion {
		v.planf("op %d: of: cp is %q, want %s, %s or %s", i, of.CP, ops.CPRing, ops.CPAllgather, ops.CPExpansion)
	}
	if of.GQA && (e == nil || !e.Takes(ops.AttrGQA)) {
		v.planf("op %d: of: %s has enable_gqa, but only sdpa takes enable_gqa", i, of.Op)
	}
	if of.TopK != 0 && (e == nil || !e.Takes(ops.AttrTopK) || of.TopK < 1) {
		v.planf("op %d: of: %s has top_k %d, but only moe_topk takes top_k, at least 1", i, of.Op, of.TopK)
	}
	if of.Capacity != 0 && (e == nil || !e.Takes(ops.AttrCapacity) || of.Capacity < 1) {
		v.planf("op %d: of: %s has capacity %d, but only moe_dispatch takes capacity, at least 1", i, of.Op, of.Capacity)
	}
	if first := v.checkOfAlike(i, of); first && e != nil && !of.Grad && of.Op == "sdpa" && len(of.Inputs) == 3 {
		v.checkSDPAHeads(i, of)
	}
}

// checkSDPAHeads checks an sdpa's record against its operands' shapes as
// the registry's expansion takes them (ops.SDPAGroup): with enable_gqa,
// k and v of Hkv heads, a divisor of q's H; without it, q, k and v of
// equal heads. The simulator's definition and the ring's geometry read
// the heads by the record, so a record that the shapes contradict would
// be a wrong number or no plan, not a problem at the op.
func (v *validator) checkSDPAHeads(i int, of *Of) {
	shapes := make([][]int, len(of.Inputs))
	for n, name := range of.Inputs {
		t := v.tensor(name)
		if t == nil {
			return // reported: not a tensor of the plan
		}
		shapes[n] = valueShape(t.t)
		if t.t.Partial != "" && len(shapes[n]) > 0 {
			// Its logical axis 0 holds the terms: the operand is their
			// reduction, which the expansion's first op reads.
			shapes[n] = shapes[n][1:]
		}
	}
	if _, err := ops.SDPAGroup(shapes, of.GQA); err != nil {
		at := ""
		if err.Index >= 0 && err.Index < len(of.Inputs) {
			at = fmt.Sprintf(" (%s %q)", []string{"q", "k", "v"}[err.Index], of.Inputs[err.Index])
		}
		v.planf("op %d: of records %s, whose operands are not sdpa's%s: %s; %s", i, of.Expr(), at, err.Msg, err.Hint)
	}
}

// ofKey names the op of the fusion a record is of: its output, and
// whether the record is of its gradient.
type ofKey struct {
	output string
	grad   bool
}

// checkOfAlike checks that op i records its composite as the first op
// of its expansion did: the simulator checks the expansion against the
// record its last op carries, so a record that differs on one op (an
// eps, an axis, causal) would be read by one check and not another. It
// reports whether op i is that first op.
func (v *validator) checkOfAlike(i int, of *Of) bool {
	if v.ofRecords == nil {
		v.ofRecords = map[ofKey]int{}
	}
	k := ofKey{of.Output, of.Grad}
	first, seen := v.ofRecords[k]
	if !seen {
		v.ofRecords[k] = i
		return true
	}
	if prev := v.p.Ops[first].Of; !sameOf(prev, of) {
		v.planf("op %d: of records %s, but op %d records %s: the ops of one expansion record its op alike", i, of.Expr(), first, prev.Expr())
	}
	return false
}

// sameOf reports whether two records say the same.
func sameOf(a, b *Of) bool {
	return a.Op == b.Op && slices.Equal(a.Inputs, b.Inputs) && a.Output == b.Output && equalPtr(a.Axis, b.Axis) &&
		slices.Equal(a.Axes, b.Axes) && equalPtr(a.Eps, b.Eps) && a.Reduction == b.Reduction && a.Causal == b.Causal && a.CP == b.CP && a.GQA == b.GQA && a.Grad == b.Grad &&
		a.TopK == b.TopK && a.Capacity == b.Capacity
}

// equalPtr reports whether two optional values are both absent, or equal.
func equalPtr[T comparable](a, b *T) bool {
	return (a == nil) == (b == nil) && (a == nil || *a == *b)
}

// checkOfOperands checks a composite's operands as its registry entry
// takes them: how many, and integer indices where it reads some
// (cross_entropy's labels), so that simulate's definition of the
// composite reads what the expansion read.
func (v *validator) checkOfOperands(i int, of *Of, e *ops.Op) {
	if !e.TakesOperands(len(of.Inputs)) {
		v.planf("op %d: of: %s takes %s, got %d", i, of.Op, e.ArityText(), len(of.Inputs))
		return
	}
	if x := e.Indexed; x != nil && x.Indices < len(of.Inputs) {
		if ids := v.tensor(of.Inputs[x.Indices]); ids != nil && !shard.IsIntDType(ids.t.DType) {
			v.planf("op %d: of: %s's %s %q have dtype %s, want int32 or int64", i, of.Op, e.Operands[x.Indices], of.Inputs[x.Indices], ids.t.DType)
		}
	}
}

// reducesTerms reports whether op is the reduction of a Partial tensor's
// terms over its axis 0: what a set from it is.
func (v *validator) reducesTerms(op Op) bool {
	in := v.tensor(op.Input)
	return isReductionOp(op.Op) && op.Axis != nil && *op.Axis == 0 && in != nil && in.t.Partial == op.Op
}

// checkInserted checks an inserted set's provenance against the ops it
// names: a set before op For whose output For reads at exactly the
// listed operand slots, or a set after For that reads For's output.
func (v *validator) checkInserted(i int, op Op) {
	in := op.Inserted
	if in == nil {
		return
	}
	switch {
	case op.Op != "set" && !v.reducesTerms(op):
		v.planf("op %d: is marked inserted, but nvcomm inserts only sets (a set from a Partial tensor being the reduction of its terms over axis 0), not %s", i, op.Op)
	case in.For < 0 || in.For >= len(v.p.Ops) || in.For == i:
		v.planf("op %d: inserted for op %d, which is not another op of the plan", i, in.For)
	case in.Output == (len(in.Operands) > 0):
		v.planf("op %d: inserted for op %d must name either its operands or its output", i, in.For)
	case in.Output:
		if f := v.p.Ops[in.For]; in.For > i || op.Input != f.Output {
			v.planf("op %d: inserted after op %d, so it reads that op's output %q and comes after it, but it reads %q", i, in.For, f.Output, op.Input)
		}
	default:
		var reads []int
		for k, name := range v.p.Ops[in.For].Operands() {
			if name == op.Output {
				reads = append(reads, k)
			}
		}
		if in.For < i || !slices.Equal(reads, in.Operands) {
			v.planf("op %d: inserted before op %d for its operands %v, but that op reads %q at operands %v", i, in.For, in.Operands, op.Output, reads)
		}
	}
}

// checkOperands checks how an op names its operands (input for one,
// inputs for several) and how many it names, and returns each operand's
// tensor, nil where the name is not a tensor's.
func (v *validator) checkOperands(i int, op Op, known bool) []*tensorInfo {
	switch {
	case len(op.Inputs) > 0 && op.Input != "":
		v.planf("op %d: has both input %q and inputs; an op with several inputs lists them in inputs alone", i, op.Input)
	case len(op.Inputs) == 1:
		v.planf("op %d: inputs lists one tensor; an op with one input names it in input", i)
	}
	names := op.Operands()
	if msg := scalarProblem(op.Op, op.Scalar); msg != "" {
		v.planf("op %d: scalar: %s", i, msg)
	}
	if lo, hi := opArity(op.Op); known && (len(names)+scalarCount(op.Scalar) < lo || len(names)+scalarCount(op.Scalar) > hi) {
		v.planf("op %d: %s takes %s, got %d", i, op.Op, ops.Lookup(op.Op).ArityText(), len(names)+scalarCount(op.Scalar))
	}
	ins := make([]*tensorInfo, len(names))
	for k, name := range names {
		if ins[k] = v.tensor(name); ins[k] == nil {
			v.planf("op %d: input %q is not a tensor", i, name)
		}
	}
	return ins
}

// scalarCount is the number of operands a number stands for: 1 for an
// op or step with one, else 0.
func scalarCount(s *ops.Scalar) int {
	if s == nil {
		return 0
	}
	return 1
}

// scalarProblem says what is wrong with number s as an operand of binary
// function fn (an op or a Pointwise step's func), "" when nothing is or
// there is none: only a binary op takes one, in slot 0 or 1, and it is
// finite.
func scalarProblem(fn string, s *ops.Scalar) string {
	switch {
	case s == nil:
		return ""
	case !isBinaryOp(fn):
		return fmt.Sprintf("%s takes no number as an operand (only the binary elementwise ops do)", fn)
	case s.Slot != 0 && s.Slot != 1:
		return fmt.Sprintf("slot %d is not an operand of %s (0 or 1)", s.Slot, fn)
	case math.IsInf(s.Value, 0) || math.IsNaN(s.Value):
		return fmt.Sprintf("value %v is not a finite number", s.Value)
	}
	return ""
}

// checkOpAxis checks that exactly the ops that take an axis (the
// reductions, gather, slice and cat) have one, a non-reduction axis of
// their first input.
func (v *validator) checkOpAxis(i int, op Op, in *tensorInfo) {
	switch {
	case !isKnownOp(op.Op):
	case !takesAxis(op.Op) && op.Axis != nil:
		v.planf("op %d: %s takes no axis", i, op.Op)
	case !takesAxis(op.Op):
	case op.Axis == nil:
		v.planf("op %d: %s needs an axis", i, op.Op)
	case in != nil && in.rank >= 0 && (*op.Axis < 0 || *op.Axis >= in.rank):
		v.planf("op %d: axis %d is not among the %d non-reduction axes of %q", i, *op.Axis, in.rank, op.Operands()[0])
	}
}

// checkOpAxes checks that only a broadcast has axes, and that a
// broadcast's are increasing positions in its output: the input's axes and
// the new ones.
func (v *validator) checkOpAxes(i int, op Op, in *tensorInfo) {
	switch {
	case !ops.Is(op.Op, ops.Broadcast) && len(op.Axes) > 0:
		v.planf("op %d: %s takes no axes (only broadcast inserts axes)", i, op.Op)
	case !ops.Is(op.Op, ops.Broadcast) || in == nil || in.rank < 0:
	case !increasing(op.Axes, in.rank+len(op.Axes)):
		v.planf("op %d: axes %v are not increasing positions among the %d axes of the output (the input's %d and %d new)",
			i, op.Axes, in.rank+len(op.Axes), in.rank, len(op.Axes))
	}
}

// checkOpAttrs checks the op's other attributes against its registry
// entry (ops.Op.CheckValues).
func (v *validator) checkOpAttrs(i int, op Op) {
	e := ops.Lookup(op.Op)
	if e == nil {
		return
	}
	for _, pr := range e.CheckValues(op.Attrs) {
		switch pr.What {
		case ops.NotTaken:
			v.planf("op %d: %s takes no %s", i, op.Op, pr.Key)
		case ops.Missing:
			v.planf("op %d: %s needs %s", i, op.Op, pr.Key)
		case ops.Bad:
			v.planf("op %d: %s: %s", i, pr.Key, pr.Msg)
		}
	}
}

// increasing reports whether xs increase strictly within 0..n-1.
func increasing(xs []int, n int) bool {
	for k, x := range xs {
		if x < 0 || x >= n || (k > 0 && x <= xs[k-1]) {
			return false
		}
	}
	return true
}

// checkOpOutput checks that an op's output is what the op makes of its
// operands: their dtype (operands share a dtype; a cast gives its own)
// and the logical shape and
// reduction axes of docs/plan.md ("ops").
func (v *validator) checkOpOutput(i int, op Op, ins []*tensorInfo) {
	out := v.tensor(op.Output)
	if out == nil || out.rank < 0 || slices.ContainsFunc(ins, func(in *tensorInfo) bool { return in == nil || in.rank < 0 }) {
		return
	}
	names := op.Operands()
	if d := op.Attrs.Str(ops.AttrDType); isLookup(op.Op) || isScatter(op.Op) {
		v.checkLookupDTypes(i, op, ins, out)
	} else if d != "" {
		if d != out.t.DType {
			v.planf("op %d: output %q has dtype %s, but the op casts to %s", i, op.Output, out.t.DType, d)
		}
	} else {
		for k, in := range ins {
			if in.t.DType != out.t.DType && DTypeSize(in.t.DType) > 0 && DTypeSize(out.t.DType) > 0 {
				v.planf("op %d: output %q has dtype %s, but its input %q has %s (operands share a dtype; use cast)", i, op.Output, out.t.DType, names[k], in.t.DType)
			}
		}
	}
	if lo, hi := opArity(op.Op); !isKnownOp(op.Op) || len(ins) < lo || len(ins) > hi {
		return // reported as an unknown op or a wrong number of inputs
	}
	want, ok := v.wantOutput(i, op, ins, out)
	if !ok {
		return
	}
	if out.t.Partial != "" && len(out.t.Shape) > 0 && !passesSums(op.Op) {
		// An op that passes sums computes on its operands' terms.
		want = pendingDomain(want, out.t.Shape[0])
	}
	if !slices.Equal(out.t.Shape, want.shape) || !slices.Equal(out.t.ReductionAxes, want.reduced) {
		v.planf("op %d: output %q has shape %v and reduction_axes %v, want %v and %v (%s)",
			i, op.Output, out.t.Shape, out.t.ReductionAxes, want.shape, want.reduced, want.why)
	}
}

// pendingDomain is the domain of the pending terms of an op whose own
// output domain is d (docs/plan.md, "partial"): a leading axis of the
// terms, then d's non-reduction axes, no reduction axis.
func pendingDomain(d outputDomain, terms int) outputDomain {
	shape := []int{terms}
	for k, e := range d.shape {
		if !slices.Contains(d.reduced, k) {
			shape = append(shape, e)
		}
	}
	return outputDomain{shape, nil, "the terms axis, then " + d.why + " without the combined axis: the output holds pending terms"}
}

// outputDomain is the logical domain an op's output must have, and why.
type outputDomain struct {
	shape, reduced []int
	why            string
}

// valueShape returns the extents of a tensor's non-reduction axes, for
// reading only: a tensor with no reduction axis gives its own shape
// (validate asks for the shape of every op's operands).
func valueShape(t *Tensor) []int {
	if len(t.ReductionAxes) == 0 {
		return slices.Clip(t.Shape)
	}
	var shape []int
	for k, e := range t.Shape {
		if !slices.Contains(t.ReductionAxes, k) {
			shape = append(shape, e)
		}
	}
	return shape
}

// wantOutput returns the output domain of op, whose operands and arity
// are valid, or false, with a problem, when its operands' shapes do not
// fit together (or, for a reduction or broadcast, its axis or axes are
// invalid, which the axis checks report).
func (v *validator) wantOutput(i int, op Op, ins []*tensorInfo, out *tensorInfo) (outputDomain, bool) {
	in := valueShape(ins[0].t)
	switch {
	case op.Op == "set":
		return outputDomain{in, nil, "the input's non-reduction shape, the reduced axis"}, true
	case isReductionOp(op.Op):
		if op.Axis == nil || *op.Axis < 0 || *op.Axis >= len(in) {
			return outputDomain{}, false // reported as a bad axis
		}
		return outputDomain{in, []int{*op.Axis}, "the input's non-reduction shape, the reduced axis"}, true
	case isUnaryOp(op.Op):
		return outputDomain{in, nil, "the input's non-reduction shape"}, true
	case op.Op == "broadcast":
		return broadcastDomain(op.Axes, in, out.t.Shape)
	case isBinaryOp(op.Op) && op.Scalar != nil:
		return outputDomain{in, nil, "the input's non-reduction shape"}, true
	case isBinaryOp(op.Op):
		return v.elementwiseDomain(i, op, ins)
	case op.Op == "matmul":
		return v.matmulDomain(i, op, ins)
	case op.Op == "embedding":
		return v.embeddingDomain(i, op, ins)
	case op.Op == "gather":
		return v.gatherDomain(i, op, ins)
	case op.Op == "scatter_add":
		return v.scatterDomain(i, op, ins)
	case ops.Is(op.Op, ops.View):
		return v.viewDomain(i, op, ins)
	}
	return v.linearDomain(i, op, ins)
}

// viewDomain is a view op's output (permute, reshape): the shape its
// registry entry gives its input's and its attributes (Validate has
// checked they are given), and no reduction axis.
func (v *validator) viewDomain(i int, op Op, ins []*tensorInfo) (outputDomain, bool) {
	e := ops.Lookup(op.Op)
	if len(e.CheckValues(op.Attrs)) > 0 || e.Takes(ops.AttrAxis) && op.Axis == nil {
		return outputDomain{}, false // reported by checkOpAttrs, checkOpAxis
	}
	shapes := make([][]int, len(ins))
	for k, x := range ins {
		shapes[k] = valueShape(x.t)
	}
	in := shapes[0]
	shape, _, err := e.Shape(shapes, ops.Attrs{Axis: axisOr(op.Axis, -1), Values: op.Attrs})
	if err != nil {
		v.planf("op %d: %s of %q: %s", i, op.Op, op.Operands()[0], err.Msg)
		return outputDomain{}, false
	}
	return outputDomain{shape, nil, fmt.Sprintf("the input's %v as %s", in, op.Expr())}, true
}
