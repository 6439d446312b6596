package scale_test

import (
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/nvcomm/nvcomm/internal/cli"
	"github.com/nvcomm/nvcomm/internal/scale"
)

// cliEnv, set in a child's environment, makes this test binary run as
// nvcomm: the report measures the command's peak memory in a process of
// its own.
const cliEnv = "NVCOMM_SCALE_AS_CLI"

func TestMain(m *testing.M) {
	if os.Getenv(cliEnv) == "1" {
		os.Exit(cli.Main())
	}
	os.Exit(m.Run())
}

// linear is the largest fitted exponent the report calls linear: timings
// of small inputs on a shared machine move it by a few hundredths.
const linear = 1.15

// row is one line of the report.
type row struct {
	work, before, now, goal string
	met                     bool
}

// TestScaleReport measures every row of docs/performance.md's table in one
// run, each beside its baseline measured in the same run, and prints the
// table. It runs only with NVCOMM_SCALE=1 (make bench-scale): it takes
// about a minute and a few GB of memory.
func TestScaleReport(t *testing.T) {
	if os.Getenv("NVCOMM_SCALE") == "" {
		t.Skip("set NVCOMM_SCALE=1 to measure the scale report (make bench-scale)")
	}
	loadBefore := loadAverage()
	dir := t.TempDir()
	// The children first: Linux counts in a child's peak the memory of
	// the parent it was forked from, so the parent must still be small.
	memory := lowerMemoryRow(t, dir)
	bigMemory := bigMemoryRows(t, dir)
	var rows []row
	rows = append(rows, chainRows(t)...)
	rows = append(rows, memory)
	rows = append(rows, bigRows(t)...)
	rows = append(rows, bigMemory...)
	rows = append(rows, meshRow(t))
	printReport(os.Stdout, rows)
	// Other work on the machine slows single timings by up to several
	// times: the load says how much there was.
	fmt.Printf("\nload average (1 min) before and after: %s, %s\n", loadBefore, loadAverage())
}

// best runs f k times and keeps the result that faster says is fastest:
// the one least disturbed by other work on the machine.
func best[T any](t *testing.T, k int, faster func(a, b T) bool, f func() (T, error)) T {
	t.Helper()
	var out T
	for i := range k {
		runtime.GC() // no debt of collection left by the work before
		v, err := f()
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 || faster(v, out) {
			out = v
		}
	}
	return out
}

// fastest is the shortest of k durations that f measures.
func fastest(t *testing.T, k int, f func() (time.Duration, error)) time.Duration {
	t.Helper()
	return best(t, k, func(a, b time.Duration) bool { return a < b }, f)
}

// shorter compares durations by key.
func shorter[T any](key func(T) time.Duration) func(a, b T) bool {
	return func(a, b T) bool { return key(a) < key(b) }
}

// repeats is how many times an input of n ops is measured.
func repeats(n int) int {
	if n >= 100_000 {
		return 1
	}
	return 3
}

