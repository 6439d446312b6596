package ir

import (
	"fmt"
	"math"
	"slices"

	"github.com/nvcomm/nvcomm/internal/diag"
	"github.com/nvcomm/nvcomm/internal/shard"
)

// This file replays a tensor's schedule and allocation, given as values,
// with every check a fusion file's schedule gets: the YAML front end
// decodes a file's steps into values (schedparse.go) and the builder
// (construct.go) passes a TensorSpec's, and both call replaySchedule.

var stepNames = StepNames()

// StepNames are the kinds of schedule step, as a file writes them.
func StepNames() []string { return []string{"split", "outer_split", "merge", "reorder", "parallelize"} }

// ScheduleDecl is a tensor's schedule as a file writes it: where the
// list is written, what it is when it is no list (Got, "" for a list), how
// many entries it has (N), and its steps up to the first that cannot be
// decoded, whose problems wait in it for the replay.
type ScheduleDecl struct {
	At    diag.Pos
	Got   string
	N     int
	Steps []StepDecl
}

// StepDecl is a schedule step for the replay to check and perform, as
// given: its positions count from the end of the loop domain when
// negative, and are normalized against the loop domain as it is when the
// step runs. The other fields say where each part is written (zero for the
// builder's steps), for the errors.
//
// A file's step carries the problems its decoding found: Errs, reported
// when the replay reaches the step, as the front end found them when it
// decoded the step in turn. When a part could not be decoded (Failed),
// the replay stops at the step; it first checks the parts decoded before
// that part, and reports Late, the failed part's own problems, only when
// they pass: the file's checks run in the order its parts are written
// (an axis out of range hides a factor that is no integer).
type StepDecl struct {
	ScheduleStep
	// AxisAt is where the axis is written, ArgAt split's factor or
	// parallelize's type, ListAt reorder's list and OrderAt its entries.
	AxisAt, ArgAt, ListAt diag.Pos
	OrderAt               []diag.Pos
	// OrderLen counts the entries of reorder's list: len(Order) unless
	// one failed.
	OrderLen int

	Errs, Late []diag.Diagnostic
	Failed     bool
}

// AllocDecl is a tensor's allocation for the replay to check, as given:
// loop positions (negative ones count from the end), where each is
// written and where the list is. A file's allocation whose entry could not
// be decoded holds the entries before it and that entry's problems (Errs),
// reported once those before it are checked.
type AllocDecl struct {
	Order   []int
	OrderAt []diag.Pos
	At      diag.Pos
	Errs    []diag.Diagnostic
}

// posAt is ps[i], or the zero position when ps does not have it (the
// builder gives no positions).
func posAt(ps []diag.Pos, i int) diag.Pos {
	if i < len(ps) {
		return ps[i]
	}
	return diag.Pos{}
}

// replaySchedule performs steps on t's logical domain, stopping at the
// first that fails, then checks t's device axes, applies alloc (nil for the
// default order) and analyzes t. It reports whether t has no error.
func (p *Source) replaySchedule(t *Tensor, steps []StepDecl, alloc *AllocDecl) bool {
	t.Loop = slices.Clone(t.Logical)
	if len(steps) > 0 {
		t.Schedule = make([]ScheduleStep, 0, len(steps))
	}
	before := p.errs.Count()
	for i := range steps {
		if !p.replayStep(t, &steps[i]) {
			break
		}
	}
	if p.errs.Count() > before {
		return false
	}
	return p.finishSchedule(t, alloc, before)
}

// placeSchedule gives t the schedule its placements pls stand for, then
// finishes it as replaySchedule does.
func (p *Source) placeSchedule(t *Tensor, pls []placement, alloc *AllocDecl) bool {
	t.Loop = slices.Clone(t.Logical)
	before := p.errs.Count()
	if !p.placementSchedule(t, pls) || p.errs.Count() > before {
		return false
	}
	return p.finishSchedule(t, alloc, before)
}

// checkStepCount reports a schedule of more than MaxScheduleSteps steps.
func (p *Source) checkStepCount(name string, n int, at diag.Pos) bool {
	if n <= MaxScheduleSteps {
		return true
	}
	p.errs.AddHint(at, "each split adds a loop axis; real schedules have a handful of steps",
		"tensor %q schedule: %d steps, more than %d", name, n, MaxScheduleSteps)
	return false
}

// replayStep checks step s against t's loop domain and performs it.
func (p *Source) replayStep(t *Tensor, s *StepDecl) bool {
	p.errs.AppendAll(s.Errs)
	if s.Failed && s.Late == nil {
		return false
	}
	step, ok := p.checkStep(t, s)
	if !ok || !p.apply(t, step) {
		return false
	}
	if step.Kind == StepReorder && len(step.Order) == 0 {
		// The reorder of a rank-0 loop moves nothing, and a plan has no
		// way to write a step of no transform: it is not recorded.
		return true
	}
	t.Schedule = append(t.Schedule, step)
	return true
}

