package plan

import (
	"reflect"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nvcomm/nvcomm/internal/diag"
)

// validateBothWays returns Validate(p) with tensors alike skipped, and as
// every tensor checked on its own.
func validateBothWays(p *Plan) (alike, alone []diag.Diagnostic) {
	return Validate(p), validate(p, false)
}

// withTwins returns p with a copy of each of base's tensors, renamed,
// before its own: every tensor of p comes after one alike the tensor
// before its edit, which checkTensorOnce may have checked without a
// problem.
func withTwins(p, base *Plan) *Plan {
	q := *p
	q.Tensors = nil
	for _, twin := range base.Tensors {
		twin.Name += "'"
		q.Tensors = append(q.Tensors, twin)
	}
	q.Tensors = append(q.Tensors, p.Tensors...)
	return &q
}

// TestValidateTensorsAlike: skipping the checks of tensors alike changes
// nothing Validate finds, on every case of TestValidate with the
// unedited tensors' twins before the edited ones, and on every golden
// plan and its tensors' twins.
func TestValidateTensorsAlike(t *testing.T) {
	var cases []validateCase
	for _, f := range []func() []validateCase{planCases, tensorCases, opCases, stepCases, rootCases, bufferCases, countCases,
		allToAllVCases, localFieldCases, coverageCases, summaryCases, padCases, scheduleCases, opOutputCases,
		certificateCases, flowCases, layerOpCases, computeStepCases} {
		cases = append(cases, f()...)
	}
	for _, tc := range cases {
		base := tc.base
		if base == nil {
			base = allgatherPlan
		}
		p := clonePlan(t, base())
		tc.mutate(p)
		q := withTwins(p, base())
		alike, alone := validateBothWays(q)
		if diff := cmp.Diff(alone, alike); diff != "" {
			t.Errorf("%s: Validate with tensors alike skipped differs (-alone +alike):\n%s", tc.name, diff)
		}
	}
	files, plans := decodedGoldens(t)
	for _, file := range files {
		p := plans[file]
		alike, alone := validateBothWays(withTwins(p, p))
		if diff := cmp.Diff(alone, alike); diff != "" {
			t.Errorf("%s: Validate with tensors alike skipped differs (-alone +alike):\n%s", file, diff)
		}
	}
}

// TestTensorKeyFields lists the fields of Tensor and of the types it
// holds: a field added to one must be in appendTensorKey, and this list
// updated with it.
func TestTensorKeyFields(t *testing.T) {
	got := map[string][]string{}
	for _, typ := range []reflect.Type{reflect.TypeFor[Tensor](), reflect.TypeFor[ScheduleStep](), reflect.TypeFor[SplitArgs](),
		reflect.TypeFor[AxisArgs](), reflect.TypeFor[ParallelizeArgs](), reflect.TypeFor[Sharding]()} {
		for f := range typ.Fields() {
			got[typ.Name()] = append(got[typ.Name()], f.Name)
		}
	}
	want := map[string][]string{
		"Tensor": {"Name", "DType", "Mesh", "Shape", "ReductionAxes", "Schedule", "Allocation", "Sharding", "LocalShape",
			"PaddedShape", "Layout", "Partial", "Propagated"},
		"ScheduleStep":    {"Split", "OuterSplit", "Merge", "Reorder", "Parallelize"},
		"SplitArgs":       {"Axis", "Factor"},
		"AxisArgs":        {"Axis"},
		"ParallelizeArgs": {"Axis", "Type"},
		"Sharding":        {"Type", "LogicalAxis", "ShapeAxis", "Kind", "LogicalAxes"},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("the fields of a plan's tensors changed: update appendTensorKey, then this list (-want +got):\n%s", d)
	}
}

