package ir

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/nvcomm/nvcomm/internal/diag"
	"github.com/nvcomm/nvcomm/internal/ops"
)

// This file is what a fusion's front end hands its Source: the header's
// values, and each mesh, tensor and op as the file writes it, with where
// each part is written (the zero position for a part left out).

// Errors is the collector the front end reports the file's syntax into,
// and Build its checks: one capped list of the file's problems.
func (p *Source) Errors() *diag.Collector { return p.errs }

// SetFormat sets the file's format, 1 or 2 (which propagates shardings).
func (p *Source) SetFormat(format int) {
	p.changeAfterStart()
	p.format = format
}

// SetName names the fusion, in place of the file's name.
func (p *Source) SetName(name string) { p.name = name }

// SetInputs and SetOutputs give the file's inputs and outputs lists, which
// Build checks; without them the fusion's are the tensors no op produces
// and those no op reads.
func (p *Source) SetInputs(l *StrList) { p.inputs = l }

// SetOutputs: see SetInputs.
func (p *Source) SetOutputs(l *StrList) { p.outputs = l }

// AddMesh declares mesh m, whose Devices are nil when it is broken (its
// problems reported): no tensor lies on it.
func (p *Source) AddMesh(m *Mesh) {
	p.changeAfterStart()
	p.meshes[m.Name] = m
	p.meshNames = append(p.meshNames, m.Name)
}

// Declares reports whether a tensor named name is declared.
func (p *Source) Declares(name string) bool {
	_, ok := p.raw[name]
	return ok
}

// TensorDecl is a tensor's declaration as a file writes it.
type TensorDecl struct {
	Name string
	Pos  diag.Pos
	// MeshAt is where the mesh is written; Mesh the declared mesh it
	// names, nil when the name is wrong (reported) or names a broken mesh.
	MeshAt diag.Pos
	Mesh   *Mesh
	// DTypeAt and ShapeAt are where the dtype and shape are written; DType
	// and Shape their values ("" and nil when they are wrong, reported).
	DTypeAt, ShapeAt diag.Pos
	DType            DType
	Shape            []int
	// Schedule and Alloc are the schedule and allocation as decoded, nil
	// when not given: their problems wait in them for the replay.
	Schedule *ScheduleDecl
	Alloc    *AllocDecl
	// Placements are the placements' entries, nil when not given (or
	// auto); Auto is set by `placements: auto`.
	Placements *StrList
	Auto       bool
	// Broken is set when the front end reported a problem of the
	// declaration: Build checks it no further, nor the ops reading it.
	Broken bool
}

// AddTensor declares a tensor. Its placements are decoded now on the mesh
// it declares, so that their errors are reported along with those of the
// ops even when the op producing it is broken; such errors leave it
// unbroken (an output's shape comes from its op, and the ops reading it
// are still checked), and Build reports them again.
func (p *Source) AddTensor(d *TensorDecl) {
	p.changeAfterStart()
	rt := &rawTensor{name: d.Name, pos: d.Pos, meshAt: d.MeshAt, mesh: d.Mesh, auto: d.Auto}
	p.raw[d.Name] = declared{raw: rt}
	if p.asRead == nil {
		p.tensorNames = append(p.tensorNames, d.Name)
	} else if !IsIdent(d.Name) {
		p.abandon() // a gradient or a part: build checks it against the ops
	}
	if given(d.DTypeAt) {
		rt.own().dtypeAt, rt.own().dtype = d.DTypeAt, d.DType
	}
	if given(d.ShapeAt) {
		rt.own().shapeAt, rt.own().shape = d.ShapeAt, d.Shape
	}
	if d.Schedule != nil {
		rt.own().sched = d.Schedule
	}
	if d.Alloc != nil {
		rt.own().alloc = d.Alloc
	}
	rt.broken = d.Broken || given(rt.meshAt) && rt.mesh == nil
	if d.Placements == nil {
		return
	}
	rt.plsAt = d.Placements.At
	if rt.mesh != nil {
		if decoded, ok := p.placements(d.Placements, rt.mesh, rt.whatPart(" placements")); ok {
			rt.pls = p.sharedPlacements(decoded, rt.plsAt)
			return
		}
	}
	rt.own().plsList = d.Placements
}