// checkStep checks s and normalizes its positions against t's loop
// domain.
func (p *Source) checkStep(t *Tensor, s *StepDecl) (ScheduleStep, bool) {
	out := ScheduleStep{Kind: s.Kind, Pos: s.Pos}
	word := string(s.Kind) // messages name the step "tensor \"t\" split"
	switch s.Kind {
	case StepReorder:
		return p.checkReorder(t, s, out)
	case StepSplit, StepOuterSplit, StepMerge, StepParallelize:
	default:
		p.errs.AddHint(s.Pos, diag.Suggest(word, stepNames), "tensor %q schedule: unknown key %q (expected one of %s)",
			t.Name, s.Kind, joinNames(stepNames))
		return out, false
	}
	axis, ok := p.loopPos(t, s.Axis, s.AxisAt, word, s.Kind == StepMerge)
	if !ok || !p.reportLate(s) {
		return out, false
	}
	out.Axis = axis
	switch s.Kind {
	case StepSplit, StepOuterSplit:
		out.Factor = s.Factor
		if !isPositive(s.Factor) {
			return out, CheckPositive(p.errs, s.Factor, s.ArgAt, fmt.Sprintf("tensor %q %s factor", t.Name, word))
		}
	case StepParallelize:
		out.Type = s.Type
		return out, p.checkType(t, s.Type, s.ArgAt, word)
	}
	return out, true
}

// reportLate reports s's late problems, and whether it has none.
func (p *Source) reportLate(s *StepDecl) bool {
	p.errs.AppendAll(s.Late)
	return s.Late == nil && !s.Failed
}

// checkType checks a parallelize step's type: one of the types, and a
// device type of t's mesh.
func (p *Source) checkType(t *Tensor, typ ParallelType, at diag.Pos, word string) bool {
	if typ < Serial || typ > DIDz {
		name := typeName(typ)
		p.errs.AddHint(at, diag.Suggest(name, shard.ParallelTypeNames()), "tensor %q %s: unknown parallel type %q (expected DIDx, DIDy, DIDz or Serial)", t.Name, word, name)
		return false
	}
	if typ.IsDevice() && !t.Mesh.Has(typ) {
		p.errs.AddHint(at, "DIDx is the last mesh axis, DIDy the second-to-last, DIDz the third-to-last",
			"tensor %q %s: mesh %q of rank %d has no %s axis", t.Name, word, t.Mesh.Name, t.Mesh.Rank(), typ)
		return false
	}
	return true
}

// typeName names a parallel type as a fusion file does; a value no type
// has gets a name no file can write.
func typeName(t ParallelType) string {
	if t < Serial || t > DIDz {
		return fmt.Sprintf("ParallelType(%d)", int(t))
	}
	return t.String()
}

// CheckPositive reports into errs v, written at pos, unless it is an integer >= 1
// that a file can write (an int32, as the front end reads them): the
// builder's values are checked as a file's.
func CheckPositive(errs *diag.Collector, v int, pos diag.Pos, what string) bool {
	switch {
	case isPositive(v):
		return true
	case v > math.MaxInt32:
		errs.Add(pos, "%s: integer %d is out of range (expected %d to %d)", what, v, math.MinInt32, math.MaxInt32)
	case v < math.MinInt32:
		errs.Add(pos, "%s: integer %d is out of range (expected %d to %d)", what, v, math.MinInt32, math.MaxInt32)
	default:
		errs.Add(pos, "%s: expected an integer >= 1, got %d", what, v)
	}
	return false
}

// isPositive reports whether v is an integer >= 1 that a file can write.
func isPositive(v int) bool { return v >= 1 && v <= math.MaxInt32 }

// loopPos normalizes a loop position v written at pos (negative counts
// from the end). For a merge the position needs a partner after it. word
// names the step or list in messages: "tensor \"t\" word: ...".
func (p *Source) loopPos(t *Tensor, v int, pos diag.Pos, word string, merge bool) (int, bool) {
	rank := len(t.Loop)
	a := v
	if a < 0 {
		a += rank
	}
	limit := rank
	if merge {
		limit = rank - 1
	}
	if a < 0 || a >= limit {
		if merge && a == rank-1 {
			p.errs.Add(pos, "tensor %q %s: axis %d is the last loop axis and has no partner to merge with", t.Name, word, v)
		} else {
			p.errs.Add(pos, "tensor %q %s: axis %d is out of range for a loop domain of %d axes", t.Name, word, v, rank)
		}
		return 0, false
	}
	return a, true
}

