package auto

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nvcomm/nvcomm/internal/cost"
	"github.com/nvcomm/nvcomm/internal/diag"
	"github.com/nvcomm/nvcomm/internal/lower"
)

// trainingMLP is Megatron's MLP forward and backward on 4 devices, its
// weights auto and h, a undeclared; gradDecl declares a gradient.
func trainingMLP(gradDecl string) string {
	return `format: 2
meshes:
  tp: [0, 1, 2, 3]
tensors:
  x:  {mesh: tp, shape: [8, 16]}
  w1: {mesh: tp, shape: [32, 16], placements: auto}
  w2: {mesh: tp, shape: [16, 32], placements: auto}
  y:  {placements: [Replicate()]}
  dy: {mesh: tp, shape: [8, 16]}
` + gradDecl + `ops:
  - {op: linear, in: [x, w1], out: h}
  - {op: relu, in: h, out: a}
  - {op: linear, in: [a, w2], out: y}
backward:
  seeds: {y: dy}
  wrt: [w1, w2]
`
}

// TestTrainingStep checks --auto on a fusion with a backward section: the
// decisions are the forward's (no gradient among them), the backward's
// ops are counted and follow propagation, the search minimises more than
// the forward alone (each op's gradient is priced with it) and the
// headline is the whole step's plan.
func TestTrainingStep(t *testing.T) {
	src := trainingMLP("")
	res, err := Solve("train.yaml", []byte(src), Options{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range res.Decisions {
		got = append(got, d.Tensor)
	}
	if d := cmp.Diff([]string{"w1", "w2", "h", "a"}, got); d != "" {
		t.Errorf("decisions (-want +got):\n%s", d)
	}
	forward, err := Solve("train.yaml", []byte(src), Options{forwardOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.BackwardOps != 8 || res.Searched != res.summed || res.summed <= forward.summed {
		t.Errorf("backward ops %d (want 8), searched %g s (summed %g s), the forward alone %g s", res.BackwardOps, res.Searched, res.summed, forward.summed)
	}
	if s, ok := predictFusion("train.yaml", res.Fusion, lower.Options{Topology: cost.Default()}); !ok || s != res.Seconds {
		t.Errorf("the chosen fusion's plan predicts %g s (lowers: %v), the headline %g s", s, ok, res.Seconds)
	}
}

// TestTrainingPricesBackward checks the choices of docs/auto.md's
// training step, auto_tp_block_backward.yaml, against the forward-only
// search's: within 33 KiB a device, pricing each op with its gradient
// finds a step as fast as Megatron-LM's hand split (tp_block_backward,
// 656 µs), where pricing the forward alone chose a norm on sequence
// shards that ties in the forward and costs three collectives more in
// the backward (826 µs); within 32 KiB Megatron's split does not fit
// (33 KiB by --auto's count) and both choose the latter; with no budget
// both keep the block replicated.
func TestTrainingPricesBackward(t *testing.T) {
	src, err := os.ReadFile("../../testdata/examples/auto_tp_block_backward.yaml")
	if err != nil {
		t.Fatal(err)
	}
	type step struct {
		Step, ForwardOnly string
		W, LN2            string
	}
	got := map[string]step{}
	for name, budget := range map[string]int64{"none": 0, "32KiB": 32 << 10, "33KiB": 33 << 10} {
		res, err := Solve("block.yaml", src, Options{MemoryBudget: budget})
		if err != nil {
			t.Fatal(err)
		}
		fwd, err := Solve("block.yaml", src, Options{MemoryBudget: budget, forwardOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		s := step{Step: fmt.Sprintf("%.0f µs", res.Seconds*1e6), ForwardOnly: fmt.Sprintf("%.0f µs", fwd.Seconds*1e6)}
		for _, d := range res.Decisions {
			switch d.Tensor {
			case "w_qkv", "w_o", "w_fc1", "w_fc2":
				s.W += d.Chosen
			case "ln2":
				s.LN2 = d.Chosen
			}
		}
		got[name] = s
	}
	want := map[string]step{
		"none":  {Step: "570 µs", ForwardOnly: "570 µs", W: "[Replicate()][Replicate()][Replicate()][Replicate()]", LN2: "[Replicate()]"},
		"32KiB": {Step: "826 µs", ForwardOnly: "826 µs", W: "[Shard(0)][Shard(1)][Shard(0)][Shard(1)]", LN2: "[Shard(1)]"},
		"33KiB": {Step: "656 µs", ForwardOnly: "826 µs", W: "[Shard(0)][Shard(1)][Shard(0)][Shard(1)]", LN2: "[Replicate()]"},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("auto_tp_block_backward (-want +got):\n%s", d)
	}
}

// TestGradientAuto checks that placements: auto on a gradient is an error
// at its declaration.
func TestGradientAuto(t *testing.T) {
	_, err := Solve("train.yaml", []byte(trainingMLP("  w2.grad: {placements: auto}\n")), Options{})
	var d diag.Diagnostic
	if !errors.As(err, &d) {
		t.Fatalf("got %v, want a diagnostic", err)
	}
	if want := `train.yaml:10:3: error: tensor "w2.grad": placements: auto on a gradient`; !strings.HasPrefix(d.Error(), want) {
		t.Errorf("got\n%s\nwant it to start with\n%s", d.Error(), want)
	}
}

// TestRecomputeShortensLifetimes checks the memory --auto counts for a
// training step whose backward gathers the weights again
// (fsdp_mlp_backward_reshard): the forward's gathered copy of w1, read by
// no backward op, is freed after its last forward reader, so the peak is
// 32 KiB (w1_full, [128, 64] float32) below the same step that keeps the
// gathered copies for the backward; w2_full, read by the forward's last
// op, is held to the forward's end either way. Both count the upstream
// gradient dy (16 KiB a device), an input only the backward reads.
func TestRecomputeShortensLifetimes(t *testing.T) {
	src, err := os.ReadFile("../../testdata/examples/fsdp_mlp_backward_reshard.yaml")
	if err != nil {
		t.Fatal(err)
	}
	kept := strings.Replace(string(src), "\n  reshard_after_forward: true", "\n  reshard_after_forward: false", 1)
	if kept == string(src) {
		t.Fatal("the example has no reshard_after_forward: true")
	}
	peak := map[string]int64{}
	for name, s := range map[string]string{"kept": kept, "resharded": string(src)} {
		res, err := Solve(name+".yaml", []byte(s), Options{})
		if err != nil {
			t.Fatal(err)
		}
		peak[name] = res.PeakBytes
	}
	want := map[string]int64{"kept": 160 << 10, "resharded": 128 << 10}
	if d := cmp.Diff(want, peak); d != "" {
		t.Errorf("peak bytes per device (-want +got):\n%s", d)
	}
}

// TestTrainingObjective measures how far the sum the search minimises
// for a training step (each op's forward and gradient, vjp.go) is from
// the chosen plan's prediction, on every example with a backward section
// and decisions, and holds it to the bound docs/auto.md states. The sum
// is not exact: the gradient of an op's output may arrive sharded
// otherwise than the op's training price seeds it, and the sums of a
// tensor's gradients are no op's.
func TestTrainingObjective(t *testing.T) {
	paths, err := filepath.Glob("../../testdata/examples/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	worst, compared := 0.0, 0
	for _, path := range paths {
		src, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(src), "\nbackward:") || strings.Contains(string(src), "\npipeline:") {
			continue
		}
		runs := []Options{{}}
		switch filepath.Base(path) {
		case "auto_tp_block_backward.yaml":
			runs = append(runs, Options{MemoryBudget: 32 << 10}, Options{MemoryBudget: 33 << 10})
		case "auto_fsdp_mlp_backward.yaml":
			runs = append(runs, Options{MemoryBudget: 200 << 10, Optimizer: "adam"})
		}
		for _, opts := range runs {
			res, err := Solve(path, src, opts)
			if err != nil || res.BackwardOps == 0 || len(res.Decisions) == 0 {
				continue
			}
			off := (res.summed - res.Seconds) / res.Seconds
			worst = max(worst, math.Abs(off))
			compared++
			budget := "none"
			if opts.MemoryBudget > 0 {
				budget = fmt.Sprintf("%d KiB", opts.MemoryBudget>>10)
				if opts.Optimizer != "" {
					budget += ", " + opts.Optimizer
				}
			}
			lines = append(lines, fmt.Sprintf("| `%s` | %s | %.1f µs | %.1f µs | %+.1f%% |", filepath.Base(path), budget, res.summed*1e6, res.Seconds*1e6, 100*off))
		}
	}
	t.Logf("training steps: the search's sum against the plan's prediction\n%s", strings.Join(lines, "\n"))
	if compared < 5 {
		t.Errorf("compared %d training steps, want the examples with decisions (5 or more)", compared)
	}
	if worst > maxTrainingGap {
		t.Errorf("the search's sum is %.1f%% from the plan's prediction, more than the %.0f%% docs/auto.md states", 100*worst, 100*maxTrainingGap)
	}
}

// maxTrainingGap is the most, relative to the plan's prediction, that
// the search's sum for a training step is off on the examples
// (docs/auto.md, "Training steps").
const maxTrainingGap = 0.2

// TestOptimizerMemory checks what --optimizer adds to a training step's
// memory on auto_fsdp_mlp_backward: each weight's gradient, declared
// Shard(0) (8 KiB a device), under sgd and adam, and Adam's two float32
// moments of the weight's shard (2 × 32 KiB replicated) under adam; and
// that within 200 KiB Adam's state of replicated weights does not fit and
// the search shards them (FSDP).
func TestOptimizerMemory(t *testing.T) {
	src, err := os.ReadFile("../../testdata/examples/auto_fsdp_mlp_backward.yaml")
	if err != nil {
		t.Fatal(err)
	}
	type step struct {
		Peak    int64
		Weights string
	}
	got := map[string]step{}
	for _, tc := range []struct {
		name      string
		optimizer string
		budget    int64
	}{{"default", "", 0}, {"none", "none", 0}, {"sgd", "sgd", 0}, {"adam", "adam", 0}, {"adam within 200KiB", "adam", 200 << 10}} {
		res, err := Solve("fsdp.yaml", src, Options{Optimizer: tc.optimizer, MemoryBudget: tc.budget})
		if err != nil {
			t.Fatal(err)
		}
		s := step{Peak: res.PeakBytes >> 10}
		for _, d := range res.Decisions[:2] {
			s.Weights += d.Tensor + " " + d.Chosen + " "
		}
		got[tc.name] = s
	}
	replicated, sharded := "w1 [Replicate()] w2 [Replicate()] ", "w1 [Shard(0)] w2 [Shard(0)] "
	want := map[string]step{
		"default":            {176, replicated},
		"none":               {176, replicated},
		"sgd":                {176 + 2*8, replicated},
		"adam":               {176 + 2*(8+2*32), replicated},
		"adam within 200KiB": {176, sharded},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("peak KiB a device and weights (-want +got):\n%s", d)
	}
	if _, err := Solve("fsdp.yaml", src, Options{Optimizer: "lamb"}); err == nil || !strings.Contains(err.Error(), `optimizer "lamb"`) {
		t.Errorf("--optimizer lamb: %v, want an error naming it", err)
	}
}
