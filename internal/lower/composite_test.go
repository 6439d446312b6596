package lower_test

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nvcomm/nvcomm/internal/lower"
	"github.com/nvcomm/nvcomm/internal/syntax"
)

// TestCompositeCollectives holds the composite ops to the communication
// of their design (docs/fusion.md, "Composite ops"), under both
// policies: over a sharded axis, one small Allreduce per statistic —
// softmax two (Megatron's vocab-parallel softmax), rms_norm one,
// layer_norm two, mean one — and over an axis every device holds whole
// (sequence parallelism), nothing.
func TestCompositeCollectives(t *testing.T) {
	const head = `format: 2
meshes:
  m: [0, 1, 2, 3]
tensors:
  x: {mesh: m, shape: [8, 32], placements: [%s]}
  g: {mesh: m, shape: [32], placements: [%s]}
  y: {mesh: m, placements: [%s]}
ops:
  - %s
`
	for _, tc := range []struct {
		name, x, y, op string
		want           map[string]int
	}{
		{"softmax over the vocabulary", "Shard(1)", "Shard(1)", "{op: softmax, in: x, out: y, axis: -1}", map[string]int{"Allreduce": 2}},
		{"softmax over whole rows", "Shard(0)", "Shard(0)", "{op: softmax, in: x, out: y, axis: 1}", map[string]int{}},
		{"rms_norm over the hidden axis", "Shard(1)", "Shard(1)", "{op: rms_norm, in: [x, g], out: y, axes: [-1], eps: 1.0e-6}",
			map[string]int{"Allreduce": 1}},
		{"rms_norm, sequence parallel", "Shard(0)", "Shard(0)", "{op: rms_norm, in: [x, g], out: y, axes: [-1], eps: 1.0e-6}", map[string]int{}},
		{"layer_norm over the hidden axis", "Shard(1)", "Shard(1)", "{op: layer_norm, in: [x, g, g], out: y, axes: [-1], eps: 1.0e-5}",
			map[string]int{"Allreduce": 2}},
		{"layer_norm, sequence parallel", "Shard(0)", "Shard(0)", "{op: layer_norm, in: x, out: y, axes: [-1], eps: 1.0e-5}", map[string]int{}},
		{"mean over the sharded axis", "Shard(1)", "Replicate()", "{op: mean, in: x, out: y, axis: 1}", map[string]int{"Allreduce": 1}},
		{"mean over whole rows", "Shard(0)", "Shard(0)", "{op: mean, in: x, out: y, axis: 1}", map[string]int{}},
	} {
		for _, policy := range []lower.Policy{lower.PolicyOptimal, lower.PolicyNvFuser} {
			t.Run(tc.name+"/"+string(policy), func(t *testing.T) {
				// The norms' weight is sharded as the normalized axis is:
				// a replicated one would be sliced (or, under nvfuser,
				// scattered) to the devices' blocks.
				g := "Replicate()"
				if tc.x == "Shard(1)" {
					g = "Shard(0)"
				}
				f, err := syntax.Parse("in.yaml", fmt.Appendf(nil, head, tc.x, g, tc.y, tc.op))
				if err != nil {
					t.Fatal(err)
				}
				p, err := lower.Lower(f, lower.Options{Policy: policy})
				if err != nil {
					t.Fatal(err)
				}
				got := map[string]int{}
				for _, s := range p.Steps {
					if s.Kind == "collective" {
						got[s.Type]++
					}
				}
				if d := cmp.Diff(tc.want, got); d != "" {
					t.Errorf("collectives (-want +got):\n%s", d)
				}
			})
		}
	}
}
