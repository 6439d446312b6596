package explain

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nvcomm/nvcomm/internal/plan"
)

// inner, outer and par build schedule steps.
func inner(axis, f int) plan.ScheduleStep {
	return plan.ScheduleStep{Split: &plan.SplitArgs{Axis: axis, Factor: f}}
}

func outer(axis, f int) plan.ScheduleStep {
	return plan.ScheduleStep{OuterSplit: &plan.SplitArgs{Axis: axis, Factor: f}}
}

func par(axis int, typ string) plan.ScheduleStep {
	return plan.ScheduleStep{Parallelize: &plan.ParallelizeArgs{Axis: axis, Type: typ}}
}

// onePlan is a plan of one input tensor on mesh m.
func onePlan(mesh plan.Mesh, t plan.Tensor) *plan.Plan {
	t.Name, t.DType, t.Mesh = "t", "float32", "m"
	return &plan.Plan{Fusion: "f", Policy: "optimal", Meshes: map[string]plan.Mesh{"m": mesh}, Tensors: []plan.Tensor{t}}
}

var (
	mesh4  = plan.Mesh{Shape: []int{4}, Devices: []int{0, 1, 2, 3}}
	mesh24 = plan.Mesh{Shape: []int{2, 4}, Devices: []int{0, 1, 2, 3, 4, 5, 6, 7}}
)

// TestSharding checks the placements, DTensor's or nvcomm's, and the index
// ranges of device 1 (mesh coordinates (1) or (0, 1)) on each kind of split.
func TestSharding(t *testing.T) {
	tests := map[string]struct {
		mesh     plan.Mesh
		tensor   plan.Tensor
		want     string // placements
		dtensor  bool
		device1  []string // indexSet of each value axis for device 1
		noteHint string   // a substring of the notes, if any
	}{
		"replicated":   {mesh4, plan.Tensor{Shape: []int{8}}, "[Replicate()]", true, []string{":"}, ""},
		"block":        {mesh4, plan.Tensor{Shape: []int{8, 4}, Schedule: []plan.ScheduleStep{outer(0, 4), par(0, "DIDx")}}, "[Shard(0)]", true, []string{"2:4", ":"}, ""},
		"strided":      {mesh4, plan.Tensor{Shape: []int{12}, Schedule: []plan.ScheduleStep{inner(0, 4), par(1, "DIDx")}}, "[Shard(0, strided)]", false, []string{"1:10:4"}, "i % 4 = c"},
		"nested":       {mesh4, plan.Tensor{Shape: []int{16}, Schedule: []plan.ScheduleStep{outer(0, 2), inner(1, 2), outer(1, 4), par(1, "DIDx")}}, "[Shard(0, nested)]", false, []string{"2:4, 10:12"}, "(i / 2) % 4 = c"},
		"uneven":       {mesh4, plan.Tensor{Shape: []int{10}, Schedule: []plan.ScheduleStep{outer(0, 4), par(0, "DIDx")}}, "[Shard(0)]", true, []string{"3:6"}, "blocks of 3, the last 1"},
		"2-D":          {mesh24, plan.Tensor{Shape: []int{8, 16}, Schedule: []plan.ScheduleStep{outer(1, 4), par(1, "DIDx"), outer(0, 2), par(0, "DIDy")}}, "[Shard(0), Shard(1)]", true, []string{"0:4", "4:8"}, ""},
		"DTensor nest": {mesh24, plan.Tensor{Shape: []int{16}, Schedule: []plan.ScheduleStep{outer(0, 2), par(0, "DIDy"), outer(1, 4), par(1, "DIDx")}}, "[Shard(0), Shard(0)]", true, []string{"2:4"}, ""},
		"nest against mesh order": {mesh24, plan.Tensor{Shape: []int{16}, Schedule: []plan.ScheduleStep{outer(0, 4), par(0, "DIDx"), outer(1, 2), par(1, "DIDy")}},
			"[Shard(0, nested), Shard(0)]", false, []string{"4:6"}, "nested split over DIDy"},
		"merged": {mesh4, plan.Tensor{Shape: []int{2, 8}, Schedule: []plan.ScheduleStep{{Merge: &plan.AxisArgs{Axis: 0}}, outer(0, 4), par(0, "DIDx")}},
			"[Shard(0·1, merged)]", false, nil, "dims 0, 1 merged, then split over DIDx"},
		"partial result": {mesh4, plan.Tensor{Shape: []int{8, 16}, ReductionAxes: []int{1}, Schedule: []plan.ScheduleStep{outer(1, 4), par(1, "DIDx")}},
			"[Replicate()]", true, []string{":"}, "reduced over DIDx: the op's sum runs over a dim split along DIDx and combines the partial results across those devices itself"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			p := onePlan(tc.mesh, tc.tensor)
			s, err := analyze(p, p.Tensors[0])
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, s.placements("sum")); diff != "" {
				t.Errorf("placements (-want +got):\n%s", diff)
			}
			if got := s.isDTensor("sum"); got != tc.dtensor {
				t.Errorf("isDTensor = %v, want %v", got, tc.dtensor)
			}
			if tc.device1 != nil {
				c := coords(s.Mesh, 1)
				var got []string
				for a := range s.Axes {
					got = append(got, s.indexSet(c, a))
				}
				if diff := cmp.Diff(tc.device1, got); diff != "" {
					t.Errorf("device 1's indices (-want +got):\n%s", diff)
				}
			}
			if notes := strings.Join(s.notes("sum"), "\n"); !strings.Contains(notes, tc.noteHint) {
				t.Errorf("notes lack %q:\n%s", tc.noteHint, notes)
			}
		})
	}
}

