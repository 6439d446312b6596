package ir

import (
	"fmt"
	"slices"

	"go.yaml.in/yaml/v3"

	"github.com/nvcomm/nvcomm/internal/diag"
	"github.com/nvcomm/nvcomm/internal/shard"
)

// This file decodes a fusion file's schedules and allocations into the
// values replaySchedule checks and performs (schedule.go).

// schedule replays t's schedule and allocation from its declaration onto its
// loop domain, then checks the device-parallel axes.
func (p *parser) schedule(t *Tensor, rt *rawTensor) bool { return p.scheduleWith(t, rt, nil) }

// scheduleWith is schedule with the tensor's decoded placements, which stand
// in for a schedule.
func (p *parser) scheduleWith(t *Tensor, rt *rawTensor, pls []placement) bool {
	if rt == nil {
		return p.replaySchedule(t, nil, nil)
	}
	r := rt.rest()
	if given(rt.plsAt) && r.sched != nil {
		t.Loop = slices.Clone(t.Logical)
		p.errs.AddHint(rt.plsAt, "placements are sugar for a schedule; keep one of them",
			"tensor %q: both placements and schedule are given", t.Name)
		return false
	}
	if pls != nil {
		return p.placeSchedule(t, pls, r.alloc)
	}
	var steps []stepIn
	if r.sched != nil {
		var ok bool
		if steps, ok = p.stepsOf(t.Name, r.sched); !ok {
			t.Loop = slices.Clone(t.Logical)
			return false
		}
	}
	return p.replaySchedule(t, steps, r.alloc)
}

// quiet is a walker whose problems wait in l, a list of p's kept for it,
// emptied: a step's are reported when the replay reaches it.
func (p *parser) quiet(l *diag.Collector) walker {
	l.File, l.Uncapped = p.file, true
	l.Take()
	return walker{errs: l}
}

// schedIn is a tensor's schedule as parseTensor decodes it: where the
// list is written, what it is when it is no list (kindName, "" for a
// list), how many entries it has, and its steps up to the first that
// cannot be decoded, whose problems wait in it for the replay.
type schedIn struct {
	at    diag.Pos
	got   string
	n     int
	steps []stepIn
}

// scheduleIn decodes the schedule list n of the tensor name, reporting
// nothing: the list's own problems are stepsOf's to report, when the
// replay needs the schedule.
func (p *parser) scheduleIn(name string, n *yaml.Node) *schedIn {
	s := &schedIn{at: posOf(n)}
	if n.Kind != yaml.SequenceNode {
		s.got = kindName(n)
		return s
	}
	s.n = len(n.Content)
	if s.n > MaxScheduleSteps {
		return s // stepsOf reports it
	}
	what := fmt.Sprintf("tensor %q schedule", name)
	s.steps = make([]stepIn, 0, s.n)
	for _, it := range n.Content {
		s.steps = append(s.steps, p.stepOf(name, it, what))
		if s.steps[len(s.steps)-1].failed {
			break
		}
	}
	return s
}

// stepsOf returns the steps of schedule s of the tensor name, up to the
// first that cannot be decoded. The list's own problems (not a list, too
// many steps) come first among the schedule's and are reported: ok is
// then false.
func (p *parser) stepsOf(name string, s *schedIn) (steps []stepIn, ok bool) {
	if s.got != "" {
		p.w.expected(s.at, fmt.Sprintf("tensor %q schedule", name), "a list", s.got)
		return nil, false
	}
	if !p.checkStepCount(name, s.n, s.at) {
		return nil, false
	}
	return s.steps, true
}

