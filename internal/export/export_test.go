package export

import (
	"bytes"
	stdcmp "cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nvcomm/nvcomm/internal/plan"
)

// update reports whether golden files are to be rewritten
// (NVCOMM_UPDATE=1 go test ./...).
var update = os.Getenv("NVCOMM_UPDATE") == "1"

func readPlan(t *testing.T, path string) *plan.Plan {
	t.Helper()
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	p, err := plan.Decode(path, src)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// goldens are plans whose generated programs are checked in under
// testdata/NAME.py, with the options each is exported with. The embedded
// runtime.py, the same in every program, is replaced there by one marker
// line: the goldens pin what a plan changes, not the runtime twice over.
var goldens = map[string]struct {
	plan string
	opts Options
}{
	"allgather_loop_split": {"../../testdata/examples/allgather_loop_split.json", Options{
		Probes:    map[string][]float64{"tv0": {-26, -110, -288, 92}},
		Predicted: []float64{2.73e-05}, Topology: "h200"}},
	"L-03_gather_root_appended":         {"../../testdata/conformance/L-03_gather_root_appended.json", Options{Seed: 3}},
	"L-22_reduce_scatter_noncontiguous": {"../../testdata/conformance/L-22_reduce_scatter_noncontiguous.json", Options{}},
	"layers_linear_row_parallel":        {"testdata/layers_linear_row_parallel.json", Options{}},
	"alltoallv":                         {"testdata/alltoallv.json", Options{}},
	"alltoallv_meshes":                  {"testdata/alltoallv_meshes.json", Options{}},
	// Every elementwise op of transformer blocks, lowered from a fusion
	// of them on two devices: their torch functions.
	"layers_transformer": {"testdata/layers_transformer.json", Options{}},
	"swiglu_mlp":         {"../../testdata/examples/swiglu_mlp.json", Options{}},
	// slice and cat: their Concat steps, and their reference functions.
	"rotary_embedding": {"../../testdata/examples/rotary_embedding.json", Options{}},
	// A step graph (format 2): collectives issued with async_op=True on
	// stream comm, waits where the graph says, the makespan.
	"tp_mlp_overlap_collective_k2": {"../../testdata/examples/tp_mlp_overlap_collective_k2.optimal.json", Options{
		Predicted: []float64{1e-5, 1e-5, 2.71e-5, 1e-5, 2.71e-5, 1e-5, 1e-5, 1e-5, 1e-5, 1e-5, 1e-5, 2.83e-5, 1e-5, 2.83e-5, 1e-5},
		Topology:  "h200", Makespan: 1.5e-4}},
}

// runtimeMarker stands for runtime.py in the golden programs.
const runtimeMarker = "# ... internal/export/runtime.py, verbatim ...\n"

func TestGoldenPrograms(t *testing.T) {
	for name, g := range goldens {
		t.Run(name, func(t *testing.T) {
			var b bytes.Buffer
			if err := Torch(&b, readPlan(t, g.plan), g.opts); err != nil {
				t.Fatal(err)
			}
			rt := runtimeOf(readPlan(t, g.plan))
			if n := strings.Count(b.String(), rt); n != 1 {
				t.Fatalf("the program embeds runtime.py %d times, want once", n)
			}
			got := strings.Replace(b.String(), rt, runtimeMarker, 1)
			golden := filepath.Join("testdata", name+".py")
			if update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("missing golden (NVCOMM_UPDATE=1 go test ./...): %v", err)
			}
			if diff := cmp.Diff(string(want), got); diff != "" {
				t.Errorf("%s mismatch (-want +got):\n%s", golden, diff)
			}
		})
	}
}

func TestPredictedLength(t *testing.T) {
	p := readPlan(t, "../../testdata/examples/allgather_loop_split.json")
	err := Torch(&bytes.Buffer{}, p, Options{Predicted: []float64{1, 2}})
	if err == nil || !strings.Contains(err.Error(), "2 predicted times for 1 blocks") {
		t.Errorf("Torch error = %v, want a count mismatch", err)
	}
}