// checkReorder checks reorder's list: a permutation of the loop positions.
func (p *Source) checkReorder(t *Tensor, s *StepDecl, out ScheduleStep) (ScheduleStep, bool) {
	rank := len(t.Loop)
	if s.OrderLen != rank {
		p.errs.Add(s.ListAt, "tensor %q reorder: expected a permutation of the %d loop positions, got %d entries", t.Name, rank, s.OrderLen)
		return out, false
	}
	seen := make([]bool, rank)
	if len(s.Order) > 0 {
		out.Order = make([]int, 0, len(s.Order))
	}
	for i, v := range s.Order {
		pos := posAt(s.OrderAt, i)
		a, ok := p.loopPos(t, v, pos, "reorder", false)
		if !ok {
			return out, false
		}
		if seen[a] {
			p.errs.Add(pos, "tensor %q reorder: position %d appears twice (expected a permutation)", t.Name, a)
			return out, false
		}
		seen[a] = true
		out.Order = append(out.Order, a)
	}
	return out, p.reportLate(s)
}

// scheduleSteps replays steps, made by nvcomm rather than read from a file,
// on t's logical domain, then checks and analyzes t as replaySchedule does
// a tensor of the file: format 2's propagation builds its tensors so.
func (p *Source) scheduleSteps(t *Tensor, steps []ScheduleStep) bool {
	t.Loop, t.Schedule = slices.Clone(t.Logical), nil // analyze makes the analysis anew
	before := p.errs.Count()
	if !p.applySteps(t, steps...) {
		return false
	}
	return p.finishSchedule(t, nil, before)
}

// applySteps performs steps on t's loop domain and records them in its
// schedule, stopping at the first that fails.
func (p *Source) applySteps(t *Tensor, steps ...ScheduleStep) bool {
	for _, s := range steps {
		if !p.apply(t, s) {
			return false
		}
		t.Schedule = append(t.Schedule, s)
	}
	return true
}

// finishSchedule checks t's device axes once its loop domain is built,
// applies the allocation alloc (nil for the default order) and analyzes
// t. before is the error count when t's checks began: it reports whether
// none was added since.
func (p *Source) finishSchedule(t *Tensor, alloc *AllocDecl, before int) bool {
	p.checkDevices(t)
	if alloc != nil && p.errs.Count() == before {
		p.allocation(t, alloc)
	}
	if p.errs.Count() == before {
		if err := t.analyze(); err != nil {
			p.errs.AddHint(err.Pos, err.Hint, "tensor %q: %s", t.Name, err.Msg)
		} else {
			p.checkPadded(t)
		}
	}
	return p.errs.Count() == before
}

// apply performs one schedule step on t's loop domain.
func (p *Source) apply(t *Tensor, s ScheduleStep) bool {
	switch s.Kind {
	case StepSplit, StepOuterSplit:
		in := t.Loop[s.Axis]
		if in.Parallel.IsDevice() {
			p.errs.AddHint(s.Pos, "split first, then parallelize one of its outputs",
				"tensor %q %s: loop axis %d is parallelized on %s and cannot be split", t.Name, s.Kind, s.Axis, in.Parallel)
			return false
		}
		inner := s.Factor
		if s.Kind == StepOuterSplit {
			inner = ceilDiv(in.Extent, s.Factor)
		}
		// The split's transform, axes and lists in one allocation: every
		// sharded tensor of a fusion has a split.
		a := new(struct {
			tr           Transform
			outer, inner IterDomain
			in           [1]*IterDomain
			out          [2]*IterDomain
		})
		outer, innerID, tr := &a.outer, &a.inner, &a.tr
		*outer = IterDomain{Extent: ceilDiv(in.Extent, inner), Reduction: in.Reduction, Logical: -1}
		if s.Kind == StepOuterSplit {
			outer.Extent = s.Factor
		}
		*innerID = IterDomain{Extent: inner, Reduction: in.Reduction, Logical: -1}
		a.in, a.out = [1]*IterDomain{in}, [2]*IterDomain{outer, innerID}
		*tr = Transform{Kind: Split, In: a.in[:], Out: a.out[:], Pos: s.Pos, Step: s.Kind, Factor: s.Factor}
		outer.Def, innerID.Def = tr, tr
		t.Loop = slices.Replace(t.Loop, s.Axis, s.Axis+1, outer, innerID)
	case StepMerge:
		a, b := t.Loop[s.Axis], t.Loop[s.Axis+1]
		if a.Parallel.IsDevice() || b.Parallel.IsDevice() {
			p.errs.AddHint(s.Pos, "merge first, then parallelize the merged axis",
				"tensor %q merge: a device-parallel axis cannot be merged (positions %d and %d)", t.Name, s.Axis, s.Axis+1)
			return false
		}
		if a.Reduction != b.Reduction {
			p.errs.Add(s.Pos, "tensor %q merge: cannot merge a reduction axis with a non-reduction axis (positions %d and %d)", t.Name, s.Axis, s.Axis+1)
			return false
		}
		out := &IterDomain{Extent: a.Extent * b.Extent, Reduction: a.Reduction, Logical: -1}
		if out.Extent > 1<<31 {
			p.errs.Add(s.Pos, "tensor %q merge: merged extent %d is too large", t.Name, out.Extent)
			return false
		}
		out.Def = &Transform{Kind: Merge, In: []*IterDomain{a, b}, Out: []*IterDomain{out}, Pos: s.Pos}
		t.Loop = slices.Replace(t.Loop, s.Axis, s.Axis+2, out)
	case StepReorder:
		loop := make([]*IterDomain, len(t.Loop))
		for i, old := range s.Order {
			loop[i] = t.Loop[old]
		}
		t.Loop = loop
	case StepParallelize:
		t.Loop[s.Axis].Parallel = s.Type
		t.Loop[s.Axis].ParPos = s.Pos
	}
	return true
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }

