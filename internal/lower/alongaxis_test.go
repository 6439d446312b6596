package lower_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nvcomm/nvcomm/internal/lower"
	"github.com/nvcomm/nvcomm/internal/plan"
	"github.com/nvcomm/nvcomm/internal/syntax"
)

// TestAlongAxisPolicies lowers slices and cats along a split axis under
// both policies: the steps of each op, or the error nvFuser's rules give.
func TestAlongAxisPolicies(t *testing.T) {
	const head = `format: 2
meshes:
  m: [0, 1, 2, 3]
tensors:
  x: {mesh: m, shape: [8, 12], placements: [Shard(1)]}
  y: {mesh: m, shape: [8, 4], placements: [Shard(0)]}
`
	for _, tc := range []struct {
		name, src        string
		optimal, nvfuser string // the steps' types, or the error
	}{
		{"slice of a split operand into a declared output", head + `  a: {placements: [Replicate()]}
ops:
  - {op: slice, in: x, out: a, axis: 1, start: 2, end: 6}
`, "Allgather Permute Concat", "Allgather Permute Concat"},
		{"slice of a split operand into a propagated output", head + `ops:
  - {op: slice, in: x, out: a, axis: 1, start: 2, end: 6}
`, "Allgather Permute Concat",
			`f.yaml:8:5: error: op "a = slice(x, axis=1, start=2, end=6)" cannot be lowered under nvFuser's rules: operand "x" splits axis 1 along DIDx, and nvFuser's sharding propagation cannot carry the split through the slice's Resize of that axis (nvFuser: "Expected the target ID ... to be in the loop domain"); reshard the operand with a set before the slice, or slice along an axis that is not split, as nvFuser's tests do`},
		{"slice into an output split along the axis", head + `  a: {placements: [Shard(1)]}
ops:
  - {op: slice, in: x, out: a, axis: 1, start: 4, end: 12}
`, "Allgather Permute Concat Slice",
			`f.yaml:9:5: error: op "a = slice(x, axis=1, start=4, end=12)" cannot be lowered under nvFuser's rules: its output "a" splits the sliced axis 1 along DIDx, an axis nvFuser derives by a Resize (nvFuser: "Unexpected transform: Resize"); split the output along another axis, or slice into an output whole along the axis and split it with a set after`},
		{"cat along a split axis", head + `ops:
  - {op: cat, in: [x, x], out: a, axis: 1}
`, "Allgather Permute Concat",
			`f.yaml:8:5: error: op "a = cat(x, x, axis=1)" cannot be lowered under nvFuser's rules: operand "x" splits axis 1 along DIDx, and nvFuser's sharding propagation cannot carry the split through the cat's Resize of that axis (nvFuser: "Expected the target ID ... to be in the loop domain"); reshard the operand with a set before the cat, or cat along an axis that is not split, as nvFuser's tests do`},
		{"cat into an output split along the axis", head + `  a: {placements: [Shard(1)]}
ops:
  - {op: cat, in: [y, y], out: a, axis: 1}
`, "Allgather Concat Slice", "Allgather Concat Permute Scatter"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := syntax.Parse("f.yaml", []byte(tc.src))
			if err != nil {
				t.Fatal(err)
			}
			for policy, want := range map[lower.Policy]string{lower.PolicyOptimal: tc.optimal, lower.PolicyNvFuser: tc.nvfuser} {
				p, err := lower.Lower(f, lower.Options{Policy: policy})
				if d := cmp.Diff(want, stepTypes(p, err)); d != "" {
					t.Errorf("%s (-want +got):\n%s", policy, d)
				}
			}
		})
	}
}

// stepTypes is the types of p's steps, space-separated, or err's text.
func stepTypes(p *plan.Plan, err error) string {
	if err != nil {
		return err.Error()
	}
	var s string
	for i, st := range p.Steps {
		if i > 0 {
			s += " "
		}
		s += st.Type
	}
	return s
}
