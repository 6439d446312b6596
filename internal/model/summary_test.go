package model

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nvcomm/nvcomm/internal/plan"
)

// TestTeamAxes checks that a collective's teams are named by the mesh
// axes their members differ along.
func TestTeamAxes(t *testing.T) {
	pl := &plan.Plan{Meshes: map[string]plan.Mesh{"m": {Shape: []int{2, 4}, Devices: []int{0, 1, 2, 3, 4, 5, 6, 7}}}}
	p := Parallel{Mesh: []Axis{{DP, 2}, {TP, 4}}}
	tests := []struct {
		teams [][]int
		want  string
	}{
		{[][]int{{0, 1, 2, 3}, {4, 5, 6, 7}}, "tp"},
		{[][]int{{0, 4}, {1, 5}, {2, 6}, {3, 7}}, "dp"},
		{[][]int{{0, 1, 2, 3, 4, 5, 6, 7}}, "dp×tp"},
		{[][]int{{0, 1}, {2, 3}}, "tp"},
		{nil, "?"},
	}
	for _, tc := range tests {
		if d := cmp.Diff(tc.want, teamAxes(pl, p, tc.teams)); d != "" {
			t.Errorf("teamAxes(%v) (-want +got):\n%s", tc.teams, d)
		}
	}
}

// TestScaleDown checks that the scaled-down model keeps the structure
// the mesh shards: grouped-query attention, the MLP's ratio, the padded
// vocabulary; that fsdp shards its weights evenly (a wider head where
// hidden would not split), and that it takes one sequence per dp and fsdp
// device, of 2 tokens per tp and cp device.
func TestScaleDown(t *testing.T) {
	for _, tc := range []struct {
		config, mesh                                      string
		heads, kv, hidden, ffn, vocab, layers, seq, batch int
	}{
		{"llama3_70b", "dp=8,tp=8", 16, 8, 64, 224, 128, 2, 16, 8},
		{"gpt3_175b", "dp=8,tp=8", 8, 8, 32, 128, 127, 2, 16, 8},
		{"llama3_70b", "fsdp=8,tp=8", 16, 8, 64, 256, 128, 2, 16, 8},
		{"llama3_8b", "fsdp=8", 2, 1, 16, 56, 128, 2, 2, 8},
		{"gpt3_175b", "fsdp=8", 1, 1, 8, 32, 127, 2, 2, 8},
		{"llama3_8b", "fsdp=4,cp=2,tp=8", 16, 8, 64, 224, 128, 2, 32, 4},
		{"llama3_8b", "dp=2,fsdp=4,tp=8", 16, 8, 64, 224, 128, 2, 16, 8},
		{"llama3_8b", "dp=2,cp=2,tp=8", 16, 8, 64, 224, 128, 2, 32, 2},
		{"mixtral_8x7b", "ep=8,tp=8", 16, 8, 64, 224, 128, 2, 16, 8},
	} {
		c := readConfig(t, tc.config)
		mesh, err := ParseMesh(tc.mesh)
		if err != nil {
			t.Fatal(err)
		}
		p := Parallel{Mesh: mesh}
		s, o := ScaleDown(c, p, Options{Batch: 64, Seq: 8192})
		got := []int{s.Heads, s.KVHeads, s.Hidden, s.FFN, s.Vocab, s.Layers, o.Seq, o.Batch}
		want := []int{tc.heads, tc.kv, tc.hidden, tc.ffn, tc.vocab, tc.layers, tc.seq, tc.batch}
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("%s on %s: heads, kv heads, hidden, MLP, vocabulary, layers, seq, batch (-want +got):\n%s", tc.config, tc.mesh, d)
		}
		if err := fits(s, p, o); err != nil {
			t.Errorf("%s on %s: the scaled-down model does not fit: %v", tc.config, tc.mesh, err)
		}
	}
}

