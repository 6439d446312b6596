package lower

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nvcomm/nvcomm/internal/diag"
	"github.com/nvcomm/nvcomm/internal/ir"
	"github.com/nvcomm/nvcomm/internal/plan"
	"github.com/nvcomm/nvcomm/internal/scale"
	"github.com/nvcomm/nvcomm/internal/shard"
	"github.com/nvcomm/nvcomm/internal/syntax"
)

// certifiedPlans are the golden plans Validate accepts and the plans of
// the generated families at 50 ops, whose tensors repeat a few specs.
func certifiedPlans(t *testing.T) map[string]*plan.Plan {
	t.Helper()
	plans := map[string]*plan.Plan{}
	files, err := filepath.Glob("../../testdata/*/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden plans (%v)", err)
	}
	for _, file := range files {
		src, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if p, err := plan.Decode(file, src); err == nil && plan.Validate(p) == nil {
			plans[file] = p
		}
	}
	for _, fam := range scale.Families {
		f, err := syntax.Parse(fam.Name+".yaml", fam.Gen(50))
		if err != nil {
			t.Fatal(err)
		}
		p, err := Lower(f, Options{})
		if err != nil {
			t.Fatal(err)
		}
		plans[fam.Name] = p
	}
	return plans
}

// TestAlikeTensorsAsNewTensor: every tensor Certify rebuilds, whether
// built or renamed from a tensor alike, is what ir.NewTensor builds for
// its spec alone, field by field (the producer and a pending output's
// Combined apart, which rebuild sets from its op);
// and the generated chains do share specs.
func TestAlikeTensorsAsNewTensor(t *testing.T) {
	shared := 0
	for name, p := range certifiedPlans(t) {
		ps := plan.NewProblems()
		f, alike := rebuild(p, ps)
		if f == nil {
			t.Errorf("%s: rebuild: %v", name, ps.All())
			continue
		}
		shared += len(p.Tensors) - len(alike.first)
		for k, pt := range p.Tensors {
			want, err := ir.NewTensor(specOf(&pt, f.Meshes[slices.IndexFunc(f.Meshes, func(m *ir.Mesh) bool { return m.Name == pt.Mesh })], nil))
			if err != nil {
				t.Fatalf("%s: tensor %q: %v", name, pt.Name, err)
			}
			got := *f.Tensors[k]
			got.Producer, got.Combined = nil, nil
			if !reflect.DeepEqual(&got, want) {
				t.Errorf("%s: tensor %q rebuilt otherwise than ir.NewTensor builds it", name, pt.Name)
			}
			if a, w := alike.analyses(k, f.Tensors[k]), tensorOf(want); !reflect.DeepEqual(*a, plan.Tensor{
				Name: a.Name, DType: w.DType, Mesh: w.Mesh, Shape: w.Shape, ReductionAxes: w.ReductionAxes, Schedule: w.Schedule,
				Allocation: w.Allocation, Sharding: w.Sharding, LocalShape: w.LocalShape, PaddedShape: w.PaddedShape,
				Layout: w.Layout, Partial: w.Partial, Propagated: w.Propagated,
			}) {
				t.Errorf("%s: tensor %q: analyses of its class are not its own", name, pt.Name)
			}
		}
	}
	if shared == 0 {
		t.Error("no tensor was renamed from one alike: the test proves nothing")
	}
}

// TestSpecKeyFields lists the fields of ir.TensorSpec and ir.ScheduleStep:
// a field added to either must be in appendSpecKey (or knowingly left
// out, as the name is), and this list updated with it.
func TestSpecKeyFields(t *testing.T) {
	fields := func(typ reflect.Type) []string {
		var names []string
		for f := range typ.Fields() {
			names = append(names, f.Name)
		}
		return names
	}
	want := []string{"Name", "Mesh", "DType", "Shape", "ReductionAxes", "Schedule", "Placements", "Allocation", "Partial", "Propagated", "Combine"}
	if d := cmp.Diff(want, fields(reflect.TypeFor[ir.TensorSpec]())); d != "" {
		t.Errorf("ir.TensorSpec's fields changed: update appendSpecKey, then this list (-want +got):\n%s", d)
	}
	want = []string{"Kind", "Axis", "Factor", "Order", "Type", "Pos"}
	if d := cmp.Diff(want, fields(reflect.TypeFor[ir.ScheduleStep]())); d != "" {
		t.Errorf("ir.ScheduleStep's fields changed: update appendSpecKey, then this list (-want +got):\n%s", d)
	}
}