// TestBadSchedule: a schedule that does not replay is reported on the
// tensor's line, never a panic.
func TestBadSchedule(t *testing.T) {
	for name, sched := range map[string][]plan.ScheduleStep{
		"split out of range":     {inner(3, 2)},
		"split by 0":             {inner(0, 0)},
		"merge of the last axis": {{Merge: &plan.AxisArgs{Axis: 0}}},
		"reorder not a perm":     {{Reorder: []int{0, 0}}},
		"parallelize far":        {par(5, "DIDx")},
		"empty step":             {{}},
	} {
		p := onePlan(mesh4, plan.Tensor{Shape: []int{8}, Schedule: sched})
		var b bytes.Buffer
		if err := Write(&b, p, All()); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !strings.Contains(b.String(), "t  float32 [8] on m: tensor t: schedule step 0:") {
			t.Errorf("%s: no error on the tensor's line:\n%s", name, b.String())
		}
	}
	p := onePlan(mesh4, plan.Tensor{Shape: []int{8}})
	p.Tensors[0].Mesh = "nope"
	var b bytes.Buffer
	if err := Write(&b, p, All()); err != nil || !strings.Contains(b.String(), `unknown mesh "nope"`) {
		t.Errorf("unknown mesh: %v\n%s", err, b.String())
	}
}

func TestCheck(t *testing.T) {
	p := onePlan(mesh4, plan.Tensor{Shape: []int{8}})
	tests := map[string]struct {
		o    Options
		want string
	}{
		"all":        {Options{Op: -1}, ""},
		"tensor":     {Options{Op: -1, Tensor: "t"}, ""},
		"no tensor":  {Options{Op: -1, Tensor: "u"}, `no tensor "u" in f (tensors: t)`},
		"no op":      {Options{Op: 0}, "no op 0 in f: it has ops 0 to -1"},
		"op and all": {Options{Op: -1}, ""},
	}
	for name, tc := range tests {
		got := ""
		if err := tc.o.Check(p); err != nil {
			got = err.Error()
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", name, diff)
		}
	}
}

