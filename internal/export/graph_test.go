package export

import (
	"bytes"
	stdcmp "cmp"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nvcomm/nvcomm/internal/plan"
)

// graphPlans are the examples' plans of format 2 whose waits are checked.
func graphPlans(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("../../testdata/examples/*.optimal.json")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, f := range files {
		if readPlan(t, f).Graph() {
			out = append(out, f)
		}
	}
	if len(out) < 8 {
		t.Fatalf("%d example plans of format 2, want the overlap and pipeline ones (8 at least)", len(out))
	}
	return out
}

var (
	blockMark = regexp.MustCompile(`^\s*# steps? (\d+)(?:-(\d+))? \(`)
	waitCall  = regexp.MustCompile(`wait_for\(work, ([\d, ]+)\)`)
)

// programBlock is a block of an exported function as its text gives it:
// its steps and the steps its wait_for lines name.
type programBlock struct {
	steps, waits []int
}

// programBlocks reads the blocks of the function in an exported program,
// in the order the function runs them.
func programBlocks(t *testing.T, src string) []programBlock {
	t.Helper()
	var out []programBlock
	for _, line := range strings.Split(src, "\n") {
		if line == "# --- What the runtime below needs: the plan, simulate's data, the predictions. ---" {
			break
		}
		if m := blockMark.FindStringSubmatch(line); m != nil {
			a, _ := strconv.Atoi(m[1])
			b := a
			if m[2] != "" {
				b, _ = strconv.Atoi(m[2])
			}
			var steps []int
			for i := a; i <= b; i++ {
				steps = append(steps, i)
			}
			out = append(out, programBlock{steps: steps})
			continue
		}
		if m := waitCall.FindStringSubmatch(line); m != nil && len(out) > 0 {
			for _, f := range strings.Split(m[1], ",") {
				n, err := strconv.Atoi(strings.TrimSpace(f))
				if err != nil {
					t.Fatalf("wait_for line %q: %v", line, err)
				}
				out[len(out)-1].waits = append(out[len(out)-1].waits, n)
			}
		}
	}
	return out
}

// checkWaits runs the function's blocks as the streams of each rank run
// them on a GPU, and reports every read that no wait orders after its
// write, and every step the function runs twice or never. Local steps run
// on the current stream (compute), each collective on its step's stream
// (its NCCL work on a stream of its own, which has waited for what that
// stream had waited for when it was issued); a wait_for makes the stream
// of its block wait for each step it names: for a collective, for its
// completion; for a local step, for the current stream up to it (its
// event). So a step's stream must have waited, directly or through the
// steps it waited for, for the step that last wrote each buffer it reads.
// The host of gloo waits for at least as much (a wait there holds the
// whole host), so a program that passes holds on gloo too.
func checkWaits(p *plan.Plan, blocks []programBlock) []string {
	var probs []string
	seen := map[int]int{}
	for _, b := range blocks {
		for _, i := range b.steps {
			seen[i]++
		}
	}
	for i := range p.Steps {
		if seen[i] != 1 {
			probs = append(probs, fmt.Sprintf("step %d runs %d times", i, seen[i]))
		}
	}
	for _, r := range planDevices(p) {
		writer := map[string]int{}          // buffer -> the step that last wrote it on r
		waited := map[string]map[int]bool{} // stream -> the steps it is ordered after
		reached := map[int]map[int]bool{}   // step -> what waiting for it orders a stream after
		for _, b := range blocks {
			s0 := &p.Steps[b.steps[0]]
			stream := plan.StreamCompute
			if s0.Kind == plan.KindCollective {
				stream = s0.StreamName()
			}
			on := false
			for _, i := range b.steps {
				on = on || slices.Contains(p.Steps[i].Members(), r)
			}
			if !on {
				continue
			}
			if waited[stream] == nil {
				waited[stream] = map[int]bool{}
			}
			for _, j := range b.waits {
				for k := range reached[j] {
					waited[stream][k] = true
				}
			}
			for _, i := range b.steps {
				s := &p.Steps[i]
				if !slices.Contains(s.Members(), r) {
					continue
				}
				for _, in := range s.Operands() {
					if w, ok := writer[in]; ok && !waited[stream][w] {
						probs = append(probs, fmt.Sprintf("device %d: step %d (stream %s) reads %q before waiting for step %d, which writes it", r, i, stream, in, w))
					}
				}
				writer[s.Output] = i
				reached[i] = map[int]bool{i: true}
				for k := range waited[stream] {
					reached[i][k] = true
				}
				if stream == plan.StreamCompute && s.Kind != plan.KindCollective {
					waited[stream][i] = true // the current stream runs local steps in order
				}
			}
		}
	}
	return probs
}

