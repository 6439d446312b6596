package sim_test

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/nvcomm/nvcomm/internal/lower"
	"github.com/nvcomm/nvcomm/internal/plan"
	"github.com/nvcomm/nvcomm/internal/sim"
	"github.com/nvcomm/nvcomm/internal/syntax"
)

// TestPipelineEqualsWholeBatch: a pipeline's micro-batches together
// compute the whole batch's program (CheckMicrobatches), on the examples
// and on a fusion whose batch is its inputs' dim 1, and a plan whose
// micro-batches compute something else is caught.
func TestPipelineEqualsWholeBatch(t *testing.T) {
	const columns = `format: 2
meshes: {s0: [0], s1: [1]}
tensors:
  x: {mesh: s0, shape: [8, 16]}
  w: {mesh: s0, shape: [8, 8]}
  y1: {mesh: s1}
ops:
  - {op: permute, in: x, out: xt, dims: [1, 0]}
  - {op: linear, in: [xt, w], out: h}
  - {op: set, in: h, out: y1}
  - {op: relu, in: y1, out: z}
pipeline: {stages: [s0, s1], microbatches: 4, schedule: gpipe, batch_axis: 1, inputs: [x]}
`
	sources := map[string][]byte{"columns": []byte(columns)}
	for _, name := range []string{"pipeline_1f1b", "pipeline_gpipe"} {
		src, err := os.ReadFile("../../testdata/examples/" + name + ".yaml")
		if err != nil {
			t.Fatal(err)
		}
		sources[name] = src
	}
	for name, src := range sources {
		t.Run(name, func(t *testing.T) {
			section := regexp.MustCompile(`(?m)^pipeline:.*\n`)
			whole := lowered(t, section.ReplaceAll(src, nil))
			micro := lowered(t, src)
			c, err := sim.CheckMicrobatches(whole, micro, 1)
			if err != nil {
				t.Fatal(err)
			}
			if len(c.Differ) > 0 || c.Compared < len(whole.Tensors)/2 {
				t.Errorf("compared %d of %d tensors, %v differ", c.Compared, len(whole.Tensors), c.Differ)
			}
			// Micro-batch 1 computing micro-batch 0's block: caught.
			for i := range micro.Ops {
				o := &micro.Ops[i]
				for k, in := range o.Inputs {
					if strings.HasPrefix(in, "x@mb1") {
						o.Inputs[k] = strings.Replace(in, "@mb1", "@mb0", 1)
					}
				}
				if strings.HasPrefix(o.Input, "x@mb1") {
					o.Input = strings.Replace(o.Input, "@mb1", "@mb0", 1)
				}
			}
			if c, err := sim.CheckMicrobatches(whole, micro, 1); err != nil || len(c.Differ) == 0 {
				t.Errorf("micro-batch 1 reading micro-batch 0's input: %v differ, error %v", c, err)
			}
		})
	}
}

// lowered is the optimal plan of fusion src.
func lowered(t *testing.T, src []byte) *plan.Plan {
	t.Helper()
	f, err := syntax.Parse("in.yaml", src)
	if err != nil {
		t.Fatal(err)
	}
	p, err := lower.Lower(f, lower.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}
