package ir

import (
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/nvcomm/nvcomm/internal/diag"
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

var placementRE = regexp.MustCompile(`^\s*(Shard|Replicate|Partial)\s*\(\s*([^)]*?)\s*\)\s*$`)

// placement is one decoded entry.
type placement struct {
	kind string // Shard, Replicate or Partial
	dim  int    // Shard's dim
	op   OpKind // Partial's op
	pos  diag.Pos
}

// placements decodes a placements list for a tensor on mesh m.
func (p *parser) placements(n *yaml.Node, m *Mesh, what string) ([]placement, bool) {
	items, ok := p.w.sequence(n, what)
	if !ok {
		return nil, false
	}
	if len(items) != m.Rank() {
		p.errs.Add(posOf(n), "%s: expected one placement per axis of mesh %q (%d), got %d", what, m.Name, m.Rank(), len(items))
		return nil, false
	}
	var out []placement
	partials := 0
	for _, it := range items {
		pl, ok := p.placement(it, what)
		if !ok {
			return nil, false
		}
		if pl.kind == "Partial" {
			partials++
			if partials > 1 {
				p.errs.Add(pl.pos, "%s: at most one Partial placement is supported", what)
				return nil, false
			}
		}
		out = append(out, pl)
	}
	return out, true
}

func (p *parser) placement(n *yaml.Node, what string) (placement, bool) {
	s, ok := p.w.str(n, what)
	if !ok {
		return placement{}, false
	}
	pl := placement{pos: posOf(n)}
	m := placementRE.FindStringSubmatch(s)
	if m == nil {
		head, _, _ := strings.Cut(s, "(")
		p.errs.AddHint(pl.pos, diag.Suggest(strings.TrimSpace(head), []string{"Shard", "Replicate", "Partial"}),
			"%s: %q is not a placement (expected Shard(dim), Replicate() or Partial(sum|prod|max|min))", what, s)
		return pl, false
	}
	pl.kind = m[1]
	switch pl.kind {
	case "Replicate":
		if m[2] != "" {
			p.errs.Add(pl.pos, "%s: Replicate takes no argument, got %q", what, m[2])
			return pl, false
		}
	case "Shard":
		d, err := strconv.Atoi(m[2])
		if err != nil {
			p.errs.Add(pl.pos, "%s: Shard needs a tensor dim, got %q", what, m[2])
			return pl, false
		}
		pl.dim = d
	case "Partial":
		op := m[2]
		if op == "" {
			op = "sum" // DTensor's default
		}
		if !contains(reductionNames, op) {
			p.errs.AddHint(pl.pos, diag.Suggest(op, reductionNames), "%s: Partial needs a reduce op (sum, prod, max, min), got %q", what, op)
			return pl, false
		}
		pl.op = OpKind(op)
	}
	return pl, true
}

// placementSchedule turns placements into schedule steps on t, whose loop
// domain is its logical domain. It returns false after reporting an error.
func (p *parser) placementSchedule(t *Tensor, pls []placement, what string) bool {
	dims := t.ValueAxes() // a tensor's dims are its non-reduction axes
	if t.partial != "" {
		dims = dims[1:] // the partial terms' axis is not a dim of the value
	}
	// Mesh axes sharding each logical position, in mesh order.
	byPos := map[int][]int{}
	for i, pl := range pls {
		if pl.kind != "Shard" {
			continue
		}
		d := pl.dim
		if d < 0 {
			d += len(dims)
		}
		if d < 0 || d >= len(dims) {
			p.errs.Add(pl.pos, "%s: Shard(%d) is out of range for a tensor of %d dims", what, pl.dim, len(dims))
			return false
		}
		byPos[dims[d]] = append(byPos[dims[d]], i)
	}
	if pl, i, ok := partialOf(pls); ok && t.partial == "" {
		// A contraction's or a reduction's output: the Partial splits the
		// axis it sums over, its one reduction axis (checkOutputPartial
		// allows no other produced tensor a Partial).
		r := reductionAxis(t)
		if r < 0 {
			p.errs.Add(pl.pos, "%s: Partial needs a reduction axis to split", what)
			return false
		}
		byPos[r] = append(byPos[r], i)
	}
	// Positions from last to first, so splits do not move the positions
	// still to shard.
	for pos := len(t.Logical) - 1; pos >= 0; pos-- {
		at := pos
		for _, i := range byPos[pos] {
			typ := DeviceTypes[t.Mesh.Rank()-1-i]
			if !p.applySteps(t, blockSplit(t.Mesh, at, typ, pls[i].pos)...) {
				return false
			}
			at++
		}
	}
	for i, pl := range pls {
		if pl.kind == "Partial" && t.partial != "" {
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
		if pl.kind == "Partial" {
			return pl, i, true
		}
	}
	return placement{}, -1, false
}