// stepOf decodes one schedule entry, a mapping of one step's kind to its
// arguments.
func (p *parser) stepOf(name string, it *yaml.Node, what string) stepIn {
	var s stepIn
	early, late := p.quiet(&p.stepErrs), p.quiet(&p.lateErrs)
	fields, ok := early.mapping(it, what, stepNames)
	switch {
	case !ok:
	case len(fields) == 0 && len(it.Content) > 0:
		ok = false // every key was reported as unknown or repeated
	case len(fields) != 1:
		early.errs.Add(posOf(it), "%s: expected exactly one step per entry (one of %s), got %d", what, joinNames(stepNames), len(fields))
		ok = false
	default:
		ok = p.decodeStep(&s, name, fields[0], early, late)
	}
	s.errs, s.late, s.failed = early.errs.Take(), late.errs.Take(), !ok
	return s
}

// decodeStep decodes step f into s: its kind and where it is written, and
// its arguments, the factor's or type's problems reported late (after the
// axis is checked).
func (p *parser) decodeStep(s *stepIn, name string, f field, early, late walker) bool {
	s.Kind, s.Pos = StepKind(f.Key), posOf(f.KeyN)
	what := fmt.Sprintf("tensor %q %s", name, f.Key)
	var keys []string
	switch s.Kind {
	case StepReorder:
		return decodeReorder(s, f.Value, what, early, late)
	case StepSplit, StepOuterSplit:
		keys = []string{"axis", "factor"}
	case StepMerge:
		keys = []string{"axis"}
	case StepParallelize:
		keys = []string{"axis", "type"}
	}
	fields, ok := early.mapping(f.Value, what, keys)
	if !ok {
		return false
	}
	got := map[string]*yaml.Node{}
	for _, x := range fields {
		got[x.Key] = x.Value
	}
	for _, k := range keys {
		if got[k] == nil {
			if !misspelled(f.Value, keys, k) { // else reported as an unknown key
				early.errs.Add(posOf(f.Value), "%s: missing key %q", what, k)
			}
			return false
		}
	}
	s.axisPos = posOf(got["axis"])
	if s.Axis, ok = early.integer(got["axis"], what+" axis"); !ok {
		return false
	}
	switch s.Kind {
	case StepSplit, StepOuterSplit:
		s.argPos = posOf(got["factor"])
		s.Factor, ok = late.integer(got["factor"], what+" factor")
	case StepParallelize:
		s.argPos = posOf(got["type"])
		s.Type, ok = parallelType(late, got["type"], what)
	}
	return ok
}

// parallelType decodes a parallel type's name.
func parallelType(w walker, n *yaml.Node, what string) (ParallelType, bool) {
	name, ok := w.str(n, what+" type")
	if !ok {
		return 0, false
	}
	typ, ok := ParseParallelType(name)
	if !ok {
		w.errs.AddHint(posOf(n), diag.Suggest(name, shard.ParallelTypeNames()), "%s: unknown parallel type %q (expected DIDx, DIDy, DIDz or Serial)", what, name)
	}
	return typ, ok
}

// decodeReorder decodes reorder's list of loop positions, up to the first
// that is no integer, whose problem is reported late (once the list's
// length and the positions before it are checked).
func decodeReorder(s *stepIn, n *yaml.Node, what string, early, late walker) bool {
	items, ok := early.sequence(n, what)
	if !ok {
		return false
	}
	s.listPos, s.orderLen = posOf(n), len(items)
	s.Order, s.orderPos = make([]int, 0, len(items)), make([]diag.Pos, 0, len(items))
	for _, it := range items {
		v, ok := late.integer(it, what+" axis")
		if !ok {
			return false
		}
		s.Order, s.orderPos = append(s.Order, v), append(s.orderPos, posOf(it))
	}
	return true
}

// allocOf decodes an allocation list, up to the first entry that is no
// integer.
func (p *parser) allocOf(name string, n *yaml.Node) *allocIn {
	w := p.quiet(&p.lateErrs)
	a := &allocIn{at: posOf(n)}
	what := fmt.Sprintf("tensor %q allocation", name)
	if items, ok := w.sequence(n, what); ok {
		for _, it := range items {
			v, ok := w.integer(it, what+" axis")
			if !ok {
				break
			}
			a.order, a.pos = append(a.order, v), append(a.pos, posOf(it))
		}
	}
	a.errs = w.errs.Take()
	return a
}
