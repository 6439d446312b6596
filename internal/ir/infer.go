package ir

import (
	"fmt"
	"slices"

	"github.com/nvcomm/nvcomm/internal/diag"
	"github.com/nvcomm/nvcomm/internal/ops"
	"github.com/nvcomm/nvcomm/internal/shard"
)

// This file infers an op's output from its operands (docs/fusion.md,
// "ops"): the logical domain, the mesh and the dtype, then checks the
// output's declaration against them. Shapes follow PyTorch: binary
// elementwise ops broadcast extent-1 axes (torch's broadcasting semantics),
// matmul is torch.matmul without its 1-D and batch-broadcasting cases, and
// linear is torch.nn.functional.linear. Like nvFuser's matmul and linear
// (csrc/ops/composite.cpp), a contraction's output keeps the contracted
// axis k as a trailing reduction axis of its logical domain.

// resolveOp infers the output of op from its operands and checks the
// output's declaration against it. inferred reports whether the output's
// domain, mesh and dtype are known, so that the ops reading it can be
// checked even when its declaration is wrong; ok whether everything is
// right.
func (p *Source) resolveOp(op *Op, ro *rawOp) (inferred, ok bool) {
	in := ro.in()
	in.termsOut = p.declaresSumTerms(ro.out)
	if !p.inferOp(op, in, func() ([]int, diag.Pos, bool) { return p.broadcastShape(ro, op) }) {
		return false, false
	}
	out := op.Out
	part := p.inferredPart(ro)
	out.Propagated = p.propagates(out.Name) || part
	if part {
		out.Mesh = p.compositeMesh(ro)
	}
	if out.Propagated {
		// Its mesh and sharding come from the forward sweep, once the op
		// is checked (propagate.go).
		return true, p.declarePropagated(op)
	}
	out.Mesh = operandMesh(op)
	ok = p.declareOutput(op)
	return out.Mesh != nil, ok
}

// inferredPart reports whether ro writes an intermediate that takes its
// shape and sharding from its op (rawOp.intermediate) rather than from a
// declaration: a file that writes a backward's ops declares the copies
// whose sharding propagation would not give, and the broadcasts' shapes
// (gradof.go).
func (p *Source) inferredPart(ro *rawOp) bool {
	return ro.intermediate() && p.decl(ro.out) == nil
}

// opIn is an op for inferOp to check, as given: its kind as written (a
// set of a Partial tensor becomes the reduction of its terms), its
// attributes as written (negative positions count from the end) and its
// index in messages (ops[idx]). src is the file's op, which says where
// each part is written, nil for the builder's, whose parts have no
// position: positions are looked up only where they are recorded or
// reported, since a fusion has 100k ops.
type opIn struct {
	kind OpKind
	idx  int
	axis int
	axes []int
	// attrs are the other attributes, checked against the op's entry.
	attrs ops.Values
	// scalar is the number a binary op takes as an operand, or nil.
	scalar *ops.Scalar
	out    string
	pos    diag.Pos
	src    *rawOp
	// termsOut says that the output is declared to hold pending terms
	// of a sum: an op that passes sums then reads its operands' terms as
	// they are (sums.go).
	termsOut bool
}

// attrPos is where attribute key is written, or its list's entry i when
// i is not negative.
func (in opIn) attrPos(key ops.Attr, i int) diag.Pos {
	if in.src == nil {
		return diag.Pos{}
	}
	return in.src.keysOf().attrPos(key, i)
}

// inPos is where operand k is written.
func (in opIn) inPos(k int) diag.Pos {
	if in.src == nil {
		return diag.Pos{}
	}
	return in.src.inAt[k]
}

// axisPos is where a reduction's axis is written.
func (in opIn) axisPos() diag.Pos {
	if in.src == nil {
		return diag.Pos{}
	}
	return in.src.keysOf().axisAt
}

// axisAt is where entry i of broadcast's list of axes is written.
func (in opIn) axisAt(i int) diag.Pos {
	if in.src == nil {
		return diag.Pos{}
	}
	return in.src.keysOf().axesEach[i]
}

