package cli_test

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/nvcomm/nvcomm/internal/cli"
)

// seedFusion is the seed example (nvFuser PR #3284): one Allgather.
const seedFusion = `format: 1
name: allgather_loop_split
meshes:
  m: [0, 1, 2, 3]
tensors:
  tv0:
    mesh: m
    shape: [16]
    schedule:
      - outer_split: {axis: 0, factor: 4}
      - parallelize: {axis: 0, type: DIDx}
  tv1:
    mesh: m
ops:
  - {op: set, in: tv0, out: tv1}
`

// badFusion has one error: an unknown mesh at 5:15.
const badFusion = `meshes:
  m: [0, 1, 2, 3]
tensors:
  tv0: {mesh: m, shape: [16]}
  tv1: {mesh: mm}
ops:
  - {op: set, in: tv0, out: tv1}
`

// run calls cli.Run in-process and returns the exit code and both streams.
func run(t *testing.T, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = cli.Run(t.Context(), args, strings.NewReader(stdin), &out, &errb)
	return code, out.String(), errb.String()
}

// writeFile writes content to name in dir and returns its path.
func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// dirNames lists the names in dir, sorted.
func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	slices.Sort(names)
	return names
}

// TestInvalidFusions lowers every fusion in testdata/invalid, from the file
// and from standard input: each exits 1, prints no plan, and its diagnostics
// start with the file name as given (or <stdin>) and a line:col.
func TestInvalidFusions(t *testing.T) {
	files, err := filepath.Glob("../../testdata/invalid/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Skip("no fusions in ../../testdata/invalid")
	}
	for _, path := range files {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".yaml"), func(t *testing.T) {
			t.Parallel()
			src, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			for _, tc := range []struct{ arg, stdin, name string }{
				{path, "", path},
				{"-", string(src), "<stdin>"},
			} {
				code, stdout, stderr := run(t, tc.stdin, "lower", tc.arg)
				if code != cli.ExitInput {
					t.Errorf("lower %s: exit code %d, want %d; stderr:\n%s", tc.arg, code, cli.ExitInput, stderr)
				}
				if stdout != "" {
					t.Errorf("lower %s: unexpected stdout:\n%s", tc.arg, stdout)
				}
				want := regexp.MustCompile(`\A` + regexp.QuoteMeta(tc.name) + `:\d+:\d+: error: `)
				if !want.MatchString(stderr) {
					t.Errorf("lower %s: stderr does not start with %q and line:col:\n%s", tc.arg, tc.name+":", stderr)
				}
			}
		})
	}
}