// OpDecl is an op as a file writes it.
type OpDecl struct {
	// Kind is the op's, "" when the file's is no op (reported): the op
	// is then left out unchecked.
	Kind OpKind
	Pos  diag.Pos
	// Index is the op's position in the file's ops list.
	Index int
	// In are the operands' names, InAt where each is written; InList is
	// where "in" is, InBroken set when the front end reported it.
	In       []string
	InAt     []diag.Pos
	InList   diag.Pos
	InBroken bool
	Out      string
	OutAt    diag.Pos
	// Axis is -1 for none, written at AxisAt; Axes are broadcast's new
	// axes or a norm's, the list at AxesAt, its entries at AxesEach.
	Axis     int
	AxisAt   diag.Pos
	Axes     []int
	AxesAt   diag.Pos
	AxesEach []diag.Pos
	// Attrs are the other attributes in the file's order, each written at
	// AttrAt, a list's entries at AttrEach.
	Attrs    ops.Values
	AttrAt   []diag.Pos
	AttrEach [][]diag.Pos
	// Scalar is the number a binary op takes as an operand, nil for none,
	// written at ScalarAt.
	Scalar   *ops.Scalar
	ScalarAt diag.Pos
	// GradOf is the tensor whose op the op is part of the gradient of
	// (grad_of, docs/training.md), "" for none, written at GradOfAt.
	GradOf   string
	GradOfAt diag.Pos
	// Broken is set when the front end reported a problem of the op: it
	// is left out.
	Broken bool
	// Written reports whether the file writes key on the op, misspelled
	// or with a value of the wrong kind: an attribute it lacks is then not
	// reported missing again.
	Written func(key string) bool
}

// AddOp declares an op, nil for an entry of the ops list that is no op at
// all (reported). An op of a known kind has its attributes and arity
// checked; one with problems is left out (leaveOut).
func (p *Source) AddOp(d *OpDecl) {
	if d == nil {
		if p.building() {
			p.abandon()
		}
		p.leaveOut(nil)
		return
	}
	op := d.raw()
	ok := !d.Broken && d.Kind != ""
	if d.Kind != "" {
		ok = p.checkAttrs(op, d.Written) && ok
		ok = (d.InBroken || p.checkArity(op, d.InList)) && ok
	}
	switch {
	case p.asRead != nil:
		if ok && p.building() {
			p.buildAsRead(op)
		} else if p.building() {
			p.abandon() // read again, for build to report
		}
	case ok:
		p.ops = append(p.ops, op)
	default:
		p.leaveOut(op)
	}
}

// raw is the op d declares, as build reads it.
func (d *OpDecl) raw() *rawOp {
	op := &rawOp{kind: d.Kind, ins: d.In, inAt: d.InAt, out: d.Out, outAt: d.OutAt, axis: d.Axis, pos: d.Pos, fileIdx: d.Index}
	if given(d.AxisAt) || given(d.AxesAt) || d.Attrs != nil || d.Scalar != nil || d.GradOf != "" {
		op.keys = &rawKeys{axisAt: d.AxisAt, axes: d.Axes, axesAt: d.AxesAt, axesEach: d.AxesEach, scalar: d.Scalar, scalarAt: d.ScalarAt,
			gradOf: d.GradOf, gradOfAt: d.GradOfAt}
		if d.Attrs != nil {
			op.keys.attrs = &rawAttrs{vals: d.Attrs, at: d.AttrAt, each: d.AttrEach}
		}
	}
	return op
}

// opWhat names the file's op idx in messages, "ops[3]": made for a
// message only, as the ops of a file of 100k ops are checked.
func opWhat(idx int) string { return "ops[" + strconv.Itoa(idx) + "]" }

// leaveOut records what an op left out for its errors (nil when it is not
// even a mapping) writes and reads: its output is lost, and its operands
// are read.
func (p *Source) leaveOut(op *rawOp) {
	if op == nil || !given(op.outAt) || len(op.ins) == 0 {
		p.opsLost = true
	}
	if op == nil {
		return
	}
	if op.out != "" {
		p.lose(op.out)
	}
	if p.lostReads == nil {
		p.lostReads = map[string]bool{}
	}
	for _, in := range op.ins {
		p.lostReads[in] = true
	}
}

