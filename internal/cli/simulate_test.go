package cli_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/nvcomm/nvcomm/internal/cli"
	"github.com/nvcomm/nvcomm/internal/lower"
	"github.com/nvcomm/nvcomm/internal/sim"
	"github.com/nvcomm/nvcomm/internal/syntax"
)

// rssFusions are the shapes TestEstimateWithinPeakRSS simulates, each
// estimated at 70 to 200 MB: large enough that the runtime's own ten
// megabytes do not decide the ratio, small enough for make test. Each
// stores its values under the simulator's memory model (docs/simulate.md,
// "Memory"): a shard of short rows, a reduction read by a computing op, a
// ReduceScatter's outputs, an input that an elementwise op reads. (Shards
// of long rows, an Allgather's shared output or an Allreduce that shares
// the reference's sums would store next to nothing.)
var rssFusions = map[string]string{
	"allgather_short_rows": `meshes:
  m: [0, 1]
tensors:
  tv0: {mesh: m, shape: [1572864, 2], schedule: [{parallelize: {axis: 1, type: DIDx}}]}
  tv1: {mesh: m}
ops:
  - {op: set, in: tv0, out: tv1}
`,
	"allreduce_then_neg": `meshes:
  m: [0, 1]
tensors:
  tv0: {mesh: m, shape: [2, 3145728], schedule: [{parallelize: {axis: 0, type: DIDx}}]}
  tv1: {mesh: m}
  tv2: {mesh: m}
ops:
  - {op: sum, in: tv0, out: tv1, axis: 0}
  - {op: neg, in: tv1, out: tv2}
`,
	"reduce_scatter": `meshes:
  m: [0, 1, 2, 3]
tensors:
  tv0: {mesh: m, shape: [4, 4194304], placements: [Shard(0)]}
  tv1: {mesh: m, placements: [Shard(0)]}
ops:
  - {op: sum, in: tv0, out: tv1, axis: 0}
`,
	"set_then_add": `meshes:
  m: [0, 1]
tensors:
  tv0: {mesh: m, shape: [2, 1572864], schedule: [{parallelize: {axis: 0, type: DIDx}}]}
  tv1: {mesh: m}
  tv2: {mesh: m}
ops:
  - {op: set, in: tv0, out: tv1}
  - {op: add, in: [tv1, tv0], out: tv2}
`,
}

// TestEstimateWithinPeakRSS runs real simulations, each in a child process
// (this test binary as nvcomm, see TestMain), and holds the memory
// estimate within 25% of the child's peak resident memory (ru_maxrss).
// Before the estimate modelled the garbage collector, the peak was twice
// the estimate.
func TestEstimateWithinPeakRSS(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("ru_maxrss is in kilobytes on Linux; elsewhere units differ")
	}
	if testing.Short() {
		t.Skip("three simulations of about 100 MB each")
	}
	exe, err := exec.LookPath("nvcomm") // TestMain puts this binary there
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for name, fusion := range rssFusions {
		t.Run(name, func(t *testing.T) {
			file := writeFile(t, dir, name+".yaml", fusion)
			want := estimate(t, file)
			// A child that the machine's other work starves of CPU lets
			// its heap overshoot before the collector finishes (peaks of
			// 1.3-1.35x seen under load, 1.15-1.2x on an idle machine):
			// such a run is measured again, up to three runs, and the
			// least peak is held to the estimate. Load never lowers a
			// peak, so a low ratio fails at once.
			var ratios []float64
			for range 3 {
				ratio := peakRatio(t, exe, file, want)
				ratios = append(ratios, ratio)
				if ratio <= 1.25 {
					break
				}
			}
			ratio := slices.Min(ratios)
			if ratio < 0.75 || ratio > 1.25 {
				t.Errorf("peak RSS is %.2f times the estimate %d B (runs: %.2f), want within 25%%", ratio, want, ratios)
			}
		})
	}
}