// TestUsageErrors checks that every way of calling nvcomm wrongly exits 2,
// prints nothing on stdout and says what was wrong on stderr.
func TestUsageErrors(t *testing.T) {
	dir := t.TempDir()
	fusion := writeFile(t, dir, "fusion.yaml", seedFusion)
	out := filepath.Join(dir, "out.json")
	tests := []struct {
		name string
		args []string
		want string // a substring of stderr
	}{
		{"no command", nil, "nvcomm: missing command"},
		{"unknown command", []string{"lowr", fusion}, `nvcomm: unknown command "lowr"`},
		{"help unknown topic", []string{"help", "lowr"}, `nvcomm: unknown help topic "lowr"`},
		{"unknown root flag", []string{"--bogus"}, "nvcomm: unknown flag: --bogus"},
		{"unknown lower flag", []string{"lower", "--bogus", fusion}, "nvcomm: unknown flag: --bogus"},
		{"unknown shorthand", []string{"lower", "-x", fusion}, "unknown shorthand flag: 'x'"},
		{"unknown validate flag", []string{"validate", "--strict", fusion}, "nvcomm: unknown flag: --strict"},
		{"flag without value", []string{"lower", fusion, "-o"}, "flag needs an argument"},
		{"bad format", []string{"lower", "--format", "xml", fusion}, `invalid argument "xml" for "--format" flag: must be one of json, text`},
		{"empty format", []string{"lower", "--format=", fusion}, `invalid argument "" for "--format" flag`},
		{"bad policy", []string{"lower", "--policy", "gspmd", fusion}, `invalid argument "gspmd" for "--policy" flag`},
		{"bad format with output", []string{"lower", "--format", "xml", "-o", out, fusion}, `for "--format" flag`},
		{"lower no args", []string{"lower"}, "accepts 1 arg(s), received 0"},
		{"lower two args", []string{"lower", fusion, fusion}, "accepts 1 arg(s), received 2"},
		{"lower two args with output", []string{"lower", "-o", out, fusion, fusion}, "accepts 1 arg(s), received 2"},
		{"validate no args", []string{"validate"}, "accepts 1 arg(s), received 0"},
		{"validate two args", []string{"validate", fusion, fusion}, "accepts 1 arg(s), received 2"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := run(t, "", tc.args...)
			if code != cli.ExitUsage {
				t.Errorf("nvcomm %q: exit code %d, want %d; stderr:\n%s", tc.args, code, cli.ExitUsage, stderr)
			}
			if stdout != "" {
				t.Errorf("nvcomm %q: unexpected stdout:\n%s", tc.args, stdout)
			}
			if !strings.Contains(stderr, tc.want) {
				t.Errorf("nvcomm %q: stderr does not contain %q:\n%s", tc.args, tc.want, stderr)
			}
			if _, err := os.Stat(out); err == nil {
				t.Errorf("nvcomm %q wrote %s", tc.args, out)
			}
		})
	}
}

// TestLowerOutputFile checks that lower -o writes exactly the bytes lower
// prints, in both formats, with nothing on stdout, mode 0644 and no
// temporary file left behind, replacing an existing file.
func TestLowerOutputFile(t *testing.T) {
	for _, format := range []string{"json", "text"} {
		t.Run(format, func(t *testing.T) {
			dir := t.TempDir()
			fusion := writeFile(t, dir, "fusion.yaml", seedFusion)
			out := writeFile(t, dir, "plan.out", "stale contents, longer than nothing\n")

			code, want, stderr := run(t, "", "lower", "--format", format, fusion)
			if code != cli.ExitOK || stderr != "" || want == "" {
				t.Fatalf("lower: exit code %d, stderr %q, %d bytes on stdout", code, stderr, len(want))
			}
			code, stdout, stderr := run(t, "", "lower", "--format", format, "-o", out, fusion)
			if code != cli.ExitOK || stdout != "" || stderr != "" {
				t.Fatalf("lower -o: exit code %d, stdout %q, stderr %q", code, stdout, stderr)
			}
			got, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != want {
				t.Errorf("lower -o wrote:\n%s\nlower printed:\n%s", got, want)
			}
			fi, err := os.Stat(out)
			if err != nil {
				t.Fatal(err)
			}
			if fi.Mode().Perm() != 0o644 {
				t.Errorf("lower -o: mode %v, want 0644", fi.Mode().Perm())
			}
			if names, want := dirNames(t, dir), []string{"fusion.yaml", "plan.out"}; !slices.Equal(names, want) {
				t.Errorf("files after lower -o: %q, want %q", names, want)
			}
		})
	}
}