func TestPyString(t *testing.T) {
	tests := map[string]struct{ in, want string }{
		"raw":          {"{\"a\": 1}\n", "r'''\n{\"a\": 1}\n'''"},
		"triple quote": {"{\"a\": \"'''\"}\n", `"{\"a\": \"'''\"}\n"`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := pyString([]byte(tc.in)); got != tc.want {
				t.Errorf("pyString(%q) = %s, want %s", tc.in, got, tc.want)
			}
		})
	}
}

// planDirs hold the plans every test exports: the examples, the
// conformance corpus, and this package's hand-written plans of layer ops
// (which no lowering writes yet).
var planDirs = []string{"../../testdata/examples", "../../testdata/conformance", "testdata"}

// allPlans lists every plan of planDirs.
func allPlans(t *testing.T) []string {
	t.Helper()
	var files []string
	for _, dir := range planDirs {
		fs, err := filepath.Glob(filepath.Join(dir, "*.json"))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, fs...)
	}
	if len(files) == 0 {
		t.Fatal("no plans")
	}
	return files
}

// writePrograms exports every plan into dir and returns the programs.
func writePrograms(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	for _, f := range allPlans(t) {
		var b bytes.Buffer
		if err := Torch(&b, readPlan(t, f), Options{}); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		py := filepath.Join(dir, strings.TrimSuffix(filepath.Base(f), ".json")+".py")
		if err := os.WriteFile(py, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		out = append(out, py)
	}
	return out
}

// TestProgramsCompile byte-compiles every exported program and the
// calibration program, where python3 exists.
func TestProgramsCompile(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3")
	}
	dir := t.TempDir()
	files := writePrograms(t, dir)
	cal := filepath.Join(dir, "calibrate.py")
	if err := os.WriteFile(cal, CalibrationProgram(), 0o644); err != nil {
		t.Fatal(err)
	}
	args := append([]string{"-m", "py_compile", cal}, files...)
	if out, err := exec.Command(py, args...).CombinedOutput(); err != nil {
		t.Fatalf("py_compile: %v\n%s", err, out)
	}
}

// TestProgramsRunGloo runs every exported program on CPU processes with
// torch.distributed's gloo backend, started as torchrun would (RANK,
// WORLD_SIZE, MASTER_ADDR, ...). It needs PyTorch, so it runs only with
// NVCOMM_TORCH_TEST=1 (PYTHON selects the interpreter, python3 by default).
func TestProgramsRunGloo(t *testing.T) {
	if os.Getenv("NVCOMM_TORCH_TEST") != "1" {
		t.Skip("set NVCOMM_TORCH_TEST=1 to run the programs with PyTorch (gloo)")
	}
	py := stdcmp.Or(os.Getenv("PYTHON"), "python3")
	dir := t.TempDir()
	plans := allPlans(t)
	for i, prog := range writePrograms(t, dir) {
		name := strings.TrimSuffix(filepath.Base(prog), ".py")
		t.Run(name, func(t *testing.T) {
			n := maxDevice(readPlan(t, plans[i])) + 1
			out, err := launch(py, n, 29600+i%200, prog, "--backend", "gloo")
			if err != nil || !bytes.Contains(out, []byte("\nPASS\n")) {
				t.Errorf("%v\n%s", err, out)
			}
		})
	}
}