// checkDevices enforces one loop axis per device type among non-reduction
// axes, and that every device-parallel axis spans its mesh axis exactly.
func (p *Source) checkDevices(t *Tensor) {
	var seen [DIDz + 1]*IterDomain // by type: a map per tensor cost more
	for _, id := range t.Loop {
		if !id.Parallel.IsDevice() {
			continue
		}
		if size := t.Mesh.Size(id.Parallel); id.Extent != size {
			p.errs.AddHint(id.ParPos, fmt.Sprintf("split the axis by %d first (outer_split with factor %d gives a DID loop split)", size, size),
				"tensor %q: a %s axis must have the extent of mesh %q along %s (%d), but this axis has extent %d",
				t.Name, id.Parallel, t.Mesh.Name, id.Parallel, size, id.Extent)
			continue
		}
		if id.Reduction {
			continue
		}
		if prev := seen[id.Parallel]; prev != nil {
			p.errs.Add(id.ParPos, "tensor %q: two loop axes are parallelized on %s (the first at %s)", t.Name, id.Parallel, prev.ParPos)
			continue
		}
		seen[id.Parallel] = id
	}
}

// allocation checks the allocation order a: every loop position that is
// neither device-parallel nor a reduction, each once.
func (p *Source) allocation(t *Tensor, a *AllocDecl) {
	t.AllocPos = a.At
	var order []int
	seen := make([]bool, len(t.Loop))
	for i, v := range a.Order {
		pos := posAt(a.OrderAt, i)
		k, ok := p.loopPos(t, v, pos, "allocation", false)
		if !ok {
			return
		}
		id := t.Loop[k]
		switch {
		case id.Parallel.IsDevice() && !id.Reduction:
			p.errs.Add(pos, "tensor %q allocation: loop axis %d is parallelized on %s; list only the axes stored on each device", t.Name, k, id.Parallel)
			return
		case id.Reduction:
			p.errs.Add(pos, "tensor %q allocation: loop axis %d is a reduction axis, which is not stored", t.Name, k)
			return
		case seen[k]:
			p.errs.Add(pos, "tensor %q allocation: loop axis %d is listed twice", t.Name, k)
			return
		}
		seen[k] = true
		order = append(order, k)
	}
	if a.Errs != nil {
		p.errs.AppendAll(a.Errs)
		return
	}
	for k, id := range t.Loop {
		if !seen[k] && !id.Reduction && !id.Parallel.IsDevice() {
			p.errs.Add(a.At, "tensor %q allocation: loop axis %d (extent %d) is missing; list every stored loop axis once", t.Name, k, id.Extent)
			return
		}
	}
	t.Allocation = order
}

// schedule replays t's schedule and allocation from its declaration onto its
// loop domain, then checks the device-parallel axes.
func (p *Source) schedule(t *Tensor, rt *rawTensor) bool { return p.scheduleWith(t, rt, nil) }

// scheduleWith is schedule with the tensor's decoded placements, which stand
// in for a schedule.
func (p *Source) scheduleWith(t *Tensor, rt *rawTensor, pls []placement) bool {
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
	var steps []StepDecl
	if r.sched != nil {
		var ok bool
		if steps, ok = p.stepsOf(t.Name, r.sched); !ok {
			t.Loop = slices.Clone(t.Logical)
			return false
		}
	}
	return p.replaySchedule(t, steps, r.alloc)
}

// stepsOf returns the steps of schedule s of the tensor name, up to the
// first that cannot be decoded. The list's own problems (not a list, too
// many steps) come first among the schedule's and are reported: ok is
// then false.
func (p *Source) stepsOf(name string, s *ScheduleDecl) (steps []StepDecl, ok bool) {
	if s.Got != "" {
		Expected(p.errs, s.At, fmt.Sprintf("tensor %q schedule", name), "a list", s.Got)
		return nil, false
	}
	if !p.checkStepCount(name, s.N, s.At) {
		return nil, false
	}
	return s.Steps, true
}
