package lower_test

import (
	"testing"

	"github.com/nvcomm/nvcomm/internal/lower"
	"github.com/nvcomm/nvcomm/internal/plan"
	"github.com/nvcomm/nvcomm/internal/sim"
	"github.com/nvcomm/nvcomm/internal/syntax"
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
			f, err := syntax.Parse("p.yaml", []byte(src))
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

// TestAlikePendingTerms: pending terms alike other tensors (the same mesh,
// shape and sharding) keep what their own op computes into them. The
// soak found plans that took it from the first tensor alike: a Partial
// input's nothing (a matmul rejected), a reduction's (a matmul lowered as
// that reduction, its sum of terms wrong), or certified against another
// bound. It also found broadcast axes recorded past a terms axis, one
// position off: a sharded axis read as a broadcast one (a Pointwise
// repeating one element where an Allgather was needed).
func TestAlikePendingTerms(t *testing.T) {
	tests := map[string]string{
		"after a Partial input": `format: 2
meshes:
  m: [11, 7, 15]
tensors:
  t1: {mesh: m, shape: [1, 6], placements: [Partial(sum)]}
  t2: {placements: [Replicate()]}
  t4: {mesh: m, shape: [6, 6], placements: [Replicate()]}
  t3: {placements: [Partial(sum)]}
ops:
  - {op: set, in: t1, out: t2}
  - {op: matmul, in: [t2, t4], out: t3}
`,
		"after a reduction's terms": `meshes:
  m: [11, 7, 15]
  n: [0, 3, 8]
tensors:
  t0:
    mesh: m
    shape: [6, 1, 6]
    placements: [Shard(2)]
  t1:
    placements: [Partial(sum)]
  t2:
    placements: [Replicate()]
  t4:
    mesh: n
    dtype: float32
    shape: [6, 6]
  t3:
    placements: [Partial(sum)]
ops:
  - {op: sum, in: t0, out: t1, axis: -3}
  - {op: set, in: t1, out: t2}
  - {op: matmul, in: [t2, t4], out: t3}
`,
		"broadcast axes past terms": `meshes:
  m: [11, 1, 4, 0]
  n: [10]
tensors:
  t0:
    mesh: m
    dtype: int64
    shape: [4]
    placements: [Shard(0)]
  t1:
    shape: [4, 1, 8]
    placements: [Shard(-1)]
  t2:
    placements: [Partial(prod)]
  t3:
    mesh: m
    schedule:
      - split: {axis: 1, factor: 4}
      - parallelize: {axis: 2, type: DIDx}
      - outer_split: {axis: 3, factor: 2}
  t4:
    placements: [Replicate()]
ops:
  - {op: broadcast, in: t0, out: t1, axes: [1, -1]}
  - {op: prod, in: t1, out: t2, axis: -1}
  - {op: set, in: t2, out: t3}
  - {op: square, in: [t3], out: t4}
`,
		"after an inserted reduction": `meshes:
  m: [[[0, 1, 2, 3], [4, 5, 6, 7]], [[8, 9, 10, 11], [12, 13, 14, 15]]]
  n: [7, 13, 14]
tensors:
  t0:
    mesh: m
    dtype: float32
    shape: [4]
    placements: [Shard(0), Partial(sum), Replicate()]
  t1:
    mesh: m
    schedule:
      - outer_split: {axis: 0, factor: 2}
      - parallelize: {axis: -2, type: DIDz}
  t3:
    mesh: m
    shape: [6, 4]
    schedule:
      - reorder: [0, 1]
      - parallelize: {axis: 1, type: DIDx}
    allocation: [0]
  t2:
    schedule:
      - outer_split: {axis: 1, factor: 2}
      - parallelize: {axis: 1, type: DIDz}
      - outer_split: {axis: 0, factor: 2}
      - parallelize: {axis: 0, type: DIDy}
  t4:
    schedule:
      - outer_split: {axis: 0, factor: 2}
      - parallelize: {axis: 0, type: DIDy}
      - split: {axis: 1, factor: 1}
  t6:
    mesh: m
    dtype: float32
    shape: [4, 6]
  t5:
    dtype: float32
    placements: [Shard(0), Partial(sum), Replicate()]
ops:
  - {op: neg, in: t0, out: t1}
  - {op: linear, in: [t1, t3], out: t2}
  - {op: set, in: t2, out: t4}
  - {op: linear, in: [t4, t6], out: t5}
`,
	}
	for name, src := range tests {
		for _, policy := range lower.Policies {
			t.Run(name+"/"+policy, func(t *testing.T) {
				f, err := syntax.Parse("p.yaml", []byte(src))
				if err != nil {
					t.Fatal(err)
				}
				p, err := lower.Lower(f, lower.Options{Policy: lower.Policy(policy)})
				if err != nil && lower.Policy(policy) == lower.PolicyNvFuser {
					t.Skipf("not lowered under %s: %v", policy, err) // nvFuser's rules may reject it, clearly
				}
				if err != nil {
					t.Fatal(err)
				}
				if problems := plan.Validate(p); len(problems) > 0 {
					t.Fatalf("Validate: %v", problems)
				}
				if problems, unproven := lower.Certify(p); len(problems) > 0 || len(unproven) > 0 {
					t.Fatalf("Certify: %v, unproven ops %v", problems, unproven)
				}
				if res, err := sim.Run(p, sim.Options{}); err != nil || !res.Pass {
					t.Fatalf("simulate: %v, %+v", err, res)
				}
			})
		}
	}
}
