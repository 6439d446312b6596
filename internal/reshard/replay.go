package reshard

import (
	"slices"
	"strings"

	"github.com/nvcomm/nvcomm/internal/ir"
	"github.com/nvcomm/nvcomm/internal/plan"
)

// Emitting a stored path (memo.go) builds the same steps for every op whose
// search key it has, but for the names: the producer's, the consumer's and
// the op's intermediate buffers. Building them — digit orders, teams, the
// bytes each device receives — was most of lowering a long chain of sets,
// so the first emission of a search is recorded as a template, and the
// ops after it replay the template with their own names.
//
// A replay must leave what a fresh emission would: the same steps, the
// same bytes booked for each device (and any overflow of them), and the
// job's buffer counters advanced alike. So a template records the
// buffers the emission named, in order, and the bytes it booked, and is
// kept only when nothing but the search key and the op's kind and axis
// (the reduce op and axis of reducing steps) decided the emission: no
// error while emitting, no earlier overflow of the job that would have
// hidden one, no axis map (Job.Reshard), and a producer that is not an
// intermediate buffer, whose earlier steps an emission may rename
// (retarget). Every name in its steps must be one of the recorded ones.

// template is a recorded emission.
type template struct {
	kind     ir.OpKind
	axis     int
	src, dst string   // the producer's and consumer's names when recorded
	whats    []string // the buffers named, in order: buffer's argument
	names    []string // and its result
	steps    []plan.Step
	received []deviceBytes // the bytes booked, in order
}

// deviceBytes is an amount of bytes booked for a device.
type deviceBytes struct {
	dev int
	n   int64
}

// templatable reports whether an emission of c from src may be recorded
// or replayed (see above).
func (c lowering) templatable(src *view) bool {
	return !c.planner.debug.NoReplay && c.toOpAxis == nil && !c.job.overflowed && !strings.Contains(src.name, "/")
}

// emitPath appends the steps of found's path from src to dst: a replay of
// its template when it has one for the op's kind and axis, else an
// emission, recorded when it may be.
func (c lowering) emitPath(found *search, src, dst *view) {
	t := found.template
	if c.templatable(src) && t != nil && t.kind == c.op.Kind && t.axis == c.op.Axis {
		c.replay(t, src, dst)
		return
	}
	if !c.templatable(src) {
		emission{c, src, dst, found.pl}.emit(found.path)
		return
	}
	first, errs := c.ledger.steps.len(), c.ledger.errs.Len()
	c.job.rec = &template{kind: c.op.Kind, axis: c.op.Axis, src: src.name, dst: dst.name}
	emission{c, src, dst, found.pl}.emit(found.path)
	rec := c.job.rec
	c.job.rec = nil
	if c.ledger.errs.Len() != errs || c.job.overflowed {
		return
	}
	for i := first; i < c.ledger.steps.len(); i++ {
		rec.steps = append(rec.steps, *c.ledger.steps.at(i))
	}
	if rec.covers() {
		found.template = rec
	}
}

// covers reports whether every buffer the recorded steps name is the
// producer, the consumer or a buffer the emission named.
func (t *template) covers() bool {
	known := func(name string) bool {
		return name == t.src || name == t.dst || slices.Contains(t.names, name)
	}
	return namesOnly(t.steps, known)
}

// renameBuffers renames the buffers step s reads and writes, giving it
// an Inputs of its own (a recorded step shares its slice with the record).
func renameBuffers(s *plan.Step, rename func(string) string) {
	if s.Input != "" {
		s.Input = rename(s.Input)
	}
	s.Output = rename(s.Output)
	if s.Inputs != nil {
		ins := make([]string, len(s.Inputs))
		for i, in := range s.Inputs {
			ins[i] = rename(in)
		}
		s.Inputs = ins
	}
}

// namesOnly reports whether every buffer that steps read or write is one
// that known accepts.
func namesOnly(steps []plan.Step, known func(string) bool) bool {
	for i := range steps {
		s := &steps[i]
		if s.Input != "" && !known(s.Input) || !known(s.Output) {
			return false
		}
		for _, in := range s.Inputs {
			if !known(in) {
				return false
			}
		}
	}
	return true
}

// replay appends t's steps with the names of src, dst and the job's new
// buffers, and books the bytes t booked.
func (c lowering) replay(t *template, src, dst *view) {
	names := make([]string, len(t.whats))
	for i, what := range t.whats {
		names[i] = c.buffer(what)
	}
	rename := func(name string) string {
		switch name {
		case t.src:
			return src.name
		case t.dst:
			return dst.name
		}
		return names[slices.Index(t.names, name)]
	}
	for _, s := range t.steps {
		renameBuffers(&s, rename)
		c.append(s)
	}
	for _, r := range t.received {
		c.addBytes(bookReceived, r.dev, r.n)
	}
}
