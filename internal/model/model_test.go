package model

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestParseConfigErrors checks that a configuration's problems are
// reported at their key or value, several at once.
func TestParseConfigErrors(t *testing.T) {
	tests := []struct {
		name, src, want string
	}{
		{"not an object", `[1]`, `c.json:1:1: error: c.json is not a JSON object of keys: the file does not start with {`},
		{"no model_type", `{"hidden_size": 8}`, `c.json:1:1: error: the configuration has no model_type (supported: gpt2, llama, mixtral)` + `; add "model_type": "llama"`},
		{"unknown type", "{\n  \"model_type\": \"bert\"\n}", `c.json:2:17: error: model_type "bert" is not supported` + `; nvcomm writes the fusions of gpt2, llama, mixtral`},
		{"mixture of experts", "{\n  \"model_type\": \"qwen2_moe\"\n}", `c.json:2:17: error: model_type "qwen2_moe" is not supported yet: its mixture of experts' shared expert (a dense MLP beside the routed experts, gated by a sigmoid) is not written yet` + `; nvcomm writes the fusions of gpt2, llama, mixtral`},
		{"mixtral keys", "{\"model_type\": \"mixtral\", \"hidden_size\": 8, \"intermediate_size\": 8, \"num_attention_heads\": 2, \"num_hidden_layers\": 1,\n \"vocab_size\": 8, \"rms_norm_eps\": 1e-5, \"num_local_experts\": 4, \"num_experts_per_tok\": 2, \"sliding_window\": 4096, \"router_jitter_noise\": 0.1}",
			"c.json:2:109: error: sliding_window: nvcomm writes full causal attention only (null), got 4096\n" +
				"c.json:2:138: error: router_jitter_noise: nvcomm writes the router without jitter (0), got 0.1"},
		{"mixtral experts", "{\"model_type\": \"mixtral\", \"hidden_size\": 8, \"intermediate_size\": 8, \"num_attention_heads\": 2, \"num_hidden_layers\": 1,\n \"vocab_size\": 8, \"rms_norm_eps\": 1e-5, \"num_local_experts\": 2, \"num_experts_per_tok\": 3}",
			"c.json:1:1: error: num_local_experts 2 and num_experts_per_tok 3: want 1 ≤ num_experts_per_tok ≤ num_local_experts; each token goes to num_experts_per_tok of the num_local_experts experts"},
		{"gpt2 keys", "{\"model_type\": \"gpt2\", \"n_embd\": 8, \"n_head\": 2, \"n_layer\": 1, \"n_positions\": 8, \"vocab_size\": 8,\n \"activation_function\": \"relu\", \"rms_norm_eps\": 1e-5}",
			"c.json:2:25: error: activation_function: nvcomm writes \"gelu_new\" only, got \"relu\"\n" +
				"c.json:2:33: error: key \"rms_norm_eps\" is not one nvcomm knows for model_type gpt2: it may change the model in a way nvcomm would not plan; nvcomm reads n_embd, n_head, n_layer, n_positions, n_inner, vocab_size, layer_norm_epsilon, tie_word_embeddings, activation_function, and ignores _name_or_path, architectures, attention_dropout, bos_token_id, eos_token_id, hidden_dropout, initializer_range, model_type, pad_token_id, rope_scaling, rope_theta, torch_dtype, transformers_version, use_cache, attn_pdrop, embd_pdrop, resid_pdrop, n_ctx, scale_attn_weights, scale_attn_by_inverse_layer_idx, reorder_and_upcast_attn, summary_activation, summary_first_dropout, summary_proj_to_labels, summary_type, summary_use_proj, task_specific_params"},
		{"duplicate key", `{"model_type": "llama", "model_type": "llama"}`, `c.json:1:25: error: c.json is not a JSON object of keys: key "model_type" appears twice`},
		{"unknown key and wrong value", "{\"model_type\": \"llama\",\n \"hidden_sise\": 8,\n \"hidden_act\": \"gelu\"}",
			"c.json:1:1: error: the configuration has no hidden_size\n" +
				"c.json:1:1: error: the configuration has no intermediate_size\n" +
				"c.json:1:1: error: the configuration has no num_attention_heads\n" +
				"c.json:1:1: error: the configuration has no num_hidden_layers\n" +
				"c.json:1:1: error: the configuration has no vocab_size\n" +
				"c.json:1:1: error: the configuration has no rms_norm_eps\n" +
				"c.json:2:2: error: key \"hidden_sise\" is not one nvcomm knows for model_type llama: it may change the model in a way nvcomm would not plan; did you mean \"hidden_size\"?\n" +
				"c.json:3:16: error: hidden_act: nvcomm writes \"silu\" only, got \"gelu\""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseConfig("c.json", []byte(tc.src))
			if err == nil {
				t.Fatal("no error")
			}
			if d := cmp.Diff(tc.want, err.Error()); d != "" {
				t.Errorf("error (-want +got):\n%s", d)
			}
		})
	}
}

