package cli_test

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// TestExportDataScale checks export torch's --data and --data-scale: the
// program states the data set of its inputs (None, simulate's own, unless
// asked) and the exponent its floating-point inputs are scaled by (0
// unless asked); a data set or an exponent out of range is a usage error.
func TestExportDataScale(t *testing.T) {
	fusion := "../../testdata/examples/allgather_loop_split.yaml"
	tests := []struct {
		args []string
		code int
		want string // in the program, or on stderr for an error
	}{
		{nil, 0, "\nDATA_SCALE = 0\n"},
		{nil, 0, "\nDATA = None\n"},
		{[]string{"--data", "small"}, 0, "\nDATA = \"small\"\n"},
		{[]string{"--data", "auto"}, 0, "\nDATA = None\n"},
		{[]string{"--data", "even"}, 2, "--data"},
		{[]string{"--data-scale", "4"}, 0, "\nDATA_SCALE = 4\n"},
		{[]string{"--data-scale", "60"}, 0, "\nDATA_SCALE = 60\n"},
		{[]string{"--data-scale", "61"}, 2, "--data-scale must be from 0 to 60, got 61"},
		{[]string{"--data-scale", "-1"}, 2, "--data-scale must be from 0 to 60, got -1"},
	}
	// The embedded probes are the named data set's values: small's are
	// {−2, −1, 1, 2}, where the fusion's own (wide) spans [−512, 512].
	_, stdout, _ := run(t, "", "export", "torch", fusion, "--topology", "none", "--data", "small")
	line, _, _ := strings.Cut(stdout[strings.Index(stdout, "\nPROBES = ")+1:], "\n")
	for _, v := range strings.FieldsFunc(strings.TrimPrefix(line, `PROBES = {"tv0": [`), func(r rune) bool { return r == ',' || r == ' ' || r == ']' || r == '}' }) {
		if v != "-2" && v != "-1" && v != "1" && v != "2" {
			t.Errorf("--data small: probe %q is not one of small's values (%s)", v, line)
		}
	}
	for _, tc := range tests {
		t.Run(strings.Join(append([]string{"flags"}, tc.args...), " "), func(t *testing.T) {
			code, stdout, stderr := run(t, "", append([]string{"export", "torch", fusion, "--topology", "none"}, tc.args...)...)
			got := stdout
			if tc.code != 0 {
				got = stderr
			}
			if code != tc.code || !strings.Contains(got, tc.want) {
				t.Errorf("exit %d, want %d; output does not contain %q:\n%s", code, tc.code, tc.want, firstLines(got, 5))
			}
		})
	}
}

// TestModelExportGloo runs the exported program of a scaled-down model's
// step, forward and backward, on 8 CPU processes with torch.distributed's
// gloo backend, each model on the mesh and flags docs/models.md lists,
// in float64 on simulate's small data times 2^-4 (--data small
// --data-scale 4; docs/export.md, "Data and the check"):
// every op's output matches within its error bound, PASS. It needs
// PyTorch, so it runs only with NVCOMM_TORCH_TEST=1 (PYTHON selects the
// interpreter, python3 by default); it takes minutes.
func TestModelExportGloo(t *testing.T) {
	if os.Getenv("NVCOMM_TORCH_TEST") != "1" {
		t.Skip("set NVCOMM_TORCH_TEST=1 to run the programs with PyTorch (gloo)")
	}
	py := cmp.Or(os.Getenv("PYTHON"), "python3")
	for i, tc := range []struct{ config, mesh, export string }{
		{"llama3_8b", "dp=2,tp=4 --sp", ""},
		{"gpt3_175b", "dp=2,tp=4 --sp", ""},
		{"mixtral_8x7b", "ep=2,tp=4 --sp", ""},
		{"mixtral_8x7b", "ep=8", ""},
		{"mixtral_8x7b", "fsdp=2,ep=4", ""},
		{"llama3_8b", "fsdp=2,cp=2,tp=2", ""},
		{"mixtral_8x7b", "dp=2,ep=2,tp=2", ""},
		{"llama3_8b", "pp=2,dp=2,tp=2 --first-stage-layers 2", ""},
		{"mixtral_8x7b", "pp=2,dp=2,ep=2", ""},
		{"mixtral_8x7b", "cp=2,ep=2,tp=2", ""},
		// The non-expert gradients over dp × ep reduce-scattered along
		// ep, all-reduced along dp and gathered along ep (the optimal
		// policy keeps two Allreduces at this size).
		{"mixtral_8x7b", "dp=2,ep=2,tp=2", "--policy nvfuser"},
	} {
		t.Run(strings.TrimSpace(tc.config+" "+tc.mesh+" "+tc.export), func(t *testing.T) {
			dir := t.TempDir()
			fusion, prog := filepath.Join(dir, "small.yaml"), filepath.Join(dir, "run.py")
			args := append([]string{"model", filepath.Join("../../testdata/models", tc.config, "config.json"), "--scale-down",
				"--backward", "--dtype", "float64", "-o", fusion, "--mesh"}, strings.Fields(tc.mesh)...)
			if code, _, stderr := run(t, "", args...); code != 0 {
				t.Fatalf("model exited %d: %s", code, stderr)
			}
			if code, _, stderr := run(t, "", append([]string{"export", "torch", fusion, "--data", "small", "--data-scale", "4", "--topology", "none", "-o", prog}, strings.Fields(tc.export)...)...); code != 0 {
				t.Fatalf("export exited %d: %s", code, stderr)
			}
			out, err := launchGloo(py, 8, 29400+i, prog)
			if err != nil || !bytes.Contains(out, []byte("\nPASS\n")) {
				t.Errorf("%v\n%s", err, out)
			}
		})
	}
}

// launchGloo starts n processes of a torch.distributed program on gloo
// with torchrun's environment and returns their combined output.
func launchGloo(py string, n, port int, prog string) ([]byte, error) {
	var mu sync.Mutex
	var out bytes.Buffer
	w := writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return out.Write(p)
	})
	var cmds []*exec.Cmd
	for r := range n {
		cmd := exec.Command(py, prog, "--backend", "gloo")
		cmd.Env = append(os.Environ(), fmt.Sprintf("RANK=%d", r), fmt.Sprintf("LOCAL_RANK=%d", r),
			fmt.Sprintf("WORLD_SIZE=%d", n), fmt.Sprintf("LOCAL_WORLD_SIZE=%d", n),
			"MASTER_ADDR=127.0.0.1", fmt.Sprintf("MASTER_PORT=%d", port), "OMP_NUM_THREADS=1")
		cmd.Stdout, cmd.Stderr = w, w
		if err := cmd.Start(); err != nil {
			return out.Bytes(), err
		}
		cmds = append(cmds, cmd)
	}
	var errs []error
	for _, c := range cmds {
		errs = append(errs, c.Wait())
	}
	return out.Bytes(), errors.Join(errs...)
}

// writerFunc is an io.Writer of a function.
type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
