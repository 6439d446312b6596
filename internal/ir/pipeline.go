package ir

import (
	"fmt"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

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

// pipelineKeys are the keys of a pipeline section.
var pipelineKeys = []string{"stages", "microbatches", "schedule", "batch_axis", "inputs"}

// rawPipeline is a pipeline section as written: its values and where
// each is written, for the checks that run once the fusion is built.
type rawPipeline struct {
	at           diag.Pos
	stages       []scalarIn
	microbatches int
	mbAt         diag.Pos
	schedule     string
	schedAt      diag.Pos
	batchAxis    int
	axisAt       diag.Pos
	inputs       []scalarIn
	inputsAt     diag.Pos
}

// parsePipeline reads the pipeline section; its names are checked by
// pipelineOf, after the fusion is built.
func (p *parser) parsePipeline(v *yaml.Node) {
	fields, ok := p.w.mapping(v, "pipeline", pipelineKeys)
	if !ok {
		return
	}
	r := &rawPipeline{at: posOf(v), microbatches: -1}
	var seen []string
	for _, f := range fields {
		seen = append(seen, f.Key)
		switch f.Key {
		case "stages":
			if items, ok := p.w.list(listOf(f.Value), "pipeline stages"); ok {
				r.stages = items
			}
		case "microbatches":
			r.mbAt = posOf(f.Value)
			if n, ok := p.w.positive(f.Value, "pipeline microbatches"); ok {
				r.microbatches = n
			}
		case "schedule":
			r.schedAt = posOf(f.Value)
			if s, ok := p.w.str(f.Value, "pipeline schedule"); ok {
				r.schedule = s
				if !slices.Contains(Schedules(), s) {
					hint := diag.Suggest(s, Schedules())
					if s == "interleaved" {
						hint = "interleaved 1F1B (virtual stages) is not built yet: use 1f1b"
					}
					p.errs.AddHint(r.schedAt, hint, "pipeline schedule: unknown schedule %q (known: %s)", s, strings.Join(Schedules(), ", "))
				}
			}
		case "batch_axis":
			r.axisAt = posOf(f.Value)
			if a, ok := p.w.integer(f.Value, "pipeline batch_axis"); ok {
				r.batchAxis = a
			}
		case "inputs":
			r.inputsAt = posOf(f.Value)
			if items, ok := p.w.list(listOf(f.Value), "pipeline inputs"); ok {
				for _, it := range items {
					if _, ok := p.w.identIn(it, "pipeline inputs"); ok {
						r.inputs = append(r.inputs, it)
					}
				}
			}
		}
	}
	for _, key := range []string{"stages", "microbatches", "schedule", "inputs"} {
		if !slices.Contains(seen, key) && !misspelled(v, pipelineKeys, key) {
			p.errs.AddHint(r.at, "pipeline: {stages: [s0, s1], microbatches: 4, schedule: 1f1b, inputs: [x, dy]}",
				"pipeline: missing key %q", key)
		}
	}
	if p.allowAuto {
		p.errs.AddHint(r.at, "lower the pipeline with the shardings written, without --auto",
			"pipeline: lower --auto does not plan a pipeline yet")
	}
	p.pipe = r
}

// pipelineOf checks the pipeline section against f, the fusion built
// whole, and returns f written once per micro-batch and ordered per the
// schedule; f itself when there is no section. Errors are added to p.
func (p *parser) pipelineOf(f *Fusion) *Fusion {
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
func (p *parser) checkPipeline(r *rawPipeline, f *Fusion) (*Pipeline, bool) {
	before := p.errs.Count()
	pl := &Pipeline{Microbatches: r.microbatches, Schedule: r.schedule, BatchAxis: r.batchAxis}
	meshNames := make([]string, len(f.Meshes))
	for i, m := range f.Meshes {
		meshNames[i] = m.Name
	}
	owner := map[int]string{}
	for _, s := range r.stages {
		name, ok := p.w.strIn(s, "pipeline stages")
		if !ok {
			continue
		}
		i := slices.Index(meshNames, name)
		if i < 0 {
			p.errs.AddHint(s.pos, diag.Suggest(name, meshNames), "pipeline stages: %q is not a mesh of the fusion (meshes: %s)",
				name, strings.Join(meshNames, ", "))
			continue
		}
		m := f.Meshes[i]
		if slices.Contains(pl.Stages, m) {
			p.errs.Add(s.pos, "pipeline stages: mesh %q is listed twice", name)
			continue
		}
		for _, d := range m.Devices {
			if o, taken := owner[d]; taken {
				p.errs.AddHint(s.pos, "each stage runs on devices of its own", "pipeline stages: device %d is on stages %q and %q", d, o, name)
				break
			}
			owner[d] = name
		}
		pl.Stages = append(pl.Stages, m)
	}
	if len(r.stages) == 0 && r.stages != nil {
		p.errs.Add(r.at, "pipeline stages: expected at least one mesh, got an empty list")
	}
	for _, in := range r.inputs {
		t := f.Tensor(in.value)
		switch {
		case t == nil || !slices.Contains(f.Inputs, t):
			names := make([]string, len(f.Inputs))
			for i, t := range f.Inputs {
				names[i] = t.Name
			}
			p.errs.AddHint(in.pos, diag.Suggest(in.value, names), "pipeline inputs: %q is not an input of the fusion (inputs: %s)",
				in.value, strings.Join(names, ", "))
		case slices.Contains(pl.Inputs, in.value):
			p.errs.Add(in.pos, "pipeline inputs: %q is listed twice", in.value)
		default:
			p.checkBatch(r, t, in.pos)
			pl.Inputs = append(pl.Inputs, in.value)
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
func (p *parser) checkBatch(r *rawPipeline, t *Tensor, at diag.Pos) {
	shape := t.Shape()
	axis := r.batchAxis
	if axis < 0 || axis >= len(shape) {
		pos := r.axisAt
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
	if m := r.microbatches; m > 0 && shape[axis]%m != 0 {
		p.errs.AddHint(r.mbAt, "micro-batches are equal blocks of the batch: use a divisor of "+fmt.Sprint(shape[axis]),
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
