package scale_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/nvcomm/nvcomm/internal/ir"
	"github.com/nvcomm/nvcomm/internal/scale"
)

// The benchmarks time one row of the report each, for profiling
// (go test -run '^$' -bench ScaleLower/chain1d_100k -cpuprofile cpu.out
// ./internal/scale). `make bench` leaves them out: their inputs are big.

// familySizes are the sizes every family is benchmarked at: enough to
// show the exponent.
var familySizes = []int{1_000, 10_000, 100_000}

// input is one generated fusion of a family.
type input struct {
	name string
	src  []byte
}

// familyInputs are every family at every size, named family_size
// ("mixed1_10k").
func familyInputs() []input {
	var out []input
	for _, f := range scale.Families {
		for _, n := range familySizes {
			out = append(out, input{sizeName(f.Name, n), f.Gen(n)})
		}
	}
	return out
}

// sizeName names a family's input of n ops: chain1d_100k.
func sizeName(family string, n int) string {
	if n >= 1000 {
		return fmt.Sprintf("%s_%dk", family, n/1000)
	}
	return fmt.Sprintf("%s_%d", family, n)
}

// BenchmarkScaleLower parses, lowers and encodes every family and a
// 1M-device mesh; x-yaml-decode is the ratio to decoding the file's YAML
// (goal ≤ 2).
func BenchmarkScaleLower(b *testing.B) {
	inputs := append(familyInputs(), input{"mesh_1M", scale.BigMesh(1_000_000)})
	for _, in := range inputs {
		b.Run(in.name, func(b *testing.B) {
			b.ReportAllocs()
			var sum lowering
			for b.Loop() {
				l, err := lowerSource(in.name, in.src)
				if err != nil {
					b.Fatal(err)
				}
				sum.decode, sum.parse, sum.lower, sum.encode = sum.decode+l.decode, sum.parse+l.parse, sum.lower+l.lower, sum.encode+l.encode
			}
			b.ReportMetric(sum.total().Seconds()/float64(b.N), "s-lower")
			b.ReportMetric(float64(sum.total())/float64(sum.decode), "x-yaml-decode")
			b.ReportMetric(float64(sum.parse)/float64(sum.total()), "parse-share")
			b.ReportMetric(float64(sum.encode)/float64(sum.total()), "encode-share")
		})
	}
}

// BenchmarkScaleParse parses the chain of 100k ops; x-yaml-decode is the
// ratio to decoding its YAML alone, the part of parsing that ir.Parse
// cannot avoid.
func BenchmarkScaleParse(b *testing.B) {
	src := scale.Chain(100_000, scale.Mesh1D)
	b.ReportAllocs()
	var decode, parse time.Duration
	for b.Loop() {
		b.StopTimer()
		d, err := scale.YAMLDecode(src)
		if err != nil {
			b.Fatal(err)
		}
		decode += d
		b.StartTimer()
		start := time.Now()
		if _, err := ir.Parse("chain.yaml", src); err != nil {
			b.Fatal(err)
		}
		parse += time.Since(start)
	}
	b.ReportMetric(float64(parse)/float64(decode), "x-yaml-decode")
}

// BenchmarkScaleValidate validates the plans of every family; x-lower is
// the ratio to lowering them (goal ≤ 0.5), and decode- and check-x-lower
// are its two parts' ratios.
func BenchmarkScaleValidate(b *testing.B) {
	for _, in := range familyInputs() {
		l, err := lowerSource(in.name, in.src)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(in.name, func(b *testing.B) {
			var sum validation
			for b.Loop() {
				v, err := validateSource(in.name, in.src)
				if err != nil {
					b.Fatal(err)
				}
				sum.decode, sum.check = sum.decode+v.decode, sum.check+v.check
			}
			perLower := func(d time.Duration) float64 { return d.Seconds() / float64(b.N) / l.total().Seconds() }
			b.ReportMetric(sum.total().Seconds()/float64(b.N), "s-validate")
			b.ReportMetric(perLower(sum.total()), "x-lower")
			b.ReportMetric(perLower(sum.decode), "decode-x-lower")
			b.ReportMetric(perLower(sum.check), "check-x-lower")
		})
	}
}

// BenchmarkScaleSimulateChain simulates the plans of every family; x-lower
// is the ratio to lowering them (goal ≤ 2).
func BenchmarkScaleSimulateChain(b *testing.B) {
	for _, in := range familyInputs() {
		l, err := lowerSource(in.name, in.src)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(in.name, func(b *testing.B) {
			b.ReportAllocs()
			var simulating time.Duration
			for b.Loop() {
				wall, _, err := simulate(l.plan)
				if err != nil {
					b.Fatal(err)
				}
				simulating += wall
			}
			b.ReportMetric(simulating.Seconds()/float64(b.N), "s-simulate")
			b.ReportMetric(simulating.Seconds()/float64(b.N)/l.total().Seconds(), "x-lower")
		})
	}
}

// BenchmarkScaleSimulateBig simulates a collective on 64 MiB of float32
// over 8 devices; x-copy-bw is its bandwidth over the bytes the devices
// hold relative to copy()'s, measured in the same loop (goal ≥ 0.5).
func BenchmarkScaleSimulateBig(b *testing.B) {
	for _, big := range scale.BigTensors() {
		b.Run(big.Name, func(b *testing.B) {
			b.ReportAllocs()
			var sum bandwidth
			for b.Loop() {
				bw, err := simulateBig(big)
				if err != nil {
					b.Fatal(err)
				}
				sum.held, sum.simulate, sum.copy = bw.held, sum.simulate+bw.simulate, sum.copy+bw.copy
			}
			b.ReportMetric(float64(sum.held)*float64(b.N)/sum.simulate.Seconds()/1e9, "GB/s-simulate")
			b.ReportMetric(sum.ratio(), "x-copy-bw")
		})
	}
}

// BenchmarkScaleMesh4096 lowers three-axis sharding changes on meshes of
// 4,096 devices (goal ≤ 0.2 s each).
func BenchmarkScaleMesh4096(b *testing.B) {
	for _, shape := range scale.Shapes4096 {
		for _, c := range scale.MeshChanges {
			src := scale.MeshChange(shape[0], shape[1], shape[2], c)
			b.Run(fmt.Sprintf("%dx%dx%d_%s", shape[0], shape[1], shape[2], c.Name), func(b *testing.B) {
				for b.Loop() {
					if _, err := lowerSource("mesh", src); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