// TestGlooFallbacks runs programs with the runtime's slow forms of the
// collectives older PyTorch's gloo lacks (all_gather_into_tensor,
// reduce_scatter_tensor, all_to_all_single, with and without split sizes),
// which PyTorch 1.13 and later never take: each must still print PASS,
// also in a step graph's program, where they are issued asynchronously.
// It needs PyTorch, as TestProgramsRunGloo.
func TestGlooFallbacks(t *testing.T) {
	if os.Getenv("NVCOMM_TORCH_TEST") != "1" {
		t.Skip("set NVCOMM_TORCH_TEST=1 to run the programs with PyTorch (gloo)")
	}
	const fast = "self._d, self._slow = real, set()"
	const slow = `self._d, self._slow = real, {"all_gather_into_tensor", "reduce_scatter_tensor", "all_to_all_single"}`
	if n := strings.Count(runtime(), fast); n != 1 {
		t.Fatalf("runtime.py has %q %d times, want once", fast, n)
	}
	py := stdcmp.Or(os.Getenv("PYTHON"), "python3")
	dir := t.TempDir()
	plans := []string{"testdata/alltoallv.json", "testdata/alltoallv_meshes.json", "../../testdata/examples/gpu2_alltoall.json",
		"../../testdata/examples/gpu2_reduce_scatter_allgather.json",
		// Step graphs (format 2): the slow forms issued with async_op,
		// finished at wait(); in bfloat16, copied back there too.
		"testdata/overlap_k2_bfloat16.json", "testdata/overlap_ring_k2_bfloat16.json"}
	for i, f := range plans {
		name := strings.TrimSuffix(filepath.Base(f), ".json")
		t.Run(name, func(t *testing.T) {
			p := readPlan(t, f)
			var b bytes.Buffer
			if err := Torch(&b, p, Options{}); err != nil {
				t.Fatal(err)
			}
			prog := filepath.Join(dir, name+".py")
			if err := os.WriteFile(prog, []byte(strings.Replace(b.String(), fast, slow, 1)), 0o644); err != nil {
				t.Fatal(err)
			}
			out, err := launch(py, maxDevice(p)+1, 29850+i, prog, "--backend", "gloo")
			if err != nil || !bytes.Contains(out, []byte("\nPASS\n")) {
				t.Errorf("%v\n%s", err, out)
			}
		})
	}
}

