package lower_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nvcomm/nvcomm/internal/lower"
	"github.com/nvcomm/nvcomm/internal/syntax"
)

// TestRootedGather checks where the optimal policy gathers an uneven
// shard to one device and broadcasts it instead of an Allgather of padded
// buffers (docs/lowering.md, "Uneven extents"): only where it is better
// under the objective, which for the time objective it is not on these
// tensors. Each plan is validated, certified (without simulation: its
// steps are nvcomm's) and simulated.
func TestRootedGather(t *testing.T) {
	set := `  - {op: set, in: x, out: y}`
	shard0 := func(shape string) string {
		return "  x: {mesh: m, shape: " + shape + ", placements: [Shard(0)]}\n  y: {mesh: m, placements: [Replicate()]}"
	}
	tests := map[string]struct {
		src   string
		obj   lower.Objective
		want  []string
		bytes int64
	}{
		"rows 2, 2, 1, 0 under bytes: the bound, 5 rows": {
			src: fusion4(shard0("[5, 16]"), set), obj: lower.ObjectiveBytes,
			want: []string{"y = set(x): Pad Gather Unpad Broadcast"}, bytes: 320,
		},
		"rows 2, 2, 1, 0 under time: an Allgather is faster": {
			src: fusion4(shard0("[5, 16]"), set), obj: lower.ObjectiveTime,
			want: []string{"y = set(x): Pad Allgather Unpad"}, bytes: 384,
		},
		"elements 1, 1, 0, 0 under bytes: no holes gathered": {
			src: fusion4(shard0("[2]"), set), obj: lower.ObjectiveBytes,
			want: []string{"y = set(x): Pad Gather Unpad Broadcast"}, bytes: 8,
		},
		"rows 1, 1, 1, 0 under bytes: as many bytes, the Allgather is faster": {
			src: fusion4(shard0("[3, 4]"), set), obj: lower.ObjectiveBytes,
			want: []string{"y = set(x): Pad Allgather Unpad"}, bytes: 48,
		},
		"rows 2, 2, 2, 1 under bytes: every device holds a row": {
			src: fusion4(shard0("[7, 4]"), set), obj: lower.ObjectiveBytes,
			want: []string{"y = set(x): Pad Allgather Unpad"}, bytes: 96,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f, err := syntax.Parse("f.yaml", []byte(tc.src))
			if err != nil {
				t.Fatal(err)
			}
			p, err := lower.Lower(f, lower.Options{Objective: tc.obj})
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, opSteps(p)); d != "" {
				t.Errorf("ops and their steps (-want +got):\n%s", d)
			}
			if p.Summary.BytesReceivedMax != tc.bytes || p.Summary.BytesLowerBound > tc.bytes {
				t.Errorf("bytes_received_max %d (bound %d), want %d", p.Summary.BytesReceivedMax, p.Summary.BytesLowerBound, tc.bytes)
			}
			proveOnDevices(t, p)
		})
	}
}
