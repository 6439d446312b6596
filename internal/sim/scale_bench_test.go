package sim_test

// The scale benchmarks of simulate. They lower fusions with internal/lower
// to get realistic plans and a baseline to compare with; package sim itself
// never imports the compiler (it is the independent oracle).

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nvcomm/nvcomm/internal/ir"
	"github.com/nvcomm/nvcomm/internal/lower"
	"github.com/nvcomm/nvcomm/internal/plan"
	"github.com/nvcomm/nvcomm/internal/sim"
)

// chainFusion writes a fusion of n set ops, t0 → t1 → … → tn, each tensor
// [16, 16] float32 with the next of a few shardings in turn: on mesh "1d",
// 8 devices, dim 0, dim 1, replicated; on "2d", a 2×4 mesh, four
// placements that shard one or both dims (as internal/plan's benchmarks).
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

// lowerSource parses and lowers a fusion (policy optimal).
func lowerSource(b *testing.B, name string, src []byte) *plan.Plan {
	b.Helper()
	f, err := ir.Parse(name+".yaml", src)
	if err != nil {
		b.Fatal(err)
	}
	p, err := lower.Lower(f, lower.Options{})
	if err != nil {
		b.Fatal(err)
	}
	return p
}

// run simulates p and fails the benchmark unless it passes.
func run(b *testing.B, p *plan.Plan) {
	b.Helper()
	res, err := sim.Run(p, sim.Options{Seed: 1, MaxBytes: 16 << 30})
	if err != nil {
		b.Fatal(err)
	}
	if !res.Pass {
		b.Fatalf("FAIL: %+v", res.Mismatch)
	}
}

// BenchmarkScaleSimulateChain simulates long chains of set ops
// (small extents, many ops) beside lowering the same fusion in the same
// loop: x-lower is the ratio of wall times (goal ≤ 2 at 100k ops, and the
// same at every size: linear), x-lower-cpu of CPU times (the process's,
// garbage collection included), steadier on a busy machine.
func BenchmarkScaleSimulateChain(b *testing.B) {
	for _, c := range []struct {
		name string
		n    int
		mesh string
	}{{"chain1d_1k", 1_000, "1d"}, {"chain1d_10k", 10_000, "1d"}, {"chain1d_100k", 100_000, "1d"}, {"chain2d_100k", 100_000, "2d"}} {
		src := chainFusion(c.n, c.mesh)
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			var lowering, simulating, lowerCPU, simCPU time.Duration
			for b.Loop() {
				b.StopTimer()
				start, cpu := time.Now(), cpuTime()
				p := lowerSource(b, c.name, src)
				lowering, lowerCPU = lowering+time.Since(start), lowerCPU+cpuTime()-cpu
				b.StartTimer()
				start, cpu = time.Now(), cpuTime()
				run(b, p)
				simulating, simCPU = simulating+time.Since(start), simCPU+cpuTime()-cpu
			}
			b.ReportMetric(simulating.Seconds()/float64(b.N), "s-simulate")
			b.ReportMetric(lowering.Seconds()/float64(b.N), "s-lower")
			b.ReportMetric(float64(simulating)/float64(lowering), "x-lower")
			b.ReportMetric(simCPU.Seconds()/float64(b.N), "s-simulate-cpu")
			if lowerCPU > 0 {
				b.ReportMetric(float64(simCPU)/float64(lowerCPU), "x-lower-cpu")
			}
		})
	}
}

// bigFusions are the big tensors: 64 MiB of float32 on 8 devices,
// each lowered to one collective.
var bigFusions = []struct{ name, tensors, op string }{
	{"allgather", "x: {mesh: m, shape: [8, 2097152], placements: [Shard(0)]}\n  y: {mesh: m, placements: [Replicate()]}", "{op: set, in: x, out: y}"},
	{"alltoall", "x: {mesh: m, shape: [8, 8, 262144], placements: [Shard(0)]}\n  y: {mesh: m, placements: [Shard(1)]}", "{op: set, in: x, out: y}"},
	{"allreduce", "x: {mesh: m, shape: [8, 2097152], placements: [Shard(0)]}\n  y: {mesh: m, placements: [Replicate()]}", "{op: sum, in: x, out: y, axis: 0}"},
}

// heldBytes is what the devices hold once p has run, as the simulation
// holds it (8 bytes an element): every fusion input's shards, and every
// step output on each device that gets one.
func heldBytes(p *plan.Plan) int64 {
	var n int64
	produced := map[string]bool{}
	for _, op := range p.Ops {
		produced[op.Output] = true
	}
	for _, t := range p.Tensors {
		if !produced[t.Name] {
			shard := int64(1)
			for _, e := range t.LocalShape {
				shard *= int64(e)
			}
			n += shard * int64(len(p.Meshes[t.Mesh].Devices))
		}
	}
	for _, s := range p.Steps {
		members := len(s.Devices)
		for _, team := range s.Teams {
			members += len(team)
		}
		if s.Type == plan.Gather || s.Type == plan.Reduce {
			members = 1
		}
		n += int64(s.Count.Output) * int64(members)
	}
	return 8 * n
}

// copyTime is how long Go's copy() takes to copy n bytes, in pieces of at
// most 256 MiB (larger than any cache, so the copy runs at memory speed).
func copyTime(n int64) time.Duration {
	const piece = 256 << 20
	src, dst := make([]byte, min(n, piece)), make([]byte, min(n, piece))
	for i := range src {
		src[i] = byte(i) // touch every page before timing
	}
	copy(dst, src)
	start := time.Now()
	for left := n; left > 0; left -= piece {
		copy(dst[:min(left, piece)], src)
	}
	return time.Since(start)
}

// BenchmarkScaleSimulateBig simulates 64 MiB float32 tensors on 8 devices
// through one Allgather, AllToAll or Allreduce and measures, in the same
// loop, Go's copy() of as many bytes as the devices hold at the end
// (heldBytes). x-copy-bw is the simulation's bandwidth over those bytes
// relative to copy()'s (goal ≥ 0.5): a simulation that builds every
// shard, runs the collective, and checks every device's output costs at
// most twice copying what the devices hold. x-held-estimate is
// sim.Estimate, the memory model that tracks peak RSS, over the bytes held
// (goal ≤ 4).
func BenchmarkScaleSimulateBig(b *testing.B) {
	for _, f := range bigFusions {
		src := fmt.Sprintf("format: 1\nname: big_%s\nmeshes:\n  m: [0, 1, 2, 3, 4, 5, 6, 7]\ntensors:\n  %s\nops:\n  - %s\n", f.name, f.tensors, f.op)
		p := lowerSource(b, f.name, []byte(src))
		held := heldBytes(p)
		estimate, err := sim.Estimate(p)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(f.name, func(b *testing.B) {
			b.ReportAllocs()
			var copying, simulating time.Duration
			for b.Loop() {
				b.StopTimer()
				copying += copyTime(held)
				b.StartTimer()
				start := time.Now()
				run(b, p)
				simulating += time.Since(start)
			}
			simBW := float64(held) * float64(b.N) / simulating.Seconds()
			copyBW := float64(held) * float64(b.N) / copying.Seconds()
			b.ReportMetric(simBW/1e9, "GB/s-simulate")
			b.ReportMetric(copyBW/1e9, "GB/s-copy")
			b.ReportMetric(simBW/copyBW, "x-copy-bw")
			b.ReportMetric(float64(estimate)/float64(held), "x-held-estimate")
		})
	}
}
