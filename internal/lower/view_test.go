package lower_test

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nvcomm/nvcomm/internal/diag"
	"github.com/nvcomm/nvcomm/internal/ir"
	"github.com/nvcomm/nvcomm/internal/lower"
	"github.com/nvcomm/nvcomm/internal/plan"
	"github.com/nvcomm/nvcomm/internal/sim"
	"github.com/nvcomm/nvcomm/internal/syntax"
)

// TestViewLowering checks how a permute, a reshape and a cast are
// lowered under each policy: the steps of a view that keeps its shard,
// the reshardings around one that cannot, and nvFuser's errors, in its
// words, for a shard that would fall on an inner piece of a reshaped dim
// or split a piece unevenly (tests/cpp/test_sharding.cpp's
// ShardedInnerReshape and ShardedNonDivisibleReshape).
func TestViewLowering(t *testing.T) {
	const head = "format: 2\nmeshes:\n  m: [0, 1]\ntensors:\n"
	tests := map[string]struct {
		src              string
		optimal, nvfuser []string // the step types, or the error
	}{
		"a split keeps the shard on its outer piece": {
			head + "  x: {mesh: m, shape: [8, 12], placements: [Shard(1)]}\n  y: {placements: [Shard(1)]}\nops:\n  - {op: reshape, in: x, out: y, shape: [8, 4, 3]}\n",
			[]string{"Copy"}, []string{"Copy"}},
		"a merge keeps the outer piece's shard": {
			head + "  x: {mesh: m, shape: [8, 4, 3], placements: [Shard(1)]}\n  y: {placements: [Shard(1)]}\nops:\n  - {op: reshape, in: x, out: y, shape: [8, 12]}\n",
			[]string{"Copy"}, []string{"Copy"}},
		"a permute moves the shard with its dim": {
			head + "  x: {mesh: m, shape: [8, 4, 3], placements: [Shard(1)]}\n  y: {placements: [Shard(0)]}\nops:\n  - {op: permute, in: x, out: y, dims: [1, 0, 2]}\n",
			[]string{"Permute"}, []string{"Permute"}},
		"a cast is a copy": {
			head + "  x: {mesh: m, shape: [8, 4], placements: [Shard(0)]}\n  y: {placements: [Shard(0)]}\nops:\n  - {op: cast, in: x, out: y, dtype: bfloat16}\n",
			[]string{"Copy"}, []string{"Copy"}},
		"an output split on the inner piece: gathered before and sliced after under optimal, computed on the outer then resharded under nvfuser": {
			head + "  x: {mesh: m, shape: [8, 12], placements: [Shard(1)]}\n  y: {placements: [Shard(2)]}\nops:\n  - {op: reshape, in: x, out: y, shape: [8, 2, 6]}\n",
			// The optimal policy prices an Allgather and a local Slice below
			// an AllToAll at this size, and resharding the operand before
			// the reshape below resharding its result after (ways.go).
			[]string{"Allgather", "Permute", "Copy", "Slice"}, []string{"Copy", "Permute", "AllToAll", "Permute"}},
		"blocks stored column-major are put in order around the copy": {
			"meshes:\n  m: [0, 1]\ntensors:\n  x: {mesh: m, shape: [4, 6], placements: [Shard(0)], allocation: [2, 1]}\n" +
				"  y: {mesh: m, placements: [Shard(0)], allocation: [3, 2, 1]}\n  c: {mesh: m, placements: [Shard(0)], allocation: [1, 2]}\n" +
				"ops:\n  - {op: reshape, in: x, out: y, shape: [4, 2, 3]}\n  - {op: cast, in: x, out: c, dtype: float64}\n",
			[]string{"Permute", "Copy", "Permute", "Copy", "Permute"}, []string{"Permute", "Copy", "Permute", "Copy", "Permute"}},
		"ShardedInnerReshape: a merge of a sharded inner piece": {
			head + "  x: {mesh: m, shape: [3, 10], placements: [Shard(1)]}\n  y: {placements: [Shard(0)]}\nops:\n  - {op: reshape, in: x, out: y, shape: [30]}\n",
			[]string{"Allgather", "Permute", "Copy", "Slice"},
			[]string{`f.yaml:8:5: error: op "y = reshape(x, shape=[30])" cannot be lowered under nvFuser's rules: "x" splits dim 1 along DIDx, which becomes an inner piece of a reshaped dim (nvFuser: "Expected the sharding to be on the outer reshaped id"); shard the outer piece of the reshaped dim, by a device count that divides it, or reshard before the reshape`}},
		"ShardedNonDivisibleReshape: a split whose outer piece the devices do not divide": {
			head + "  x: {mesh: m, shape: [6], placements: [Shard(0)]}\n  y: {placements: [Replicate()]}\nops:\n  - {op: reshape, in: x, out: y, shape: [3, 2]}\n",
			[]string{"Allgather", "Copy"},
			[]string{`f.yaml:8:5: error: op "y = reshape(x, shape=[3, 2])" cannot be lowered under nvFuser's rules: "x" splits dim 0 along DIDx, which becomes a dim whose outer piece has extent 3, which 2 devices do not divide (nvFuser: "Require the sharded ID to be divisible by the split factor"); shard the outer piece of the reshaped dim, by a device count that divides it, or reshard before the reshape`}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f, err := syntax.Parse("f.yaml", []byte(tc.src))
			if err != nil {
				t.Fatal(err)
			}
			for policy, want := range map[lower.Policy][]string{lower.PolicyOptimal: tc.optimal, lower.PolicyNvFuser: tc.nvfuser} {
				if d := cmp.Diff(want, stepsOrError(f, policy)); d != "" {
					t.Errorf("%s (-want +got):\n%s", policy, d)
				}
			}
		})
	}
}

// stepsOrError lowers f under policy and returns the types of its plan's
// steps, then "invalid" when Validate rejects the plan and "FAIL" when it
// does not simulate PASS; or the error's text.
func stepsOrError(f *ir.Fusion, policy lower.Policy) []string {
	p, err := lower.Lower(f, lower.Options{Policy: policy})
	var dl *diag.List
	if errors.As(err, &dl) {
		return []string{dl.Error()}
	}
	if err != nil {
		return []string{err.Error()}
	}
	var types []string
	for _, s := range p.Steps {
		types = append(types, s.Type)
	}
	if problems := plan.Validate(p); len(problems) > 0 {
		types = append(types, "invalid")
	}
	if res, err := sim.Run(p, sim.Options{Seed: 3}); err != nil || !res.Pass {
		types = append(types, "FAIL")
	}
	return types
}
