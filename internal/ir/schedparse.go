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
	if rt.placements != nil && rt.sched != nil {
		t.Loop = slices.Clone(t.Logical)
		p.errs.AddHint(posOf(rt.placements), "placements are sugar for a schedule; keep one of them",
			"tensor %q: both placements and schedule are given", t.Name)
		return false
	}
	var alloc *allocIn
	if rt.alloc != nil {
		alloc = p.allocOf(t.Name, rt.alloc)
	}
	if pls != nil {
		return p.placeSchedule(t, pls, alloc)
	}
	var steps []stepIn
	if rt.sched != nil {
		var ok bool
		if steps, ok = p.stepsOf(t.Name, rt.sched); !ok {
			t.Loop = slices.Clone(t.Logical)
			return false
		}
	}
	return p.replaySchedule(t, steps, alloc)
}

// quiet is a walker whose problems wait in l, a list of p's kept for it,
// emptied: a step's are reported when the replay reaches it.
func (p *parser) quiet(l *errList) walker {
	l.file, l.uncapped = p.file, true
	l.take()
	return walker{errs: l}
}

// stepsOf decodes the schedule list n of the tensor name, up to the first
// step that cannot be decoded. The list's own problems (not a list, too
// many steps) come first among the schedule's and are reported: ok is
// then false.
func (p *parser) stepsOf(name string, n *yaml.Node) (steps []stepIn, ok bool) {
	what := fmt.Sprintf("tensor %q schedule", name)
	items, ok := p.w.sequence(n, what)
	if !ok || !p.checkStepCount(name, len(items), posOf(n)) {
		return nil, false
	}
	steps = make([]stepIn, 0, len(items))
	for _, it := range items {
		steps = append(steps, p.stepOf(name, it, what))
		if steps[len(steps)-1].failed {
			break
		}
	}
	return steps, true
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
	s.errs, s.late, s.failed = early.errs.take(), late.errs.take(), !ok
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
	a.errs = w.errs.take()
	return a
}
