package ir

import (
	"fmt"
	"slices"
	"strings"

	"github.com/nvcomm/nvcomm/internal/diag"
)

// This file reads a fusion's pipeline section (docs/pipeline.md): the
// meshes that are its stages, the inputs split into micro-batches along
// their batch axis, and the schedule that orders the micro-batches. The
// fusion is built whole first (its backward too); pipelineOf then writes
// it again with every op once per micro-batch (pipeline_expand.go) and
// orders the copies per the schedule (pipeline_order.go).

// Pipeline is a fusion's pipeline section, as the expanded fusion keeps
// it: its stages in order, the number of micro-batches and the schedule.
type Pipeline struct {
	// Stages are the stages' meshes, stage 0 first: each op runs on the
	// stage of its output's mesh.
	Stages []*Mesh
	// Microbatches is m: every input of Inputs is cut into m equal blocks
	// along its batch axis, and every op that reads one is written once
	// per block.
	Microbatches int
	// Schedule orders each stage's micro-batches: ScheduleGPipe,
	// Schedule1F1B or ScheduleInterleaved.
	Schedule string
	// Groups is p, the number of device groups: stage s runs on group
	// s mod p. It is the number of stages but under ScheduleInterleaved,
	// where each group holds len(Stages)/p ≥ 2 stages (virtual stages).
	Groups int
	// BatchAxis is the dimension of each input of Inputs that is cut.
	BatchAxis int
	// Inputs are the names, as the file writes them, of the inputs cut
	// into micro-batches; the other inputs (weights) are read whole by
	// every micro-batch.
	Inputs []string
}

// The schedules a pipeline section may name.
const (
	// ScheduleGPipe runs every micro-batch's forward, then every
	// backward (Huang et al., 2019).
	ScheduleGPipe = "gpipe"
	// Schedule1F1B runs on stage r (of p) p − r − 1 forwards, then one
	// forward and one backward in turn, then the backwards left
	// (PipeDream-Flush, Narayanan et al., 2021; Megatron-LM's
	// forward_backward_pipelining_without_interleaving).
	Schedule1F1B = "1f1b"
	// ScheduleInterleaved is 1F1B over virtual stages: p device groups
	// each hold v ≥ 2 stages, stage s on group s mod p, and each group
	// runs its stages' micro-batches in Megatron-LM's interleaved order
	// (forward_backward_pipelining_with_interleaving; Narayanan et al.,
	// 2021, §2.2.2), which cuts the bubble by v.
	ScheduleInterleaved = "interleaved"
)

// Schedules lists the schedules a pipeline section may name.
func Schedules() []string { return []string{Schedule1F1B, ScheduleGPipe, ScheduleInterleaved} }

// MicrobatchSep separates a tensor's name from its micro-batch in the
// names of the copies: "y@mb2" is y of micro-batch 2. A file's names are
// identifiers, so no copy's name is taken.
const MicrobatchSep = "@mb"

// MicrobatchName is the name of micro-batch mb's copy of tensor name.
func MicrobatchName(name string, mb int) string {
	return fmt.Sprintf("%s%s%d", name, MicrobatchSep, mb)
}

// PipelineDecl is a fusion's pipeline section as a file writes it: its
// values and where each is written, for the checks that run once the
// fusion is built. Microbatches is -1 when the file gives none.
type PipelineDecl struct {
	At           diag.Pos
	Stages       []Str
	Microbatches int
	MicroAt      diag.Pos
	Schedule     string
	ScheduleAt   diag.Pos
	BatchAxis    int
	BatchAxisAt  diag.Pos
	Inputs       []Str
	InputsAt     diag.Pos
}

// SetPipeline gives the file's pipeline section.
func (p *Source) SetPipeline(d *PipelineDecl) { p.pipe = d }

// pipelineOf checks the pipeline section against f, the fusion built
// whole, and returns f written once per micro-batch and ordered per the
// schedule; f itself when there is no section. Errors are added to p.
func (p *Source) pipelineOf(f *Fusion) *Fusion {
	r := p.pipe
	if r == nil || f == nil {
		return f
	}
	pl, ok := p.checkPipeline(r, f)
	if !ok {
		return nil
	}
	e := newExpansion(p, f, pl)
	if !e.trace() {
		return nil
	}
	g := e.expand()
	if g == nil {
		return nil
	}
	if !orderPipeline(p, g, e) {
		return nil
	}
	g.Pipeline = pl
	return g
}

