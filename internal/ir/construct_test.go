package ir

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// constructFusion has tensors of every kind NewTensor must analyze as
// Parse does: a DID loop split, two device types, an uneven split, a merge,
// a reorder with an allocation, a reduction output.
const constructFusion = `
meshes:
  m: [0, 1, 2, 3]
  g: [[0, 1, 2], [3, 4, 5]]
tensors:
  a:
    mesh: m
    shape: [8, 16]
    schedule:
      - outer_split: {axis: 1, factor: 4}
      - parallelize: {axis: 1, type: DIDx}
  b:
    mesh: g
    shape: [6, 9]
    schedule:
      - outer_split: {axis: 0, factor: 2}
      - parallelize: {axis: 0, type: DIDy}
      - split: {axis: 2, factor: 3}
      - parallelize: {axis: 3, type: DIDx}
  u:
    mesh: m
    shape: [7]
    schedule:
      - outer_split: {axis: 0, factor: 4}
      - parallelize: {axis: 0, type: DIDx}
  c:
    mesh: m
    shape: [4, 6, 5]
    schedule:
      - merge: {axis: 0}
      - outer_split: {axis: 0, factor: 4}
      - parallelize: {axis: 0, type: DIDx}
      - reorder: [0, 2, 1]
    allocation: [2, 1]
  d:
    mesh: m
    schedule:
      - outer_split: {axis: 1, factor: 4}
      - parallelize: {axis: 1, type: DIDx}
ops:
  - {op: sum, in: a, out: d, axis: 0}
  - {op: set, in: b, out: e}
  - {op: set, in: c, out: f}
  - {op: set, in: u, out: v}
`

// analysis is what the analyses resolve for a tensor.
type analysis struct {
	Shardings                      []Sharding
	Local, Padded, Layout, Logical []int
	Loop                           int
}

func analysisOf(t *Tensor) analysis {
	return analysis{t.Shardings(), t.LocalShape(), t.PaddedShape(), t.Layout(), t.LogicalExtents(), len(t.Loop)}
}

func specOf(t *Tensor) TensorSpec {
	spec := TensorSpec{Name: t.Name, Mesh: t.Mesh, DType: t.DType, Shape: t.LogicalExtents(), Schedule: t.Schedule, Allocation: t.Allocation}
	for i, id := range t.Logical {
		if id.Reduction {
			spec.ReductionAxes = append(spec.ReductionAxes, i)
		}
	}
	return spec
}

// TestNewTensorAsParse builds every tensor of a fusion from its values and
// requires the analyses Parse gave it.
func TestNewTensorAsParse(t *testing.T) {
	f, err := Parse("c.yaml", []byte(constructFusion))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range f.Tensors {
		t.Run(want.Name, func(t *testing.T) {
			got, err := NewTensor(specOf(want))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(analysisOf(want), analysisOf(got)); diff != "" {
				t.Errorf("analysis mismatch (-parsed +built):\n%s", diff)
			}
		})
	}
}