// launch starts n processes of a torch.distributed program on this machine
// with torchrun's environment and returns their combined output.
func launch(py string, n, port int, args ...string) ([]byte, error) {
	var out bytes.Buffer
	var cmds []*exec.Cmd
	for r := range n {
		cmd := exec.Command(py, args...)
		cmd.Env = append(os.Environ(), fmt.Sprintf("RANK=%d", r), fmt.Sprintf("LOCAL_RANK=%d", r),
			fmt.Sprintf("WORLD_SIZE=%d", n), fmt.Sprintf("LOCAL_WORLD_SIZE=%d", n),
			"MASTER_ADDR=127.0.0.1", fmt.Sprintf("MASTER_PORT=%d", port))
		cmd.Stdout, cmd.Stderr = &syncWriter{w: &out}, &syncWriter{w: &out}
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

// syncWriter serializes writes of several processes to one buffer.
type syncWriter struct {
	w io.Writer
}

var writeMu sync.Mutex

func (s *syncWriter) Write(p []byte) (int, error) {
	writeMu.Lock()
	defer writeMu.Unlock()
	return s.w.Write(p)
}

// TestLayerPlansValid: the hand-written plans of testdata pass plan.Validate,
// so that the programs they export run plans nvcomm accepts.
func TestLayerPlansValid(t *testing.T) {
	files, err := filepath.Glob("testdata/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no plans in testdata: %v", err)
	}
	for _, f := range files {
		if probs := plan.Validate(readPlan(t, f)); probs != nil {
			t.Errorf("%s: %v", f, probs)
		}
	}
}

// TestAllToAllVReadersWriters writes AllToAllVs whose members do not all
// send or receive: a member that sends nothing passes an empty input, one
// that receives nothing an empty output, and only the receivers hold the
// step's output; a team of one device copies, reads nothing and writes an
// empty output, or moves nothing.
func TestAllToAllVReadersWriters(t *testing.T) {
	step := func(count [2]int, counts [][]int, teams ...[]int) plan.Step {
		return plan.Step{ID: 0, Kind: plan.KindCollective, Type: plan.AllToAllV, Teams: teams,
			Input: "a", Output: "b", Count: plan.Count{Input: count[0], Output: count[1]}, SendCounts: counts}
	}
	tests := []struct {
		name    string
		step    plan.Step
		lines   []string // each in the code, in order
		holders []int
	}{
		{
			name: "two senders of 6 to three receivers of 4",
			step: step([2]int{6, 4}, [][]int{{0, 0, 4, 2, 0}, {0, 0, 0, 2, 4}, {0, 0, 0, 0, 0}, {0, 0, 0, 0, 0}, {0, 0, 0, 0, 0}},
				[]int{0, 1, 2, 3, 4}),
			lines: []string{
				"buf = torch.empty({0: 0, 1: 0, 2: 4, 3: 4, 4: 4}[rank], dtype=torch.float32, device=device)",
				"dist.all_to_all_single(buf, (a if rank in (0, 1) else torch.empty(0, dtype=torch.float32, device=device)), " +
					"output_split_sizes={0: [0, 0, 0, 0, 0], 1: [0, 0, 0, 0, 0], 2: [4, 0, 0, 0, 0], 3: [2, 2, 0, 0, 0], 4: [0, 4, 0, 0, 0]}[rank], " +
					"input_split_sizes={0: [0, 0, 4, 2, 0], 1: [0, 0, 0, 2, 4], 2: [0, 0, 0, 0, 0], 3: [0, 0, 0, 0, 0], 4: [0, 0, 0, 0, 0]}[rank], group=groups[0, 1, 2, 3, 4])",
				"if rank in (2, 3, 4):  # the members that receive",
				"    b = buf",
			},
			holders: []int{2, 3, 4},
		},
		{
			name:    "teams of one device copy",
			step:    step([2]int{6, 6}, [][]int{{6}}, []int{0}, []int{1}),
			lines:   []string{"if rank in (0, 1):  # a team of one device: a copy", "    b = a.clone()"},
			holders: []int{0, 1},
		},
		{
			name:  "a team of one device that moves nothing",
			step:  step([2]int{6, 4}, [][]int{{0}}, []int{0}),
			lines: []string{"if rank == 0:  # a team of one device that moves nothing", "    pass"},
		},
		{
			name: "a team of one device that writes an empty output",
			step: step([2]int{6, 0}, [][]int{{0}}, []int{0}),
			lines: []string{"if rank == 0:  # a team of one device: an empty output",
				"    b = torch.empty(0, dtype=torch.float32, device=device)"},
			holders: []int{0},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &plan.Plan{Tensors: []plan.Tensor{{Name: "a", DType: "float32"}, {Name: "b", DType: "float32"}}}
			p.Steps = []plan.Step{tt.step}
			g := newGen(p)
			if err := g.collective(planned{steps: []int{0}}, &p.Steps[0]); err != nil {
				t.Fatal(err)
			}
			code := strings.Join(g.w.lines, "\n")
			rest := code
			for _, l := range tt.lines {
				i := strings.Index(rest, l)
				if i < 0 {
					t.Fatalf("no line %q (in order) in\n%s", l, code)
				}
				rest = rest[i+len(l):]
			}
			if diff := cmp.Diff(tt.holders, g.holders["b"]); diff != "" {
				t.Errorf("holders of b (-want +got):\n%s", diff)
			}
		})
	}
}

