package lower_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nvcomm/nvcomm/internal/lower"
	"github.com/nvcomm/nvcomm/internal/syntax"
)

// TestIntervalExchange checks the AllToAllV between disjoint meshes whose
// even blocks of one axis have no common factoring (docs/lowering.md,
// "Resharding between meshes" and "no common factoring"): where it applies, one step in which each
// consumer receives its block, the bound; where it does not, the
// replicated copy. Each plan certifies and simulates.
func TestIntervalExchange(t *testing.T) {
	meshes := "format: 2\nmeshes:\n  a: [0, 1]\n  b: [2, 3, 4]\n  c: [1, 2, 3]\ntensors:\n"
	set := "\nops:\n  - {op: set, in: x, out: y}\n"
	tests := map[string]struct {
		src   string
		steps []string
		bytes int64
	}{
		"rows 3 per device over 2, to 2 per device over 3 others": {
			src:   meshes + "  x: {mesh: a, shape: [6, 16], placements: [Shard(0)]}\n  y: {mesh: b, shape: [6, 16], placements: [Shard(0)]}" + set,
			steps: []string{"y = set(x): AllToAllV"}, bytes: 128,
		},
		"a split second axis after an axis of extent 1": {
			src:   meshes + "  x: {mesh: a, shape: [1, 12], placements: [Shard(1)]}\n  y: {mesh: b, shape: [1, 12], placements: [Shard(1)]}" + set,
			steps: []string{"y = set(x): AllToAllV"}, bytes: 16,
		},
		"a split second axis after an axis of extent 2: runs not contiguous": {
			src:   meshes + "  x: {mesh: a, shape: [2, 6], placements: [Shard(1)]}\n  y: {mesh: b, shape: [2, 6], placements: [Shard(1)]}" + set,
			steps: []string{"y = set(x): Allgather Permute Slice AllToAllV"}, bytes: 24,
		},
		"meshes sharing a device: the replicated copy": {
			src:   meshes + "  x: {mesh: a, shape: [6, 16], placements: [Shard(0)]}\n  y: {mesh: c, shape: [6, 16], placements: [Shard(0)]}" + set,
			steps: []string{"y = set(x): Allgather Scatter"}, bytes: 192,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f, err := syntax.Parse("f.yaml", []byte(tc.src))
			if err != nil {
				t.Fatal(err)
			}
			p, err := lower.Lower(f, lower.Options{Objective: lower.ObjectiveBytes})
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.steps, opSteps(p)); d != "" {
				t.Errorf("ops and their steps (-want +got):\n%s", d)
			}
			if got := p.Summary.BytesReceivedMax; got != tc.bytes {
				t.Errorf("bytes_received_max %d, want %d", got, tc.bytes)
			}
			if problems, _ := lower.Certify(p); len(problems) > 0 {
				t.Errorf("certify: %v", problems)
			}
			proveOnDevices(t, p)
		})
	}
}
