package lower_test

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nvcomm/nvcomm/internal/diag"
	"github.com/nvcomm/nvcomm/internal/ir"
	"github.com/nvcomm/nvcomm/internal/lower"
)

// TestLayerErrorsOnce checks that a layer op the lowering cannot take is
// one error that names the output's split, not a second one from a later
// check of the op (found by the soak: 1,573 of 1M cases said "this is a
// bug in nvcomm" after the real reason).
func TestLayerErrorsOnce(t *testing.T) {
	tests := map[string]struct{ src, want string }{
		"summed axis split unevenly": {`meshes:
  m: [0, 1, 2]
tensors:
  x: {mesh: m, shape: [2, 1]}
  w: {mesh: m, shape: [3, 1]}
  y: {mesh: m, placements: [Partial(sum)]}
ops:
  - {op: linear, in: [x, w], out: y}
`, `f.yaml:8:5: error: op "y = linear(x, w)" cannot be lowered: "y" splits its summed axis k of extent 1 over the 3 devices along DIDx, which do not divide it, and layer ops take even splits only; choose a summed extent that the mesh axis divides, or leave k whole on the output`},
		"output split unevenly": {`meshes:
  m: [0, 1, 2]
tensors:
  a: {mesh: m, shape: [4, 6]}
  b: {mesh: m, shape: [6, 5]}
  c: {mesh: m, placements: [Shard(0)]}
ops:
  - {op: matmul, in: [a, b], out: c}
`, `f.yaml:8:5: error: op "c = matmul(a, b)" cannot be lowered: "c" is split unevenly (shape [4 5], shards of up to [2 5]), and layer ops take even block splits only; shard the outputs of layer ops with placements (Shard(d)) or outer_split by the mesh size, on extents the mesh divides`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f, err := ir.Parse("f.yaml", []byte(tc.src))
			if err != nil {
				t.Fatal(err)
			}
			for _, policy := range lower.Policies {
				_, err := lower.Lower(f, lower.Options{Policy: lower.Policy(policy)})
				var dl *diag.List
				if !errors.As(err, &dl) {
					t.Fatalf("%s: error %v, want diagnostics", policy, err)
				}
				if d := cmp.Diff(tc.want, dl.Error()); d != "" {
					t.Errorf("%s: diagnostics (-want +got):\n%s", policy, d)
				}
			}
		})
	}
}