// chainRows lowers, validates and simulates chains of 1k, 10k and 100k
// ops on the 1-D mesh and 10k on the 2×4 mesh.
func chainRows(t *testing.T) []row {
	sizes := []int{1_000, 10_000, 100_000}
	var lowers, validates, simulates []time.Duration
	var big lowering
	var bigValidate validation
	var bigSim time.Duration
	for _, n := range sizes {
		name, src := sizeName("chain1d", n), scale.Chain(n, scale.Mesh1D)
		l := best(t, repeats(n), shorter(lowering.total), func() (lowering, error) { return lowerSource(name, src) })
		v := best(t, repeats(n), shorter(func(v validation) time.Duration { return v.validate }),
			func() (validation, error) { return validateSource(name, src) })
		s := fastest(t, repeats(n), func() (time.Duration, error) {
			wall, _, err := simulate(l.plan)
			return wall, err
		})
		l.decode = fastest(t, repeats(n), func() (time.Duration, error) { return scale.YAMLDecode(src) })
		t.Logf("%s: decode %v, parse %v, lower %v, encode %v; validate %v; simulate %v", name,
			l.decode, l.parse, l.lower, l.encode, v.validate, s)
		lowers, validates, simulates = append(lowers, l.total()), append(validates, v.validate), append(simulates, s)
		big, bigValidate, bigSim = l, v, s
	}
	name2d, src2d := sizeName("chain2d", 10_000), scale.Chain(10_000, scale.Mesh2x4)
	l2d := best(t, 3, shorter(lowering.total), func() (lowering, error) { return lowerSource(name2d, src2d) })
	l2d.decode = fastest(t, 3, func() (time.Duration, error) { return scale.YAMLDecode(src2d) })
	lowerX := ratio(big.total(), big.decode)
	validateX, simulateX := ratio(bigValidate.validate, big.total()), ratio(bigSim, big.total())
	ke, ve, se := scale.Exponent(sizes, lowers), scale.Exponent(sizes, validates), scale.Exponent(sizes, simulates)
	return []row{
		{"`lower`, 100k ops (1-D mesh), wall", "30.7 s", secs(big.total()), "≤ 1 s", big.total() <= time.Second},
		{"`lower`, 100k ops, ÷ YAML decode", "16×", fmt.Sprintf("%.1f× (parse %.1f×, encode %.1f×)", lowerX,
			ratio(big.parse, big.decode), ratio(big.encode, big.decode)), "≤ 2×", lowerX <= 2},
		{"`lower`, 10k ops (2×4 mesh), ÷ YAML decode", "", fmt.Sprintf("%.1f× (%s)", ratio(l2d.total(), l2d.decode), secs(l2d.total())), "≤ 2×",
			ratio(l2d.total(), l2d.decode) <= 2},
		{"`lower`, 1k → 10k → 100k, exponent", "1.01", fmt.Sprintf("%.2f", ke), "linear", ke <= linear},
		{"`validate`, 100k ops, ÷ lower", "93 s CPU", fmt.Sprintf("%.2f× (%s)", validateX, secs(bigValidate.validate)), "≤ 0.5×", validateX <= 0.5},
		{"`validate`, exponent", "2.08", fmt.Sprintf("%.2f", ve), "linear", ve <= linear},
		{"`simulate`, 100k ops (small extents), ÷ lower", "22.7 s CPU", fmt.Sprintf("%.2f× (%s)", simulateX, secs(bigSim)), "≤ 2×", simulateX <= 2},
		{"`simulate`, exponent", "1.41", fmt.Sprintf("%.2f", se), "linear", se <= linear},
	}
}

// lowerMemoryRow runs `nvcomm lower` on 100k ops in a child and compares
// its peak resident memory with the size of the fusion file.
func lowerMemoryRow(t *testing.T, dir string) row {
	src := scale.Chain(100_000, scale.Mesh1D)
	file := filepath.Join(dir, "chain.yaml")
	if err := os.WriteFile(file, src, 0o644); err != nil {
		t.Fatal(err)
	}
	peak := peakRSS(t, "lower", file, "-o", filepath.Join(dir, "chain.json"))
	if peak == 0 {
		return row{"`lower`, 100k ops, peak RSS ÷ file", "3.65 GB", "not measured here", "≤ 10×", false}
	}
	x := float64(peak) / float64(len(src))
	return row{"`lower`, 100k ops, peak RSS ÷ file", "3.65 GB (436×)", fmt.Sprintf("%.0f× (%s)", x, megabytes(peak)), "≤ 10×", x <= 10}
}

// bigRows runs `nvcomm simulate` on the big tensors, each a command in a
// child process timed as a user sees it, and compares their bandwidth
// over the bytes the devices hold with copy()'s.
func bigRows(t *testing.T) []row {
	var rows []row
	before := map[string]string{"allgather": "86 MB/s", "alltoall": "29 MB/s", "allreduce": "67 MB/s"}
	dir := t.TempDir()
	for _, big := range scale.BigTensors() {
		bw := fastestBandwidth(t, dir, big)
		t.Logf("%s: held %d B (float64), simulate %v (user %v, system %v), copy %v", big.Name, bw.held, bw.simulate, bw.user, bw.system, bw.copy)
		rows = append(rows, row{fmt.Sprintf("`simulate` 64 MiB %s, ÷ copy() bandwidth", big.Name), before[big.Name],
			fmt.Sprintf("%.2f (%.1f GB/s)", bw.ratio(), float64(bw.held)/bw.simulate.Seconds()/1e9), "≥ 0.5", bw.ratio() >= 0.5})
	}
	return rows
}