// TestGraphWaits holds every example plan of format 2's exported function
// to its graph: on every rank, a step reads what a collective wrote only
// after a wait for that collective, as gloo runs it (a read before the
// wait would read the buffer while the collective writes it). A program
// with one wait dropped fails the check, so the check is not vacuous.
func TestGraphWaits(t *testing.T) {
	for _, f := range graphPlans(t) {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".optimal.json"), func(t *testing.T) {
			p := readPlan(t, f)
			var b bytes.Buffer
			if err := Torch(&b, p, Options{}); err != nil {
				t.Fatal(err)
			}
			blocks := programBlocks(t, b.String())
			if probs := checkWaits(p, blocks); len(probs) > 0 {
				t.Fatalf("%d problems, the first: %s", len(probs), probs[0])
			}
			// Drop, in turn, every wait for one collective whose output
			// some step reads: each must be caught. (Dropping one wait_for
			// line alone may change nothing: a later reader may wait
			// again, as the graph says, for what its stream has waited
			// for already through another step; TestDroppedWaitFails
			// drops one line and runs the program.)
			dropped := 0
			for j := range p.Steps {
				s := &p.Steps[j]
				if s.Kind != plan.KindCollective || !slices.ContainsFunc(p.Steps[j+1:], func(x plan.Step) bool {
					return slices.Contains(x.Operands(), s.Output)
				}) {
					continue
				}
				mutant := slices.Clone(blocks)
				for k := range mutant {
					mutant[k].waits = slices.DeleteFunc(slices.Clone(mutant[k].waits), func(w int) bool { return w == j })
				}
				if len(checkWaits(p, mutant)) == 0 {
					t.Errorf("every wait for step %d dropped: no problem found", j)
				}
				dropped++
			}
			if dropped == 0 {
				t.Errorf("no wait for a collective's output to drop")
			}
		})
	}
}

// TestGraphIssuesAsync: every collective of a plan of format 2 is issued
// with async_op=True (or as isend and irecv) on its step's stream, and a
// plan of format 1 keeps its blocking calls (the golden programs pin those
// byte for byte).
func TestGraphIssuesAsync(t *testing.T) {
	for _, f := range []string{"../../testdata/examples/tp_mlp_overlap_collective_k2.optimal.json",
		"../../testdata/examples/tp_mlp_overlap_ring_k4.optimal.json", "../../testdata/examples/pipeline_1f1b.optimal.json"} {
		p := readPlan(t, f)
		var b bytes.Buffer
		if err := Torch(&b, p, Options{}); err != nil {
			t.Fatal(err)
		}
		fn := b.String()[:strings.Index(b.String(), "# --- What the runtime")]
		var got, want []string
		for _, s := range p.Steps {
			if s.Kind == plan.KindCollective {
				want = append(want, fmt.Sprintf("work[%d]", s.ID))
			}
		}
		for _, m := range regexp.MustCompile(`(work\[\d+\])(?: = dist\.\w+\(.*async_op=True\)| = dist\.i(?:send|recv)\(|\.append\(dist\.i(?:send|recv)\()`).FindAllStringSubmatch(fn, -1) {
			got = append(got, m[1])
		}
		got = slices.Compact(got)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s: collectives issued asynchronously (-want +got):\n%s", f, diff)
		}
		if n := strings.Count(fn, "with on_stream(device, \"comm\"):"); n != len(want) {
			t.Errorf("%s: %d collectives on stream comm, want %d", f, n, len(want))
		}
	}
}