// TestParseMesh checks the mesh flag's syntax and its errors.
func TestParseMesh(t *testing.T) {
	tests := []struct {
		in   string
		want []Axis
		err  string
	}{
		{in: "tp=4", want: []Axis{{TP, 4}}},
		{in: "dp=2,tp=4", want: []Axis{{DP, 2}, {TP, 4}}},
		{in: "tp=0", err: `mesh axis "tp=0": want NAME=DEVICES, as dp=2 or tp=4`},
		{in: "fsdp=8,tp=8", want: []Axis{{FSDP, 8}, {TP, 8}}},
		{in: "dp=2,cp=2,tp=4", want: []Axis{{DP, 2}, {CP, 2}, {TP, 4}}},
		{in: "fsdp=2,cp=2,tp=2", want: []Axis{{FSDP, 2}, {CP, 2}, {TP, 2}}},
		{in: "cp=2,fsdp=2,tp=2", err: `mesh "cp=2,fsdp=2,tp=2": write fsdp before cp, as torchtitan's mesh orders dp_shard and cp: fsdp shards every weight over fsdp × cp, its split outermost`},
		{in: "pp=2", want: []Axis{{PP, 2}}},
		{in: "pp=4,dp=2,cp=2,tp=8", want: []Axis{{PP, 4}, {DP, 2}, {CP, 2}, {TP, 8}}},
		{in: "tp=2,pp=2", err: `mesh axis "pp": write pp first: the pipeline's stages are the outermost groups of devices, as torchtitan's and Megatron-LM's meshes place them`},
		{in: "pp=2,dp=2,fsdp=2,cp=2,tp=2", err: `mesh "pp=2,dp=2,fsdp=2,cp=2,tp=2" has 4 axes besides pp: a mesh has at most 3 (nvFuser's DIDz, DIDy, DIDx); leave out an axis of 1 device, or fold two parallelisms into one`},
		{in: "ep=8", want: []Axis{{EP, 8}}},
		{in: "ep=8,tp=8", want: []Axis{{EP, 8}, {TP, 8}}},
		{in: "pp=2,ep=4,tp=2", want: []Axis{{PP, 2}, {EP, 4}, {TP, 2}}},
		{in: "dp=2,ep=4", want: []Axis{{DP, 2}, {EP, 4}}},
		{in: "fsdp=2,ep=4,tp=8", want: []Axis{{FSDP, 2}, {EP, 4}, {TP, 8}}},
		{in: "cp=2,ep=4,tp=8", want: []Axis{{CP, 2}, {EP, 4}, {TP, 8}}},
		{in: "ep=4,cp=2", want: []Axis{{EP, 4}, {CP, 2}}},
		{in: "fsdp=2,cp=2,ep=2", err: `mesh "fsdp=2,cp=2,ep=2": ep with cp combines with tp alone, not with dp or fsdp: the experts' tokens would be split along cp and along dp or fsdp in one dim; leave dp (fsdp) out, as cp=2,ep=4,tp=8`},
		{in: "dp=2,ep=2,cp=2", err: `mesh "dp=2,ep=2,cp=2": ep with cp combines with tp alone, not with dp or fsdp: the experts' tokens would be split along cp and along dp or fsdp in one dim; leave dp (fsdp) out, as cp=2,ep=4,tp=8`},
		{in: "pp=2,cp=2,ep=2", err: `mesh "pp=2,cp=2,ep=2": ep with cp combines with tp alone, not with pp: the experts' tokens merge the cp slices (outermost, split along cp) with the batch, whose micro-batches are then no block of them; leave pp or cp out (cp=2,ep=4,tp=8, or pp=4,dp=2,ep=8)`},
		{in: "pp=2,dp=2,ep=2", want: []Axis{{PP, 2}, {DP, 2}, {EP, 2}}},
		{in: "pp=2,dp=2,ep=2,tp=2", want: []Axis{{PP, 2}, {DP, 2}, {EP, 2}, {TP, 2}}},
		{in: "pp=2,fsdp=2,ep=2", want: []Axis{{PP, 2}, {FSDP, 2}, {EP, 2}}},
		{in: "dp=2,fsdp=2,ep=2", err: `mesh "dp=2,fsdp=2,ep=2": ep combines with dp or fsdp, not both: ep splits the batch as they do, and the batch is split over two axes at most`},
		{in: "xp=2", err: `mesh axis "xp": nvcomm writes pp, dp, fsdp, cp, ep and tp parallelism`},
		{in: "tp=2,tp=2", err: `mesh axis "tp" is given twice`},
		{in: "dp=2,fsdp=2,cp=2,tp=2", err: `mesh "dp=2,fsdp=2,cp=2,tp=2" has 4 axes: a mesh has at most 3 (nvFuser's DIDz, DIDy, DIDx); leave out an axis of 1 device, or fold two parallelisms into one`},
	}
	for _, tc := range tests {
		got, err := ParseMesh(tc.in)
		if tc.err != "" {
			if err == nil || err.Error() != tc.err {
				t.Errorf("ParseMesh(%q) error = %v, want %s", tc.in, err, tc.err)
			}
			continue
		}
		if d := cmp.Diff(tc.want, got); d != "" || err != nil {
			t.Errorf("ParseMesh(%q) = %v (-want +got):\n%s", tc.in, err, d)
		}
	}
}

