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

	"github.com/google/go-cmp/cmp"

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

// row is one line of the report.
type row struct {
	work, before, now, goal string
	met                     bool
}

// TestScaleReport measures every row of docs/performance.md's table in one
// run, each beside its baseline measured in the same run, prints the table
// and fails for every goal missed: a report that says "no" is never green.
// It runs only with NVCOMM_SCALE=1 (make bench-scale): it takes a few
// minutes and a few GB of memory.
func TestScaleReport(t *testing.T) {
	if os.Getenv("NVCOMM_SCALE") == "" {
		t.Skip("set NVCOMM_SCALE=1 to measure the scale report (make bench-scale)")
	}
	loadBefore := loadAverage()
	dir := t.TempDir()
	// The children first: Linux counts in a child's peak the memory of
	// the parent it was forked from, so the parent must still be small.
	memory := lowerCommandRows(t, dir)
	bigMemory := bigMemoryRows(t, dir)
	var rows []row
	rows = append(rows, familyRows(t)...)
	rows = append(rows, memory...)
	rows = append(rows, bigRows(t)...)
	rows = append(rows, bigMemory...)
	rows = append(rows, meshRow(t))
	printReport(os.Stdout, rows)
	// Other work on the machine slows single timings by up to several
	// times: the load says how much there was.
	fmt.Printf("\nload average (1 min) before and after: %s, %s\n", loadBefore, loadAverage())
	for _, miss := range missedGoals(rows) {
		t.Error(miss)
	}
}

// missedGoals says, for each row whose goal is not met, what missed it.
func missedGoals(rows []row) []string {
	var out []string
	for _, r := range rows {
		if !r.met {
			out = append(out, fmt.Sprintf("goal missed: %s is %s, goal %s", r.work, r.now, r.goal))
		}
	}
	return out
}