// inferOp checks op against its operands and infers its output's logical
// domain and dtype. declared gives the output's declared shape and where
// it is written, which broadcast takes its new axes' extents from (false
// after reporting why there is none).
func (p *Source) inferOp(op *Op, in opIn, declared func() ([]int, diag.Pos, bool)) bool {
	if !p.checkPartialReads(op, in) {
		return false
	}
	op.Attrs, op.Scalar = in.attrs, in.scalar.Clone()
	shape, reduction, shapeOK := p.inferShape(op, in, declared)
	if dtypeOK := p.sameDTypes(op, in); !shapeOK || !dtypeOK {
		return false
	}
	// The output of a broadcast, a binary op or a contraction can be
	// larger than every operand; its reduction axis takes no memory.
	value := slices.Clone(shape)
	if reduction >= 0 {
		value = slices.Delete(value, reduction, reduction+1)
	}
	if _, fits := Bytes(value, valueOperand(op).DType); !fits {
		// What the error names is formatted only for it.
		p.checkBytes(value, valueOperand(op).DType, in.pos, fmt.Sprintf("ops[%d]: output %q", in.idx, op.Out.Name), "")
		return false
	}
	op.Out.Logical = logicalDomain(shape, reduction)
	op.Out.DType = outputDType(op)
	return true
}

// outputDType is the dtype op's output takes: its operands', but for an
// op with a dtype attribute (cast), which gives it.
func outputDType(op *Op) DType {
	if d := op.Attrs.Str(ops.AttrDType); d != "" {
		return DType(d)
	}
	return valueOperand(op).DType
}

// operandMesh is the mesh an output takes when it gives none: its first
// operand's. In format 2 an operand may not have its mesh yet (a fusion
// input whose mesh is propagated from its consumers), and then the first
// operand that has one gives it.
func operandMesh(op *Op) *Mesh {
	for _, in := range op.Inputs {
		if in.Mesh != nil {
			return in.Mesh
		}
	}
	return nil
}

// checkPartialReads enforces that only set reads a tensor with a Partial
// placement, and turns such a set into the reduction of its terms.
func (p *Source) checkPartialReads(op *Op, oi opIn) bool {
	good := true
	for k, in := range op.Inputs {
		if in.Partial == "" {
			continue
		}
		if op.Kind == OpSet {
			// A set from a Partial tensor is the reduction of its terms.
			op.Kind, op.Axis = in.Partial, 0
			continue
		}
		if oi.termsOut && op.Kind.PassesSums() && in.Partial == OpSum {
			continue // it computes on the terms (sums.go), checked with its output
		}
		pos := oi.pos
		if !op.Kind.IsReduction() {
			pos = oi.inPos(k)
		}
		p.errs.AddHint(pos, "read it with a set, which reduces its partial terms",
			"ops[%d]: %q has a Partial placement and can only be read by set", oi.idx, in.Name)
		good = false
	}
	return good
}

// inferShape returns the output's logical extents and the position of its
// reduction axis (-1 when it has none).
func (p *Source) inferShape(op *Op, in opIn, declared func() ([]int, diag.Pos, bool)) ([]int, int, bool) {
	switch {
	case in.kind == OpSet:
		// op.Axis is 0 for a set from Partial terms, which reduces them.
		return op.In().Shape(), op.Axis, true
	case in.kind.IsReduction():
		return p.inferReduction(op, in)
	case op.Kind.isBinary():
		shape, ok := p.inferElementwise(op, in)
		return shape, -1, ok
	case op.Kind == OpBroadcast:
		shape, ok := p.inferBroadcast(op, in, declared)
		return shape, -1, ok
	case op.Kind == OpMatmul:
		return p.inferMatmul(op, in)
	case op.Kind == OpLinear:
		return p.inferLinear(op, in)
	case op.Kind == OpEmbedding:
		return p.inferEmbedding(op, in)
	case op.Kind == OpGather:
		return p.inferGather(op, in)
	case op.Kind == OpScatterAdd:
		return p.inferScatter(op, in)
	case op.Kind.family() == ops.View:
		shape, ok := p.inferView(op, in)
		return shape, -1, ok
	}
	return op.In().Shape(), -1, true // unary ops keep the shape
}

