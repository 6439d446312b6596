package explain

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nvcomm/nvcomm/internal/lower"
	"github.com/nvcomm/nvcomm/internal/syntax"
)

// remadeFusion gathers w for a linear (FSDP's set) and reads x, split
// by rows, whole in a column-parallel linear (sequence parallelism's
// gather): the backward section back may make either again.
func remadeFusion(back string) string {
	return `format: 2
meshes:
  m: [0, 1]
tensors:
  x: {mesh: m, shape: [4, 8], placements: [Shard(0)]}
  w: {mesh: m, shape: [6, 8], placements: [Shard(0)]}
  w_full: {placements: [Replicate()]}
  v: {mesh: m, shape: [6, 8], placements: [Shard(0)]}
  dy: {mesh: m, shape: [4, 6], placements: [Shard(1)]}
  dz: {mesh: m, shape: [4, 6], placements: [Shard(1)]}
ops:
  - {op: set, in: w, out: w_full}
  - {op: linear, in: [x, w_full], out: y}
  - {op: linear, in: [x, v], out: z}
backward:
  seeds: {y: dy, z: dz}
  wrt: [x, w, v]
` + back
}

// TestExplainRemade: explain says of each copy the backward makes again
// which forward tensor it stands for and why, and of no other op.
func TestExplainRemade(t *testing.T) {
	const (
		recomputed = "made again for the backward (backward recompute): the forward's w_full is not kept for the backward, and lives until its last forward reader"
		regathered = "gathered again for the backward (backward regather): the forward's gathered copy of x is not kept for the backward"
	)
	for _, tc := range []struct {
		name, back string
		want       []string
	}{
		{"kept", "", nil},
		{"recompute and regather", "  reshard_after_forward: true\n  regather: [x]\n", []string{regathered, recomputed}}, // z's gradient first: the backward runs the ops in reverse
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := syntax.Parse("remade.yaml", []byte(remadeFusion(tc.back)))
			if err != nil {
				t.Fatal(err)
			}
			p, err := lower.Lower(f, lower.Options{})
			if err != nil {
				t.Fatal(err)
			}
			var b bytes.Buffer
			if err := Write(&b, p, All()); err != nil {
				t.Fatal(err)
			}
			var got []string
			for line := range strings.SplitSeq(b.String(), "\n") {
				if line = strings.TrimSpace(line); strings.Contains(line, "again for the backward") && !slices.Contains(got, line) {
					got = append(got, line)
				}
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("explain's lines on copies made again (-want +got):\n%s", d)
			}
		})
	}
}
