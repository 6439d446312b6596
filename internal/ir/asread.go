package ir

import (
	"cmp"
	"slices"

	"github.com/nvcomm/nvcomm/internal/diag"
)

// This file builds a fusion as its file is read: each op as soon as the
// front end hands it over (AddOp), where build keeps every op's raw entry
// until the whole file is read and its ops are ordered. The raw ops, their
// operand lists and the order were a third of what was live at the peak of
// parsing a file of 100k ops, the peak of `nvcomm lower`'s memory
// (docs/performance.md, "Ops built as read").
//
// It takes the files whose ops come in an order where each reads only
// tensors declared as inputs or written by an op before it, and that have
// no error, no backward and no pipeline section: the fusion is then the
// one build makes, tensor for tensor and op for op, since build orders
// such ops as they are written and makes the inputs alike. For any other
// file it gives up (Abandoned) as soon as it can tell, and the front end
// reads the file again for build, which checks and reports what is wrong
// as it always has: no message comes from this file.

// asRead is the state of a fusion built as it is read (Source.asRead).
type asRead struct {
	b *builder
	// started is set once an op is built: the format, the meshes and the
	// tensors can no longer change.
	started bool
	// ops counts the ops built, each's index in build's order.
	ops int
	// reading is set while an input is resolved as an op reads it:
	// isRead is true of it.
	reading bool
	// abandoned is set when the file is not built as read.
	abandoned bool
	// done is set by FinishRead once the fusion is whole.
	done bool
}

// BuildAsRead makes the Source build its fusion's ops as they are added
// (AddOp), rather than keeping them for Build: the front end calls it
// before adding anything, and FinishRead once it has read the file. When
// the Source gives up (Abandoned), the front end reads the file again into
// a new Source that builds as Build always has.
func (p *Source) BuildAsRead() {
	p.asRead = &asRead{b: p.newBuilder()}
	p.asRead.b.tensors.left = slabSize // slabs of the full size: the count is not known
}

// Abandoned reports whether a Source that builds as read gave up: its file
// must be read again into a new Source, which builds as Build does.
func (p *Source) Abandoned() bool { return p.asRead != nil && p.asRead.abandoned }

// BuiltAsRead reports whether the Source built its fusion as it was read
// and has it whole (FinishRead): Build then only checks the fusion's
// inputs and outputs lists and propagates shardings.
func (p *Source) BuiltAsRead() bool { return p.asRead != nil && p.asRead.done }

// abandon gives up building as read and drops what was built.
func (p *Source) abandon() {
	p.asRead.abandoned = true
	p.asRead.b = nil
}

// building reports whether p builds as read and has not given up.
func (p *Source) building() bool { return p.asRead != nil && !p.asRead.abandoned }

// changeAfterStart gives up building as read when the file changes its
// format, meshes or tensors after an op was built.
func (p *Source) changeAfterStart() {
	if p.building() && p.asRead.started {
		p.abandon()
	}
}

// buildAsRead builds ro, an op the file declares without error, unless it
// gives up: at any error, at an op that reads a tensor neither declared
// nor written before it, or writes one that is read or written before it
// (build would order such ops otherwise, or report them), and at a file
// with a backward or pipeline section.
func (p *Source) buildAsRead(ro *rawOp) {
	e := p.asRead
	b := e.b
	e.started = true
	if p.errs.Count() > 0 || p.back != nil || p.pipe != nil || !IsIdent(ro.out) || ro.keysOf().gradOf != "" || ro.reads(ro.out) ||
		b.tensors.lookup(ro.out) != nil {
		p.abandon()
		return
	}
	for k, name := range ro.ins {
		if b.tensors.lookup(name) != nil {
			continue
		}
		if !IsIdent(name) || p.decl(name) == nil {
			p.abandon() // undeclared: an op after it may write it, or none
			return
		}
		// An input, unless an op after it writes it: that op then gives
		// up. build makes the inputs first, each as here.
		e.reading = true
		ok := b.makeInput(b.tensors.get(name, ro.inAt[k]))
		e.reading = false
		if !ok {
			p.abandon()
			return
		}
	}
	if !b.buildOp(ro, e.ops) || p.errs.Count() > 0 {
		p.abandon()
		return
	}
	e.ops++
}

// FinishRead ends the reading of a Source that builds as read: it makes
// the declared tensors that no op reads or writes, the inputs no op
// reads, and puts every input first, in the order of their declarations,
// as build does. It reports false when the Source gives up (Abandoned).
func (p *Source) FinishRead() bool {
	if !p.building() {
		return false
	}
	e := p.asRead
	if e.done {
		return true
	}
	b := e.b
	if p.errs.Count() > 0 || p.back != nil || p.pipe != nil {
		p.abandon()
		return false
	}
	// The declared tensors that no op reads or writes are inputs too,
	// made in the order of their declarations (their positions).
	var unread []mention
	for n, d := range p.raw {
		if d.raw != nil {
			unread = append(unread, mention{n, d.raw.pos})
		}
	}
	slices.SortFunc(unread, func(a, b mention) int { return comparePos(a.pos, b.pos) })
	for _, m := range unread {
		if !b.makeInput(b.tensors.get(m.name, m.pos)) {
			p.abandon()
			return false
		}
	}
	if p.errs.Count() > 0 {
		p.abandon()
		return false
	}
	// The inputs were added to f.Tensors as the ops first read them:
	// they move to the front, in the order of their declarations, as
	// build makes them. Every input is declared (an undeclared one is an
	// error), so that its position is that of its declaration.
	tensors := make([]*Tensor, 0, len(b.f.Tensors))
	for _, t := range b.f.Tensors {
		if t.Producer == nil {
			tensors = append(tensors, t)
		}
	}
	slices.SortStableFunc(tensors, func(a, b *Tensor) int { return comparePos(a.Pos, b.Pos) })
	for _, t := range b.f.Tensors {
		if t.Producer != nil {
			tensors = append(tensors, t)
		}
	}
	b.f.Tensors = tensors
	// Every declared tensor is made: the declarations by name (a tenth
	// of what is live once a big file is read) are no longer read, and
	// a name is looked up in the fusion's tensors (builtByName).
	p.raw = nil
	e.done = true
	return true
}

// comparePos orders positions as they come in a file.
func comparePos(a, b diag.Pos) int {
	return cmp.Or(cmp.Compare(a.Line, b.Line), cmp.Compare(a.Col, b.Col))
}