// inferView infers a view op's output shape from its entry's Shape, and
// normalizes its attributes as the entry does (dims counted from the
// start, a reshape's -1 inferred); a problem is reported where the value
// at fault is written.
func (p *Source) inferView(op *Op, oi opIn) ([]int, bool) {
	x, e := op.In(), op.Kind.Entry()
	in := make([][]int, len(op.Inputs))
	for k, t := range op.Inputs {
		in[k] = t.Shape()
	}
	axis := -1
	if e.Takes(ops.AttrAxis) { // slice, cat: the axis they work along
		a, ok := ops.NormalizeAxis(oi.axis, len(in[0]))
		if !ok {
			p.errs.AddHint(oi.axisPos(), "axes count from 0, or from -1 at the end",
				"ops[%d]: %s axis %d is out of range for %q, which has %d non-reduction axes", oi.idx, op.Kind, oi.axis, x.Name, len(in[0]))
			return nil, false
		}
		axis, op.Axis = a, a
	}
	shape, attrs, err := e.Shape(in, ops.Attrs{Axis: axis, Values: op.Attrs})
	if err != nil {
		pos, what := oi.inPos(0), x.Name
		switch {
		case err.Attr != "":
			pos = oi.attrPos(err.Attr, err.Index)
		case err.Index > 0: // an operand but the first: cat's
			pos, what = oi.inPos(err.Index), op.Inputs[err.Index].Name
		}
		p.errs.AddHint(pos, err.Hint, "ops[%d]: %s of %q: %s", oi.idx, op.Kind, what, err.Msg)
		return nil, false
	}
	op.Attrs = attrs
	return shape, true
}

// inferReduction checks the reduced axis: the output keeps the input's
// axes, the reduced one as a reduction axis.
func (p *Source) inferReduction(op *Op, oi opIn) ([]int, int, bool) {
	in := op.In()
	rank := len(in.ValueAxes())
	axis := oi.axis
	if axis < 0 {
		axis += rank
	}
	if axis < 0 || axis >= rank {
		p.errs.Add(oi.axisPos(), "ops[%d]: %s axis %d is out of range for %q, which has %d non-reduction axes", oi.idx, op.Kind, oi.axis, in.Name, rank)
		return nil, -1, false
	}
	op.Axis = axis
	return in.Shape(), axis, true
}

// inferElementwise broadcasts the operands' shapes: equal ranks, and at
// each axis equal extents or 1 in one operand, which is repeated along it.
func (p *Source) inferElementwise(op *Op, oi opIn) ([]int, bool) {
	a := op.In()
	shape := a.Shape()
	for k, b := range op.Inputs[1:] {
		bs := b.Shape()
		pos := oi.inPos(k + 1)
		if len(bs) != len(shape) {
			p.errs.AddHint(pos, "insert the missing axes with a broadcast op first",
				"ops[%d]: %s operands must have equal ranks, but %q has rank %d and %q rank %d", oi.idx, op.Kind, a.Name, len(shape), b.Name, len(bs))
			return nil, false
		}
		for ax, e := range bs {
			switch {
			case e == shape[ax] || e == 1:
			case shape[ax] == 1:
				shape[ax] = e
			default:
				p.errs.AddHint(pos, "extents must be equal, or 1 in one operand, which is then repeated (torch's broadcasting rule)",
					"ops[%d]: %s operands do not broadcast: axis %d has extent %d in %q and %d in %q", oi.idx, op.Kind, ax, shape[ax], a.Name, e, b.Name)
				return nil, false
			}
		}
	}
	return shape, true
}

// broadcastShape is the shape a file declares for broadcast ro's output,
// and where: the new axes' extents come from it.
func (p *Source) broadcastShape(ro *rawOp, op *Op) ([]int, diag.Pos, bool) {
	if shape := ro.keysOf().outShape; shape != nil {
		return shape, ro.pos, true
	}
	if p.inferredPart(ro) {
		return extentOne(op.In().Shape(), ro.keysOf().axes), ro.pos, true
	}
	rt := p.decl(ro.out)
	if rt != nil && rt.broken {
		return nil, diag.Pos{}, false // its declaration's errors are reported
	}
	if rt == nil || !given(rt.rest().shapeAt) {
		p.noBroadcastShape(ro.outAt, ro.fileIdx, ro.out)
		return nil, diag.Pos{}, false
	}
	return rt.rest().shape, rt.rest().shapeAt, true
}