// fastestBandwidth runs `nvcomm simulate` on big as a command (its fusion
// file in dir) and copies the bytes its devices hold a few times, and
// keeps the fastest of each: a busy machine slows single runs of either
// by up to several times.
func fastestBandwidth(t *testing.T, dir string, big scale.Big) bandwidth {
	var out bandwidth
	for i := range 4 {
		runtime.GC()
		bw, err := simulateBigCommand(dir, big)
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 || bw.simulate < out.simulate {
			out.simulate, out.user, out.system = bw.simulate, bw.user, bw.system
		}
		out.held, out.copy = bw.held, min(out.copy, bw.copy)
		if i == 0 {
			out.copy = bw.copy
		}
	}
	return out
}

// bigMemoryRows runs `nvcomm simulate` on the big tensors in children and
// compares their peak memory with the bytes the devices hold, as the
// plan's float32.
func bigMemoryRows(t *testing.T, dir string) []row {
	var rows []row
	for _, big := range scale.BigTensors() {
		l, err := lowerSource(big.Name, big.Src)
		if err != nil {
			t.Fatal(err)
		}
		held := heldBytes(l.plan) / 2
		file := filepath.Join(dir, big.Name+".yaml")
		if err := os.WriteFile(file, big.Src, 0o644); err != nil {
			t.Fatal(err)
		}
		if peak := peakRSS(t, "simulate", "--max-bytes", "17179869184", file); peak > 0 {
			x := float64(peak) / float64(held)
			rows = append(rows, row{fmt.Sprintf("`simulate` 64 MiB %s, peak RSS ÷ bytes held", big.Name), "20–100×",
				fmt.Sprintf("%.1f× (%s)", x, megabytes(peak)), "≤ 4×", x <= 4})
		}
	}
	return rows
}

// meshRow lowers every sharding change on every 3-D mesh of 4,096 devices
// and reports the slowest.
func meshRow(t *testing.T) row {
	var slowest time.Duration
	var which string
	for _, shape := range scale.Shapes3D(4096) {
		for _, c := range scale.MeshChanges {
			src := scale.MeshChange(shape[0], shape[1], shape[2], c)
			l := best(t, 2, shorter(lowering.total), func() (lowering, error) { return lowerSource("mesh", src) })
			if l.total() > slowest {
				slowest, which = l.total(), fmt.Sprintf("%d×%d×%d %s", shape[0], shape[1], shape[2], c.Name)
			}
		}
	}
	return row{"`lower`, every 4,096-device 3-D mesh × 3 three-axis changes, slowest", "3.05 s (8×8×64)",
		fmt.Sprintf("%s (%s)", secs(slowest), which), "≤ 0.2 s", slowest <= 200*time.Millisecond}
}

// peakRSS runs this test binary as nvcomm with args and returns its peak
// resident memory in bytes, or 0 where the system does not say.
func peakRSS(t *testing.T, args ...string) int64 {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), cliEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("nvcomm %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return maxRSS(cmd.ProcessState)
}

// printReport writes rows as a Markdown table.
func printReport(w io.Writer, rows []row) {
	fmt.Fprintln(w, "| work | before | now | goal | met |")
	fmt.Fprintln(w, "|---|---|---|---|---|")
	for _, r := range rows {
		met := "no"
		if r.met {
			met = "yes"
		}
		before := r.before
		if before == "" {
			before = "—"
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s |\n", r.work, before, r.now, r.goal, met)
	}
}

// loadAverage is the system's load average over the last minute, or "?"
// where /proc/loadavg cannot be read.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) > 0 {
		return f[0]
	}
	return "?"
}

func ratio(a, b time.Duration) float64 { return float64(a) / float64(b) }

// secs writes a duration in seconds to three significant digits.
func secs(d time.Duration) string {
	s := d.Seconds()
	digits := max(0, 2-int(math.Floor(math.Log10(s))))
	return fmt.Sprintf("%.*f s", digits, s)
}

func megabytes(n int64) string { return fmt.Sprintf("%d MB", (n+500_000)/1_000_000) }
