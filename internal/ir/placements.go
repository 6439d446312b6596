package ir

import (
	"encoding/binary"
	"fmt"

	"github.com/nvcomm/nvcomm/internal/diag"
	"github.com/nvcomm/nvcomm/internal/ops"
	"github.com/nvcomm/nvcomm/internal/shard"
)

// Placements are PyTorch DTensor's way to say how a tensor lies on a mesh:
// one entry per mesh axis, in mesh order (outermost first). They are sugar
// for a schedule (docs/fusion.md, "placements"):
//
//   - Replicate(): the mesh axis does not shard the tensor;
//   - Shard(d): tensor dim d is outer-split by the mesh axis size and the
//     outer part parallelized along the mesh axis's device type; several
//     mesh axes sharding one dim nest in mesh-axis order, as DTensor does;
//   - Partial(op): each device along the mesh axis holds one term of an op
//     (sum, prod, max, min) over devices. On a fusion input, the tensor
//     gets an extra leading logical axis of the mesh axis's size, sharded
//     along it, and every set that reads the tensor becomes that reduction
//     over axis 0. On the output of matmul or linear, Partial(sum) names
//     the contracted axis k, the trailing reduction axis of the output's
//     logical domain: it is outer-split by the mesh axis size and the outer
//     part parallelized: each device multiplies its slices of k and the op
//     sums the partial products across devices (nvFuser's device-split
//     reduction axis, which it rFactors).

// placement is one decoded entry, with its position.
type placement struct {
	shard.Placement
	pos diag.Pos
}

// op is a Partial placement's reduce op.
func (pl placement) op() OpKind { return OpKind(pl.Op) }

// placementsOf decodes rt's placements for the tensor on mesh m, or
// returns those parseTensor decoded on the mesh rt declares, which is m:
// a tensor that declares a mesh lies on it.
func (p *Source) placementsOf(rt *rawTensor, m *Mesh, what string) ([]placement, bool) {
	if l := rt.rest().plsList; l != nil {
		return p.placements(l, m, what)
	}
	return rebased(readPart(rt.pls), rt.plsAt), true
}

// sharedPlacements keeps pls, decoded from the list written at at, for a
// declaration until build reads it (rebased): one list for every
// declaration that writes the same placements laid out alike, its
// positions relative to at. A file of 100k tensors writes a few lists,
// and a list of its own per declaration was a sixth of what was live at
// the end of reading (docs/performance.md).
func (p *Source) sharedPlacements(pls []placement, at diag.Pos) *[]placement {
	key := p.plsKey[:0]
	for _, pl := range pls {
		rel := relative(pl.pos, at)
		key = AppendKeyString(key, string(pl.Kind))
		key = AppendKeyString(key, pl.Op)
		key = binary.AppendVarint(key, int64(pl.Dim))
		key = binary.AppendVarint(key, int64(rel.Line))
		key = binary.AppendVarint(key, int64(rel.Col))
	}
	p.plsKey = key
	if shared, ok := p.sharedPls[string(key)]; ok {
		return shared
	}
	list := make([]placement, len(pls))
	for i, pl := range pls {
		list[i] = placement{pl.Placement, relative(pl.pos, at)}
	}
	shared := &list
	if p.sharedPls == nil {
		p.sharedPls = map[string]*[]placement{}
	}
	p.sharedPls[string(key)] = shared
	return shared
}

// relative is pos relative to at, which comes before it: the lines
// after at's, and the column after at's on at's line, or pos's own
// column on a later line.
func relative(pos, at diag.Pos) diag.Pos {
	if pos.Line == at.Line {
		return diag.Pos{Col: pos.Col - at.Col}
	}
	return diag.Pos{Line: pos.Line - at.Line, Col: pos.Col}
}

// rebased is a copy of shared placements (sharedPlacements) with the
// positions of the list written at at: the caller's to keep or change.
func rebased(shared []placement, at diag.Pos) []placement {
	if shared == nil {
		return nil
	}
	out := make([]placement, len(shared))
	for i, pl := range shared {
		pos := diag.Pos{Line: at.Line + pl.pos.Line, Col: pl.pos.Col}
		if pl.pos.Line == 0 {
			pos.Col += at.Col
		}
		out[i] = placement{pl.Placement, pos}
	}
	return out
}

// placements decodes a placements list for a tensor on mesh m.
func (p *Source) placements(l *StrList, m *Mesh, what string) ([]placement, bool) {
	items, ok := l.Entries(p.errs, what)
	if !ok || !p.checkPlacementCount(m, len(items), l.At, what) {
		return nil, false
	}
	out := make([]placement, 0, len(items))
	for _, it := range items {
		pl, ok := p.placement(it, what)
		if !ok || !p.checkPartials(out, pl, what) {
			return nil, false
		}
		out = append(out, pl)
	}
	return out, true
}

// checkPlacementCount checks that a tensor on mesh m has n placements,
// one per mesh axis (the list written at pos).
func (p *Source) checkPlacementCount(m *Mesh, n int, pos diag.Pos, what string) bool {
	if n != m.Rank() {
		p.errs.Add(pos, "%s: expected one placement per axis of mesh %q (%d), got %d", what, m.Name, m.Rank(), n)
		return false
	}
	return true
}