// lose marks the tensor name as lost: its producer is unknown.
func (p *Source) lose(name string) {
	if p.lost == nil {
		p.lost = map[string]bool{}
	}
	p.lost[name] = true
}

// checkAttrs checks the op's attributes but axis and axes against its
// registry entry (checkAttrValues) and puts them in the entry's order;
// written says which keys the file writes.
func (p *Source) checkAttrs(op *rawOp, written func(string) bool) bool {
	k := readPart(op.keysOf().attrs)
	order, good := p.checkAttrValues(op.kind, k.vals, func(j int) diag.Pos { return k.at[j] }, op.pos, op.fileIdx, written)
	if op.keys != nil && op.keys.attrs != nil {
		var in rawAttrs
		for _, j := range order {
			in.vals, in.at, in.each = append(in.vals, k.vals[j]), append(in.at, k.at[j]), append(in.each, k.each[j])
		}
		*op.keys.attrs = in
	}
	return good
}

// checkAttrValues checks attribute values vals of an op of kind, each
// written at at(j), the op ops[idx] at pos (ops.Op.CheckValues); a missing one
// that reported says was reported already (written misspelled, or with a
// value of the wrong type) is not reported again. It returns the indices
// of vals in the entry's order.
func (p *Source) checkAttrValues(kind OpKind, vals ops.Values, at func(j int) diag.Pos, pos diag.Pos, idx int,
	reported func(key string) bool) ([]int, bool) {
	e := kind.Entry()
	probs := e.CheckValues(vals)
	for _, pr := range probs {
		what := opWhat(idx)
		switch pr.What {
		case ops.NotTaken:
			p.errs.AddHint(at(pr.Index), takersHint(pr.Key), "%s: %s takes no %q", what, kind, pr.Key)
		case ops.Bad:
			p.errs.AddHint(at(pr.Index), pr.Hint, "%s %s: %s", what, pr.Key, pr.Msg)
		case ops.Missing:
			if !reported(string(pr.Key)) {
				p.errs.AddHint(pos, string(pr.Key)+": "+ops.AttrOf(string(pr.Key)).Doc, "%s: %s needs %q", what, kind, pr.Key)
			}
		}
	}
	var order []int
	for _, a := range e.Attrs {
		if j := slices.IndexFunc(vals, func(v ops.Value) bool { return v.Key == a }); j >= 0 {
			order = append(order, j)
		}
	}
	return order, len(probs) == 0
}

// scalarHint says which ops take a number as an operand.
var scalarHint = "only the binary elementwise ops (" + strings.Join(ops.FamilyNames(ops.Binary), ", ") +
	") take a number as one of their operands"

// takersHint names the ops that take attribute a.
func takersHint(a ops.Attr) string {
	return fmt.Sprintf("%q is an attribute of %s", a, strings.Join(ops.Takers(a), ", "))
}

// checkArity checks the number of operands the op's kind takes, written
// at in.
func (p *Source) checkArity(op *rawOp, in diag.Pos) bool {
	n := len(op.ins)
	if k := op.keysOf(); k.scalar != nil {
		if !op.kind.isBinary() {
			p.errs.AddHint(k.scalarAt, scalarHint, "%s: %s takes no number as an operand", opWhat(op.fileIdx), op.kind)
			return false
		}
		n++
	}
	e := op.kind.Entry()
	switch _, hi := op.kind.arity(); {
	case e == nil || e.TakesOperands(n):
		return true
	case hi == 1:
		p.errs.AddHint(in, "in names one tensor", "%s: %s takes 1 input, got %d", opWhat(op.fileIdx), op.kind, n)
		return false
	}
	p.errs.AddHint(in, "write in: "+op.kind.operandNames(), "%s: %s takes %s (%s), got %d",
		opWhat(op.fileIdx), op.kind, e.ArityText(), op.kind.operandNames(), n)
	return false
}