func TestSeconds(t *testing.T) {
	for x, want := range map[float64]string{0: "0 s", -1: "0 s", 1.2345e-6: "1.23 µs", 2.3456e-4: "235 µs", 1.5e-3: "1.5 ms", 9.996e-4: "1 ms", 4.2e-9: "4.2 ns"} {
		if got := Seconds(x); got != want {
			t.Errorf("Seconds(%g) = %q, want %q", x, got, want)
		}
	}
}

func TestDeviceList(t *testing.T) {
	for want, ids := range map[string][]int{"none": nil, "0": {0}, "0,1": {0, 1}, "0-3": {0, 1, 2, 3}, "0,4": {0, 4}, "0-2,5,7-9": {0, 1, 2, 5, 7, 8, 9}} {
		if got := deviceList(ids); got != want {
			t.Errorf("deviceList(%v) = %q, want %q", ids, got, want)
		}
	}
}

// TestColor: colour only when asked, and the same text either way.
func TestColor(t *testing.T) {
	p := decode(t, "../../testdata/examples/dp_tp_mlp.optimal.json")
	var plain, coloured bytes.Buffer
	o := All()
	if err := Write(&plain, p, o); err != nil {
		t.Fatal(err)
	}
	o.Color = true
	if err := Write(&coloured, p, o); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(plain.String(), "\x1b[") {
		t.Error("colour without Color")
	}
	if !strings.Contains(coloured.String(), "\x1b[") {
		t.Error("no colour with Color")
	}
	if diff := cmp.Diff(plain.String(), stripANSI(coloured.String())); diff != "" {
		t.Errorf("coloured text differs (-plain +coloured):\n%s", diff)
	}
}

// stripANSI removes SGR escape sequences.
func stripANSI(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == 0x1b && i+1 < len(s) && s[i+1] == '[' {
			j := i + 2
			for j < len(s) && s[j] != 'm' {
				j++
			}
			i = j
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// TestFilter: --tensor shows one tensor and no ops, --op one op and no
// tensors.
func TestFilter(t *testing.T) {
	p := decode(t, "../../testdata/examples/megatron_mlp.optimal.json")
	tests := map[string]struct {
		o          Options
		want, lack []string
	}{
		"tensor": {Options{Op: -1, Tensor: "w2"}, []string{"\nw2  float32 [16, 32] on tp, given\n"}, []string{"\nx  ", "\nOps\n"}},
		"op":     {Options{Op: 2}, []string{"op 2: y = linear(a, w2)", "Allreduce"}, []string{"\nTensors\n", "op 0:"}},
		"both":   {Options{Op: 1, Tensor: "a"}, []string{"\na  float32", "op 1: a = relu(h)"}, []string{"\nx  ", "op 2:"}},
	}
	for name, tc := range tests {
		var b bytes.Buffer
		if err := Write(&b, p, tc.o); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, w := range tc.want {
			if !strings.Contains(b.String(), w) {
				t.Errorf("%s: lacks %q", name, w)
			}
		}
		for _, l := range tc.lack {
			if strings.Contains(b.String(), l) {
				t.Errorf("%s: has %q", name, l)
			}
		}
	}
}

// TestColorAuto: no colour for buffers and files, whatever NO_COLOR says.
func TestColorAuto(t *testing.T) {
	f, err := os.CreateTemp(t.TempDir(), "out")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if ColorAuto(&bytes.Buffer{}) || ColorAuto(f) {
		t.Error("colour for a buffer or a file")
	}
	t.Setenv("NO_COLOR", "1")
	if ColorAuto(os.Stdout) {
		t.Error("colour with NO_COLOR")
	}
}

// TestFourDimMesh: a mesh of more axes than device types (no valid plan
// has one) names its axes by number rather than failing.
func TestFourDimMesh(t *testing.T) {
	p := onePlan(plan.Mesh{Shape: []int{1, 1, 1, 2}, Devices: []int{0, 1}}, plan.Tensor{Shape: []int{4}})
	var b bytes.Buffer
	if err := Write(&b, p, All()); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "axis 0: mesh axis 0") {
		t.Errorf("no numbered axis:\n%s", b.String())
	}
}