// TestSpecKey: specs that differ in one field other than the name, a nil
// list from an empty one included, have different keys; a spec renamed
// has its key.
func TestSpecKey(t *testing.T) {
	m, n := &ir.Mesh{Name: "m"}, &ir.Mesh{Name: "n"}
	base := func() ir.TensorSpec {
		return ir.TensorSpec{Name: "x", Mesh: m, DType: "float32", Shape: []int{8, 16}, ReductionAxes: []int{1},
			Allocation: []int{1, 0}, Schedule: []ir.ScheduleStep{
				{Kind: ir.StepSplit, Axis: 0, Factor: 2},
				{Kind: ir.StepReorder, Order: []int{1, 0}},
				{Kind: ir.StepParallelize, Axis: 0, Type: ir.DIDx},
			}}
	}
	edits := map[string]func(s *ir.TensorSpec){
		"base":             func(*ir.TensorSpec) {},
		"mesh":             func(s *ir.TensorSpec) { s.Mesh = n },
		"no mesh":          func(s *ir.TensorSpec) { s.Mesh = nil },
		"dtype":            func(s *ir.TensorSpec) { s.DType = "bfloat16" },
		"shape extent":     func(s *ir.TensorSpec) { s.Shape[1] = 17 },
		"shape longer":     func(s *ir.TensorSpec) { s.Shape = append(s.Shape, 1) },
		"shape nil":        func(s *ir.TensorSpec) { s.Shape = nil },
		"shape empty":      func(s *ir.TensorSpec) { s.Shape = []int{} },
		"reduction axes":   func(s *ir.TensorSpec) { s.ReductionAxes = []int{0} },
		"reduction nil":    func(s *ir.TensorSpec) { s.ReductionAxes = nil },
		"reduction empty":  func(s *ir.TensorSpec) { s.ReductionAxes = []int{} },
		"allocation":       func(s *ir.TensorSpec) { s.Allocation = []int{0, 1} },
		"allocation nil":   func(s *ir.TensorSpec) { s.Allocation = nil },
		"allocation empty": func(s *ir.TensorSpec) { s.Allocation = []int{} },
		"propagated":       func(s *ir.TensorSpec) { s.Propagated = true },
		"placements":       func(s *ir.TensorSpec) { s.Placements = []shard.Placement{{Kind: shard.Shard, Dim: 0}} },
		"placements empty": func(s *ir.TensorSpec) { s.Placements = []shard.Placement{} },
		"placement dim":    func(s *ir.TensorSpec) { s.Placements = []shard.Placement{{Kind: shard.Shard, Dim: 1}} },
		"placement op":     func(s *ir.TensorSpec) { s.Placements = []shard.Placement{{Kind: shard.Partial, Op: "max"}} },
		"partial":          func(s *ir.TensorSpec) { s.Partial = ir.OpSum },
		"schedule nil":     func(s *ir.TensorSpec) { s.Schedule = nil },
		"schedule empty":   func(s *ir.TensorSpec) { s.Schedule = []ir.ScheduleStep{} },
		"schedule shorter": func(s *ir.TensorSpec) { s.Schedule = s.Schedule[:2] },
		"step kind":        func(s *ir.TensorSpec) { s.Schedule[0].Kind = ir.StepOuterSplit },
		"step axis":        func(s *ir.TensorSpec) { s.Schedule[0].Axis = 1 },
		"step factor":      func(s *ir.TensorSpec) { s.Schedule[0].Factor = 4 },
		"step order":       func(s *ir.TensorSpec) { s.Schedule[1].Order = []int{0, 1} },
		"step order nil":   func(s *ir.TensorSpec) { s.Schedule[1].Order = nil },
		"step order empty": func(s *ir.TensorSpec) { s.Schedule[1].Order = []int{} },
		"step type":        func(s *ir.TensorSpec) { s.Schedule[2].Type = ir.DIDy },
		"step line":        func(s *ir.TensorSpec) { s.Schedule[2].Pos = diag.Pos{Line: 1} },
		"step column":      func(s *ir.TensorSpec) { s.Schedule[2].Pos = diag.Pos{Col: 1} },
	}
	keys := map[string]string{}
	for name, edit := range edits {
		s := base()
		edit(&s)
		key := string(appendSpecKey(nil, s))
		if other, ok := keys[key]; ok {
			t.Errorf("%q and %q have the same key", name, other)
		}
		keys[key] = name
		s.Name = "renamed"
		if again := string(appendSpecKey(nil, s)); again != key {
			t.Errorf("%q: renaming the spec changes its key", name)
		}
	}
}

// TestGroupByOp compares groupByOp with its definition, a list per op of
// its steps in order, on steps out of op order and of no op.
func TestGroupByOp(t *testing.T) {
	for _, ops := range [][]int{{}, {0}, {0, 0, 1, 2, 2}, {2, 0, -1, 1, 0, 5, 2}, {3, 3}, {-1}} {
		var steps []plan.Step
		for i, op := range ops {
			steps = append(steps, plan.Step{ID: i, Op: op})
		}
		const n = 3
		want := make([][]int, n)
		for i, s := range steps {
			if s.Op >= 0 && s.Op < n {
				want[s.Op] = append(want[s.Op], i)
			}
		}
		g := groupByOp(steps, n)
		for op := range n {
			if got := g.of(op); !slices.Equal(got, want[op]) {
				t.Errorf("ops %v: op %d's steps are %v, want %v", ops, op, got, want[op])
			}
		}
	}
}
