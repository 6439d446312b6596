package ir

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestPlacements(t *testing.T) {
	tests := map[string]struct {
		mesh, shape, placements string
		wantShape, wantLocal    []int
		wantShardings           []Sharding
		wantSteps               []ScheduleStep
	}{
		"shard one dim, 6 over 4 devices": {
			mesh: "[0, 1, 2, 3]", shape: "[8, 6]", placements: "[Shard(1)]",
			wantShape: []int{8, 6}, wantLocal: []int{8, 2},
			wantShardings: []Sharding{{Type: DIDx, Digits: []Digit{{Axis: 1, Stride: 2, Extent: 4}}, Kind: Block}},
			wantSteps: []ScheduleStep{
				{Kind: StepOuterSplit, Axis: 1, Factor: 4}, {Kind: StepParallelize, Axis: 1, Type: DIDx},
			},
		},
		"nested in mesh order": {
			mesh: "[[0, 1, 2, 3], [4, 5, 6, 7]]", shape: "[16]", placements: "[Shard(0), Shard(0)]",
			wantShape: []int{16}, wantLocal: []int{2},
			wantShardings: []Sharding{
				{Type: DIDx, Digits: []Digit{{Axis: 0, Stride: 2, Extent: 4}}, Kind: Nested},
				{Type: DIDy, Digits: []Digit{{Axis: 0, Stride: 8, Extent: 2}}, Kind: Block},
			},
			wantSteps: []ScheduleStep{
				{Kind: StepOuterSplit, Axis: 0, Factor: 2}, {Kind: StepParallelize, Axis: 0, Type: DIDy},
				{Kind: StepOuterSplit, Axis: 1, Factor: 4}, {Kind: StepParallelize, Axis: 1, Type: DIDx},
			},
		},
		"uneven like torch.chunk": {
			mesh: "[0, 1, 2, 3]", shape: "[10]", placements: "[Shard(-1)]",
			wantShape: []int{10}, wantLocal: []int{3},
			wantShardings: []Sharding{{Type: DIDx, Digits: []Digit{{Axis: 0, Stride: 3, Extent: 4}}, Kind: Block}},
			wantSteps: []ScheduleStep{
				{Kind: StepOuterSplit, Axis: 0, Factor: 4}, {Kind: StepParallelize, Axis: 0, Type: DIDx},
			},
		},
		"partial adds a leading axis": {
			mesh: "[[0, 1], [2, 3]]", shape: "[6]", placements: "[Partial(max), Shard(0)]",
			wantShape: []int{2, 6}, wantLocal: []int{1, 3},
			wantShardings: []Sharding{
				{Type: DIDx, Digits: []Digit{{Axis: 1, Stride: 3, Extent: 2}}, Kind: Block},
				{Type: DIDy, Digits: []Digit{{Axis: 0, Stride: 1, Extent: 2}}, Kind: Block},
			},
			wantSteps: []ScheduleStep{
				{Kind: StepOuterSplit, Axis: 1, Factor: 2}, {Kind: StepParallelize, Axis: 1, Type: DIDx},
				{Kind: StepParallelize, Axis: 0, Type: DIDy},
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			src := "meshes: {m: " + tc.mesh + "}\ntensors:\n  x: {mesh: m, shape: " + tc.shape + ", placements: " + tc.placements + "}\n"
			f, err := Parse("p.yaml", []byte(src))
			if err != nil {
				t.Fatal(err)
			}
			x := f.Tensor("x")
			ignore := cmpopts.IgnoreFields(ScheduleStep{}, "Pos")
			if d := cmp.Diff(tc.wantSteps, x.Schedule, ignore); d != "" {
				t.Errorf("schedule (-want +got):\n%s", d)
			}
			if d := cmp.Diff(tc.wantShardings, x.Shardings()); d != "" {
				t.Errorf("shardings (-want +got):\n%s", d)
			}
			if d := cmp.Diff(tc.wantShape, x.Shape()); d != "" {
				t.Errorf("shape (-want +got):\n%s", d)
			}
			if d := cmp.Diff(tc.wantLocal, x.LocalShape()); d != "" {
				t.Errorf("local shape (-want +got):\n%s", d)
			}
		})
	}
}

func TestPartialSetBecomesReduction(t *testing.T) {
	src := `meshes: {m: [0, 1]}
tensors:
  p: {mesh: m, shape: [4], placements: [Partial(min)]}
ops:
  - {op: set, in: p, out: q}
`
	f, err := Parse("p.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	op := f.Ops[0]
	if op.Kind != OpMin || op.Axis != 0 || op.Expr() != "q = min(p, axis=0)" {
		t.Errorf("op = %s (kind %s, axis %d), want q = min(p, axis=0)", op.Expr(), op.Kind, op.Axis)
	}
	if d := cmp.Diff([]int{4}, f.Tensor("q").Shape()); d != "" {
		t.Errorf("q's shape (-want +got):\n%s", d)
	}
}
