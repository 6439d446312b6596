package ir

import (
	"fmt"
	"slices"

	"go.yaml.in/yaml/v3"

	"github.com/nvcomm/nvcomm/internal/diag"
	"github.com/nvcomm/nvcomm/internal/shard"
)

var stepNames = []string{"split", "outer_split", "merge", "reorder", "parallelize"}

// schedule replays t's schedule and allocation from its declaration onto its
// loop domain, then checks the device-parallel axes.
func (p *parser) schedule(t *Tensor, rt *rawTensor) bool { return p.scheduleWith(t, rt, nil) }

// scheduleWith is schedule with the tensor's decoded placements, which stand
// in for a schedule.
func (p *parser) scheduleWith(t *Tensor, rt *rawTensor, pls []placement) bool {
	t.Loop = slices.Clone(t.Logical)
	before := p.errs.Count()
	if rt != nil && rt.placements != nil && rt.sched != nil {
		p.errs.AddHint(posOf(rt.placements), "placements are sugar for a schedule; keep one of them",
			"tensor %q: both placements and schedule are given", t.Name)
		return false
	}
	if pls != nil && !p.placementSchedule(t, pls) {
		return false
	}
	if rt != nil && rt.sched != nil {
		p.replay(t, rt.sched)
	}
	if p.errs.Count() > before {
		return false
	}
	var alloc *yaml.Node
	if rt != nil {
		alloc = rt.alloc
	}
	return p.finishSchedule(t, alloc, before)
}

// scheduleSteps replays steps, made by nvcomm rather than read from a file,
// on t's logical domain, then checks and analyzes t as scheduleWith does a
// tensor of the file: format 2's propagation builds its tensors so.
func (p *parser) scheduleSteps(t *Tensor, steps []ScheduleStep) bool {
	t.Loop, t.Schedule, t.rootPad = slices.Clone(t.Logical), nil, nil
	before := p.errs.Count()
	if !p.applySteps(t, steps...) {
		return false
	}
	return p.finishSchedule(t, nil, before)
}

// applySteps performs steps on t's loop domain and records them in its
// schedule, stopping at the first that fails.
func (p *parser) applySteps(t *Tensor, steps ...ScheduleStep) bool {
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
func (p *parser) finishSchedule(t *Tensor, alloc *yaml.Node, before int) bool {
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

func (p *parser) replay(t *Tensor, n *yaml.Node) {
	what := fmt.Sprintf("tensor %q schedule", t.Name)
	items, ok := p.w.sequence(n, what)
	if !ok {
		return
	}
	if len(items) > MaxScheduleSteps {
		p.errs.AddHint(posOf(n), "each split adds a loop axis; real schedules have a handful of steps",
			"%s: %d steps, more than %d", what, len(items), MaxScheduleSteps)
		return
	}
	for _, it := range items {
		fields, ok := p.w.mapping(it, what, stepNames)
		if !ok {
			return
		}
		if len(fields) == 0 && len(it.Content) > 0 {
			return // every key was reported as unknown or repeated
		}
		if len(fields) != 1 {
			p.errs.Add(posOf(it), "%s: expected exactly one step per entry (one of %s), got %d", what, joinNames(stepNames), len(fields))
			return
		}
		step, ok := p.step(t, fields[0])
		if !ok {
			return
		}
		if !p.apply(t, step) {
			return
		}
		t.Schedule = append(t.Schedule, step)
	}
}

// step decodes one schedule entry and normalizes its positions against the
// current loop domain.
func (p *parser) step(t *Tensor, f field) (ScheduleStep, bool) {
	s := ScheduleStep{Kind: StepKind(f.Key), Pos: posOf(f.KeyN)}
	what := fmt.Sprintf("tensor %q %s", t.Name, f.Key)
	var keys []string
	switch s.Kind {
	case StepReorder:
		return p.reorder(t, s, f.Value, what)
	case StepSplit, StepOuterSplit:
		keys = []string{"axis", "factor"}
	case StepMerge:
		keys = []string{"axis"}
	case StepParallelize:
		keys = []string{"axis", "type"}
	}
	fields, ok := p.w.mapping(f.Value, what, keys)
	if !ok {
		return s, false
	}
	got := map[string]*yaml.Node{}
	for _, x := range fields {
		got[x.Key] = x.Value
	}
	for _, k := range keys {
		if got[k] == nil {
			if misspelled(f.Value, keys, k) {
				return s, false // reported as an unknown key
			}
			p.errs.Add(posOf(f.Value), "%s: missing key %q", what, k)
			return s, false
		}
	}
	axis, ok := p.position(t, got["axis"], what, s.Kind == StepMerge)
	if !ok {
		return s, false
	}
	s.Axis = axis
	switch s.Kind {
	case StepSplit, StepOuterSplit:
		s.Factor, ok = p.w.positive(got["factor"], what+" factor")
	case StepParallelize:
		var name string
		name, ok = p.w.str(got["type"], what+" type")
		if ok {
			s.Type, ok = ParseParallelType(name)
			if !ok {
				p.errs.AddHint(posOf(got["type"]), diag.Suggest(name, shard.ParallelTypeNames()), "%s: unknown parallel type %q (expected DIDx, DIDy, DIDz or Serial)", what, name)
			}
		}
		if ok && s.Type.IsDevice() && !t.Mesh.Has(s.Type) {
			p.errs.AddHint(posOf(got["type"]), "DIDx is the last mesh axis, DIDy the second-to-last, DIDz the third-to-last",
				"%s: mesh %q of rank %d has no %s axis", what, t.Mesh.Name, t.Mesh.Rank(), s.Type)
			ok = false
		}
	}
	return s, ok
}

// position decodes a loop position (negative counts from the end). For a
// merge the position needs a partner after it.
func (p *parser) position(t *Tensor, n *yaml.Node, what string, merge bool) (int, bool) {
	v, ok := p.w.integer(n, what+" axis")
	if !ok {
		return 0, false
	}
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
			p.errs.Add(posOf(n), "%s: axis %d is the last loop axis and has no partner to merge with", what, v)
		} else {
			p.errs.Add(posOf(n), "%s: axis %d is out of range for a loop domain of %d axes", what, v, rank)
		}
		return 0, false
	}
	return a, true
}