// checkPartials checks that pl, following pls, is not a second Partial.
func (p *Source) checkPartials(pls []placement, pl placement, what string) bool {
	if _, _, ok := partialOf(pls); ok && pl.Kind == shard.Partial {
		p.errs.Add(pl.pos, "%s: at most one Partial placement is supported", what)
		return false
	}
	return true
}

// placement decodes one entry of a placements list.
func (p *Source) placement(in Str, what string) (placement, bool) {
	s, ok := in.String(p.errs, what)
	if !ok {
		return placement{}, false
	}
	if pl, ok := p.parsedPlacements[s]; ok {
		return placement{pl, in.Pos}, true
	}
	pl, err := shard.ParsePlacement(s)
	if err != nil {
		hint := ""
		switch {
		case err.Near != "":
			hint = diag.Suggest(err.Near, shard.PlacementKinds)
		case err.Op != "":
			hint = diag.Suggest(err.Op, ops.FamilyNames(ops.Reduction))
		}
		p.errs.AddHint(in.Pos, hint, "%s: %s", what, err.Msg)
		return placement{}, false
	}
	if p.parsedPlacements == nil {
		p.parsedPlacements = map[string]shard.Placement{}
	}
	p.parsedPlacements[s] = pl
	return placement{pl, in.Pos}, true
}

// placementSchedule turns placements into schedule steps on t, whose loop
// domain is its logical domain. It returns false after reporting an error.
func (p *Source) placementSchedule(t *Tensor, pls []placement) bool {
	// Named only for an error: formatted for every tensor, it was a tenth
	// of building a fusion.
	what := func() string { return fmt.Sprintf("tensor %q placements", t.Name) }
	dims := t.ValueAxes() // a tensor's dims are its non-reduction axes
	if t.Partial != "" {
		dims = dims[1:] // the partial terms' axis is not a dim of the value
	}
	// The logical position each placement shards, -1 for none: a list
	// (a mesh has at most 3 axes) rather than a map per tensor.
	byPos := make([]int, len(pls))
	for i := range byPos {
		byPos[i] = -1
	}
	for i, pl := range pls {
		if pl.Kind != shard.Shard {
			continue
		}
		d := pl.Dim
		if d < 0 {
			d += len(dims)
		}
		if d < 0 || d >= len(dims) {
			p.errs.Add(pl.pos, "%s: Shard(%d) is out of range for a tensor of %d dims", what(), pl.Dim, len(dims))
			return false
		}
		byPos[i] = dims[d]
	}
	if pl, i, ok := partialOf(pls); ok && t.Partial == "" {
		// A contraction's or a reduction's output: the Partial splits the
		// axis it sums over, its one reduction axis (checkOutputPartial
		// allows no other produced tensor a Partial).
		r := reductionAxis(t)
		if r < 0 {
			p.errs.Add(pl.pos, "%s: Partial needs a reduction axis to split", what())
			return false
		}
		byPos[i] = r
	}
	// Positions from last to first, so splits do not move the positions
	// still to shard.
	// Room for the steps: a split and a parallelize for each placement
	// that shards (none left nil, as a tensor without steps has).
	k := 0
	for i, pl := range pls {
		if byPos[i] >= 0 || pl.Kind == shard.Partial {
			k++
		}
	}
	if t.Schedule == nil && k > 0 {
		t.Schedule = make([]ScheduleStep, 0, 2*k)
	}
	for pos := len(t.Logical) - 1; pos >= 0; pos-- {
		at := pos
		for i := range pls {
			if byPos[i] != pos {
				continue
			}
			typ := DeviceTypes[t.Mesh.Rank()-1-i]
			if !p.applySteps(t, blockSplit(t.Mesh, at, typ, pls[i].pos)...) {
				return false
			}
			at++
		}
	}
	for i, pl := range pls {
		if pl.Kind == shard.Partial && t.Partial != "" {
			s := ScheduleStep{Kind: StepParallelize, Axis: 0, Type: DeviceTypes[t.Mesh.Rank()-1-i], Pos: pl.pos}
			if !p.applySteps(t, s) {
				return false
			}
		}
	}
	return true
}

// blockSplit is the schedule of a DID loop split of loop axis at: an
// outer split by the mesh's size along typ, the outer part parallelized on
// typ. This is what Shard(d) writes, and what propagation replays.
func blockSplit(mesh *Mesh, at int, typ ParallelType, pos diag.Pos) []ScheduleStep {
	return []ScheduleStep{
		{Kind: StepOuterSplit, Axis: at, Factor: mesh.Size(typ), Pos: pos},
		{Kind: StepParallelize, Axis: at, Type: typ, Pos: pos},
	}
}

// reductionAxis returns the position of t's one reduction axis, or -1 when
// it has none or several.
func reductionAxis(t *Tensor) int {
	r := -1
	for i, id := range t.Logical {
		if id.Reduction {
			if r >= 0 {
				return -1
			}
			r = i
		}
	}
	return r
}

// partialOf returns the Partial entry of pls and its mesh axis, if any.
func partialOf(pls []placement) (placement, int, bool) {
	for i, pl := range pls {
		if pl.Kind == shard.Partial {
			return pl, i, true
		}
	}
	return placement{}, -1, false
}