// TestFusionGolden writes the fusions of the tiny configurations of
// testdata/models under tensor and data parallelism, with and without
// sequence parallelism (and one with its backward), under FSDP and HSDP
// (with their gathers, and the sharded gradients of the backward) and
// context parallelism, alone, with sequence parallelism and with FSDP
// (the weights sharded over fsdp × cp, their gradients' too), a mixture
// of experts under ep with dp, in a pipeline with dp, and with cp (its
// routing per cp slice), and compares
// them with the golden files (NVCOMM_UPDATE=1 rewrites them). cli's tests
// simulate them.
func TestFusionGolden(t *testing.T) {
	tests := []struct {
		name, config, mesh string
		sp, backward       bool
		micro              int
		schedule           string
	}{
		{"tiny_llama_dp2_tp4", "tiny_llama", "dp=2,tp=4", false, false, 0, ""},
		{"tiny_llama_dp2_tp4_sp", "tiny_llama", "dp=2,tp=4", true, false, 0, ""},
		{"tiny_llama_dp2_tp4_backward", "tiny_llama", "dp=2,tp=4", false, true, 0, ""},
		{"tiny_gpt2_dp2_tp4", "tiny_gpt2", "dp=2,tp=4", false, false, 0, ""},
		{"tiny_gpt2_dp2_tp4_sp", "tiny_gpt2", "dp=2,tp=4", true, false, 0, ""},
		{"tiny_llama_fsdp2_tp4_backward", "tiny_llama", "fsdp=2,tp=4", false, true, 0, ""},
		{"tiny_gpt2_fsdp2_tp4", "tiny_gpt2", "fsdp=2,tp=4", false, false, 0, ""},
		{"tiny_llama_cp2_tp4", "tiny_llama", "cp=2,tp=4", false, false, 0, ""},
		{"tiny_llama_dp2_fsdp2_tp2_backward", "tiny_llama", "dp=2,fsdp=2,tp=2", false, true, 0, ""},
		{"tiny_gpt2_cp2_tp4_sp", "tiny_gpt2", "cp=2,tp=4", true, false, 0, ""},
		{"tiny_llama_fsdp2_cp2_tp2_backward", "tiny_llama", "fsdp=2,cp=2,tp=2", false, true, 0, ""},
		{"tiny_llama_pp2_dp2_tp2_backward", "tiny_llama", "pp=2,dp=2,tp=2", false, true, 2, ""},
		{"tiny_gpt2_pp2_tp4_sp_gpipe", "tiny_gpt2", "pp=2,tp=4", true, false, 4, "gpipe"},
		{"tiny_mixtral_ep2_tp4", "tiny_mixtral", "ep=2,tp=4", false, false, 0, ""},
		{"tiny_mixtral_ep2_tp4_backward", "tiny_mixtral", "ep=2,tp=4", false, true, 0, ""},
		{"tiny_mixtral_dp2_ep2_tp2_backward", "tiny_mixtral", "dp=2,ep=2,tp=2", false, true, 0, ""},
		{"tiny_mixtral_pp2_dp2_ep2_backward", "tiny_mixtral", "pp=2,dp=2,ep=2", false, true, 2, ""},
		{"tiny_mixtral_cp2_ep2_tp2_backward", "tiny_mixtral", "cp=2,ep=2,tp=2", false, true, 0, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := readConfig(t, tc.config)
			mesh, err := ParseMesh(tc.mesh)
			if err != nil {
				t.Fatal(err)
			}
			p := NewParallel(mesh, tc.sp)
			// Two sequences, or one per device that splits the batch
			// (and micro-batch); a block per pipeline stage.
			batch := max(2, p.split(batchSplit)) * max(tc.micro, 1)
			got, err := Fusion(c, p, Options{Name: tc.name, Batch: batch, Seq: 16, DType: "float32", Layers: p.stageGroups(), Backward: tc.backward,
				Microbatches: tc.micro, Schedule: tc.schedule})
			if err != nil {
				t.Fatal(err)
			}
			golden(t, filepath.Join("../../testdata/models", tc.name+".yaml"), got)
		})
	}
}

// readConfig parses testdata/models/NAME/config.json.
func readConfig(t *testing.T, name string) *Config {
	t.Helper()
	file := filepath.Join("../../testdata/models", name, "config.json")
	src, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	c, err := ParseConfig(file, src)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// golden compares got with file, which NVCOMM_UPDATE=1 rewrites.
func golden(t *testing.T, file string, got []byte) {
	t.Helper()
	if os.Getenv("NVCOMM_UPDATE") != "" {
		if err := os.WriteFile(file, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(string(want), string(got)); d != "" {
		t.Errorf("%s (-want +got):\n%s", file, d)
	}
}
