package ir_test

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nvcomm/nvcomm/internal/ir"
)

// TestStageOrder: each stage's order of forwards (mb) and backwards
// (−1 − mb) under GPipe and 1F1B, the warm-up of 1F1B capped by the
// micro-batches.
func TestStageOrder(t *testing.T) {
	tests := []struct {
		schedule             string
		stages, stage, micro int
		want                 string
	}{
		{ir.Schedule1F1B, 2, 0, 4, "F0 F1 B0 F2 B1 F3 B2 B3"},
		{ir.Schedule1F1B, 2, 1, 4, "F0 B0 F1 B1 F2 B2 F3 B3"},
		{ir.Schedule1F1B, 4, 0, 4, "F0 F1 F2 F3 B0 B1 B2 B3"},
		{ir.Schedule1F1B, 4, 1, 4, "F0 F1 F2 B0 F3 B1 B2 B3"},
		{ir.Schedule1F1B, 4, 0, 2, "F0 F1 B0 B1"},
		{ir.ScheduleGPipe, 4, 2, 3, "F0 F1 F2 B0 B1 B2"},
	}
	for _, tc := range tests {
		if got := phases(ir.StageOrder(tc.schedule, tc.stages, tc.stage, tc.micro)); got != tc.want {
			t.Errorf("StageOrder(%s, %d stages, stage %d, %d) = %s, want %s", tc.schedule, tc.stages, tc.stage, tc.micro, got, tc.want)
		}
	}
}

func phases(seq []int) string {
	var s []string
	for _, mb := range seq {
		if mb < 0 {
			s = append(s, "B"+string(rune('0'-1-mb)))
		} else {
			s = append(s, "F"+string(rune('0'+mb)))
		}
	}
	return strings.Join(s, " ")
}

// TestInterleavedOrder: each device group's slots under the interleaved
// schedule, F2@1 the forward of micro-batch 2 on stage 1: Megatron-LM's
// order, rounds of one micro-batch per group forward on chunks 0, 1 and
// backward on 1, 0, all forwards first when m = p.
func TestInterleavedOrder(t *testing.T) {
	tests := []struct {
		groups, v, rank, m int
		want               string
	}{
		{2, 2, 0, 4, "F0@0 F1@0 F0@2 F1@2 F2@0 B0@2 F3@0 B1@2 F2@2 B0@0 F3@2 B1@0 B2@2 B3@2 B2@0 B3@0"},
		{2, 2, 1, 4, "F0@1 F1@1 F0@3 B0@3 F1@3 B1@3 F2@1 B0@1 F3@1 B1@1 F2@3 B2@3 F3@3 B3@3 B2@1 B3@1"},
		{2, 2, 0, 2, "F0@0 F1@0 F0@2 F1@2 B0@2 B1@2 B0@0 B1@0"},
	}
	for _, tc := range tests {
		var got []string
		for _, s := range ir.InterleavedOrder(tc.groups, tc.v, tc.rank, tc.m) {
			phase := "F"
			if s.Backward {
				phase = "B"
			}
			got = append(got, fmt.Sprintf("%s%d@%d", phase, s.Microbatch, s.Stage))
		}
		if d := cmp.Diff(tc.want, strings.Join(got, " ")); d != "" {
			t.Errorf("InterleavedOrder(%d groups, v %d, rank %d, m %d) (-want +got):\n%s", tc.groups, tc.v, tc.rank, tc.m, d)
		}
	}
}