// TestMissedGoals checks that the report fails on exactly the rows whose
// goal is missed: a report that prints "no" must not pass.
func TestMissedGoals(t *testing.T) {
	rows := []row{
		{"a", "", "1.0×", "≤ 2×", true},
		{"b", "", "3.0×", "≤ 2×", false},
	}
	want := []string{"goal missed: b is 3.0×, goal ≤ 2×"}
	if d := cmp.Diff(want, missedGoals(rows)); d != "" {
		t.Errorf("missedGoals (-want +got):\n%s", d)
	}
	var b strings.Builder
	printReport(&b, rows)
	wantTable := "| work | before | now | goal | met |\n|---|---|---|---|---|\n| a | — | 1.0× | ≤ 2× | yes |\n| b | — | 3.0× | ≤ 2× | no |\n"
	if d := cmp.Diff(wantTable, b.String()); d != "" {
		t.Errorf("printReport (-want +got):\n%s", d)
	}
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

// commandRepeats is how many times a command on an input of n ops is
// run: single runs of a child process move by ±30% on a busy machine.
func commandRepeats(n int) int {
	if n >= 100_000 {
		return 2
	}
	return 3
}

// repeats is how many times an input of n ops is measured.
func repeats(n int) int {
	if n >= 100_000 {
		return 1
	}
	return 3
}

// familyBefore is each family's figures before the work that met its
// goals (docs/performance.md): lower ÷ YAML decode, lower 100k ÷ 10k,
// validate ÷ lower, simulate ÷ lower.
var familyBefore = map[string][4]string{
	"chain1d": {"16×", "", "", ""},
	"mixed1":  {"19.8×", "62×", "1.4× (30k ops)", ""},
}

// measured is one family's input of n ops lowered and simulated.
type measured struct {
	lower    lowering
	simulate time.Duration
}

// measureFamily measures f's input of n ops, each work the fastest of a
// few runs.
func measureFamily(t *testing.T, f scale.Family, n int) measured {
	name, src := sizeName(f.Name, n), f.Gen(n)
	k := repeats(n)
	var m measured
	m.lower = best(t, k, shorter(lowering.total), func() (lowering, error) { return lowerSource(name, src) })
	m.lower.decode = fastest(t, k, func() (time.Duration, error) { return scale.YAMLDecode(src) })
	m.simulate = fastest(t, k, func() (time.Duration, error) {
		wall, _, err := simulate(m.lower.plan)
		return wall, err
	})
	t.Logf("%s: decode %v, parse %v, lower %v, encode %v; simulate %v", name,
		m.lower.decode, m.lower.parse, m.lower.lower, m.lower.encode, m.simulate)
	m.lower.plan = nil // garbage before the next input
	return m
}

// familyRows lowers and simulates every family's 100k ops in process:
// lower within twice YAML decoding of the same file and simulate within
// twice.
func familyRows(t *testing.T) []row {
	var rows []row
	for _, f := range scale.Families {
		big := measureFamily(t, f, 100_000)
		lowerX := ratio(big.lower.total(), big.lower.decode)
		simulateX := ratio(big.simulate, big.lower.total())
		before := familyBefore[f.Name]
		rows = append(rows,
			row{f.Name + ": `lower` 100k ops ÷ YAML decode", before[0], fmt.Sprintf("%.2f× (%s; parse %.2f×, encode %.2f×)", lowerX,
				secs(big.lower.total()), ratio(big.lower.parse, big.lower.decode), ratio(big.lower.encode, big.lower.decode)), "≤ 2×", lowerX <= 2},
			row{f.Name + ": `simulate` 100k ops ÷ lower", before[3], fmt.Sprintf("%.2f× (%s)", simulateX, secs(big.simulate)), "≤ 2×", simulateX <= 2},
		)
	}
	return rows
}

// lowerCommandRows runs `nvcomm lower` in a child on every family's 10k
// and 100k ops, as a user runs it (start-up, reading the file, fresh
// memory and writing the plan included): its time grows linearly (100k
// ops within 12 times the 10k ops, the fastest of three runs), and its
// peak resident memory on 100k ops is within 10 times the file.
func lowerCommandRows(t *testing.T, dir string) []row {
	var rows []row
	for _, f := range scale.Families {
		var wall [2]time.Duration
		var src []byte
		var peak int64
		var validate time.Duration
		planFile := filepath.Join(dir, f.Name+".json")
		for i, n := range []int{10_000, 100_000} {
			src = f.Gen(n)
			file := filepath.Join(dir, sizeName(f.Name, n)+".yaml")
			if err := os.WriteFile(file, src, 0o644); err != nil {
				t.Fatal(err)
			}
			for k := range commandRepeats(n) {
				w, p := runCommand(t, "lower", file, "-o", planFile)
				if k == 0 || w < wall[i] {
					wall[i] = w
				}
				peak = p
				if n == 100_000 {
					// Each beside a lowering, so that both meet the same load.
					if w, _ := runCommand(t, "validate", planFile); k == 0 || w < validate {
						validate = w
					}
				}
			}
		}
		growth, validateX := ratio(wall[1], wall[0]), ratio(validate, wall[1])
		rows = append(rows, row{f.Name + ": `nvcomm lower` 100k ÷ 10k ops", familyBefore[f.Name][1],
			fmt.Sprintf("%.1f× (%s, %s)", growth, secs(wall[0]), secs(wall[1])), "≤ 12×", growth <= 12},
			row{f.Name + ": `nvcomm validate` of its 100k-op plan ÷ `nvcomm lower`", familyBefore[f.Name][2],
				fmt.Sprintf("%.2f× (%s)", validateX, secs(validate)), "≤ 0.5×", validateX <= 0.5})
		work := f.Name + ": `nvcomm lower` 100k ops, peak RSS ÷ file"
		if peak == 0 {
			rows = append(rows, row{work, "", "not measured here", "≤ 10×", true})
			continue
		}
		x := float64(peak) / float64(len(src))
		rows = append(rows, row{work, map[string]string{"chain1d": "3.65 GB (436×)", "mixed1": "63–79×"}[f.Name],
			fmt.Sprintf("%.0f× (%s of %s)", x, megabytes(peak), megabytes(int64(len(src)))), "≤ 10×", x <= 10})
	}
	return rows
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
		if _, peak := runCommand(t, "simulate", "--max-bytes", "17179869184", file); peak > 0 {
			x := float64(peak) / float64(held)
			rows = append(rows, row{fmt.Sprintf("`simulate` 64 MiB %s, peak RSS ÷ bytes held", big.Name), "20–100×",
				fmt.Sprintf("%.1f× (%s)", x, megabytes(peak)), "≤ 4×", x <= 4})
		}
	}
	return rows
}

// meshRow lowers every sharding change on every 3-D mesh of 4,096 devices
// and compares the slowest with YAML decoding of the 10k-op chain in the
// same run (the goal was 0.2 s where that decode took 0.05 s: 4×).
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
	src := scale.Chain(10_000, scale.Mesh1D)
	decode := fastest(t, 3, func() (time.Duration, error) { return scale.YAMLDecode(src) })
	x := ratio(slowest, decode)
	return row{"`lower`, every 4,096-device 3-D mesh × 3 three-axis changes, slowest ÷ YAML decode of chain1d_10k", "3.05 s (8×8×64)",
		fmt.Sprintf("%.1f× (%s, %s; decode %s)", x, secs(slowest), which, secs(decode)), "≤ 4×", x <= 4}
}

// runCommand runs this test binary as nvcomm with args and returns its
// wall time and peak resident memory in bytes (0 where the system does
// not say).
func runCommand(t *testing.T, args ...string) (time.Duration, int64) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), cliEnv+"=1")
	start := time.Now()
	out, err := cmd.CombinedOutput()
	wall := time.Since(start)
	if err != nil {
		t.Fatalf("nvcomm %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return wall, maxRSS(cmd.ProcessState)
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