// noBroadcastShape reports a broadcast whose output declares no shape.
func (p *Source) noBroadcastShape(pos diag.Pos, idx int, out string) {
	p.errs.AddHint(pos, fmt.Sprintf("declare tensor %q with its full shape: the new axes' extents come from it", out),
		"ops[%d]: broadcast needs the shape of its output %q", idx, out)
}

// inferBroadcast takes the output's shape from its declaration and checks
// that it is the input's with one axis inserted at each of the op's axes.
func (p *Source) inferBroadcast(op *Op, oi opIn, declared func() ([]int, diag.Pos, bool)) ([]int, bool) {
	in, out := op.In(), op.Out
	shape, at, ok := declared()
	if !ok {
		return nil, false
	}
	axes, ok := p.broadcastAxes(oi, len(shape))
	if !ok {
		return nil, false
	}
	op.Axes = axes
	what := fmt.Sprintf("tensor %q shape", out.Name)
	inShape := in.Shape()
	hint := fmt.Sprintf("the output's shape is %q's %s with a new axis inserted at each of axes %s", in.Name, fmtShape(inShape), fmtShape(axes))
	if len(shape) != len(inShape)+len(axes) {
		p.errs.AddHint(at, hint, "%s %s has rank %d, but broadcast of %q (rank %d) at axes %s gives rank %d",
			what, fmtShape(shape), len(shape), in.Name, len(inShape), fmtShape(axes), len(inShape)+len(axes))
		return nil, false
	}
	for j, e := range shape {
		if slices.Contains(axes, j) {
			continue
		}
		if k := j - countBelow(axes, j); inShape[k] != e {
			p.errs.AddHint(at, hint, "%s %s does not match its input: axis %d has extent %d, but it is axis %d of %q, of extent %d",
				what, fmtShape(shape), j, e, k, in.Name, inShape[k])
			return nil, false
		}
	}
	return shape, true
}

// broadcastAxes normalizes broadcast's axes against the output's rank
// (negative positions count from the end) and checks that they are
// increasing, so each is given once.
func (p *Source) broadcastAxes(in opIn, rank int) ([]int, bool) {
	axes := make([]int, len(in.axes))
	for i, v := range in.axes {
		a := v
		if a < 0 {
			a += rank
		}
		pos := in.axisAt(i)
		if a < 0 || a >= rank {
			p.errs.Add(pos, "ops[%d]: broadcast axis %d is out of range for the output %q of rank %d", in.idx, v, in.out, rank)
			return nil, false
		}
		if i > 0 && a <= axes[i-1] {
			p.errs.AddHint(pos, "list each new axis once, in increasing order",
				"ops[%d]: broadcast axes %s are not increasing (axis %d comes after %d)", in.idx, fmtShape(in.axes), v, in.axes[i-1])
			return nil, false
		}
		axes[i] = a
	}
	return axes, true
}

// inferMatmul checks a[..., m, k] @ b[..., k, n] (b 2-D, or of a's rank
// with equal batch extents) and returns [...batch, m, n, k], k a
// reduction axis.
func (p *Source) inferMatmul(op *Op, oi opIn) ([]int, int, bool) {
	a, b := op.Inputs[0], op.Inputs[1]
	as, bs := a.Shape(), b.Shape()
	if len(as) < 2 {
		p.errs.AddHint(oi.inPos(0), "a is [..., m, k]; give a 1-D operand an axis of extent 1 with broadcast, or use linear",
			"ops[%d]: matmul operand a, %q of shape %s, has rank %d, expected at least 2", oi.idx, a.Name, fmtShape(as), len(as))
		return nil, -1, false
	}
	if len(bs) != 2 && len(bs) != len(as) {
		p.errs.AddHint(oi.inPos(1), "b is [k, n], shared by every batch, or [..., k, n] with a's batch axes",
			"ops[%d]: matmul operand b, %q of shape %s, has rank %d, expected 2 or a's rank %d", oi.idx, b.Name, fmtShape(bs), len(bs), len(as))
		return nil, -1, false
	}
	k := as[len(as)-1]
	if kb := bs[len(bs)-2]; kb != k {
		p.errs.AddHint(oi.inPos(1), "a is [..., m, k] and b [..., k, n]; for x @ w.T with w of shape [n, k], use linear",
			"ops[%d]: matmul contracts axis %d of %q (k = %d) with axis %d of %q (k = %d): the extents differ",
			oi.idx, len(as)-1, a.Name, k, len(bs)-2, b.Name, kb)
		return nil, -1, false
	}
	if len(bs) == len(as) {
		for ax := range as[:len(as)-2] {
			if as[ax] != bs[ax] {
				p.errs.AddHint(oi.inPos(1), "batch axes are not broadcast; give b rank 2 to share it across batches",
					"ops[%d]: matmul batch axis %d has extent %d in %q and %d in %q (expected equal extents)",
					oi.idx, ax, as[ax], a.Name, bs[ax], b.Name)
				return nil, -1, false
			}
		}
	}
	shape := append(slices.Clone(as[:len(as)-1]), bs[len(bs)-1], k)
	return shape, len(shape) - 1, true
}