// TestPipelineExample: the 1F1B example is written once per micro-batch,
// each stage meeting its groups in 1F1B's order, the weight gradients
// accumulated over the micro-batches into tensors of their own names.
func TestPipelineExample(t *testing.T) {
	f := parseExample(t, "pipeline_1f1b.yaml", nil)
	if f.Pipeline == nil || len(f.Pipeline.Stages) != 2 || f.Pipeline.Microbatches != 4 {
		t.Fatalf("pipeline = %+v", f.Pipeline)
	}
	// The forward ops' groups on each stage, and the order of the
	// stages' weight gradients' partial sums.
	got := map[string][]string{}
	for _, op := range f.Ops {
		name := op.Out.Name
		at := strings.Index(name, "@mb")
		if at < 0 {
			continue
		}
		phase := "F"
		if op.Of != nil && op.Of.Grad {
			phase = "B"
		}
		label := phase + name[at+3:at+4]
		if l := got[op.Out.Mesh.Name]; len(l) == 0 || l[len(l)-1] != label {
			got[op.Out.Mesh.Name] = append(l, label)
		}
	}
	want := map[string][]string{
		"stage0": strings.Fields("F0 F1 B0 F2 B1 F3 B2 B3"),
		"stage1": strings.Fields("F0 B0 F1 B1 F2 B2 F3 B3"),
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("each stage's groups (-want +got):\n%s", d)
	}
	var outs []string
	for _, o := range f.Outputs {
		if strings.HasSuffix(o.Name, ".grad") {
			outs = append(outs, o.Name+" "+fmtInts(o.Shape()))
		}
	}
	slices.Sort(outs)
	if d := cmp.Diff([]string{"w1.grad [16 8]", "w2.grad [8 16]", "w3.grad [16 8]", "w4.grad [8 16]"}, outs); d != "" {
		t.Errorf("gradient outputs (-want +got):\n%s", d)
	}
	x := f.Tensor("x@mb3")
	if x == nil || fmtInts(x.Shape()) != "[4 8]" {
		t.Errorf("x@mb3 = %v, want a [4 8] block of x", x)
	}
	acc := f.Tensor("w1.grad@acc2")
	if acc == nil || acc.Producer == nil || acc.Producer.Kind != "add" {
		t.Errorf("w1.grad@acc2 is not an accumulation: %v", acc)
	}
}

func fmtInts(xs []int) string { return fmt.Sprint(xs) }

