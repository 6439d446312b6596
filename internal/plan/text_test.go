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
			{Name: "p", DType: "float32", Mesh: "m", Shape: []int{4, 8}, Partial: "sum",
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
		"no partial field":         func(p *Plan) { p.Tensors[0].Partial = "" },
		"not a reduce op":          func(p *Plan) { p.Tensors[0].Partial = "set" },
		"another reduce op":        func(p *Plan) { p.Tensors[0].Partial = "max" },
		"reduction axes":           func(p *Plan) { p.Tensors[0].ReductionAxes = []int{1} },
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

// TestWriteTextSplitSizes: after the steps, WriteText shows each
// AllToAllV's split sizes as an aligned matrix, row k what rank k sends;
// a plan without one shows none.
func TestWriteTextSplitSizes(t *testing.T) {
	var b bytes.Buffer
	if err := WriteText(&b, allToAllVPlan()); err != nil {
		t.Fatal(err)
	}
	want := "\nsplit sizes (AllToAllV, in elements: row k is what rank k sends to ranks 0, 1, …; one matrix for every team):\n" +
		"  step 0  rank 0:  1000   600   300   148\n" +
		"          rank 1:    48  1000   700   300\n" +
		"          rank 2:   500   148  1000   400\n" +
		"          rank 3:   500   300    48  1200\n"
	if !strings.HasSuffix(b.String(), want) {
		t.Errorf("WriteText does not end with the split sizes %q:\n%s", want, b.String())
	}
	b.Reset()
	if err := WriteText(&b, allToAllPlan()); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "split sizes") {
		t.Errorf("a plan without an AllToAllV shows split sizes:\n%s", b.String())
	}
}

func TestSplitSizesText(t *testing.T) {
	square := func(n int) [][]int {
		m := make([][]int, n)
		for k := range m {
			m[k] = make([]int, n)
			m[k][k] = k
		}
		return m
	}
	tests := map[string]struct {
		id     int
		counts [][]int
		want   string
	}{
		"none": {3, nil, "  step 3  none\n"},
		"one rank": {0, [][]int{{5}}, "" +
			"  step 0  rank 0:  5\n"},
		"widths": {2, [][]int{{7, 12345, 0}, {12345, 0, 7}, {1, 1, 12350}}, "" +
			"  step 2  rank 0:      7  12345      0\n" +
			"          rank 1:  12345      0      7\n" +
			"          rank 2:      1      1  12350\n"},
		"malformed rows shown as given": {1, [][]int{{1, -2}, {3}}, "" +
			"  step 1  rank 0:   1  -2\n" +
			"          rank 1:   3\n"},
	}
	for name, tc := range tests {
		if diff := cmp.Diff(tc.want, splitSizesText(tc.id, tc.counts)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", name, diff)
		}
	}
	// Rank labels of two digits pad the others.
	ranks := strings.Split(splitSizesText(12, square(11)), "\n")
	if want := "  step 12  rank 0:    0   0   0   0   0   0   0   0   0   0   0"; ranks[0] != want {
		t.Errorf("rank 0's line of 11:\n got %q\nwant %q", ranks[0], want)
	}
	if want := "           rank 10:   0   0   0   0   0   0   0   0   0   0  10"; ranks[10] != want {
		t.Errorf("rank 10's line of 11:\n got %q\nwant %q", ranks[10], want)
	}
	// A team of 20: 16 ranks along each side, the rest counted.
	got := strings.Split(splitSizesText(0, square(20)), "\n")
	if len(got) != 18 || got[17] != "" {
		t.Fatalf("a 20x20 matrix renders %d lines, want 16 ranks and a count:\n%s", len(got), strings.Join(got, "\n"))
	}
	if want := "          rank 15:   0   0   0   0   0   0   0   0   0   0   0   0   0   0   0  15  … 4 more"; got[15] != want {
		t.Errorf("rank 15's line:\n got %q\nwant %q", got[15], want)
	}
	if want := "          … 4 more ranks"; got[16] != want {
		t.Errorf("last line:\n got %q\nwant %q", got[16], want)
	}
}