// TestFitsErrors checks that a mesh the model or the step cannot split
// is refused, saying which axis splits what.
func TestFitsErrors(t *testing.T) {
	for _, tc := range []struct {
		mesh       string
		sp         bool
		batch, seq int
		want       string
	}{
		{"tp=3", false, 1, 16, "num_attention_heads 8 is not a multiple of 3: each device of the mesh axis takes an equal part (tp splits it)"},
		{"fsdp=3,tp=4", false, 3, 16, "hidden_size 64 is not a multiple of 3: each device of the mesh axis takes an equal part (fsdp shards every weight on it)"},
		{"fsdp=6", false, 6, 16, "hidden_size 64 is not a multiple of 6: each device of the mesh axis takes an equal part (fsdp shards every weight on it)"},
		{"fsdp=4", false, 2, 16, "--batch 2 is not a multiple of 4: each device of the mesh axis takes an equal part (fsdp splits the batch)"},
		{"cp=3,tp=2", false, 1, 16, "--seq 16 is not a multiple of 3: each device of the mesh axis takes an equal part (cp splits the sequence)"},
		{"tp=4", true, 1, 6, "--seq 6 is not a multiple of 4: each device of the mesh axis takes an equal part (tp splits the sequence)"},
		{"dp=2,fsdp=2", false, 2, 16, "--batch 2 is not a multiple of 4: each device of the mesh axis takes an equal part (dp×fsdp splits the batch)"},
		{"cp=2,tp=4", true, 1, 12, "--seq 12 is not a multiple of 8: each device of the mesh axis takes an equal part (cp×tp splits the sequence)"},
		{"ep=2,tp=4", false, 2, 16, "ep splits a mixture of experts' experts, and model_type llama has none"},
	} {
		mesh, err := ParseMesh(tc.mesh)
		if err != nil {
			t.Fatal(err)
		}
		err = fits(readConfig(t, "tiny_llama"), Parallel{Mesh: mesh, SP: tc.sp}, Options{Batch: tc.batch, Seq: tc.seq})
		if err == nil {
			t.Errorf("%s: no error, want %s", tc.mesh, tc.want)
			continue
		}
		if d := cmp.Diff(tc.want, err.Error()); d != "" {
			t.Errorf("%s (-want +got):\n%s", tc.mesh, d)
		}
	}
}

// TestThroughput checks the tokens a second and the MFU of a predicted
// step, and Adam's bytes a parameter.
func TestThroughput(t *testing.T) {
	s := &Summary{Devices: 8, Tokens: 65536, Time: 0.5, FlopsPerToken: 6e10, PeakFLOPS: 1e15}
	// 6e10 FLOPs × 65536 tokens / (0.5 s × 8 devices × 1e15 FLOP/s).
	if d := cmp.Diff([]float64{131072, 0.98304}, []float64{s.TokensPerSecond(), s.MFU()}); d != "" {
		t.Errorf("tokens/s, MFU (-want +got):\n%s", d)
	}
	s.PeakFLOPS = 0
	if got := s.MFU(); got != 0 {
		t.Errorf("MFU without a peak = %v, want 0", got)
	}
	got := []int64{adamBytes("bfloat16"), adamBytes("float16"), adamBytes("float32"), adamBytes("float64")}
	if d := cmp.Diff([]int64{12, 12, 8, 16}, got); d != "" {
		t.Errorf("Adam's bytes a parameter (-want +got):\n%s", d)
	}
	if d := cmp.Diff("8,030,261,248", withCommas(8030261248)); d != "" {
		t.Errorf("withCommas (-want +got):\n%s", d)
	}
}

// TestStageStarts checks the pipeline's runs of blocks: equal ones, the
// first or last stage's given (Megatron-LM's uneven stages), and the
// splits refused with what each stage would hold.
func TestStageStarts(t *testing.T) {
	for _, tc := range []struct {
		blocks, stages, first, last int
		want                        []int
		err                         string
	}{
		{32, 1, 0, 0, []int{0, 32}, ""},
		{32, 4, 0, 0, []int{0, 8, 16, 24, 32}, ""},
		{32, 4, 0, 5, []int{0, 9, 18, 27, 32}, ""},
		{32, 4, 8, 6, []int{0, 8, 17, 26, 32}, ""},
		{32, 4, 2, 0, []int{0, 2, 12, 22, 32}, ""},
		{32, 2, 30, 2, []int{0, 30, 32}, ""},
		{32, 2, 20, 0, []int{0, 20, 32}, ""},
		{4, 3, 2, 0, []int{0, 2, 3, 4}, ""},
		{30, 4, 0, 0, nil, "num_hidden_layers 30: 30 blocks do not split over 4 stages (the pipeline's stages hold equal numbers of blocks, unless --first-stage-layers or --last-stage-layers says otherwise)"},
		{32, 4, 3, 4, nil, "num_hidden_layers 32: 25 blocks do not split over 2 stages (the 2 stages besides the first and last given hold equal numbers)"},
		{32, 4, 0, 40, nil, "--first-stage-layers 0 --last-stage-layers 40: the first and last of 4 stages would hold 40 blocks, the model has 32"},
		{32, 2, 20, 10, nil, "--first-stage-layers 20 --last-stage-layers 10: the first and last of 2 stages would hold 30 blocks, the model has 32"},
		{32, 4, 16, 15, nil, "--first-stage-layers 16 --last-stage-layers 15 leave 1 of 32 blocks to 2 stages between: every stage holds one or more"},
	} {
		got, err := stageStarts(tc.blocks, tc.stages, Options{FirstStageBlocks: tc.first, LastStageBlocks: tc.last})
		name := fmt.Sprintf("%d blocks, %d stages, first %d, last %d", tc.blocks, tc.stages, tc.first, tc.last)
		if tc.err != "" {
			if err == nil || err.Error() != tc.err {
				t.Errorf("%s: error %v, want %s", name, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if d := cmp.Diff(tc.want, got); d != "" {
			t.Errorf("%s (-want +got):\n%s", name, d)
		}
	}
}
