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
		{"no model_type", `{"hidden_size": 8}`, `c.json:1:1: error: the configuration has no model_type (supported: llama)` + `; add "model_type": "llama"`},
		{"unsupported type", "{\n  \"model_type\": \"mixtral\"\n}", `c.json:2:17: error: model_type "mixtral" is not supported` + `; nvcomm writes the fusions of llama`},
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
		{in: "pp=2", err: `mesh axis "pp": nvcomm writes dp and tp parallelism (cp, pp, ep and fsdp are not written yet)`},
		{in: "tp=2,tp=2", err: `mesh axis "tp" is given twice`},
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

// TestFusionGolden writes the fusion of testdata/models/tiny_llama/config.json
// under tensor and data parallelism, with and without sequence
// parallelism, and compares it with the golden files (NVCOMM_UPDATE=1
// rewrites them).
func TestFusionGolden(t *testing.T) {
	src, err := os.ReadFile("../../testdata/models/tiny_llama/config.json")
	if err != nil {
		t.Fatal(err)
	}
	c, err := ParseConfig("tiny_llama.json", src)
	if err != nil {
		t.Fatal(err)
	}
	for _, sp := range []bool{false, true} {
		name := map[bool]string{false: "tiny_llama_dp2_tp4", true: "tiny_llama_dp2_tp4_sp"}[sp]
		t.Run(name, func(t *testing.T) {
			got, err := Fusion(c, Parallel{Mesh: []Axis{{DP, 2}, {TP, 4}}, SP: sp}, Options{Name: name, Batch: 2, Seq: 16, DType: "float32", Layers: 1})
			if err != nil {
				t.Fatal(err)
			}
			file := filepath.Join("../../testdata/models", name+".yaml")
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
		})
	}
}
