package plan

import (
	"encoding/json"
	"io"
)

// Writer encodes a plan section by section, in the order of its JSON —
// the header and meshes (Head), each tensor, each op, each step, then the
// summary (Finish) — so that a plan can be written as it is made, never
// held whole: `nvcomm lower` writes each op's steps once the op is
// lowered. The bytes are those Encode writes for the plan made of the same
// parts; Encode is a Writer given a whole plan.
//
// A list takes one line when it fits, as every list the encoder writes,
// so its first elements are held (copied) until the list is too wide for
// one line; from then on each element is written when it is given. The
// sections must come in order: an element of an earlier section after a
// later one is dropped.
type Writer struct {
	e *encoder
	// section is the list being written: tensors, ops or steps.
	section int
	list    streamList
	// null says, for each list, that it is written null when it has no
	// element, [] otherwise.
	null [numSections]bool
}

// The lists of a plan, in the order of its JSON.
const (
	sectionTensors = iota
	sectionOps
	sectionSteps
	numSections
)

// sectionKeys are the lists' field names.
var sectionKeys = [numSections]string{"tensors", "ops", "steps"}

// NewWriter returns a Writer of a plan to w, as Lower makes plans: a plan
// with no tensors or no ops has them null, one with no steps [].
func NewWriter(w io.Writer) *Writer {
	return newWriter(w, [numSections]bool{true, true, false})
}

func newWriter(w io.Writer, null [numSections]bool) *Writer {
	e := &encoder{w: w, buf: make([]byte, 0, flushSize+4*inlineWidth), open: make([]frame, 0, 16)}
	return &Writer{e: e, section: -1, null: null}
}

// Head writes the plan's fields before its lists: format, fusion, policy,
// objective, meshes and pipeline; p's lists and summary are not read.
func (w *Writer) Head(p *Plan) {
	e := w.e
	// A plan is always wider than a line: its object is opened across
	// lines at once, as wideObject does.
	e.begin('{', e.depth)
	e.intField("format", p.Format)
	e.strField("fusion", p.Fusion)
	e.strField("policy", p.Policy)
	e.strIf("objective", p.Objective)
	e.key("meshes")
	e.meshes(p.Meshes)
	if pl := p.Pipeline; pl != nil {
		e.key("pipeline")
		e.object(func() {
			e.key("stages")
			e.strs(pl.Stages)
			e.intField("microbatches", pl.Microbatches)
			e.strField("schedule", pl.Schedule)
		})
	}
}

// Tensor writes the next tensor.
func (w *Writer) Tensor(t *Tensor) { put(w, sectionTensors, t, (*encoder).tensor) }

// Op writes the next op.
func (w *Writer) Op(o *Op) { put(w, sectionOps, o, (*encoder).op) }

// Step writes the next step.
func (w *Writer) Step(s *Step) { put(w, sectionSteps, s, (*encoder).step) }

// put writes x, the next element of section, with write: at once when its
// list is across lines, else a copy of it is held (the caller may reuse
// x).
func put[T any](w *Writer, section int, x *T, write func(*encoder, *T)) {
	if !w.enter(section) {
		return
	}
	if w.list.across {
		w.e.item()
		write(w.e, x)
		return
	}
	c := *x
	w.list.hold(w.e, func() { write(w.e, &c) })
}

// Whole writes all of p, from its head to its summary, and returns
// Finish's error.
func (w *Writer) Whole(p *Plan) error {
	w.Head(p)
	for i := range p.Tensors {
		w.Tensor(&p.Tensors[i])
	}
	for i := range p.Ops {
		w.Op(&p.Ops[i])
	}
	for i := range p.Steps {
		w.Step(&p.Steps[i])
	}
	return w.Finish(&p.Summary)
}

// Finish ends the lists, writes the summary and the end of the plan, and
// returns the first error of writing. A bytes_ratio that is NaN or
// infinite is an error, and the summary is then not written.
func (w *Writer) Finish(s *Summary) error {
	if err := checkRatio(s); err != nil {
		return err
	}
	w.enter(numSections)
	e := w.e
	e.key("summary")
	e.summary(s)
	e.end('}')
	e.buf = append(e.buf, '\n')
	e.flush()
	return e.err
}

// enter moves on to section, ending the lists before it (those with no
// element too), and reports whether section is the list being written.
func (w *Writer) enter(section int) bool {
	for w.section < section {
		if w.section >= 0 {
			w.list.close(w.e)
		}
		w.section++
		if w.section < numSections {
			w.list = streamList{null: w.null[w.section]}
			w.e.key(sectionKeys[w.section])
		}
	}
	return w.section == section
}

// streamList is a list written element by element, either on one line or
// across lines, as the encoder's list decides for a list given whole.
type streamList struct {
	// pending are the elements held while the list may still fit on one
	// line; across says that it does not, and that its '[' is written.
	pending []func()
	across  bool
	null    bool
}

// hold holds the element that elem writes while the list so far fits on
// one line, and else writes the list so far across lines. A list that
// does not fit never will: its line only grows with more elements.
func (l *streamList) hold(e *encoder, elem func()) {
	l.pending = append(l.pending, elem)
	start := len(e.buf)
	e.flat, e.limit = true, start+inlineWidth-2*e.depth
	e.write('[', ']', e.depth, func() { l.writePending(e) })
	fits := len(e.buf) <= e.limit
	e.flat = false
	e.buf = e.buf[:start]
	if fits {
		return
	}
	l.across = true
	e.begin('[', e.depth)
	l.writePending(e)
	l.pending = nil
}

// writePending writes the elements held, each after its separator.
func (l *streamList) writePending(e *encoder) {
	for _, elem := range l.pending {
		if e.over() {
			return
		}
		e.item()
		elem()
	}
}

// close ends the list: across lines, or the elements held as one list
// (the encoder puts it on one line, since it fits), or null.
func (l *streamList) close(e *encoder) {
	switch {
	case l.across:
		e.end(']')
	case len(l.pending) == 0 && l.null:
		e.null()
	default:
		e.container('[', ']', func() { l.writePending(e) })
	}
}

// checkRatio fails for a summary whose bytes_ratio JSON cannot write (NaN
// or infinite).
func checkRatio(s *Summary) error {
	if r := s.BytesRatio; r != nil {
		if _, err := json.Marshal(*r); err != nil {
			return err
		}
	}
	return nil
}
