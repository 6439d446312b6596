package cli_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dustin/go-humanize"

	"github.com/nvcomm/nvcomm/internal/cli"
	"github.com/nvcomm/nvcomm/internal/scale"
)

// TestLowerPlanReadWithDefaults lowers the 100k-op chain, whose plan
// (about 106 MB) is larger than --max-input's default, and reads the plan
// back with validate's and simulate's default flags: a plan lower writes
// is one the commands that read plans accept and run. Both run as commands in children
// (this test binary as nvcomm, see TestMain), so that the test's memory
// does not swell this process, whose children's peak memory other tests
// measure.
func TestLowerPlanReadWithDefaults(t *testing.T) {
	if testing.Short() {
		t.Skip("lowers and validates 100k ops")
	}
	exe, err := exec.LookPath("nvcomm") // TestMain puts this binary there
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	fusion := writeFile(t, dir, "chain.yaml", string(scale.Chain(100_000, scale.Mesh1D)))
	out := filepath.Join(dir, "chain.json")
	if b, err := exec.Command(exe, "lower", fusion, "-o", out).CombinedOutput(); err != nil {
		t.Fatalf("lower: %v\n%s", err, b)
	}
	fi, err := os.Stat(out)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() <= cli.DefaultMaxInput {
		t.Fatalf("the plan is %d B, within --max-input's default: the test shows nothing", fi.Size())
	}
	b, err := exec.Command(exe, "validate", out).CombinedOutput()
	if want := out + ": valid plan (166667 steps)\n"; err != nil || string(b) != want {
		t.Errorf("validate: %v\n%s\nwant %s", err, b, want)
	}
	// simulate's default --max-bytes holds the plan too (it needs about
	// 2 GiB by the memory model, more than the 1 GiB it once had).
	if b, err := exec.Command(exe, "simulate", out).CombinedOutput(); err != nil || !strings.HasPrefix(string(b), "PASS\n") {
		t.Errorf("simulate: %v\n%.500s", err, b)
	}
}

// bigTeamFusion is a fusion whose plan is far larger than it is: a chain
// of sets on a 1-D mesh of 256 devices, each step listing the whole
// team.
func bigTeamFusion(ops int) string {
	var b strings.Builder
	b.WriteString("meshes:\n  m: [")
	for d := range 256 {
		fmt.Fprintf(&b, "%d,", d)
	}
	b.WriteString("]\ntensors:\n  t0: {mesh: m, shape: [256], placements: [Shard(0)]}\n")
	for i := 1; i <= ops; i++ {
		p := "Shard(0)"
		if i%2 == 1 {
			p = "Replicate()"
		}
		fmt.Fprintf(&b, "  t%d: {mesh: m, placements: [%s]}\n", i, p)
	}
	b.WriteString("ops:\n")
	for i := 1; i <= ops; i++ {
		fmt.Fprintf(&b, "  - {op: set, in: t%d, out: t%d}\n", i-1, i)
	}
	return b.String()
}

// TestPlanInputLimit checks the plan's own limit, PlanInputFactor times
// --max-input: a plan larger than --max-input is read within it, lower
// refuses to write a plan past it (leaving the output file as it was),
// and a plan past it is refused with a message that names it.
func TestPlanInputLimit(t *testing.T) {
	dir := t.TempDir()
	src := bigTeamFusion(20)
	fusion := writeFile(t, dir, "big.yaml", src)
	out := filepath.Join(dir, "big.json")
	code, plan, stderr := run(t, "", "lower", fusion)
	if code != 0 {
		t.Fatalf("lower: exit %d\n%s", code, stderr)
	}
	if len(plan) <= 32*len(src) {
		t.Fatalf("the plan is %d B, %.1f times its fusion: the test shows nothing", len(plan), float64(len(plan))/float64(len(src)))
	}
	limit := fmt.Sprint(len(src))
	code, _, stderr = run(t, "", "lower", "--max-input", limit, fusion, "-o", out)
	wantErr := "nvcomm: the plan is larger than the plan input limit of 1,2 KiB (32 × --max-input), which validate, simulate, explain, report and export would refuse: lower with a larger --max-input and read the plan with the same\n"
	wantErr = strings.Replace(wantErr, "1,2 KiB", humanize.IBytes(uint64(32*len(src))), 1)
	if code != 1 || stderr != wantErr {
		t.Errorf("lower --max-input %s: exit %d, stderr\n%s\nwant exit 1, stderr\n%s", limit, code, stderr, wantErr)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("lower left %s behind (%v)", out, err)
	}

	limit = fmt.Sprint(len(plan)/32 + 1)
	if code, _, stderr := run(t, "", "lower", "--max-input", limit, fusion, "-o", out); code != 0 {
		t.Fatalf("lower --max-input %s: exit %d\n%s", limit, code, stderr)
	}
	for _, args := range [][]string{{"validate"}, {"simulate"}, {"explain"}} {
		args = append(args, "--max-input", limit, out)
		if code, _, stderr := run(t, "", args...); code != 0 {
			t.Errorf("%s: exit %d\n%s", strings.Join(args, " "), code, stderr)
		}
	}
	code, _, stderr = run(t, "", "validate", "--max-input", "100", out)
	if want := "nvcomm: cannot read " + out + ": larger than the plan input limit of 3.1 KiB (32 × --max-input; raise it with --max-input, e.g. --max-input 128MiB for plans up to 4.0 GiB)\n"; code != 1 || stderr != want {
		t.Errorf("validate --max-input 100: exit %d, stderr\n%s\nwant exit 1, stderr\n%s", code, stderr, want)
	}
	// A fusion has --max-input's limit, whatever the command.
	code, _, stderr = run(t, "", "simulate", "--max-input", "100", fusion)
	if want := "nvcomm: cannot read " + fusion + ": larger than the input limit of 100 B (raise it with --max-input, e.g. --max-input 1GiB)\n"; code != 1 || stderr != want {
		t.Errorf("simulate --max-input 100 FUSION: exit %d, stderr\n%s\nwant exit 1, stderr\n%s", code, stderr, want)
	}
}

// TestMappedInputSameAsRead lowers a fusion of over a megabyte, which is
// mapped rather than read (mapMin), and the same fusion from standard
// input, which is read: the plans are the same bytes. Validating the plan,
// mapped too, twice in one process shows each Run's mapping its own.
func TestMappedInputSameAsRead(t *testing.T) {
	src := scale.Chain(15_000, scale.Mesh1D)
	if len(src) < 1<<20 {
		t.Fatalf("the fusion is %d B, under a megabyte: it is read, not mapped", len(src))
	}
	dir := t.TempDir()
	fusion := writeFile(t, dir, "chain.yaml", string(src))
	run := func(stdin string, args ...string) string {
		t.Helper()
		var out, errs strings.Builder
		if code := cli.Run(t.Context(), args, strings.NewReader(stdin), &out, &errs); code != 0 {
			t.Fatalf("nvcomm %v: exit %d\n%s", args, code, errs.String())
		}
		return out.String()
	}
	mapped, read := run("", "lower", fusion), run(string(src), "lower", "-")
	if mapped != read {
		t.Fatalf("the plan of the mapped fusion differs from the plan of the fusion read (%d and %d B)", len(mapped), len(read))
	}
	plan := writeFile(t, dir, "chain.json", mapped)
	for range 2 {
		if got, want := run("", "validate", plan), plan+": valid plan (25000 steps)\n"; got != want {
			t.Errorf("validate: %q, want %q", got, want)
		}
	}
}