func (p *parser) reorder(t *Tensor, s ScheduleStep, n *yaml.Node, what string) (ScheduleStep, bool) {
	items, ok := p.w.sequence(n, what)
	if !ok {
		return s, false
	}
	rank := len(t.Loop)
	if len(items) != rank {
		p.errs.Add(posOf(n), "%s: expected a permutation of the %d loop positions, got %d entries", what, rank, len(items))
		return s, false
	}
	seen := make([]bool, rank)
	for _, it := range items {
		a, ok := p.position(t, it, what, false)
		if !ok {
			return s, false
		}
		if seen[a] {
			p.errs.Add(posOf(it), "%s: position %d appears twice (expected a permutation)", what, a)
			return s, false
		}
		seen[a] = true
		s.Order = append(s.Order, a)
	}
	return s, true
}

// apply performs one schedule step on t's loop domain.
func (p *parser) apply(t *Tensor, s ScheduleStep) bool {
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
func (p *parser) checkDevices(t *Tensor) {
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

// allocation decodes the allocation order: every loop position that is
// neither device-parallel nor a reduction, each once.
func (p *parser) allocation(t *Tensor, n *yaml.Node) {
	what := fmt.Sprintf("tensor %q allocation", t.Name)
	items, ok := p.w.sequence(n, what)
	if !ok {
		return
	}
	t.AllocPos = posOf(n)
	var order []int
	seen := map[int]bool{}
	for _, it := range items {
		a, ok := p.position(t, it, what, false)
		if !ok {
			return
		}
		id := t.Loop[a]
		switch {
		case id.Parallel.IsDevice() && !id.Reduction:
			p.errs.Add(posOf(it), "%s: loop axis %d is parallelized on %s; list only the axes stored on each device", what, a, id.Parallel)
			return
		case id.Reduction:
			p.errs.Add(posOf(it), "%s: loop axis %d is a reduction axis, which is not stored", what, a)
			return
		case seen[a]:
			p.errs.Add(posOf(it), "%s: loop axis %d is listed twice", what, a)
			return
		}
		seen[a] = true
		order = append(order, a)
	}
	for a, id := range t.Loop {
		if !seen[a] && !id.Reduction && !id.Parallel.IsDevice() {
			p.errs.Add(posOf(n), "%s: loop axis %d (extent %d) is missing; list every stored loop axis once", what, a, id.Extent)
			return
		}
	}
	t.Allocation = order
}
