package plan

import (
	"bytes"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestSize(t *testing.T) {
	for n, want := range map[int64]string{
		0:           "0 B",
		768:         "768 B",
		1536:        "1.5 KiB",
		4 << 20:     "4.0 MiB",
		25367150592: "24 GiB",
		-1:          "-1 B",
	} {
		if got := Size(n); got != want {
			t.Errorf("Size(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestStepDevices(t *testing.T) {
	tests := map[string]struct {
		step Step
		want string
	}{
		"collective":      {Step{Kind: KindCollective, Type: Allgather, Teams: [][]int{{0, 1}, {2, 3}}}, "[0 1] [2 3]"},
		"slice has teams": {Step{Kind: KindLocal, Type: Slice, Teams: [][]int{{0, 1}, {2, 3}}}, "[0 1] [2 3]"},
		"local":           {Step{Kind: KindLocal, Type: Permute, Devices: []int{0, 1, 2}}, "[0 1 2]"},
	}
	for name, tc := range tests {
		if diff := cmp.Diff(tc.want, StepDevices(&tc.step)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", name, diff)
		}
	}
}

// partialPlan is a set from a Partial(sum) input p [8] on 4 devices (p's
// plan shape [4, 8], axis 0 whole on DIDx), then a set of the result.
func partialPlan() *Plan {
	zero := 0
	return &Plan{
		Meshes: map[string]Mesh{"m": {Shape: []int{4}, Devices: []int{0, 1, 2, 3}}},
		Tensors: []Tensor{
			{Name: "p", DType: "float32", Mesh: "m", Shape: []int{4, 8},
				Schedule: []ScheduleStep{{Parallelize: &ParallelizeArgs{Axis: 0, Type: "DIDx"}}}},
			{Name: "y", DType: "float32", Mesh: "m", Shape: []int{4, 8}, ReductionAxes: []int{0}},
			{Name: "z", DType: "float32", Mesh: "m", Shape: []int{8}},
		},
		Ops: []Op{
			{Index: 0, Op: "sum", Input: "p", Output: "y", Axis: &zero},
			{Index: 1, Op: "set", Input: "y", Output: "z"},
		},
		Steps: []Step{
			{ID: 0, Op: 0, Expr: "y = sum(p, axis=0)", Kind: KindCollective, Type: Allreduce, Teams: [][]int{{0, 1, 2, 3}}},
			{ID: 1, Op: 1, Expr: "z = set(y)", Kind: KindLocal, Type: Copy, Devices: []int{0, 1, 2, 3}},
		},
	}
}

func TestPartialInputOf(t *testing.T) {
	p := partialPlan()
	got, ok := PartialInputOf(p, "p")
	if diff := cmp.Diff(PartialInput{Op: "sum", Type: "DIDx"}, got); !ok || diff != "" {
		t.Errorf("PartialInputOf(p) = %v (-want +got):\n%s", ok, diff)
	}
	for _, name := range []string{"y", "z", "nope"} {
		if _, ok := PartialInputOf(p, name); ok {
			t.Errorf("PartialInputOf(%s) = true, want false", name)
		}
	}
}

// TestPartialInputOfNot lists the tensors that look like Partial inputs
// but are not.
func TestPartialInputOfNot(t *testing.T) {
	tests := map[string]func(p *Plan){
		"axis 0 split first": func(p *Plan) {
			p.Tensors[0].Schedule = []ScheduleStep{{OuterSplit: &SplitArgs{Axis: 0, Factor: 4}}, {Parallelize: &ParallelizeArgs{Axis: 0, Type: "DIDx"}}}
		},
		"extent is not the mesh's": func(p *Plan) { p.Tensors[0].Shape = []int{2, 8} },
		"read by another op":       func(p *Plan) { p.Ops[1].Input = "p" },
		"produced by an op":        func(p *Plan) { p.Ops[1].Output = "p" },
		"reduced over axis 1":      func(p *Plan) { one := 1; p.Ops[0].Axis = &one },
		"bad schedule":             func(p *Plan) { p.Tensors[0].Schedule[0].Parallelize.Axis = 7 },
		"unknown mesh":             func(p *Plan) { p.Tensors[0].Mesh = "nope" },
	}
	for name, edit := range tests {
		p := partialPlan()
		edit(p)
		if pi, ok := PartialInputOf(p, "p"); ok {
			t.Errorf("%s: PartialInputOf(p) = %v, want false", name, pi)
		}
	}
}

func TestWriteTextUnits(t *testing.T) {
	p := partialPlan()
	p.Steps[0].Bytes = &Bytes{SentPerDevice: 48, ReceivedPerDevice: 1 << 20, LowerBound: 1536}
	p.Steps[0].Count = Count{Input: 1234567, Output: 8}
	p.Summary.BytesReceivedMax = 1 << 20
	p.Summary.Collectives, p.Summary.LocalSteps = 1, 1
	var b bytes.Buffer
	if err := WriteText(&b, p); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"max received per device 1.0 MiB", "y = sum(p, axis=0), resolves Partial(sum)  Allreduce", "z = set(y)  ",
		"(policy ): 1 collective, 1 local step, ",
		"partial terms:\n  p: dim 0 holds one term per device along DIDx, reduced with sum by op 0: a set from a Partial(sum) input reads so\n", "1,234,567/8", "48 B", "1.0 MiB", "1.5 KiB"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("WriteText lacks %q:\n%s", want, b.String())
		}
	}
	if strings.Contains(b.String(), "z = set(y), resolves") {
		t.Errorf("a set of a tensor that holds no terms resolves a Partial:\n%s", b.String())
	}
}
