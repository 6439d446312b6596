package cli_test

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nvcomm/nvcomm/internal/cli"
	"github.com/nvcomm/nvcomm/internal/scale"
)

// BenchmarkValidateChain runs `nvcomm validate` in process on the plan
// `nvcomm lower` writes for a generated chain of 100k set ops on either
// mesh (internal/scale's chain1d and chain2d): mapping the file, decoding
// it and checking it (plan.Validate beside lower.Certify). The plan is
// written once, before the timer starts; cpu-s/op is the process's CPU
// time (user and system) an op. For profiles and benchstat:
//
//	go test -run '^$' -bench ValidateChain -count 6 ./internal/cli
func BenchmarkValidateChain(b *testing.B) {
	for _, fam := range scale.Families[:2] { // chain1d, chain2d
		b.Run(fam.Name, func(b *testing.B) {
			dir := b.TempDir()
			fusion, planFile := filepath.Join(dir, "chain.yaml"), filepath.Join(dir, "chain.json")
			if err := os.WriteFile(fusion, fam.Gen(100_000), 0o644); err != nil {
				b.Fatal(err)
			}
			runBench(b, "lower", fusion, "-o", planFile)
			info, err := os.Stat(planFile)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(info.Size())
			b.ReportAllocs()
			cpu := scale.CPUTime()
			for b.Loop() {
				runBench(b, "validate", planFile)
			}
			// CPU time varies less than wall time on a busy machine.
			b.ReportMetric((scale.CPUTime()-cpu).Seconds()/float64(b.N), "cpu-s/op")
		})
	}
}

// runBench runs nvcomm in process and fails unless it exits 0.
func runBench(b *testing.B, args ...string) {
	b.Helper()
	var stderr strings.Builder
	if code := cli.Run(context.Background(), args, strings.NewReader(""), io.Discard, &stderr); code != 0 {
		b.Fatalf("nvcomm %s: exit %d: %s", strings.Join(args, " "), code, stderr.String())
	}
}
