package lower_test

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nvcomm/nvcomm/internal/lower"
	"github.com/nvcomm/nvcomm/internal/syntax"
)

// TestEmbeddingLowering checks how an embedding is lowered under each
// policy, each plan validated and simulated: a table split on its rows
// sums partial rows under the optimal policy (Allreduce, ReduceScatter to
// a sequence-split output, pending terms) and is gathered under nvFuser's
// rules, which reject an output that asks for the sum; a table split on e
// and split ids are local.
func TestEmbeddingLowering(t *testing.T) {
	const head = "format: 2\nmeshes:\n  m: [0, 1, 2, 3]\ntensors:\n  ids: {mesh: m, dtype: int32, shape: [8, 2]%s}\n  table: {mesh: m, shape: [16384, 64]%s}\n"
	const op = "ops:\n  - {op: embedding, in: [ids, table], out: y}\n"
	vocab := ", placements: [Shard(0)]"
	tests := map[string]policyCase{
		"vocab-parallel: the partial rows summed, or the table gathered": {
			fmt.Sprintf(head, "", vocab) + "  y: {mesh: m, placements: [Replicate()]}\n" + op,
			[]string{"Lookup", "Allreduce"}, []string{"Allgather", "Lookup"}},
		"vocab-parallel, sequence-parallel output: a ReduceScatter": {
			fmt.Sprintf(head, "", vocab) + "  y: {mesh: m, placements: [Shard(0)]}\n" + op,
			[]string{"Lookup", "ReduceScatter"}, []string{"Scatter", "Allgather", "Lookup"}},
		"vocab-parallel, propagated output: as declared Replicate()": {
			fmt.Sprintf(head, "", vocab) + op,
			[]string{"Lookup", "Allreduce"}, []string{"Allgather", "Lookup"}},
		"vocab-parallel, pending terms: nvFuser has no axis for them": {
			fmt.Sprintf(head, "", vocab) + "  y: {mesh: m, placements: [Partial(sum)]}\n" + op + "  - {op: set, in: y, out: z}\n",
			[]string{"Lookup", "Allreduce"},
			[]string{`f.yaml:9:5: error: op "y = embedding(ids, table)" cannot be lowered under --policy nvfuser: "y" sums partial rows of a table split on its rows, and nvFuser's embedding_fwd has no reduction axis to split; leave the output's rows unsplit (no Partial, no rDID): nvFuser then gathers the table; or lower with --policy optimal, which sums the partial rows`}},
		"table split on e: local, the output split on its last dim": {
			fmt.Sprintf(head, "", ", placements: [Shard(1)]") + op,
			[]string{"Lookup"}, []string{"Lookup"}},
		"ids split on the sequence: local": {
			fmt.Sprintf(head, ", placements: [Shard(0)]", "") + op,
			[]string{"Lookup"}, []string{"Lookup"}},
	}
	// On a dp × tp mesh with a small vocabulary the table's Allgather costs
	// less than the ReduceScatter of the rows, but gathering it also cuts
	// the ids to the output's sequence blocks, a local Slice: summing wins.
	const mesh2 = "format: 2\nmeshes:\n  m: [[0, 1, 2, 3], [4, 5, 6, 7]]\ntensors:\n" +
		"  ids: {mesh: m, dtype: int64, shape: [2, 16], placements: [Shard(0), Replicate()]}\n" +
		"  table: {mesh: m, shape: [256, 64], placements: [Replicate(), Shard(0)]}\n  y: {mesh: m, placements: [Shard(0), Shard(1)]}\n"
	tests["dp × tp, small vocabulary, sequence-parallel output: a ReduceScatter, the ids not cut"] = policyCase{
		mesh2 + op, []string{"Lookup", "ReduceScatter"}, []string{"Scatter", "Scatter", "Allgather", "Lookup"}}
	runPolicyCases(t, tests)
}

// TestGatherLowering checks gather along the last dim: logits split on the
// vocabulary (their last dim) sum the partial target logits under the
// optimal policy and are gathered under nvFuser's rules; logits split on a
// row are local.
func TestGatherLowering(t *testing.T) {
	const src = "format: 2\nmeshes:\n  m: [0, 1, 2, 3]\ntensors:\n  logits: {mesh: m, shape: [8, 65536], placements: [%s]}\n" +
		"  labels: {mesh: m, dtype: int64, shape: [8, 1]%s}\n  t: {mesh: m, placements: [%s]}\nops:\n  - {op: gather, in: [logits, labels], out: t, axis: -1}\n"
	tests := map[string]policyCase{
		"vocab-parallel logits: the target logit summed": {
			fmt.Sprintf(src, "Shard(1)", "", "Replicate()"), []string{"Lookup", "Allreduce"}, []string{"Allgather", "Permute", "Lookup"}},
		"row-split logits and labels: local": {
			fmt.Sprintf(src, "Shard(0)", ", placements: [Shard(0)]", "Shard(0)"), []string{"Lookup"}, []string{"Lookup"}},
	}
	runPolicyCases(t, tests)
}

// policyCase is a fusion and what each policy makes of it: the step types
// of its plan (then "invalid" or "FAIL", stepsOrError), or the error.
type policyCase struct {
	src              string
	optimal, nvfuser []string
}

// runPolicyCases parses each case's fusion and checks each policy's plan.
func runPolicyCases(t *testing.T, tests map[string]policyCase) {
	t.Helper()
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