// TestNewTensorErrors: what a fusion file cannot say, a spec cannot either
// (issue 10: a plan's "DIDw", factor 0, axis 99, allocation [7, -1] and a
// DID extent other than the mesh's were accepted).
func TestNewTensorErrors(t *testing.T) {
	m, err := NewMesh("m", []int{4}, []int{0, 1, 2, 3})
	if err != nil {
		t.Fatal(err)
	}
	base := func() TensorSpec {
		return TensorSpec{Name: "t", Mesh: m, DType: "float32", Shape: []int{8, 16}, Schedule: []ScheduleStep{
			{Kind: StepOuterSplit, Axis: 1, Factor: 4},
			{Kind: StepParallelize, Axis: 1, Type: DIDx},
		}}
	}
	for _, tc := range []struct {
		name   string
		mutate func(s *TensorSpec)
		want   string
	}{
		{"parallel type", func(s *TensorSpec) { s.Schedule[1].Type = ParallelType(9) },
			`error: tensor "t" parallelize: unknown parallel type "ParallelType(9)" (expected DIDx, DIDy, DIDz or Serial)`},
		{"negative parallel type", func(s *TensorSpec) { s.Schedule[1].Type = ParallelType(-1) },
			`error: tensor "t" parallelize: unknown parallel type "ParallelType(-1)" (expected DIDx, DIDy, DIDz or Serial)`},
		{"factor 0", func(s *TensorSpec) { s.Schedule[0].Factor = 0 },
			`error: tensor "t" outer_split factor: expected an integer >= 1, got 0`},
		{"factor 2^40", func(s *TensorSpec) { s.Schedule[0].Factor = 1 << 40 },
			`error: tensor "t" outer_split factor: integer 1099511627776 is out of range (expected -2147483648 to 2147483647)`},
		{"reorder", func(s *TensorSpec) {
			s.Schedule = append(s.Schedule, ScheduleStep{Kind: StepReorder, Order: []int{0, 0, 1}})
		},
			`error: tensor "t" reorder: position 0 appears twice (expected a permutation)`},
		{"axis 99", func(s *TensorSpec) { s.Schedule[1].Axis = 99 },
			`error: tensor "t" parallelize: axis 99 is out of range for a loop domain of 3 axes`},
		{"allocation 7 -1", func(s *TensorSpec) { s.Allocation = []int{7, -1} },
			`error: tensor "t" allocation: axis 7 is out of range for a loop domain of 3 axes`},
		{"DID extent", func(s *TensorSpec) { s.Schedule[0].Factor = 2 },
			`error: tensor "t": a DIDx axis must have the extent of mesh "m" along DIDx (4), but this axis has extent 2; split the axis by 4 first (outer_split with factor 4 gives a DID loop split)`},
		{"reduction axes", func(s *TensorSpec) { s.ReductionAxes = []int{2} },
			`error: tensor "t": reduction axes [2] are not distinct positions in a shape of 2 axes`},
		{"no mesh", func(s *TensorSpec) { s.Mesh = nil }, `error: tensor "t": no mesh`},
		{"dtype", func(s *TensorSpec) { s.DType = "float8" },
			`error: tensor "t": unknown dtype "float8" (expected one of bfloat16, float16, float32, float64, int32, int64)`},
		{"extent", func(s *TensorSpec) { s.Shape[0] = 1 << 40 },
			`error: tensor "t" shape extent: integer 1099511627776 is out of range (expected -2147483648 to 2147483647)`},
		{"bytes", func(s *TensorSpec) { s.Shape = []int{1 << 30, 1 << 30, 1 << 30}; s.Schedule = nil },
			`error: tensor "t" shape: [1073741824, 1073741824, 1073741824] of float32 elements takes more than 9223372036854775807 bytes (expected a tensor whose bytes fit in int64); nvcomm counts sizes in int64 bytes; use smaller extents`},
		{"step kind", func(s *TensorSpec) { s.Schedule[0].Kind = "twist" },
			`error: tensor "t" schedule: unknown key "twist" (expected one of split, outer_split, merge, reorder, parallelize)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := base()
			tc.mutate(&s)
			got, err := NewTensor(s)
			if err == nil {
				t.Fatalf("NewTensor = %v, want an error", got)
			}
			if diff := cmp.Diff(tc.want, err.Error()); diff != "" {
				t.Errorf("error mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNewMesh(t *testing.T) {
	for _, tc := range []struct {
		name           string
		shape, devices []int
		want           string
	}{
		{"ok", []int{2, 3}, []int{5, 4, 3, 2, 1, 0}, ""},
		{"rank", []int{1, 1, 1, 1}, []int{0}, `mesh "x": 4 axes, expected 1 to 3 (DIDz, DIDy, DIDx)`},
		{"product", []int{2, 2}, []int{0, 1, 2}, `mesh "x": shape [2, 2] does not hold its 3 devices`},
		{"huge", []int{1 << 40, 1 << 40}, []int{0}, `mesh "x": shape [1099511627776, 1099511627776] does not hold its 1 devices`},
		{"zero", []int{0}, nil, `mesh "x": shape [0] does not hold its 0 devices`},
		{"twice", []int{2}, []int{1, 1}, `mesh "x": device id 1 is negative or listed twice`},
		{"negative", []int{1}, []int{-1}, `mesh "x": device id -1 is negative or listed twice`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := NewMesh("x", tc.shape, tc.devices)
			got := ""
			if err != nil {
				got = err.Error()
			} else if !strings.EqualFold(m.Name, "x") || m.Rank() != len(tc.shape) {
				t.Errorf("NewMesh = %+v", m)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("error mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// BenchmarkNewTensor builds every tensor of constructFusion from its
// values: what Certify does for each tensor of a plan.
func BenchmarkNewTensor(b *testing.B) {
	f, err := Parse("c.yaml", []byte(constructFusion))
	if err != nil {
		b.Fatal(err)
	}
	specs := make([]TensorSpec, len(f.Tensors))
	for i, t := range f.Tensors {
		specs[i] = specOf(t)
	}
	b.ReportAllocs()
	for b.Loop() {
		for _, s := range specs {
			if _, err := NewTensor(s); err != nil {
				b.Fatal(err)
			}
		}
	}
}
