package auto

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// embeddingFusion is an embedding of 32 tokens in a [8192, 64] table on a
// 1-D mesh of 4, the table left to the auto-sharder and the output wanted
// whole.
const embeddingFusion = `format: 2
name: embedding
meshes:
  tp: [0, 1, 2, 3]
tensors:
  ids:   {mesh: tp, dtype: int64, shape: [16, 2]}
  table: {mesh: tp, shape: [8192, 64], placements: auto}
  y:     {placements: [Replicate()]}
ops:
  - {op: embedding, in: [ids, table], out: y}
`

// TestEmbeddingVocabParallel checks the auto-sharder's choice for an
// embedding: with room for the table, replicated (a local lookup); under a
// budget below it, split on the vocabulary, each device looking up its
// rows and one Allreduce summing them (Megatron-LM's vocab-parallel
// embedding), rather than split on e and gathered.
func TestEmbeddingVocabParallel(t *testing.T) {
	const table = 8192 * 64 * 4 // float32: 2 MiB
	tests := map[string]struct {
		budget int64
		want   []string
		steps  []string
	}{
		"room for the table":     {budget: 0, want: []string{"table [Replicate()]"}, steps: []string{"Lookup"}},
		"budget below the table": {budget: table / 2, want: []string{"table [Shard(0)]"}, steps: []string{"Lookup", "Allreduce"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			res, err := Solve("embedding.yaml", []byte(embeddingFusion), Options{MemoryBudget: tc.budget})
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, chosen(res)); d != "" {
				t.Errorf("decisions (-want +got):\n%s", d)
			}
			if d := cmp.Diff(tc.steps, stepTypes(lowerChosen(t, res).Steps)); d != "" {
				t.Errorf("steps (-want +got):\n%s", d)
			}
		})
	}
}
