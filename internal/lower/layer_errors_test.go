package lower_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nvcomm/nvcomm/internal/diag"
	"github.com/nvcomm/nvcomm/internal/lower"
	"github.com/nvcomm/nvcomm/internal/syntax"
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
			f, err := syntax.Parse("f.yaml", []byte(tc.src))
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

// TestLowerErrorsFirstByPosition checks that of more than diag.MaxErrors
// ops the lowering cannot take, the first ones by position in the file are
// reported, not the first lowered: ops are lowered in dependency order,
// which this file lists backwards (its last op is lowered first).
func TestLowerErrorsFirstByPosition(t *testing.T) {
	const n = diag.MaxErrors + 3
	src := "meshes:\n  m: [0, 1, 2]\ntensors:\n  t0: {mesh: m, shape: [2, 1]}\n"
	for i := 1; i <= n; i++ {
		src += fmt.Sprintf("  w%d: {mesh: m, shape: [1, 1]}\n  t%d: {mesh: m, schedule: [{outer_split: {axis: 2, factor: 3}}, {parallelize: {axis: 2, type: DIDx}}]}\n", i, i)
	}
	src += "ops:\n"
	for i := n; i >= 1; i-- { // line 4+2n+1+(n-i+1)
		src += fmt.Sprintf("  - {op: linear, in: [t%d, w%d], out: t%d}\n", i-1, i, i)
	}
	f, err := syntax.Parse("f.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	_, err = lower.Lower(f, lower.Options{})
	var dl *diag.List
	if !errors.As(err, &dl) {
		t.Fatalf("error %v, want diagnostics", err)
	}
	var got, want []int
	for _, d := range dl.Items {
		got = append(got, int(d.Pos.Line))
	}
	for k := range diag.MaxErrors {
		want = append(want, 4+2*n+2+k)
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("lines reported (-want +got):\n%s", d)
	}
	if dl.Dropped != n-diag.MaxErrors {
		t.Errorf("dropped %d, want %d", dl.Dropped, n-diag.MaxErrors)
	}
}
