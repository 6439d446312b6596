package difftest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nvcomm/nvcomm/internal/lower"
	"github.com/nvcomm/nvcomm/internal/sim"
	"github.com/nvcomm/nvcomm/internal/syntax"
)

// benchFusions are the fusions the benchmarks lower and simulate.
var benchFusions = []string{
	"../../testdata/examples/allgather_loop_split.yaml",
	"../../testdata/conformance/L-22_reduce_scatter_noncontiguous.yaml",
	"../../testdata/conformance/X-02_allreduce_2d_didy.yaml",
}

func benchName(path string) string { return strings.TrimSuffix(filepath.Base(path), ".yaml") }

// BenchmarkLower measures parse + lower (policy optimal) per fusion.
func BenchmarkLower(b *testing.B) {
	for _, path := range benchFusions {
		src, err := os.ReadFile(path)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(benchName(path), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				f, err := syntax.Parse(path, src)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := lower.Lower(f, lower.Options{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkSimulate measures simulating each fusion's plan.
func BenchmarkSimulate(b *testing.B) {
	for _, path := range benchFusions {
		src, err := os.ReadFile(path)
		if err != nil {
			b.Fatal(err)
		}
		f, err := syntax.Parse(path, src)
		if err != nil {
			b.Fatal(err)
		}
		p, err := lower.Lower(f, lower.Options{})
		if err != nil {
			b.Fatal(err)
		}
		b.Run(benchName(path), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := sim.Run(p, sim.Options{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkDifferential measures one generated case end to end.
func BenchmarkDifferential(b *testing.B) {
	b.ReportAllocs()
	i := uint64(0)
	for b.Loop() {
		check(NewGenerator(i).Case(), i, true)
		i++
	}
}