// inferLinear checks x[..., k], w[n, k] and bias[n], and returns
// [..., n, k], k a reduction axis: y = x @ wᵀ + bias.
func (p *Source) inferLinear(op *Op, oi opIn) ([]int, int, bool) {
	x, w := op.Inputs[0], op.Inputs[1]
	xs, ws := x.Shape(), w.Shape()
	switch {
	case len(xs) < 1:
		p.errs.AddHint(oi.inPos(0), "x is [..., k]",
			"ops[%d]: linear operand x, %q of shape [], has rank 0, expected at least 1", oi.idx, x.Name)
		return nil, -1, false
	case len(ws) != 2:
		p.errs.AddHint(oi.inPos(1), "w is [n, k], as torch.nn.functional.linear's weight",
			"ops[%d]: linear operand w, %q of shape %s, has rank %d, expected 2", oi.idx, w.Name, fmtShape(ws), len(ws))
		return nil, -1, false
	}
	k, n := xs[len(xs)-1], ws[0]
	if ws[1] != k {
		p.errs.AddHint(oi.inPos(1), "w is [n, k], as torch.nn.functional.linear's weight; for x @ w with w of shape [k, n], use matmul",
			"ops[%d]: linear contracts axis %d of %q (k = %d) with axis 1 of %q (k = %d): the extents differ",
			oi.idx, len(xs)-1, x.Name, k, w.Name, ws[1])
		return nil, -1, false
	}
	if len(op.Inputs) == 3 {
		bias := op.Inputs[2]
		if bs := bias.Shape(); len(bs) != 1 || bs[0] != n {
			p.errs.AddHint(oi.inPos(2), fmt.Sprintf("bias is [n], w's axis 0: [%d]", n),
				"ops[%d]: linear bias %q has shape %s, expected [%d]", oi.idx, bias.Name, fmtShape(bs), n)
			return nil, -1, false
		}
	}
	shape := append(slices.Clone(xs[:len(xs)-1]), n, k)
	return shape, len(shape) - 1, true
}

// sameDTypes checks that all operands have one dtype: only cast converts (in
// either format).
func (p *Source) sameDTypes(op *Op, oi opIn) bool {
	if indexed(op) || scatters(op) != nil {
		return p.indexDTypes(op, oi)
	}
	first := op.In()
	for k, in := range op.Inputs[1:] {
		if in.DType != first.DType {
			p.errs.AddHint(oi.inPos(k+1), fmt.Sprintf("convert one first, e.g. {op: cast, in: %s, out: %s_%s, dtype: %s}", in.Name, in.Name, first.DType, first.DType),
				"ops[%d]: %s operands have different dtypes: %q is %s and %q is %s (operands share a dtype; use cast)", oi.idx, op.Kind, first.Name, first.DType, in.Name, in.DType)
			return false
		}
	}
	return true
}

