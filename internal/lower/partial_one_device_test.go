package lower_test

import (
	"testing"

	"github.com/nvcomm/nvcomm/internal/ir"
	"github.com/nvcomm/nvcomm/internal/lower"
	"github.com/nvcomm/nvcomm/internal/plan"
	"github.com/nvcomm/nvcomm/internal/sim"
)

// TestPartialOnOneDeviceAxis: a Partial output on a mesh axis of one
// device holds the op's complete values (its one term), Replicate along
// that axis. The soak found such a linear rejected as a bug of the
// resharding pass, its k split along the other axis.
func TestPartialOnOneDeviceAxis(t *testing.T) {
	const src = `format: 2
name: partial_on_one_device_axis
meshes:
  m: [[0, 1, 2, 3]]
tensors:
  x: {mesh: m, shape: [8, 16], placements: [Replicate(), Shard(1)]}
  w: {mesh: m, shape: [4, 16], placements: [Replicate(), Shard(1)]}
  y: {placements: [Partial(sum), Replicate()]}
ops:
  - {op: linear, in: [x, w], out: y}
`
	for _, policy := range lower.Policies {
		t.Run(policy, func(t *testing.T) {
			f, err := ir.Parse("p.yaml", []byte(src))
			if err != nil {
				t.Fatal(err)
			}
			p, err := lower.Lower(f, lower.Options{Policy: lower.Policy(policy)})
			if err != nil {
				t.Fatal(err)
			}
			for _, tn := range p.Tensors {
				if tn.Name == "y" && tn.Partial != "" {
					t.Errorf("y holds pending terms (%q) on an axis of one device", tn.Partial)
				}
			}
			if problems := plan.Validate(p); len(problems) > 0 {
				t.Fatalf("Validate: %v", problems)
			}
			if res, err := sim.Run(p, sim.Options{}); err != nil || !res.Pass {
				t.Fatalf("simulate: %v, %+v", err, res)
			}
		})
	}
}
