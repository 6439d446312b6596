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
	// Schedule orders each stage's micro-batches: ScheduleGPipe or
	// Schedule1F1B.
	Schedule string
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
)

// Schedules lists the schedules a pipeline section may name.
func Schedules() []string { return []string{Schedule1F1B, ScheduleGPipe} }

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
			if o, taken := owner[d]; taken {
				p.errs.AddHint(s.Pos, "each stage runs on devices of its own", "pipeline stages: device %d is on stages %q and %q", d, o, name)
				break
			}
			owner[d] = name
		}
		pl.Stages = append(pl.Stages, m)
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
