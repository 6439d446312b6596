package auto

import (
	"errors"
	"os"
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
// ops are counted and follow propagation, the forward's time is what the
// search minimised and the headline is the whole step's plan.
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
	forward, err := Solve("forward.yaml", []byte(src[:strings.Index(src, "backward:")]), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.BackwardOps == 0 || res.Forward != forward.summed || res.summed != forward.summed {
		t.Errorf("backward ops %d, forward %g s, searched %g s; the forward alone: %g s", res.BackwardOps, res.Forward, res.summed, forward.summed)
	}
	if res.Seconds <= res.Forward {
		t.Errorf("the step's %g s is no more than its forward's %g s", res.Seconds, res.Forward)
	}
	if s, ok := predictFusion("train.yaml", res.Fusion, lower.Options{Topology: cost.Default()}); !ok || s != res.Seconds {
		t.Errorf("the chosen fusion's plan predicts %g s (lowers: %v), the headline %g s", s, ok, res.Seconds)
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
// op, is held to the forward's end either way.
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
	want := map[string]int64{"kept": 144 << 10, "resharded": 112 << 10}
	if d := cmp.Diff(want, peak); d != "" {
		t.Errorf("peak bytes per device (-want +got):\n%s", d)
	}
}