// declareOutput applies the output's declaration (mesh, dtype, shape,
// schedule or placements) to the inferred output, and replays its
// schedule.
func (p *Source) declareOutput(op *Op) bool {
	out := op.Out
	rt := p.decl(out.Name)
	if rt == nil {
		return p.schedule(out, nil) // no schedule, but resolves the layout
	}
	if rt.broken {
		return false // its errors are reported
	}
	what := rt.what()
	if given(rt.meshAt) {
		out.Mesh = rt.mesh
	} else if out.Mesh == nil {
		// Format 2: every operand's mesh is still to be propagated.
		p.errs.AddHint(rt.pos, "give it a mesh, or give one to an operand",
			"%s: its sharding is given, but it has no mesh to lie on: none of its operands has one", what)
	}
	p.checkDeclared(op, rt, what)
	if out.Mesh == nil {
		return false
	}
	var pls []placement
	if given(rt.plsAt) {
		var ok bool
		if pls, ok = p.placementsOf(rt, out.Mesh, what+" placements"); !ok {
			return false
		}
		if !p.checkOutputPartial(op, pls, what+" placements") {
			return false
		}
		if _, i, ok := partialOf(pls); ok && out.Mesh.Shape[i] > 1 {
			return p.declarePending(op, pls, rt.pos, func(t *Tensor) bool { return p.scheduleWith(t, rt, pls) })
		} else if ok {
			// One device along the mesh axis holds the only term, the
			// op's complete values: Replicate along it.
			pls = slices.Clone(pls)
			pls[i].Placement = shard.Placement{Kind: shard.Replicate}
		}
	}
	return p.scheduleWith(out, rt, pls)
}

// checkDeclared checks the dtype and shape an output declares against
// those inferred from its op.
func (p *Source) checkDeclared(op *Op, rt *rawTensor, what string) {
	r := rt.rest()
	if given(r.dtypeAt) {
		p.matchDType(op, r.dtype, r.dtypeAt, what)
	}
	if given(r.shapeAt) {
		p.matchShape(op.Out, r.shape, r.shapeAt, what)
	}
}

// matchDType checks an output's declared dtype d, written at pos, against
// its op's.
func (p *Source) matchDType(op *Op, d DType, pos diag.Pos, what string) {
	want := outputDType(op)
	if d == want {
		return
	}
	if op.Attrs.Str(ops.AttrDType) != "" {
		p.errs.AddHint(pos, fmt.Sprintf("remove its dtype, or declare it %s", want),
			"%s: dtype %s differs from %s, which its %s gives", what, d, want, op.Kind)
		return
	}
	whose := "its input's"
	switch {
	case indexed(op):
		whose = "its table's"
	case scatters(op) != nil:
		whose = "its src's"
	case len(op.Inputs) > 1:
		whose = "its operands'"
	}
	p.errs.AddHint(pos, fmt.Sprintf("remove its dtype, or declare it %s; a cast op converts to another", want),
		"%s: dtype %s differs from %s %s (operands share a dtype; use cast)", what, d, whose, want)
}

// declarePropagated checks what a propagated output declares: a dtype and
// a shape, which must agree with the op, and no allocation, whose loop
// positions would count axes that propagation has yet to add.
func (p *Source) declarePropagated(op *Op) bool {
	rt := p.decl(op.Out.Name)
	if rt == nil {
		return true
	}
	if rt.broken {
		return false // its errors are reported
	}
	what := rt.what()
	before := p.errs.Count()
	p.checkDeclared(op, rt, what)
	if alloc := rt.rest().alloc; alloc != nil {
		p.errs.AddHint(alloc.At, "give the tensor a mesh and a schedule or placements, or leave allocation out",
			"%s: allocation needs a given sharding: the loop domain it counts positions of is propagated (format 2)", what)
	}
	return p.errs.Count() == before
}

// checkOutputPartial allows a Partial placement on a produced tensor only
// where the op leaves pending terms: Partial(sum) on a contraction's
// output, Partial(op) on a reduction's (op its own) (docs/fusion.md,
// "placements").
func (p *Source) checkOutputPartial(op *Op, pls []placement, what string) bool {
	pl, _, ok := partialOf(pls)
	return !ok || p.checkPendingOp(op, pl.op(), pl.pos, what)
}

// declaresSumTerms reports whether tensor name's declaration gives it a
// Partial(sum) placement: terms of a sum, which an op that passes sums
// computes on (sums.go).
func (p *Source) declaresSumTerms(name string) bool {
	rt := p.decl(name)
	if rt == nil || rt.pls == nil {
		return false
	}
	pl, _, ok := partialOf(*rt.pls)
	return ok && pl.op() == OpSum
}