// TestLowerOutputFileOnFailure checks that a failed lower -o leaves an
// existing output file untouched and no temporary file behind, whether the
// fusion is invalid or the output cannot be written.
func TestLowerOutputFileOnFailure(t *testing.T) {
	dir := t.TempDir()
	good := writeFile(t, dir, "good.yaml", seedFusion)
	bad := writeFile(t, dir, "bad.yaml", badFusion)
	const old = "{\"previous\": \"plan\"}\n"
	out := writeFile(t, dir, "plan.json", old)
	if err := os.Mkdir(filepath.Join(dir, "adir"), 0o755); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name string
		args []string
		want string // a prefix of stderr
	}{
		{"invalid fusion", []string{"lower", "-o", out, bad}, bad + ":5:15: error: "},
		{"missing fusion", []string{"lower", "-o", out, filepath.Join(dir, "missing.yaml")}, "nvcomm: cannot read " + filepath.Join(dir, "missing.yaml") + ": "},
		{"missing directory", []string{"lower", "-o", filepath.Join(dir, "nodir", "plan.json"), good}, "nvcomm: cannot write " + filepath.Join(dir, "nodir", "plan.json") + ": "},
		{"output is a directory", []string{"lower", "-o", filepath.Join(dir, "adir"), good}, "nvcomm: cannot write " + filepath.Join(dir, "adir") + ": is a directory"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := run(t, "", tc.args...)
			if code != cli.ExitInput {
				t.Errorf("exit code %d, want %d; stderr:\n%s", code, cli.ExitInput, stderr)
			}
			if stdout != "" {
				t.Errorf("unexpected stdout:\n%s", stdout)
			}
			if !strings.HasPrefix(stderr, tc.want) {
				t.Errorf("stderr does not start with %q:\n%s", tc.want, stderr)
			}
			if got, err := os.ReadFile(out); err != nil || string(got) != old {
				t.Errorf("%s changed: %q, %v", out, got, err)
			}
			if names, want := dirNames(t, dir), []string{"adir", "bad.yaml", "good.yaml", "plan.json"}; !slices.Equal(names, want) {
				t.Errorf("files after failed lower -o: %q, want %q", names, want)
			}
		})
	}
}

// panicReader panics when read, standing in for a bug anywhere under Run.
type panicReader struct{}

func (panicReader) Read([]byte) (int, error) { panic("boom") }

// TestRunRecoversPanic checks that a panic is reported as an internal error
// with its own exit code, not Go's default of 2, which means a usage error.
func TestRunRecoversPanic(t *testing.T) {
	var out, errb bytes.Buffer
	code := cli.Run(t.Context(), []string{"lower", "-"}, panicReader{}, &out, &errb)
	if code != cli.ExitInternal {
		t.Errorf("exit code %d, want %d", code, cli.ExitInternal)
	}
	if !strings.HasPrefix(errb.String(), "nvcomm: internal error: boom\n") {
		t.Errorf("stderr does not start with the internal error:\n%s", errb.String())
	}
}

// tooLargeToSimulate are the examples at a realistic size, which the
// simulator refuses (they would need tens of GiB), each with its twin at
// a size it runs, whose plan takes the same forms (docs/overlap.md,
// "Decomposed collectives").
var tooLargeToSimulate = map[string]string{"tp_mlp_overlap_auto": "tp_mlp_overlap_auto_scaled", "fsdp_mlp_overlap_auto": "fsdp_mlp_overlap_auto_scaled"}

// TestExamplesSimulate simulates every example plan: each passes (the GPU
// examples of docs/export.md included), but for those too large to
// simulate, which must be refused as such and have a twin that passes.
func TestExamplesSimulate(t *testing.T) {
	files, err := filepath.Glob("../../testdata/examples/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no example plans (%v)", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			name := strings.TrimSuffix(strings.TrimSuffix(filepath.Base(f), ".json"), ".optimal")
			if twin, ok := tooLargeToSimulate[name]; ok {
				code, _, stderr := run(t, "", "simulate", f)
				if _, err := os.Stat("../../testdata/examples/" + twin + ".yaml"); code == 0 || !strings.Contains(stderr, "too large to simulate") || err != nil {
					t.Errorf("exit %d, twin %s (%v): %s", code, twin, err, stderr)
				}
				return
			}
			if code, stdout, stderr := run(t, "", "simulate", f); code != 0 || !strings.HasPrefix(stdout, "PASS\n") {
				t.Errorf("exit %d\n%s%s", code, stdout, stderr)
			}
		})
	}
}
