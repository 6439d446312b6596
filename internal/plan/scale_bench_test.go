package plan_test

import (
	"bytes"
	"fmt"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/nvcomm/nvcomm/internal/ir"
	"github.com/nvcomm/nvcomm/internal/lower"
	"github.com/nvcomm/nvcomm/internal/plan"
)

// chainFusion writes a fusion of n set ops, t0 → t1 → … → tn, each tensor
// [16, 16] float32 with the next of a few shardings in turn: on mesh "1d",
// 8 devices, dim 0, dim 1, replicated; on "2d", a 2×4 mesh, four
// placements that shard one or both dims: the input of the scale
// benchmarks of lowering, validating and simulating.
func chainFusion(n int, mesh string) []byte {
	var b strings.Builder
	b.WriteString("format: 1\nname: chain\nmeshes:\n")
	placements := []string{"[Shard(0)]", "[Shard(1)]", "[Replicate()]"}
	if mesh == "2d" {
		b.WriteString("  m: [[0, 1, 2, 3], [4, 5, 6, 7]]\n")
		placements = []string{"[Shard(0), Shard(1)]", "[Shard(1), Shard(0)]", "[Replicate(), Shard(0)]", "[Shard(0), Replicate()]"}
	} else {
		b.WriteString("  m: [0, 1, 2, 3, 4, 5, 6, 7]\n")
	}
	fmt.Fprintf(&b, "tensors:\n  t0: {mesh: m, shape: [16, 16], placements: %s}\n", placements[0])
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "  t%d: {mesh: m, placements: %s}\n", i, placements[i%len(placements)])
	}
	b.WriteString("ops:\n")
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "  - {op: set, in: t%d, out: t%d}\n", i-1, i)
	}
	return []byte(b.String())
}

// bigMeshFusion writes a fusion whose 1-D mesh lists n devices, a [n]
// tensor sharded one element a device gathered onto every device: its plan
// lists every device in the mesh and in the Allgather's team.
func bigMeshFusion(n int) []byte {
	var b strings.Builder
	b.WriteString("format: 1\nname: big_mesh\nmeshes:\n  m: [")
	for d := range n {
		if d > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.Itoa(d))
	}
	fmt.Fprintf(&b, "]\ntensors:\n  tv0:\n    mesh: m\n    shape: [%d]\n    schedule:\n"+
		"      - outer_split: {axis: 0, factor: %d}\n      - parallelize: {axis: 0, type: DIDx}\n"+
		"  tv1:\n    mesh: m\nops:\n  - {op: set, in: tv0, out: tv1}\n", n, n)
	return []byte(b.String())
}

// scaleInput is one input of the scale benchmarks.
type scaleInput struct {
	name string
	src  []byte
}

func scaleInputs() []scaleInput {
	return []scaleInput{
		{"chain1d_1k", chainFusion(1_000, "1d")},
		{"chain1d_10k", chainFusion(10_000, "1d")},
		{"chain1d_100k", chainFusion(100_000, "1d")},
		{"chain2d_100k", chainFusion(100_000, "2d")},
		{"mesh_1M", bigMeshFusion(1_000_000)},
	}
}

// yamlDecode is the baseline every ratio is measured against: decoding
// the fusion file into yaml.Nodes, the part of reading it that no
// algorithm of nvcomm can avoid.
func yamlDecode(b *testing.B, src []byte) time.Duration {
	start := time.Now()
	var n yaml.Node
	if err := yaml.Unmarshal(src, &n); err != nil {
		b.Fatal(err)
	}
	return time.Since(start)
}

// BenchmarkScaleLower measures what `nvcomm lower` does — parse, lower
// (policy optimal) and encode the plan — on the scale inputs, beside the
// YAML decode of the same file timed in the same loop. x-yaml-decode is
// the ratio (goal ≤ 2 at 100k ops), encode-share the part of it that
// plan.Encode takes, and plan-B/file-B the encoded plan's size over the
// fusion file's.
func BenchmarkScaleLower(b *testing.B) {
	for _, in := range scaleInputs() {
		b.Run(in.name, func(b *testing.B) {
			b.ReportAllocs()
			var decode, lowering, encoding time.Duration
			var size int
			for b.Loop() {
				b.StopTimer()
				decode += yamlDecode(b, in.src)
				b.StartTimer()
				start := time.Now()
				f, err := ir.Parse(in.name+".yaml", in.src)
				if err != nil {
					b.Fatal(err)
				}
				p, err := lower.Lower(f, lower.Options{})
				if err != nil {
					b.Fatal(err)
				}
				mid := time.Now()
				var out bytes.Buffer
				if err := plan.Encode(&out, p); err != nil {
					b.Fatal(err)
				}
				encoding += time.Since(mid)
				lowering += time.Since(start)
				size = out.Len()
			}
			b.ReportMetric(lowering.Seconds()/float64(b.N), "s-lower")
			b.ReportMetric(decode.Seconds()/float64(b.N), "s-yaml-decode")
			b.ReportMetric(float64(lowering)/float64(decode), "x-yaml-decode")
			b.ReportMetric(float64(encoding)/float64(lowering), "encode-share")
			b.ReportMetric(float64(size)/float64(len(in.src)), "plan-B/file-B")
		})
	}
}

// BenchmarkScaleEncode measures plan.Encode alone on the plans of the
// scale inputs, as a ratio to the YAML decode of the fusion file measured in
// the same run, and its throughput in bytes written.
func BenchmarkScaleEncode(b *testing.B) {
	for _, in := range scaleInputs() {
		f, err := ir.Parse(in.name+".yaml", in.src)
		if err != nil {
			b.Fatal(err)
		}
		p, err := lower.Lower(f, lower.Options{})
		if err != nil {
			b.Fatal(err)
		}
		b.Run(in.name, func(b *testing.B) {
			b.ReportAllocs()
			var decode, encoding time.Duration
			for b.Loop() {
				b.StopTimer()
				decode += yamlDecode(b, in.src)
				b.StartTimer()
				start := time.Now()
				if err := plan.Encode(io.Discard, p); err != nil {
					b.Fatal(err)
				}
				encoding += time.Since(start)
			}
			b.ReportMetric(encoding.Seconds()/float64(b.N), "s-encode")
			b.ReportMetric(float64(encoding)/float64(decode), "x-yaml-decode")
		})
	}
}
