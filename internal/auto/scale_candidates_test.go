package auto

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nvcomm/nvcomm/internal/plan"
)

// normLinear is an rms_norm and a column-parallel linear layer on a 1-D
// mesh of 4 (bfloat16, 4096 tokens, hidden 4096, ffn 16384), the input
// given as inSharding, the weight and the norm's output left to the
// auto-sharder, the output split on the ffn dim.
func normLinear(inSharding string) string {
	return `format: 2
name: norm_linear
meshes:
  tp: [0, 1, 2, 3]
tensors:
  x:  {mesh: tp, shape: [4096, 4096], dtype: bfloat16, placements: [` + inSharding + `]}
  g:  {mesh: tp, shape: [4096], dtype: bfloat16}
  w1: {mesh: tp, shape: [16384, 4096], dtype: bfloat16, placements: auto}
  y:  {mesh: tp, placements: [Shard(1)]}
ops:
  - {op: rms_norm, in: [x, g], out: h, axes: [-1], eps: 1.0e-6}
  - {op: linear, in: [h, w1], out: y}
`
}

// TestSequenceParallel checks that --auto finds Megatron-LM's sequence
// parallelism: with the input split on the sequence (as the previous
// block's ReduceScatter leaves it), the norm runs on each device's
// sequence shard and one Allgather gathers its output for the
// column-parallel linear layer, rather than gathering the input and
// normalising it whole on every device (22.6 µs slower, and 24 MiB more
// a device); with the input whole, nothing moves.
func TestSequenceParallel(t *testing.T) {
	// square, the sum over the hidden dim, then div, add, rsqrt, and the
	// two broadcasts and products.
	norm := strings.Fields("Pointwise LocalReduce Pointwise Pointwise Pointwise Pointwise Pointwise Pointwise Pointwise")
	tests := map[string]struct {
		in     string
		budget int64
		want   []string
		steps  []string
	}{
		"sequence shards": {in: "Shard(0)", want: []string{"w1 [Shard(0)]", "h [Shard(0)]"},
			steps: slices.Concat(norm, []string{"Allgather", "Matmul"})},
		// The norm gathered whole needs 104 MiB a device, on sequence
		// shards 80 MiB.
		"sequence shards, 96 MiB": {in: "Shard(0)", budget: 96 << 20, want: []string{"w1 [Shard(0)]", "h [Shard(0)]"},
			steps: slices.Concat(norm, []string{"Allgather", "Matmul"})},
		"input whole": {in: "Replicate()", want: []string{"w1 [Shard(0)]", "h [Replicate()]"},
			steps: slices.Concat(norm, []string{"Matmul"})},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			res, err := Solve("norm_linear.yaml", []byte(normLinear(tc.in)), Options{MemoryBudget: tc.budget})
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

// lmHead is the LM head of a Llama-3-sized vocabulary (128,256) on a 1-D
// mesh of 4: 2048 tokens of hidden 4096, replicated, times the weight
// [vocab, hidden] (1,002 MiB in bfloat16), which the auto-sharder chooses
// with the logits.
const lmHead = `format: 2
name: lm_head
meshes:
  tp: [0, 1, 2, 3]
tensors:
  h: {mesh: tp, shape: [2048, 4096], dtype: bfloat16}
  w: {mesh: tp, shape: [128256, 4096], dtype: bfloat16, placements: auto}
ops:
  - {op: linear, in: [h, w], out: logits}
`

// TestLMHeadVocabParallel checks that --auto splits the LM head as
// Megatron-LM's ColumnParallelLinear over the vocabulary does: the weight
// by rows (Shard(0)), each device computing its vocabulary's logits
// (Shard(1)) with no collective, the logits left split for a
// vocab-parallel cross-entropy.
func TestLMHeadVocabParallel(t *testing.T) {
	tests := map[string]struct {
		budget int64
		want   []string
	}{
		"no budget":                 {want: []string{"w [Shard(0)]", "logits [Shard(1)]"}},
		"budget below the weight":   {budget: 512 << 20, want: []string{"w [Shard(0)]", "logits [Shard(1)]"}},
		"budget of the split layer": {budget: 400 << 20, want: []string{"w [Shard(0)]", "logits [Shard(1)]"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			res, err := Solve("lm_head.yaml", []byte(lmHead), Options{MemoryBudget: tc.budget})
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, chosen(res)); d != "" {
				t.Errorf("decisions (-want +got):\n%s", d)
			}
			if d := cmp.Diff([]string{"Matmul"}, stepTypes(lowerChosen(t, res).Steps)); d != "" {
				t.Errorf("steps (-want +got):\n%s", d)
			}
		})
	}
}

// stepTypes lists the steps' types.
func stepTypes(steps []plan.Step) []string {
	var out []string
	for _, s := range steps {
		out = append(out, s.Type)
	}
	return out
}