// peakRatio simulates file in a child process (exe as nvcomm) and
// returns its peak resident memory (ru_maxrss) over want.
func peakRatio(t *testing.T, exe, file string, want int64) float64 {
	t.Helper()
	hwm := filepath.Join(t.TempDir(), "hwm")
	cmd := exec.Command(exe, "simulate", file)
	cmd.Env = append(os.Environ(), "NVCOMM_TEST_HWM="+hwm)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "PASS\n") {
		t.Fatalf("simulate: %v\n%s", err, out)
	}
	peak := cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss << 10
	if b, err := os.ReadFile(hwm); err == nil {
		// "123456 kB": the child's own peak (see writeHWM), which ru_maxrss
		// is not where the child started as a copy of this process.
		if kb, err := strconv.ParseInt(strings.TrimSuffix(string(b), " kB"), 10, 64); err == nil {
			peak = kb << 10
		}
	}
	ratio := float64(peak) / float64(want)
	t.Logf("estimate %d B, peak RSS %d B, peak/estimate %.2f", want, peak, ratio)
	return ratio
}

// estimate lowers a fusion file and returns sim.Estimate of its plan.
func estimate(t *testing.T, file string) int64 {
	t.Helper()
	src, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	f, err := syntax.Parse(file, src)
	if err != nil {
		t.Fatal(err)
	}
	p, err := lower.Lower(f, lower.Options{})
	if err != nil {
		t.Fatal(err)
	}
	n, err := sim.Estimate(p)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestSimulateMemoryGuard checks the guard against the flag and against the
// machine: a plan larger than physical memory is refused with exit 1
// whatever --max-bytes says (it was a Go out-of-memory crash, exit 2).
func TestSimulateMemoryGuard(t *testing.T) {
	const huge = `meshes:
  m: [0, 1]
tensors:
  tv0: {mesh: m, shape: [2, 1073741824, 64], schedule: [{parallelize: {axis: 0, type: DIDx}}]}
  tv1: {mesh: m}
ops:
  - {op: set, in: tv0, out: tv1}
`
	dir := t.TempDir()
	tests := map[string]struct {
		fusion   string
		args     []string
		machine  bool // needs a readable memory limit
		wantCode int
		wantErr  string
	}{
		"larger than the machine, flag at 2^62": {
			fusion: huge, args: []string{"--max-bytes", "4611686018427387904"}, machine: true,
			wantCode: cli.ExitInput, wantErr: "iB of memory this machine gives the process (whatever --max-bytes says)",
		},
		"larger than the machine, default flag": {
			fusion: huge, machine: true,
			// sim.Estimate: 1 TiB of input shards, stored (rows of 64
			// elements are too short to keep as pieces of the input's
			// values); the Allgather's output is one rope its members
			// share, and tv1's reference is tv0's values.
			wantCode: cli.ExitInput, wantErr: "it needs about 1.0 TiB, more than the ",
		},
		"larger than the flag": {
			fusion: seedFusion, args: []string{"--max-bytes", "1000"},
			wantCode: cli.ExitInput, wantErr: "more than the limit of 1000 B; raise --max-bytes",
		},
		"larger than the flag, with a unit": {
			fusion: seedFusion, args: []string{"--max-bytes", "1KiB"},
			wantCode: cli.ExitInput, wantErr: "more than the limit of 1.0 KiB; raise --max-bytes",
		},
		"small, flag at 2^62": {
			fusion: seedFusion, args: []string{"--max-bytes", "4611686018427387904"}, wantCode: cli.ExitOK,
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			if tt.machine && cli.MemoryLimit() == 0 {
				t.Skip("no readable memory limit on this system")
			}
			file := writeFile(t, dir, strings.ReplaceAll(name, " ", "_")+".yaml", tt.fusion)
			code, _, stderr := run(t, "", append([]string{"simulate", file}, tt.args...)...)
			if code != tt.wantCode || !strings.Contains(stderr, tt.wantErr) {
				t.Errorf("exit %d, stderr %q; want exit %d and %q", code, stderr, tt.wantCode, tt.wantErr)
			}
		})
	}
}
