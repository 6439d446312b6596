package syntax

import (
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/nvcomm/nvcomm/internal/diag"
	"github.com/nvcomm/nvcomm/internal/ir"
	"github.com/nvcomm/nvcomm/internal/shard"
)

// This file decodes a fusion file's schedules and allocations into the
// declarations whose steps the Source replays, with the problems of each
// step, reported when the replay reaches it.

// quiet is a walker whose problems wait in l, a list of p's kept for it,
// emptied: a step's are reported when the replay reaches it.
func (p *reader) quiet(l *diag.Collector) walker {
	l.File, l.Uncapped = p.errs.File, true
	l.Take()
	return walker{errs: l}
}

// scheduleIn decodes the schedule list n of the tensor name, reporting
// nothing: the list's own problems are the replay's to report, when the
// replay needs the schedule.
func (p *reader) scheduleIn(name string, n *yaml.Node) *ir.ScheduleDecl {
	s := &ir.ScheduleDecl{At: posOf(n)}
	if n.Kind != yaml.SequenceNode {
		s.Got = kindName(n)
		return s
	}
	s.N = len(n.Content)
	if s.N > ir.MaxScheduleSteps {
		return s // the replay reports it
	}
	what := fmt.Sprintf("tensor %q schedule", name)
	s.Steps = make([]ir.StepDecl, 0, s.N)
	for _, it := range n.Content {
		s.Steps = append(s.Steps, p.stepOf(name, it, what))
		if s.Steps[len(s.Steps)-1].Failed {
			break
		}
	}
	return s
}

// stepOf decodes one schedule entry, a mapping of one step's kind to its
// arguments.
func (p *reader) stepOf(name string, it *yaml.Node, what string) ir.StepDecl {
	var s ir.StepDecl
	early, late := p.quiet(&p.stepErrs), p.quiet(&p.lateErrs)
	fields, ok := early.mapping(it, what, ir.StepNames())
	switch {
	case !ok:
	case len(fields) == 0 && len(it.Content) > 0:
		ok = false // every key was reported as unknown or repeated
	case len(fields) != 1:
		early.errs.Add(posOf(it), "%s: expected exactly one step per entry (one of %s), got %d", what, strings.Join(ir.StepNames(), ", "), len(fields))
		ok = false
	default:
		ok = p.decodeStep(&s, name, fields[0], early, late)
	}
	s.Errs, s.Late, s.Failed = early.errs.Take(), late.errs.Take(), !ok
	return s
}

// decodeStep decodes step f into s: its kind and where it is written, and
// its arguments, the factor's or type's problems reported late (after the
// axis is checked).
func (p *reader) decodeStep(s *ir.StepDecl, name string, f field, early, late walker) bool {
	s.Kind, s.Pos = ir.StepKind(f.Key), posOf(f.KeyN)
	what := fmt.Sprintf("tensor %q %s", name, f.Key)
	var keys []string
	switch s.Kind {
	case ir.StepReorder:
		return decodeReorder(s, f.Value, what, early, late)
	case ir.StepSplit, ir.StepOuterSplit:
		keys = []string{"axis", "factor"}
	case ir.StepMerge:
		keys = []string{"axis"}
	case ir.StepParallelize:
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
	s.AxisAt = posOf(got["axis"])
	if s.Axis, ok = early.integer(got["axis"], what+" axis"); !ok {
		return false
	}
	switch s.Kind {
	case ir.StepSplit, ir.StepOuterSplit:
		s.ArgAt = posOf(got["factor"])
		s.Factor, ok = late.integer(got["factor"], what+" factor")
	case ir.StepParallelize:
		s.ArgAt = posOf(got["type"])
		s.Type, ok = parallelType(late, got["type"], what)
	}
	return ok
}

// parallelType decodes a parallel type's name.
func parallelType(w walker, n *yaml.Node, what string) (ir.ParallelType, bool) {
	name, ok := w.str(n, what+" type")
	if !ok {
		return 0, false
	}
	typ, ok := ir.ParseParallelType(name)
	if !ok {
		w.errs.AddHint(posOf(n), diag.Suggest(name, shard.ParallelTypeNames()), "%s: unknown parallel type %q (expected DIDx, DIDy, DIDz or Serial)", what, name)
	}
	return typ, ok
}

// decodeReorder decodes reorder's list of loop positions, up to the first
// that is no integer, whose problem is reported late (once the list's
// length and the positions before it are checked).
func decodeReorder(s *ir.StepDecl, n *yaml.Node, what string, early, late walker) bool {
	items, ok := early.sequence(n, what)
	if !ok {
		return false
	}
	s.ListAt, s.OrderLen = posOf(n), len(items)
	s.Order, s.OrderAt = make([]int, 0, len(items)), make([]diag.Pos, 0, len(items))
	for _, it := range items {
		v, ok := late.integer(it, what+" axis")
		if !ok {
			return false
		}
		s.Order, s.OrderAt = append(s.Order, v), append(s.OrderAt, posOf(it))
	}
	return true
}

// allocOf decodes an allocation list, up to the first entry that is no
// integer.
func (p *reader) allocOf(name string, n *yaml.Node) *ir.AllocDecl {
	w := p.quiet(&p.lateErrs)
	a := &ir.AllocDecl{At: posOf(n)}
	what := fmt.Sprintf("tensor %q allocation", name)
	if items, ok := w.sequence(n, what); ok {
		for _, it := range items {
			v, ok := w.integer(it, what+" axis")
			if !ok {
				break
			}
			a.Order, a.OrderAt = append(a.Order, v), append(a.OrderAt, posOf(it))
		}
	}
	a.Errs = w.errs.Take()
	return a
}