// TestBoundedOpsChecked runs the program of every transformer elementwise
// op (layers_transformer) on gloo as it is (PASS), with one op's result
// off by a millionth or computed by another op (FAIL at that op: the
// bound is a few ulps, not vacuous), and with a sub where the plan adds,
// which takes log's operand to 0 and below (refused, never PASS or
// FAIL). It needs PyTorch, as TestProgramsRunGloo.
func TestBoundedOpsChecked(t *testing.T) {
	if os.Getenv("NVCOMM_TORCH_TEST") != "1" {
		t.Skip("set NVCOMM_TORCH_TEST=1 to run the programs with PyTorch (gloo)")
	}
	py := stdcmp.Or(os.Getenv("PYTHON"), "python3")
	dir := t.TempDir()
	for i, tc := range []struct {
		name, old, new string
		sub            bool // the plan's add made a sub
		want           string
	}{
		{name: "as is", want: "\nPASS\n"},
		{name: "exp off by 1e-6", old: "e = torch.exp(x)\n", new: "e = torch.exp(x) * (1 + 1e-6)\n", want: "\nFAIL: op 0 "},
		{name: "exp off by 2 ulps", old: "e = torch.exp(x)\n", new: "e = torch.exp(x) * (1 + 2e-7)\n", want: "\nPASS\n"},
		{name: "gelu_tanh for gelu", old: "ge = torch.nn.functional.gelu(x)\n", new: "ge = _gelu_tanh(x)\n", want: "\nFAIL: op 5 "},
		{name: "rsqrt for reciprocal", old: "c = torch.reciprocal(x)\n", new: "c = torch.rsqrt(x)\n", want: "\nFAIL: op 9 "},
		{name: "log out of its domain", sub: true, want: "error: op 15 (log): cannot check it: at element "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := readPlan(t, "testdata/layers_transformer.json")
			if tc.sub {
				k := slices.IndexFunc(p.Ops, func(o plan.Op) bool { return o.Output == "a" })
				p.Ops[k].Op = "sub"
				for j, s := range p.Steps {
					if s.Op == k {
						p.Steps[j].Func, p.Steps[j].Expr = new("sub"), strings.Replace(s.Expr, "add(", "sub(", 1)
					}
				}
			}
			var b bytes.Buffer
			if err := Torch(&b, p, Options{}); err != nil {
				t.Fatal(err)
			}
			src := b.String()
			if tc.old != "" && strings.Count(src, tc.old) != 1 {
				t.Fatalf("the program has %q %d times, want once", tc.old, strings.Count(src, tc.old))
			}
			prog := filepath.Join(dir, fmt.Sprintf("p%d.py", i))
			if err := os.WriteFile(prog, []byte(strings.Replace(src, tc.old, tc.new, 1)), 0o644); err != nil {
				t.Fatal(err)
			}
			out, _ := launch(py, 2, 29900+i, prog, "--backend", "gloo")
			if !bytes.Contains(out, []byte(tc.want)) {
				t.Errorf("want %q in the output:\n%s", tc.want, out)
			}
		})
	}
}

// TestSavedCopiesExported exports Megatron's sequence-parallel block with
// its backward (sp_block_backward) under both policies and checks how the
// column-parallel weight gradients read their saved input (docs/training.md,
// "Saved activations"): under the optimal policy the forward's gathered
// copy itself, kept alive (no buffer of the saved copy, no Allgather for
// it); under nvFuser's rules the saved copy's own Allgather, Megatron's
// re-gather. On gloo both programs PASS (TestProgramsRunGloo).
func TestSavedCopiesExported(t *testing.T) {
	for _, tc := range []struct {
		plan      string
		want, not []string
	}{
		{"sp_block_backward.optimal.json", []string{
			"fc1_grad_dw_mm = torch.matmul(fc1_grad_dw_dyt.view(2, 16, 8), ln2_resharded.view(2, 8, 16))",
			"qkv_grad_dw_mm = torch.matmul(qkv_grad_dw_dyt.view(2, 12, 8), ln1_resharded.view(2, 8, 16))",
		}, []string{"saved"}},
		{"sp_block_backward.json", []string{
			"dist.all_gather_into_tensor(fc1_grad_saved_ln2_gathered, ln2, group=groups[0, 1, 2, 3])",
			"fc1_grad_dw_mm = torch.matmul(fc1_grad_dw_dyt.view(2, 16, 8), fc1_grad_saved_ln2.view(2, 8, 16))",
			"dist.all_gather_into_tensor(qkv_grad_saved_ln1_gathered, ln1, group=groups[0, 1, 2, 3])",
			"qkv_grad_dw_mm = torch.matmul(qkv_grad_dw_dyt.view(2, 12, 8), qkv_grad_saved_ln1.view(2, 8, 16))",
		}, nil},
	} {
		t.Run(tc.plan, func(t *testing.T) {
			var b bytes.Buffer
			if err := Torch(&b, readPlan(t, "../../testdata/examples/"+tc.plan), Options{}); err != nil {
				t.Fatal(err)
			}
			code, _, _ := strings.Cut(b.String(), "\n# --- What the runtime below needs")
			for _, line := range tc.want {
				if !strings.Contains(code, line) {
					t.Errorf("the program's function lacks\n\t%s", line)
				}
			}
			for _, s := range tc.not {
				if strings.Contains(code, s) {
					t.Errorf("the program's function names %q", s)
				}
			}
		})
	}
}
