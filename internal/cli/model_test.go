package cli_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// modelConfigs are the example configurations of testdata/models.
func modelConfigs(t *testing.T) []string {
	t.Helper()
	configs, err := filepath.Glob("../../testdata/models/*/config.json")
	if err != nil || len(configs) < 5 {
		t.Fatalf("found %d model configurations (%v)", len(configs), err)
	}
	return configs
}

// TestModelScaleDownSimulates proves the plan of every example model's
// step, scaled down, under both policies, with and without sequence
// parallelism, forward alone and with its backward (the whole step, from
// the loss through the LM head and the blocks to the embedding):
// simulate PASSes.
func TestModelScaleDownSimulates(t *testing.T) {
	for _, config := range modelConfigs(t) {
		name := filepath.Base(filepath.Dir(config))
		for _, flags := range [][]string{nil, {"--sp"}, {"--backward"}, {"--sp", "--backward"}} {
			dir := t.TempDir()
			fusion := filepath.Join(dir, "small.yaml")
			args := append([]string{"model", config, "--mesh", "dp=2,tp=4", "--scale-down", "-o", fusion}, flags...)
			if code, _, stderr := run(t, "", args...); code != 0 {
				t.Fatalf("%s %v: model exited %d: %s", name, flags, code, stderr)
			}
			for _, policy := range []string{"optimal", "nvfuser"} {
				code, stdout, stderr := run(t, "", "simulate", "--policy", policy, fusion)
				if code != 0 || !strings.HasPrefix(stdout, "PASS\n") {
					t.Errorf("%s %v, policy %s: simulate exited %d:\n%s%s", name, flags, policy, code, firstLines(stdout, 3), stderr)
				}
			}
		}
	}
}

// firstLines is s's first n lines.
func firstLines(s string, n int) string {
	lines := strings.SplitAfter(s, "\n")
	return strings.Join(lines[:min(n, len(lines))], "")
}

// TestModelSummaryGolden writes the summaries of the full-size example
// models on 64 devices (dp=8, tp=8), with and without sequence
// parallelism, and compares them with the goldens beside their
// configurations (NVCOMM_UPDATE=1 rewrites them). Each is a plan of
// thousands of collectives, lowered in about a second.
func TestModelSummaryGolden(t *testing.T) {
	if testing.Short() {
		t.Skip("lowers full-size models")
	}
	for _, config := range modelConfigs(t) {
		dir := filepath.Dir(config)
		if strings.HasPrefix(filepath.Base(dir), "tiny_") {
			continue
		}
		for _, sp := range []string{"", "_sp"} {
			args := []string{"model", config, "--mesh", "dp=8,tp=8", "--batch", "8", "--summary"}
			if sp != "" {
				args = append(args, "--sp")
			}
			code, got, stderr := run(t, "", args...)
			if code != 0 {
				t.Fatalf("%v exited %d: %s", args, code, stderr)
			}
			file := filepath.Join(dir, "summary_dp8_tp8"+sp+".txt")
			if os.Getenv("NVCOMM_UPDATE") != "" {
				if err := os.WriteFile(file, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(string(want), got); d != "" {
				t.Errorf("%s (-want +got):\n%s", file, d)
			}
		}
	}
}
