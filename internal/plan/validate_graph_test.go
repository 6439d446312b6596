package plan

import (
	"fmt"
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nvcomm/nvcomm/internal/diag"
)

// TestValidateGraph checks the step graph of a plan of format 2 on the
// Megatron MLP's plan (steps 0–2 local, computing y/product; step 3 an
// Allreduce of it): the streams' own order and after order the steps; a
// read that nothing orders after its write, and fields that do not make a
// graph, are problems.
func TestValidateGraph(t *testing.T) {
	const file = "../../testdata/examples/megatron_mlp.optimal.json"
	src, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	reads := func(step, writer int, buf string) string {
		typ := map[int]string{0: "Matmul", 1: "Pointwise", 2: "Matmul", 3: "Allreduce"}[step]
		return fmt.Sprintf("step %d (%s): devices 0, 1, 2 and 3 read %q, which step %d writes there, but nothing orders the two: the read may come first (add %d to after)",
			step, typ, buf, writer, writer)
	}
	tests := map[string]struct {
		format int
		edit   func(steps []Step)
		want   []string
	}{
		"as a sequence": {format: FormatGraph, edit: func(steps []Step) {
			for i := 1; i < len(steps); i++ {
				steps[i].After = []int{i - 1}
			}
		}},
		"the streams' order and one wait": {format: FormatGraph, edit: func(steps []Step) { steps[3].After = []int{2} }},
		"waiting for an earlier step orders after its stream's": {format: FormatGraph, edit: func(steps []Step) {
			steps[3].After = []int{2}
			steps[2].Stream = "second"
			steps[2].After = []int{1}
		}},
		"a read before its write": {format: FormatGraph, want: []string{reads(3, 2, "y/product")}},
		"another compute stream":  {format: FormatGraph, edit: func(steps []Step) { steps[1].Stream, steps[3].After = "aux", []int{2} }, want: []string{reads(1, 0, "h"), reads(2, 1, "a")}},
		"a format-1 plan":         {format: Format, edit: func(steps []Step) { steps[3].After = []int{2} }, want: []string{"step 3 (Allreduce): stream and after order the steps of a plan of format 2; this plan has format 1, whose steps run one after another"}},
		"a later step": {format: FormatGraph, edit: func(steps []Step) { steps[3].After = []int{2}; steps[1].After = []int{2} },
			want: []string{"step 1 (Pointwise): after[0] is 2, but a step waits only for earlier steps (0 to 0): the list of steps is an order the graph allows"}},
		"itself": {format: FormatGraph, edit: func(steps []Step) { steps[3].After = []int{3} },
			want: []string{"step 3 (Allreduce): after[0] is 3, but a step waits only for earlier steps (0 to 2): the list of steps is an order the graph allows"}},
		"twice": {format: FormatGraph, edit: func(steps []Step) { steps[3].After = []int{2, 2} },
			want: []string{"step 3 (Allreduce): after lists step 2 twice"}},
		"not a name": {format: FormatGraph, edit: func(steps []Step) { steps[3].After, steps[3].Stream = []int{2}, "Comm" },
			want: []string{`step 3 (Allreduce): stream "Comm" is not a name: lower-case letters, digits and _, starting with a letter, up to 32`}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			p, err := Decode(file, src)
			if err != nil {
				t.Fatal(err)
			}
			p.Format = tc.format
			if tc.edit != nil {
				tc.edit(p.Steps)
			}
			if diff := cmp.Diff(tc.want, messages(Validate(p))); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			// A plan of format 2 round-trips through both decoders.
			b, err := Marshal(p)
			if err != nil {
				t.Fatal(err)
			}
			fast, ok := fastDecode(b)
			slow, err := decodeLibrary("p.json", b)
			if !ok || err != nil {
				t.Fatalf("decoding the encoded plan: fast %v, library %v", ok, err)
			}
			if diff := cmp.Diff(slow, fast); diff != "" {
				t.Errorf("the decoders differ (-library +fast):\n%s", diff)
			}
			if diff := cmp.Diff(p.Steps, fast.Steps); diff != "" {
				t.Errorf("the steps do not round-trip (-want +got):\n%s", diff)
			}
		})
	}
}

// TestRaces checks the write-write and write-after-read races on steps
// made by hand: only the race check runs.
func TestRaces(t *testing.T) {
	copyStep := func(id int, stream, in, out string, after ...int) Step {
		return Step{ID: id, Kind: KindLocal, Type: Copy, Stream: stream, After: after, Devices: []int{0}, Input: in, Output: out}
	}
	tests := map[string]struct {
		steps []Step
		want  []string
	}{
		"two writes on two streams": {steps: []Step{copyStep(0, "", "a", "b"), copyStep(1, "aux", "a", "b")},
			want: []string{`step 1 (Copy): device 0 writes "b", which step 0 also writes there, and nothing orders the two: a race (add 0 to after)`}},
		"two writes in order": {steps: []Step{copyStep(0, "", "a", "b"), copyStep(1, "aux", "a", "b", 0)}},
		"a write while another stream reads": {steps: []Step{copyStep(0, "", "b", "c"), copyStep(1, "aux", "a", "b")},
			want: []string{`step 1 (Copy): device 0 writes "b", which step 0 reads there, and nothing orders the two: the read may see either value (add 0 to after)`}},
		"a write after the read, waited for": {steps: []Step{copyStep(0, "", "b", "c"), copyStep(1, "aux", "a", "b", 0)}},
		"ordered through a third stream":     {steps: []Step{copyStep(0, "", "a", "b"), copyStep(1, "x", "c", "d", 0), copyStep(2, "y", "b", "e", 1)}},
		"a wait on one stream orders nothing on another": {steps: []Step{copyStep(0, "", "a", "b"), copyStep(1, "x", "c", "d"), copyStep(2, "y", "b", "e", 1)},
			want: []string{`step 2 (Copy): device 0 reads "b", which step 0 writes there, but nothing orders the two: the read may come first (add 0 to after)`}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			v := &validator{p: &Plan{Format: FormatGraph, Steps: tc.steps}, probs: NewProblems()}
			v.checkRaces()
			if diff := cmp.Diff(tc.want, messages(v.probs.All())); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// messages are the texts of ds ("step 3 (Allgather): …"), nil for none.
func messages(ds []diag.Diagnostic) []string {
	var out []string
	for _, d := range ds {
		out = append(out, d.Text())
	}
	return out
}