// checkPipeline resolves the section's names: stages that are distinct
// meshes of the fusion on distinct devices, inputs that are the fusion's
// inputs with a batch axis that the micro-batches divide, and every op on
// a stage.
func (p *Source) checkPipeline(r *PipelineDecl, f *Fusion) (*Pipeline, bool) {
	before := p.errs.Count()
	pl := &Pipeline{Microbatches: r.Microbatches, Schedule: r.Schedule, BatchAxis: r.BatchAxis}
	meshNames := make([]string, len(f.Meshes))
	for i, m := range f.Meshes {
		meshNames[i] = m.Name
	}
	owner := map[int]string{}
	interleaved := r.Schedule == ScheduleInterleaved
	for _, s := range r.Stages {
		name, ok := s.String(p.errs, "pipeline stages")
		if !ok {
			continue
		}
		i := slices.Index(meshNames, name)
		if i < 0 {
			p.errs.AddHint(s.Pos, diag.Suggest(name, meshNames), "pipeline stages: %q is not a mesh of the fusion (meshes: %s)",
				name, strings.Join(meshNames, ", "))
			continue
		}
		m := f.Meshes[i]
		if slices.Contains(pl.Stages, m) {
			p.errs.Add(s.Pos, "pipeline stages: mesh %q is listed twice", name)
			continue
		}
		for _, d := range m.Devices {
			if o, taken := owner[d]; taken && !interleaved {
				p.errs.AddHint(s.Pos, "each stage runs on devices of its own (or, under schedule interleaved, on the devices of a stage before it)",
					"pipeline stages: device %d is on stages %q and %q", d, o, name)
				break
			}
			owner[d] = name
		}
		pl.Stages = append(pl.Stages, m)
	}
	pl.Groups = len(pl.Stages)
	if interleaved && p.errs.Count() == before {
		pl.Groups = p.checkGroups(r, pl)
	}
	if len(r.Stages) == 0 && r.Stages != nil {
		p.errs.Add(r.At, "pipeline stages: expected at least one mesh, got an empty list")
	}
	for _, in := range r.Inputs {
		t := f.Tensor(in.Value)
		switch {
		case t == nil || !slices.Contains(f.Inputs, t):
			names := make([]string, len(f.Inputs))
			for i, t := range f.Inputs {
				names[i] = t.Name
			}
			p.errs.AddHint(in.Pos, diag.Suggest(in.Value, names), "pipeline inputs: %q is not an input of the fusion (inputs: %s)",
				in.Value, strings.Join(names, ", "))
		case slices.Contains(pl.Inputs, in.Value):
			p.errs.Add(in.Pos, "pipeline inputs: %q is listed twice", in.Value)
		default:
			p.checkBatch(r, t, in.Pos)
			pl.Inputs = append(pl.Inputs, in.Value)
		}
	}
	if p.errs.Count() > before {
		return nil, false
	}
	for _, op := range f.Ops {
		if !slices.Contains(pl.Stages, op.Out.Mesh) {
			p.errs.AddHint(op.Pos, "list the mesh among the pipeline's stages, or put the op on a stage's mesh",
				"ops[%d]: %s writes %q on mesh %q, which is no stage of the pipeline (stages: %s)",
				op.Index, op.Kind, op.Out.Name, op.Out.Mesh.Name, stageNames(pl.Stages))
		}
	}
	return pl, p.errs.Count() == before
}

// checkGroups checks an interleaved pipeline's stages and returns its
// number of device groups p: the first stages on devices of their own,
// each later stage s on exactly the devices of stage s mod p, every group
// holding at least two stages, and micro-batches a multiple of p
// (Megatron-LM's constraint on its interleaved schedule).
func (p *Source) checkGroups(r *PipelineDecl, pl *Pipeline) int {
	n := len(pl.Stages)
	groups := n
	seen := map[int]bool{}
	for s, m := range pl.Stages {
		if slices.ContainsFunc(m.Devices, func(d int) bool { return seen[d] }) {
			groups = s
			break
		}
		for _, d := range m.Devices {
			seen[d] = true
		}
	}
	hint := "list each device group's stages in turn: stage s runs on the devices of stage s mod p"
	if groups == n || n%groups != 0 {
		p.errs.AddHint(r.At, hint, "pipeline stages: schedule interleaved needs each of the p device groups to hold at least two stages; "+
			"%d stages on %d groups", n, groups)
		return groups
	}
	for s := groups; s < n; s++ {
		m, g := pl.Stages[s], pl.Stages[s%groups]
		if !sameDevices(m.Devices, g.Devices) {
			p.errs.AddHint(r.Stages[s].Pos, hint, "pipeline stages: stage %d (mesh %q) is on devices %v, want those of stage %d (mesh %q), %v",
				s, m.Name, m.Devices, s%groups, g.Name, g.Devices)
		}
	}
	if mb := r.Microbatches; mb > 0 && mb%groups != 0 {
		p.errs.AddHint(r.MicroAt, fmt.Sprintf("use a multiple of %d", groups),
			"pipeline microbatches: schedule interleaved runs the micro-batches in rounds of one per device group; %d is no multiple of the %d groups", mb, groups)
	}
	return groups
}

// sameDevices reports whether a and b hold the same devices.
func sameDevices(a, b []int) bool {
	return len(a) == len(b) && !slices.ContainsFunc(a, func(d int) bool { return !slices.Contains(b, d) })
}

// checkBatch checks input t's batch axis: one of its dimensions, not
// split over devices by a pending sum, and divided by the micro-batches.
func (p *Source) checkBatch(r *PipelineDecl, t *Tensor, at diag.Pos) {
	shape := t.Shape()
	axis := r.BatchAxis
	if axis < 0 || axis >= len(shape) {
		pos := r.BatchAxisAt
		if pos == (diag.Pos{}) {
			pos = at
		}
		p.errs.AddHint(pos, "batch_axis is a dimension of every input listed, 0 when left out",
			"pipeline batch_axis: %d is not a dimension of %q, of shape %s", axis, t.Name, fmtShape(shape))
		return
	}
	if t.Partial != "" {
		p.errs.Add(at, "pipeline inputs: %q holds pending terms (Partial); micro-batches of it are not supported yet", t.Name)
		return
	}
	if m := r.Microbatches; m > 0 && shape[axis]%m != 0 {
		p.errs.AddHint(r.MicroAt, "micro-batches are equal blocks of the batch: use a divisor of "+fmt.Sprint(shape[axis]),
			"pipeline microbatches: %d does not divide dim %d of %q, of extent %d", m, axis, t.Name, shape[axis])
	}
}

// stageNames is the stages' mesh names, for messages.
func stageNames(stages []*Mesh) string {
	names := make([]string, len(stages))
	for i, m := range stages {
		names[i] = m.Name
	}
	return strings.Join(names, ", ")
}

// Stage returns the stage of mesh m, -1 when it is none.
func (pl *Pipeline) Stage(m *Mesh) int { return slices.Index(pl.Stages, m) }