// TestTensorKey: tensors that differ in one field other than the name, a
// nil list from an empty one and an absent pointer from a present one
// included, have different keys; a tensor renamed has its key.
func TestTensorKey(t *testing.T) {
	base := func() Tensor {
		return Tensor{Name: "x", DType: "float32", Mesh: "m", Shape: []int{8, 16}, ReductionAxes: []int{1},
			Schedule: []ScheduleStep{
				{Split: &SplitArgs{Axis: 0, Factor: 2}}, {OuterSplit: &SplitArgs{Axis: 1, Factor: 2}}, {Merge: &AxisArgs{Axis: 0}},
				{Reorder: []int{1, 0}}, {Parallelize: &ParallelizeArgs{Axis: 0, Type: "DIDx"}},
			},
			Allocation: []int{1, 0}, Sharding: []Sharding{{Type: "DIDx", LogicalAxis: 0, ShapeAxis: new(1), Kind: "merged", LogicalAxes: []int{0, 1}}},
			LocalShape: []int{4, 16}, PaddedShape: []int{8, 16}, Layout: []int{0}}
	}
	edits := map[string]func(t *Tensor){
		"base":                func(*Tensor) {},
		"dtype":               func(t *Tensor) { t.DType = "bfloat16" },
		"mesh":                func(t *Tensor) { t.Mesh = "n" },
		"mesh and dtype swap": func(t *Tensor) { t.DType, t.Mesh = t.Mesh, t.DType },
		"shape":               func(t *Tensor) { t.Shape[0] = 9 },
		"shape nil":           func(t *Tensor) { t.Shape = nil },
		"shape empty":         func(t *Tensor) { t.Shape = []int{} },
		"reduction axes":      func(t *Tensor) { t.ReductionAxes = nil },
		"reduction empty":     func(t *Tensor) { t.ReductionAxes = []int{} },
		"schedule nil":        func(t *Tensor) { t.Schedule = nil },
		"schedule empty":      func(t *Tensor) { t.Schedule = []ScheduleStep{} },
		"split axis":          func(t *Tensor) { t.Schedule[0].Split.Axis = 1 },
		"split factor":        func(t *Tensor) { t.Schedule[0].Split.Factor = 4 },
		"split absent":        func(t *Tensor) { t.Schedule[0].Split = nil },
		"split as outer":      func(t *Tensor) { t.Schedule[0].Split, t.Schedule[0].OuterSplit = nil, t.Schedule[0].Split },
		"outer split":         func(t *Tensor) { t.Schedule[1].OuterSplit.Factor = 4 },
		"merge":               func(t *Tensor) { t.Schedule[2].Merge.Axis = 1 },
		"merge absent":        func(t *Tensor) { t.Schedule[2].Merge = nil },
		"reorder":             func(t *Tensor) { t.Schedule[3].Reorder = []int{0, 1} },
		"reorder empty":       func(t *Tensor) { t.Schedule[3].Reorder = []int{} },
		"reorder nil":         func(t *Tensor) { t.Schedule[3].Reorder = nil },
		"parallelize axis":    func(t *Tensor) { t.Schedule[4].Parallelize.Axis = 1 },
		"parallelize type":    func(t *Tensor) { t.Schedule[4].Parallelize.Type = "DIDy" },
		"parallelize absent":  func(t *Tensor) { t.Schedule[4].Parallelize = nil },
		"allocation":          func(t *Tensor) { t.Allocation = []int{0, 1} },
		"allocation nil":      func(t *Tensor) { t.Allocation = nil },
		"allocation empty":    func(t *Tensor) { t.Allocation = []int{} },
		"sharding nil":        func(t *Tensor) { t.Sharding = nil },
		"sharding empty":      func(t *Tensor) { t.Sharding = []Sharding{} },
		"sharding type":       func(t *Tensor) { t.Sharding[0].Type = "DIDy" },
		"sharding axis":       func(t *Tensor) { t.Sharding[0].LogicalAxis = 1 },
		"shape axis":          func(t *Tensor) { t.Sharding[0].ShapeAxis = new(0) },
		"shape axis absent":   func(t *Tensor) { t.Sharding[0].ShapeAxis = nil },
		"sharding kind":       func(t *Tensor) { t.Sharding[0].Kind = "block" },
		"logical axes":        func(t *Tensor) { t.Sharding[0].LogicalAxes = []int{0} },
		"logical axes nil":    func(t *Tensor) { t.Sharding[0].LogicalAxes = nil },
		"logical axes empty":  func(t *Tensor) { t.Sharding[0].LogicalAxes = []int{} },
		"local shape":         func(t *Tensor) { t.LocalShape = []int{8, 16} },
		"local shape nil":     func(t *Tensor) { t.LocalShape = nil },
		"padded shape":        func(t *Tensor) { t.PaddedShape = []int{8} },
		"padded shape nil":    func(t *Tensor) { t.PaddedShape = nil },
		"padded shape empty":  func(t *Tensor) { t.PaddedShape = []int{} },
		"layout":              func(t *Tensor) { t.Layout = []int{1} },
		"layout nil":          func(t *Tensor) { t.Layout = nil },
		"propagated":          func(t *Tensor) { t.Propagated = true },
		"partial":             func(t *Tensor) { t.Partial = "sum" },
	}
	keys := map[string]string{}
	for name, edit := range edits {
		tensor := base()
		edit(&tensor)
		key := string(appendTensorKey(nil, &tensor))
		if other, ok := keys[key]; ok {
			t.Errorf("%q and %q have the same key", name, other)
		}
		keys[key] = name
		tensor.Name = "renamed"
		if again := string(appendTensorKey(nil, &tensor)); again != key {
			t.Errorf("%q: renaming the tensor changes its key", name)
		}
	}
}
