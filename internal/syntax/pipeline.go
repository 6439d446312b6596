package syntax

import (
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/nvcomm/nvcomm/internal/diag"
	"github.com/nvcomm/nvcomm/internal/ir"
)

// pipelineKeys are the keys of a pipeline section.
var pipelineKeys = []string{"stages", "microbatches", "schedule", "batch_axis", "inputs"}

// parsePipeline reads the pipeline section; its names are checked by
// pipelineOf, after the fusion is built.
func (p *reader) parsePipeline(v *yaml.Node) {
	fields, ok := p.w.mapping(v, "pipeline", pipelineKeys)
	if !ok {
		return
	}
	r := &ir.PipelineDecl{At: posOf(v), Microbatches: -1}
	var seen []string
	for _, f := range fields {
		seen = append(seen, f.Key)
		switch f.Key {
		case "stages":
			if items, ok := listOf(f.Value).Entries(p.errs, "pipeline stages"); ok {
				r.Stages = items
			}
		case "microbatches":
			r.MicroAt = posOf(f.Value)
			setIf(&r.Microbatches)(p.w.positive(f.Value, "pipeline microbatches"))
		case "schedule":
			r.ScheduleAt = posOf(f.Value)
			if s, ok := p.w.str(f.Value, "pipeline schedule"); ok {
				r.Schedule = s
				if !slices.Contains(ir.Schedules(), s) {
					p.errs.AddHint(r.ScheduleAt, diag.Suggest(s, ir.Schedules()), "pipeline schedule: unknown schedule %q (known: %s)", s, strings.Join(ir.Schedules(), ", "))
				}
			}
		case "batch_axis":
			r.BatchAxisAt = posOf(f.Value)
			setIf(&r.BatchAxis)(p.w.integer(f.Value, "pipeline batch_axis"))
		case "inputs":
			r.InputsAt = posOf(f.Value)
			r.Inputs = p.w.names(f.Value, "pipeline inputs")
		}
	}
	for _, key := range []string{"stages", "microbatches", "schedule", "inputs"} {
		if !slices.Contains(seen, key) && !misspelled(v, pipelineKeys, key) {
			p.errs.AddHint(r.At, "pipeline: {stages: [s0, s1], microbatches: 4, schedule: 1f1b, inputs: [x, dy]}",
				"pipeline: missing key %q", key)
		}
	}
	if p.auto {
		p.errs.AddHint(r.At, "lower the pipeline with the shardings written, without --auto",
			"pipeline: lower --auto does not plan a pipeline yet")
	}
	p.src.SetPipeline(r)
}

// setIf returns a function that stores a decoded value in dst when the
// decoder accepted it, leaving dst's default otherwise.
func setIf[T any](dst *T) func(T, bool) {
	return func(v T, ok bool) {
		if ok {
			*dst = v
		}
	}
}
