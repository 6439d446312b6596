package cli_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestModelScaleDownAutoSimulates proves the plans --auto chooses for
// scaled-down models, a Llama (rotary embedding, grouped-query attention)
// and a GPT (learned positions, biases, tied head), forward alone and with
// the backward under Adam's memory, on a dp×tp mesh and an fsdp one:
// simulate PASSes, and the chosen fusion leaves nothing to choose.
func TestModelScaleDownAutoSimulates(t *testing.T) {
	if testing.Short() {
		t.Skip("solves and simulates scaled-down models (seconds each); the race job runs -short")
	}
	for _, tc := range []struct{ config, mesh string }{
		{"llama3_8b", "dp=2,tp=4"}, {"llama3_8b", "fsdp=4"}, {"gpt3_175b", "dp=2,tp=4"},
	} {
		config := filepath.Join("../../testdata/models", tc.config, "config.json")
		for _, flags := range [][]string{nil, {"--backward", "--optimizer", "adam"}} {
			fusion := filepath.Join(t.TempDir(), "chosen.yaml")
			args := append([]string{"model", config, "--mesh", tc.mesh, "--scale-down", "--auto", "-o", fusion}, flags...)
			// Standard error may say that the mesh's own plan, faster,
			// was written (TestModelAutoKeepsFasterMeshPlan); either is
			// simulated.
			if code, _, stderr := run(t, "", args...); code != 0 || stderr != "" && !strings.Contains(stderr, "the mesh's own plan") {
				t.Fatalf("%s %s %v: model exited %d: %s", tc.config, tc.mesh, flags, code, stderr)
			}
			src, err := os.ReadFile(fusion)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(src), "placements: auto") {
				t.Errorf("%s %s %v: the chosen fusion still has placements: auto", tc.config, tc.mesh, flags)
			}
			code, stdout, stderr := run(t, "", "simulate", fusion)
			if code != 0 || !strings.HasPrefix(stdout, "PASS\n") {
				t.Errorf("%s %s %v: simulate exited %d:\n%s%s", tc.config, tc.mesh, flags, code, firstLines(stdout, 3), stderr)
			}
		}
	}
}

// TestModelAutoSummaryGolden compares the summary of a small model's
// chosen plan, with what was chosen and the mesh's own plan beside it,
// with its golden (NVCOMM_UPDATE=1 rewrites it).
func TestModelAutoSummaryGolden(t *testing.T) {
	config := "../../testdata/models/tiny_llama/config.json"
	args := []string{"model", config, "--mesh", "dp=2,tp=4", "--batch", "2", "--seq", "16", "--layers", "2", "--dtype", "float32", "--auto", "--summary"}
	code, got, stderr := run(t, "", args...)
	if code != 0 || stderr != "" {
		t.Fatalf("%v exited %d: %s", args, code, stderr)
	}
	compareGolden(t, filepath.Join(filepath.Dir(config), "summary_auto_dp2_tp4.txt"), got)
}

// TestModelAutoUsage: what --auto does not search is a usage error (exit
// 2) saying so, and the search's flags need --auto.
func TestModelAutoUsage(t *testing.T) {
	config := "../../testdata/models/tiny_llama/config.json"
	for _, tc := range []struct {
		flags []string
		want  string
	}{
		{[]string{"--mesh", "pp=2,tp=4", "--auto"}, "--auto chooses the shardings within one mesh and does not cut a model into pipeline stages"},
		{[]string{"--mesh", "cp=2,tp=4", "--auto"}, "--auto searches meshes of dp, fsdp and tp axes"},
		{[]string{"--mesh", "fsdp=2,tp=4", "--auto", "--backward", "--keep-gathered"}, "--keep-gathered says how FSDP's gathered weights are kept"},
		{[]string{"--mesh", "dp=2,tp=4", "--memory-budget", "1GiB"}, "--memory-budget needs --auto"},
		{[]string{"--mesh", "dp=2,tp=4", "--optimizer", "adam"}, "--optimizer needs --auto"},
		{[]string{"--mesh", "dp=2,tp=4", "--auto", "--optimizer", "lion"}, `--optimizer "lion": want one of`},
	} {
		code, stdout, stderr := run(t, "", append([]string{"model", config}, tc.flags...)...)
		if code != 2 || stdout != "" || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2 and %q", tc.flags, code, stdout, stderr, tc.want)
		}
	}
}

// TestModelAutoKeepsFasterMeshPlan checks that model --auto never writes
// a step slower than the mesh's own: on a scaled-down training step the
// search's sum of per-op prices picks a plan slower than Megatron-LM's
// split the mesh names (docs/models.md), and the fusion written is then
// the mesh's own, byte for byte, with a line on standard error saying so.
func TestModelAutoKeepsFasterMeshPlan(t *testing.T) {
	config := "../../testdata/models/llama3_8b/config.json"
	flags := []string{"model", config, "--scale-down", "--mesh", "dp=2,tp=4", "--backward"}
	code, hand, stderr := run(t, "", flags...)
	if code != 0 {
		t.Fatalf("model exited %d: %s", code, stderr)
	}
	code, chosen, stderr := run(t, "", append(flags, "--auto", "--optimizer", "adam")...)
	if code != 0 {
		t.Fatalf("model --auto exited %d: %s", code, stderr)
	}
	if d := cmp.Diff(hand, chosen); d != "" {
		t.Errorf("model --auto wrote another fusion than the mesh's own, predicted faster (-own +written):\n%s", firstLines(d, 20))
	}
	if want := "the mesh's own plan (dp=2,tp=4), predicted "; !strings.Contains(stderr, want) {
		t.Errorf("stderr %q, want a line with %q", stderr, want)
	}
}
