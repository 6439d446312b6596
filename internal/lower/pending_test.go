package lower_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nvcomm/nvcomm/internal/diag"
	"github.com/nvcomm/nvcomm/internal/lower"
	"github.com/nvcomm/nvcomm/internal/syntax"
)

// TestPendingTerms lowers ops whose outputs hold pending terms (Partial on
// an op's output, DTensor's meaning) and the ops that read them, under
// both policies: the op that leaves the terms moves no data, and the op
// that reads them reduces them into the sharding it needs.
func TestPendingTerms(t *testing.T) {
	head := "meshes:\n  m: [0, 1, 2, 3]\ntensors:\n" +
		"  x: {mesh: m, shape: [8, 16], placements: [Shard(1)]}\n" +
		"  w: {mesh: m, shape: [12, 16], placements: [Shard(1)]}\n" +
		"  b: {mesh: m, shape: [12]}\n" +
		"  y: {placements: [Partial(sum)]}\n"
	linear := "  - {op: linear, in: [x, w], out: y}\n"
	for _, tc := range []struct {
		name, src string
		want      []string // the steps' op and type ("a set first": any resharding), or the error
	}{
		{"left pending", head + "ops:\n" + linear, []string{"y = linear(x, w) Matmul"}},
		{"reduced by a set to Replicate", head + "  z: {placements: [Replicate()]}\nops:\n" + linear + "  - {op: set, in: y, out: z}\n",
			[]string{"y = linear(x, w) Matmul", "z = sum(y, axis=0) Allreduce"}},
		{"reduced by a set to Shard", head + "  z: {placements: [Shard(0)]}\nops:\n" + linear + "  - {op: set, in: y, out: z}\n",
			[]string{"y = linear(x, w) Matmul", "z = sum(y, axis=0) ReduceScatter"}},
		{"reduced for an add that needs a shard", head + "  c: {mesh: m, shape: [8, 12], placements: [Shard(0)]}\n  z: {placements: [Shard(0)]}\nops:\n" +
			linear + "  - {op: add, in: [y, c], out: z}\n",
			[]string{"y = linear(x, w) Matmul", "y/reduced = sum(y, axis=0) ReduceScatter", "z = add(y/reduced, c) Pointwise"}},
		{"a reduction left pending", "meshes:\n  m: [0, 1]\ntensors:\n  x: {mesh: m, shape: [4, 6], placements: [Shard(1)]}\n  y: {placements: [Partial(max)]}\nops:\n" +
			"  - {op: max, in: x, out: y, axis: 1}\n",
			[]string{"y = max(x, axis=1) LocalReduce"}},
		{"a reduction whose operand is resharded first", "meshes:\n  m: [0, 1]\ntensors:\n  x: {mesh: m, shape: [4, 6], placements: [Shard(0)]}\n  y: {placements: [Partial(min)]}\nops:\n" +
			"  - {op: min, in: x, out: y, axis: 1}\n",
			[]string{"a set first", "y = min(x/resharded, axis=1) LocalReduce"}},
		{"a linear with a bias", head + "ops:\n  - {op: linear, in: [x, w, b], out: y}\n",
			[]string{`f.yaml:9:5: error: op "y = linear(x, w, b)" cannot be lowered (policy %s): "y" holds pending terms, and linear's bias would be added to every term; leave the bias out of the linear and add it after the terms are reduced, or declare the output Replicate() or Shard(d)`}},
	} {
		for _, policy := range lower.Policies {
			t.Run(tc.name+"/"+policy, func(t *testing.T) {
				f, err := syntax.Parse("f.yaml", []byte(tc.src))
				if err != nil {
					t.Fatal(err)
				}
				var got []string
				want := tc.want
				p, err := lower.Lower(f, lower.Options{Policy: lower.Policy(policy)})
				var dl *diag.List
				switch {
				case errors.As(err, &dl):
					got, want = []string{dl.Error()}, []string{strings.Replace(want[0], "%s", policy, 1)}
				case err != nil:
					t.Fatal(err)
				default:
					for _, s := range p.Steps {
						got = append(got, s.Expr+" "+s.Type)
					}
					if want[0] == "a set first" && len(got) > 2 && strings.HasPrefix(got[0], "x/resharded = set(x) ") {
						got = append([]string{want[0]}, got[len(got)-1]) // how the policy reshards is its own
					}
				}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("steps (-want +got):\n%s", diff)
				}
			})
		}
	}
}