// TestDroppedWaitFails runs a decomposed collective's program on gloo
// with NVCOMM_DELIVER_AT_WAIT=1 (a collective's output reads NaN until the
// function waits for it): as exported it PASSes; without the wait of the
// Matmul of chunk 1 for its Allgather it FAILs, whatever the timing. It
// needs PyTorch, as TestProgramsRunGloo.
func TestDroppedWaitFails(t *testing.T) {
	if os.Getenv("NVCOMM_TORCH_TEST") != "1" {
		t.Skip("set NVCOMM_TORCH_TEST=1 to run the programs with PyTorch (gloo)")
	}
	py := stdcmp.Or(os.Getenv("PYTHON"), "python3")
	p := readPlan(t, "../../testdata/examples/tp_mlp_overlap_collective_k2.optimal.json")
	var b bytes.Buffer
	if err := Torch(&b, p, Options{}); err != nil {
		t.Fatal(err)
	}
	const wait = "    # step 5 (Matmul): A @ B\n    wait_for(work, 4)\n"
	if n := strings.Count(b.String(), wait); n != 1 {
		t.Fatalf("the program has %q %d times, want once", wait, n)
	}
	t.Setenv("NVCOMM_DELIVER_AT_WAIT", "1")
	dir := t.TempDir()
	for i, tc := range []struct {
		name, src, want string
	}{
		{"as exported", b.String(), "\nPASS\n"},
		{"wait dropped", strings.Replace(b.String(), wait, "    # step 5 (Matmul): A @ B\n", 1), "\nFAIL: op 1 (after step 6), tensor h"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			prog := filepath.Join(dir, fmt.Sprintf("k2_%d.py", i))
			if err := os.WriteFile(prog, []byte(tc.src), 0o644); err != nil {
				t.Fatal(err)
			}
			out, _ := launch(py, 4, 29880+i, prog, "--backend", "gloo")
			if !bytes.Contains(out, []byte(tc.want)) {
				t.Errorf("want %q in the output:\n%s", tc.want, out)
			}
		})
	}
}

// TestGraphProgramsRunGloo runs the program of every example plan of
// format 2 on gloo with NVCOMM_DELIVER_AT_WAIT=1, where a read that no
// wait orders after its collective reads NaN: each must PASS (with its
// gradients against torch.autograd where it has a backward). It needs
// PyTorch, as TestProgramsRunGloo; a few minutes on 2 cores.
func TestGraphProgramsRunGloo(t *testing.T) {
	if os.Getenv("NVCOMM_TORCH_TEST") != "1" {
		t.Skip("set NVCOMM_TORCH_TEST=1 to run the programs with PyTorch (gloo)")
	}
	py := stdcmp.Or(os.Getenv("PYTHON"), "python3")
	t.Setenv("NVCOMM_DELIVER_AT_WAIT", "1")
	dir := t.TempDir()
	for i, f := range graphPlans(t) {
		name := strings.TrimSuffix(filepath.Base(f), ".optimal.json")
		t.Run(name, func(t *testing.T) {
			p := readPlan(t, f)
			if name == "tp_mlp_overlap_auto" {
				t.Skip("GPU-sized: about 30 GiB")
			}
			var b bytes.Buffer
			if err := Torch(&b, p, Options{}); err != nil {
				t.Fatal(err)
			}
			prog := filepath.Join(dir, name+".py")
			if err := os.WriteFile(prog, b.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
			out, err := launch(py, maxDevice(p)+1, 29890+i, prog, "--backend", "gloo")
			if err != nil || !bytes.Contains(out, []byte("\nPASS\n")) {
				t.Errorf("%v\n%s", err, out)
			}
		})
	}
}