// parseExample parses testdata/examples/name with the replacements
// edits (old, new pairs) made to its text.
func parseExample(t *testing.T, name string, edits []string) *ir.Fusion {
	t.Helper()
	f, err := ir.Parse("in.yaml", []byte(editedExample(t, name, edits)))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func editedExample(t *testing.T, name string, edits []string) string {
	t.Helper()
	src, err := os.ReadFile("../../testdata/examples/" + name)
	if err != nil {
		t.Fatal(err)
	}
	s := string(src)
	for i := 0; i+1 < len(edits); i += 2 {
		if !strings.Contains(s, edits[i]) {
			t.Fatalf("%s has no %q", name, edits[i])
		}
		s = strings.Replace(s, edits[i], edits[i+1], 1)
	}
	return s
}

// TestPipelineErrors: a pipeline section's mistakes are positioned
// errors that say what was expected.
func TestPipelineErrors(t *testing.T) {
	const section = "pipeline: {stages: [stage0, stage1], microbatches: 4, schedule: 1f1b, inputs: [x, dz]}"
	tests := []struct {
		name  string
		edits []string
		want  string
	}{
		{"microbatches not dividing the batch", []string{"microbatches: 4", "microbatches: 3"},
			`in.yaml:32:52: error: pipeline microbatches: 3 does not divide dim 0 of "x", of extent 16; micro-batches are equal blocks of the batch: use a divisor of 16
in.yaml:32:52: error: pipeline microbatches: 3 does not divide dim 0 of "dz", of extent 16; micro-batches are equal blocks of the batch: use a divisor of 16`},
		{"a stage not a mesh", []string{"[stage0, stage1]", "[stage0, stag1]"},
			`in.yaml:32:29: error: pipeline stages: "stag1" is not a mesh of the fusion (meshes: stage0, stage1); did you mean "stage1"?`},
		{"a stage twice", []string{"[stage0, stage1]", "[stage0, stage0]"},
			`in.yaml:32:29: error: pipeline stages: mesh "stage0" is listed twice`},
		{"unknown schedule", []string{"schedule: 1f1b", "schedule: 1fb1"},
			`in.yaml:32:65: error: pipeline schedule: unknown schedule "1fb1" (known: 1f1b, gpipe, interleaved); did you mean "1f1b"?`},
		{"interleaved", []string{"schedule: 1f1b", "schedule: interleaved"},
			`in.yaml:32:11: error: pipeline stages: schedule interleaved needs each of the p device groups to hold at least two stages; 2 stages on 2 groups; list each device group's stages in turn: stage s runs on the devices of stage s mod p`},
		{"interleaved: a stage off its group", []string{"  stage3: [2, 3]", "  stage3: [3, 2, 4]"},
			`in.yaml:49:45: error: pipeline stages: stage 3 (mesh "stage3") is on devices [3 2 4], want those of stage 1 (mesh "stage1"), [2 3]; ` +
				`list each device group's stages in turn: stage s runs on the devices of stage s mod p`},
		{"interleaved: micro-batches not in rounds", []string{"microbatches: 4", "microbatches: 1"},
			"in.yaml:49:68: error: pipeline microbatches: schedule interleaved runs the micro-batches in rounds of one per device group; " +
				"1 is no multiple of the 2 groups; use a multiple of 2"},
		{"interleaved: groups of one stage", []string{"  stage2: [0, 1]\n  stage3: [2, 3]", "  stage2: [4, 5]\n  stage3: [6, 7]"},
			"in.yaml:49:11: error: pipeline stages: schedule interleaved needs each of the p device groups to hold at least two stages; " +
				"4 stages on 4 groups; list each device group's stages in turn: stage s runs on the devices of stage s mod p"},
		{"an input not of the fusion", []string{"inputs: [x, dz]", "inputs: [x, dz, h]"},
			`in.yaml:32:87: error: pipeline inputs: "h" is not an input of the fusion (inputs: x, w1, w2, w3, w4, dz); did you mean "x"?`},
		{"a batch axis out of range", []string{"inputs: [x, dz]", "batch_axis: 2, inputs: [x, dz]"},
			`in.yaml:32:83: error: pipeline batch_axis: 2 is not a dimension of "x", of shape [16, 8]; batch_axis is a dimension of every input listed, 0 when left out
in.yaml:32:83: error: pipeline batch_axis: 2 is not a dimension of "dz", of shape [16, 8]; batch_axis is a dimension of every input listed, 0 when left out`},
		{"a seed's gradient not cut", []string{"inputs: [x, dz]", "inputs: [x]"},
			`in.yaml:28:5: error: ops[10]: matmul reads "z.grad/dw_dyt" whole, but its dim 1 is the batch axis of "a1", which is cut into micro-batches; it is computed from dz: list the one that holds the batch among the pipeline's inputs`},
		{"a missing key", []string{"microbatches: 4, ", ""},
			`in.yaml:32:11: error: pipeline: missing key "microbatches"; pipeline: {stages: [s0, s1], microbatches: 4, schedule: 1f1b, inputs: [x, dy]}`},
		{"an op on no stage", []string{"  stage1: [2, 3]\n", "  stage1: [2, 3]\n  other: [4, 5]\n", "x1: {mesh: stage1", "x1: {mesh: other"},
			`in.yaml:26:5: error: ops[3]: set writes "x1" on mesh "other", which is no stage of the pipeline (stages: stage0, stage1); list the mesh among the pipeline's stages, or put the op on a stage's mesh
in.yaml:27:5: error: ops[16]: matmul writes "w3.grad" on mesh "other", which is no stage of the pipeline (stages: stage0, stage1); list the mesh among the pipeline's stages, or put the op on a stage's mesh`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			example := "pipeline_1f1b.yaml"
			if strings.HasPrefix(tc.name, "interleaved:") {
				example = "pipeline_interleaved.yaml"
			}
			src := editedExample(t, example, tc.edits)
			if !strings.Contains(src, "pipeline:") {
				t.Fatalf("no section %q", section)
			}
			_, err := ir.Parse("in.yaml", []byte(src))
			if err == nil {
				t.Fatal("Parse: no error")
			}
			if d := cmp.Diff(tc.want, strings.TrimSpace(err.Error())); d != "" {
				t.Errorf("Parse errors (-want +got):\n%s", d)
			}
		})
	}
}
