package ir

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// meshSum is what the tests check of a mesh.
type meshSum struct {
	Name    string
	Shape   []int
	Devices []int
}

// tensorSum is what the tests check of a tensor.
type tensorSum struct {
	Name       string
	Mesh       string
	DType      DType
	Declared   bool
	Producer   string // the op's Expr, "" for an input
	Logical    []int  // every logical extent, reduction axes included
	Reductions []int  // logical positions of the reduction axes
	Loop       []int
	Shape      []int
	LocalShape []int
	Layout     []int
	Shardings  []Sharding
}

// fusionSum is what the tests check of a fusion.
type fusionSum struct {
	Name    string
	Meshes  []meshSum
	Tensors []tensorSum
	Ops     []string
	Inputs  []string
	Outputs []string
}

func summarize(f *Fusion) fusionSum {
	s := fusionSum{Name: f.Name}
	for _, m := range f.Meshes {
		s.Meshes = append(s.Meshes, meshSum{m.Name, m.Shape, m.Devices})
	}
	for _, t := range f.Tensors {
		ts := tensorSum{
			Name:       t.Name,
			DType:      t.DType,
			Declared:   t.Declared,
			Logical:    t.LogicalExtents(),
			Shape:      t.Shape(),
			LocalShape: t.LocalShape(),
			Layout:     t.Layout(),
			Shardings:  t.Shardings(),
		}
		if t.Mesh != nil {
			ts.Mesh = t.Mesh.Name
		}
		if t.Producer != nil {
			ts.Producer = t.Producer.Expr()
		}
		for i, id := range t.Logical {
			if id.Reduction {
				ts.Reductions = append(ts.Reductions, i)
			}
		}
		for _, id := range t.Loop {
			ts.Loop = append(ts.Loop, id.Extent)
		}
		s.Tensors = append(s.Tensors, ts)
	}
	for _, op := range f.Ops {
		s.Ops = append(s.Ops, op.Expr())
	}
	for _, t := range f.Inputs {
		s.Inputs = append(s.Inputs, t.Name)
	}
	for _, t := range f.Outputs {
		s.Outputs = append(s.Outputs, t.Name)
	}
	return s
}

// mesh4 is the 1-D mesh of four devices most cases use.
var mesh4 = meshSum{"m", []int{4}, []int{0, 1, 2, 3}}

// validTest is a well-formed fusion and what Parse makes of it.
type validTest struct {
	name string
	src  string
	want fusionSum
}

// validTests are well-formed fusions and what Parse makes of them; the fuzz
// test seeds from them too.
var validTests = []validTest{
	{
		name: "doc_example_allgather_loop_split",
		src: `format: 1
name: allgather_loop_split
meshes:
  m: [0, 1, 2, 3]
  g: [[0, 1, 2, 3], [4, 5, 6, 7]]
tensors:
  tv0:
    mesh: m
    dtype: float32
    shape: [8, 1024]
    schedule:
      - outer_split: {axis: 1, factor: 4}
      - parallelize: {axis: 1, type: DIDx}
  tv1:
    mesh: m
ops:
  - {op: set, in: tv0, out: tv1}
  - {op: sum, in: tv1, out: tv2, axis: 0}
`,
		want: fusionSum{
			Name: "allgather_loop_split",
			Meshes: []meshSum{
				{"g", []int{2, 4}, []int{0, 1, 2, 3, 4, 5, 6, 7}},
				mesh4,
			},
			Tensors: []tensorSum{{
				Name: "tv0", Mesh: "m", DType: "float32", Declared: true,
				Logical: []int{8, 1024}, Loop: []int{8, 4, 256},
				Shape: []int{8, 1024}, LocalShape: []int{8, 256}, Layout: []int{0, 1},
				Shardings: []Sharding{{Type: DIDx, Digits: []Digit{{Axis: 1, Stride: 256, Extent: 4}}, Kind: Block}},
			}, {
				Name: "tv1", Mesh: "m", DType: "float32", Declared: true, Producer: "tv1 = set(tv0)",
				Logical: []int{8, 1024}, Loop: []int{8, 1024},
				Shape: []int{8, 1024}, LocalShape: []int{8, 1024}, Layout: []int{0, 1},
			}, {
				Name: "tv2", Mesh: "m", DType: "float32", Producer: "tv2 = sum(tv1, axis=0)",
				Logical: []int{8, 1024}, Reductions: []int{0}, Loop: []int{8, 1024},
				Shape: []int{1024}, LocalShape: []int{1024}, Layout: []int{0},
			}},
			Ops:     []string{"tv1 = set(tv0)", "tv2 = sum(tv1, axis=0)"},
			Inputs:  []string{"tv0"},
			Outputs: []string{"tv2"},
		},
	},
	{
		name: "strided_split_then_parallelize_inner",
		src: `meshes:
  m: [0, 1]
tensors:
  tv0:
    mesh: m
    shape: [6]
    schedule:
      - split: {axis: 0, factor: 2}
      - parallelize: {axis: 1, type: DIDx}
`,
		want: fusionSum{
			Name:   "in",
			Meshes: []meshSum{{"m", []int{2}, []int{0, 1}}},
			Tensors: []tensorSum{{
				Name: "tv0", Mesh: "m", DType: "float32", Declared: true,
				Logical: []int{6}, Loop: []int{3, 2},
				Shape: []int{6}, LocalShape: []int{3}, Layout: []int{0},
				Shardings: []Sharding{{Type: DIDx, Digits: []Digit{{Axis: 0, Stride: 1, Extent: 2}}, Kind: Strided}},
			}},
			Inputs:  []string{"tv0"},
			Outputs: []string{"tv0"},
		},
	},
	{
		name: "nested_didy_then_didx_on_2d_mesh",
		src: `meshes:
  g: [[0, 1, 2, 3], [4, 5, 6, 7]]
tensors:
  tv0:
    mesh: g
    shape: [16]
    schedule:
      - outer_split: {axis: 0, factor: 2}
      - parallelize: {axis: 0, type: DIDy}
      - outer_split: {axis: 1, factor: 4}
      - parallelize: {axis: 1, type: DIDx}
`,
		want: fusionSum{
			Name:   "in",
			Meshes: []meshSum{{"g", []int{2, 4}, []int{0, 1, 2, 3, 4, 5, 6, 7}}},
			Tensors: []tensorSum{{
				Name: "tv0", Mesh: "g", DType: "float32", Declared: true,
				Logical: []int{16}, Loop: []int{2, 4, 2},
				Shape: []int{16}, LocalShape: []int{2}, Layout: []int{0},
				Shardings: []Sharding{
					{Type: DIDx, Digits: []Digit{{Axis: 0, Stride: 2, Extent: 4}}, Kind: Nested},
					{Type: DIDy, Digits: []Digit{{Axis: 0, Stride: 8, Extent: 2}}, Kind: Block},
				},
			}},
			Inputs:  []string{"tv0"},
			Outputs: []string{"tv0"},
		},
	},
	{
		name: "didy_and_didx_on_two_axes_of_2d_mesh",
		src: `meshes:
  g: [[0, 1, 2], [3, 4, 5]]
tensors:
  a:
    mesh: g
    dtype: int64
    shape: [4, 9]
    schedule:
      - outer_split: {axis: 0, factor: 2}
      - parallelize: {axis: 0, type: DIDy}
      - outer_split: {axis: 2, factor: 3}
      - parallelize: {axis: 2, type: DIDx}
  b:
    schedule:
      - outer_split: {axis: 0, factor: 2}
      - parallelize: {axis: 0, type: DIDy}
ops:
  - {op: set, in: a, out: b}
`,
		want: fusionSum{
			Name:   "in",
			Meshes: []meshSum{{"g", []int{2, 3}, []int{0, 1, 2, 3, 4, 5}}},
			Tensors: []tensorSum{{
				Name: "a", Mesh: "g", DType: "int64", Declared: true,
				Logical: []int{4, 9}, Loop: []int{2, 2, 3, 3},
				Shape: []int{4, 9}, LocalShape: []int{2, 3}, Layout: []int{0, 1},
				Shardings: []Sharding{
					{Type: DIDx, Digits: []Digit{{Axis: 1, Stride: 3, Extent: 3}}, Kind: Block},
					{Type: DIDy, Digits: []Digit{{Axis: 0, Stride: 2, Extent: 2}}, Kind: Block},
				},
			}, {
				// Only DIDy: replicated along DIDx.
				Name: "b", Mesh: "g", DType: "int64", Declared: true, Producer: "b = set(a)",
				Logical: []int{4, 9}, Loop: []int{2, 2, 9},
				Shape: []int{4, 9}, LocalShape: []int{2, 9}, Layout: []int{0, 1},
				Shardings: []Sharding{{Type: DIDy, Digits: []Digit{{Axis: 0, Stride: 2, Extent: 2}}, Kind: Block}},
			}},
			Ops:     []string{"b = set(a)"},
			Inputs:  []string{"a"},
			Outputs: []string{"b"},
		},
	},
	{
		name: "3d_mesh_with_logical_didz",
		src: `meshes:
  c: [[[0, 1], [2, 3]], [[4, 5], [6, 7]]]
tensors:
  tv0:
    mesh: c
    dtype: float64
    shape: [2, 6, 8]
    schedule:
      - outer_split: {axis: 1, factor: 2}
      - parallelize: {axis: 1, type: DIDy}
      - outer_split: {axis: -1, factor: 2}
      - parallelize: {axis: 3, type: DIDx}
      - parallelize: {axis: 0, type: DIDz}
`,
		want: fusionSum{
			Name:   "in",
			Meshes: []meshSum{{"c", []int{2, 2, 2}, []int{0, 1, 2, 3, 4, 5, 6, 7}}},
			Tensors: []tensorSum{{
				Name: "tv0", Mesh: "c", DType: "float64", Declared: true,
				Logical: []int{2, 6, 8}, Loop: []int{2, 2, 3, 2, 4},
				Shape: []int{2, 6, 8}, LocalShape: []int{1, 3, 4}, Layout: []int{0, 1, 2},
				Shardings: []Sharding{
					{Type: DIDx, Digits: []Digit{{Axis: 2, Stride: 4, Extent: 2}}, Kind: Block},
					{Type: DIDy, Digits: []Digit{{Axis: 1, Stride: 3, Extent: 2}}, Kind: Block},
					{Type: DIDz, Digits: []Digit{{Axis: 0, Stride: 1, Extent: 2}}, Kind: Block},
				},
			}},
			Inputs:  []string{"tv0"},
			Outputs: []string{"tv0"},
		},
	},
	{
		name: "logical_did_and_mesh_of_one_device",
		src: `meshes:
  m: [5, 3]
  one: [7]
tensors:
  x:
    mesh: m
    shape: [2, 8]
    schedule:
      - parallelize: {axis: 0, type: DIDx}
  y:
    mesh: one
    shape: [4]
    schedule:
      - outer_split: {axis: 0, factor: 1}
      - parallelize: {axis: 0, type: DIDx}
      - parallelize: {axis: 1, type: Serial}
`,
		want: fusionSum{
			Name:   "in",
			Meshes: []meshSum{{"m", []int{2}, []int{5, 3}}, {"one", []int{1}, []int{7}}},
			Tensors: []tensorSum{{
				Name: "x", Mesh: "m", DType: "float32", Declared: true,
				Logical: []int{2, 8}, Loop: []int{2, 8},
				Shape: []int{2, 8}, LocalShape: []int{1, 8}, Layout: []int{0, 1},
				Shardings: []Sharding{{Type: DIDx, Digits: []Digit{{Axis: 0, Stride: 1, Extent: 2}}, Kind: Block}},
			}, {
				// DIDx over a mesh axis of extent 1 shards nothing.
				Name: "y", Mesh: "one", DType: "float32", Declared: true,
				Logical: []int{4}, Loop: []int{1, 4},
				Shape: []int{4}, LocalShape: []int{4}, Layout: []int{0},
			}},
			Inputs:  []string{"x", "y"},
			Outputs: []string{"x", "y"},
		},
	},
	{
		name: "negative_positions_and_reorder",
		src: `meshes:
  m: [0, 1, 2, 3]
tensors:
  tv0:
    mesh: m
    shape: [8, 12]
    schedule:
      - split: {axis: -1, factor: 3}
      - parallelize: {axis: -2, type: DIDx}
      - reorder: [-1, 0, 1]
`,
		want: fusionSum{
			Name:   "in",
			Meshes: []meshSum{mesh4},
			Tensors: []tensorSum{{
				Name: "tv0", Mesh: "m", DType: "float32", Declared: true,
				Logical: []int{8, 12}, Loop: []int{3, 8, 4},
				Shape: []int{8, 12}, LocalShape: []int{8, 3}, Layout: []int{0, 1},
				Shardings: []Sharding{{Type: DIDx, Digits: []Digit{{Axis: 1, Stride: 3, Extent: 4}}, Kind: Block}},
			}},
			Inputs:  []string{"tv0"},
			Outputs: []string{"tv0"},
		},
	},
	{
		name: "did_on_split_of_merge_that_aligns_with_one_axis",
		src: `meshes:
  m: [0, 1]
tensors:
  tv0:
    mesh: m
    shape: [4, 6]
    schedule:
      - merge: {axis: 0}
      - outer_split: {axis: 0, factor: 2}
      - parallelize: {axis: 0, type: DIDx}
`,
		want: fusionSum{
			Name:   "in",
			Meshes: []meshSum{{"m", []int{2}, []int{0, 1}}},
			Tensors: []tensorSum{{
				Name: "tv0", Mesh: "m", DType: "float32", Declared: true,
				Logical: []int{4, 6}, Loop: []int{2, 12},
				Shape: []int{4, 6}, LocalShape: []int{2, 6}, Layout: []int{0, 1},
				Shardings: []Sharding{{Type: DIDx, Digits: []Digit{{Axis: 0, Stride: 2, Extent: 2}}, Kind: Block}},
			}},
			Inputs:  []string{"tv0"},
			Outputs: []string{"tv0"},
		},
	},
	{
		name: "allocation_orders",
		src: `meshes:
  m: [0, 1]
tensors:
  t:
    mesh: m
    shape: [4, 6]
    allocation: [1, 0]
  u:
    mesh: m
    shape: [8, 6]
    schedule:
      - outer_split: {axis: 0, factor: 2}
      - parallelize: {axis: 0, type: DIDx}
    allocation: [-1, 1]
  v:
    mesh: m
    shape: [8, 3]
    schedule:
      - split: {axis: 0, factor: 2}
      - reorder: [2, 0, 1]
    allocation: [1, 2, 0]
`,
		want: fusionSum{
			Name:   "in",
			Meshes: []meshSum{{"m", []int{2}, []int{0, 1}}},
			Tensors: []tensorSum{{
				Name: "t", Mesh: "m", DType: "float32", Declared: true,
				Logical: []int{4, 6}, Loop: []int{4, 6},
				Shape: []int{4, 6}, LocalShape: []int{4, 6}, Layout: []int{1, 0},
			}, {
				Name: "u", Mesh: "m", DType: "float32", Declared: true,
				Logical: []int{8, 6}, Loop: []int{2, 4, 6},
				Shape: []int{8, 6}, LocalShape: []int{4, 6}, Layout: []int{1, 0},
				Shardings: []Sharding{{Type: DIDx, Digits: []Digit{{Axis: 0, Stride: 4, Extent: 2}}, Kind: Block}},
			}, {
				Name: "v", Mesh: "m", DType: "float32", Declared: true,
				Logical: []int{8, 3}, Loop: []int{3, 4, 2},
				Shape: []int{8, 3}, LocalShape: []int{8, 3}, Layout: []int{0, 1},
			}},
			Inputs:  []string{"t", "u", "v"},
			Outputs: []string{"t", "u", "v"},
		},
	},
	{
		name: "reduction_keeps_r_axis_and_set_drops_it",
		src: `meshes:
  m: [0, 1]
  n: [2, 3]
tensors:
  x:
    mesh: m
    dtype: bfloat16
    shape: [8, 4]
    schedule:
      - outer_split: {axis: 0, factor: 2}
      - parallelize: {axis: 0, type: DIDx}
  s:
    shape: [8, 4]
    schedule:
      - outer_split: {axis: 0, factor: 2}
      - parallelize: {axis: 0, type: DIDx}
      - outer_split: {axis: 2, factor: 2}
      - parallelize: {axis: 2, type: DIDx}
  z:
    mesh: n
    dtype: bfloat16
    shape: [4]
ops:
  - {op: set, in: s, out: z}
  - {op: sum, in: x, out: s, axis: -2}
`,
		want: fusionSum{
			Name:   "in",
			Meshes: []meshSum{{"m", []int{2}, []int{0, 1}}, {"n", []int{2}, []int{2, 3}}},
			Tensors: []tensorSum{{
				Name: "x", Mesh: "m", DType: "bfloat16", Declared: true,
				Logical: []int{8, 4}, Loop: []int{2, 4, 4},
				Shape: []int{8, 4}, LocalShape: []int{4, 4}, Layout: []int{0, 1},
				Shardings: []Sharding{{Type: DIDx, Digits: []Digit{{Axis: 0, Stride: 4, Extent: 2}}, Kind: Block}},
			}, {
				// DIDx on the reduction axis does not shard; the one on
				// the value axis does (a reduce-scatter).
				Name: "s", Mesh: "m", DType: "bfloat16", Declared: true, Producer: "s = sum(x, axis=0)",
				Logical: []int{8, 4}, Reductions: []int{0}, Loop: []int{2, 4, 2, 2},
				Shape: []int{4}, LocalShape: []int{2}, Layout: []int{0},
				Shardings: []Sharding{{Type: DIDx, Digits: []Digit{{Axis: 0, Stride: 2, Extent: 2}}, Kind: Block}},
			}, {
				Name: "z", Mesh: "n", DType: "bfloat16", Declared: true, Producer: "z = set(s)",
				Logical: []int{4}, Loop: []int{4},
				Shape: []int{4}, LocalShape: []int{4}, Layout: []int{0},
			}},
			Ops:     []string{"s = sum(x, axis=0)", "z = set(s)"},
			Inputs:  []string{"x"},
			Outputs: []string{"z"},
		},
	},
	{
		name: "implicit_tensors_and_default_endpoints",
		src: `meshes:
  m: [0, 1, 2, 3]
tensors:
  a:
    mesh: m
    dtype: int32
    shape: [4, 8, 2]
ops:
  - {op: max, in: a, out: b, axis: 1}
  - {op: set, in: b, out: c}
  - {op: prod, in: c, out: d, axis: -1}
  - {op: min, in: a, out: e, axis: 2}
`,
		want: fusionSum{
			Name:   "in",
			Meshes: []meshSum{mesh4},
			Tensors: []tensorSum{{
				Name: "a", Mesh: "m", DType: "int32", Declared: true,
				Logical: []int{4, 8, 2}, Loop: []int{4, 8, 2},
				Shape: []int{4, 8, 2}, LocalShape: []int{4, 8, 2}, Layout: []int{0, 1, 2},
			}, {
				Name: "b", Mesh: "m", DType: "int32", Producer: "b = max(a, axis=1)",
				Logical: []int{4, 8, 2}, Reductions: []int{1}, Loop: []int{4, 8, 2},
				Shape: []int{4, 2}, LocalShape: []int{4, 2}, Layout: []int{0, 1},
			}, {
				Name: "c", Mesh: "m", DType: "int32", Producer: "c = set(b)",
				Logical: []int{4, 2}, Loop: []int{4, 2},
				Shape: []int{4, 2}, LocalShape: []int{4, 2}, Layout: []int{0, 1},
			}, {
				Name: "d", Mesh: "m", DType: "int32", Producer: "d = prod(c, axis=1)",
				Logical: []int{4, 2}, Reductions: []int{1}, Loop: []int{4, 2},
				Shape: []int{4}, LocalShape: []int{4}, Layout: []int{0},
			}, {
				Name: "e", Mesh: "m", DType: "int32", Producer: "e = min(a, axis=2)",
				Logical: []int{4, 8, 2}, Reductions: []int{2}, Loop: []int{4, 8, 2},
				Shape: []int{4, 8}, LocalShape: []int{4, 8}, Layout: []int{0, 1},
			}},
			Ops:     []string{"b = max(a, axis=1)", "c = set(b)", "d = prod(c, axis=1)", "e = min(a, axis=2)"},
			Inputs:  []string{"a"},
			Outputs: []string{"d", "e"},
		},
	},
	{
		name: "explicit_endpoints_null_declaration_and_declared_shapes",
		src: `name: custom
meshes:
  m: [0, 1]
tensors:
  a: {mesh: m, shape: [2, 6]}
  b:
  c: {shape: [2, 6]}
  d: {shape: [2, 6], dtype: float32}
ops:
  - {op: sum, in: c, out: d, axis: 0}
  - {op: set, in: a, out: b}
  - {op: set, in: b, out: c}
inputs: [a]
outputs: [b, d]
`,
		want: fusionSum{
			Name:   "custom",
			Meshes: []meshSum{{"m", []int{2}, []int{0, 1}}},
			Tensors: []tensorSum{{
				Name: "a", Mesh: "m", DType: "float32", Declared: true,
				Logical: []int{2, 6}, Loop: []int{2, 6},
				Shape: []int{2, 6}, LocalShape: []int{2, 6}, Layout: []int{0, 1},
			}, {
				Name: "b", Mesh: "m", DType: "float32", Declared: true, Producer: "b = set(a)",
				Logical: []int{2, 6}, Loop: []int{2, 6},
				Shape: []int{2, 6}, LocalShape: []int{2, 6}, Layout: []int{0, 1},
			}, {
				Name: "c", Mesh: "m", DType: "float32", Declared: true, Producer: "c = set(b)",
				Logical: []int{2, 6}, Loop: []int{2, 6},
				Shape: []int{2, 6}, LocalShape: []int{2, 6}, Layout: []int{0, 1},
			}, {
				// The declared shape may include the reduction axis.
				Name: "d", Mesh: "m", DType: "float32", Declared: true, Producer: "d = sum(c, axis=0)",
				Logical: []int{2, 6}, Reductions: []int{0}, Loop: []int{2, 6},
				Shape: []int{6}, LocalShape: []int{6}, Layout: []int{0},
			}},
			Ops:     []string{"b = set(a)", "c = set(b)", "d = sum(c, axis=0)"},
			Inputs:  []string{"a"},
			Outputs: []string{"b", "d"},
		},
	},
	{
		name: "unused_input_and_rank0",
		src: `meshes:
  m: [0]
tensors:
  s: {mesh: m, shape: []}
  w: {mesh: m, dtype: float16, shape: [3]}
`,
		want: fusionSum{
			Name:   "in",
			Meshes: []meshSum{{"m", []int{1}, []int{0}}},
			Tensors: []tensorSum{{
				Name: "s", Mesh: "m", DType: "float32", Declared: true,
			}, {
				Name: "w", Mesh: "m", DType: "float16", Declared: true,
				Logical: []int{3}, Loop: []int{3},
				Shape: []int{3}, LocalShape: []int{3}, Layout: []int{0},
			}},
			Inputs:  []string{"s", "w"},
			Outputs: []string{"s", "w"},
		},
	},
}

func TestParseValid(t *testing.T) {
	for _, tt := range slices.Concat(validTests, layerTests) {
		t.Run(tt.name, func(t *testing.T) {
			f, err := Parse("testdata/in.yaml", []byte(tt.src))
			if err != nil {
				t.Fatalf("Parse: unexpected error:\n%v", err)
			}
			if diff := cmp.Diff(tt.want, summarize(f), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("Parse mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestParseSchedule checks that schedule steps are kept as written, with
// positions normalized, and where they are.
func TestParseSchedule(t *testing.T) {
	src := `meshes:
  m: [0, 1]
tensors:
  tv0:
    mesh: m
    shape: [4, 6, 2]
    schedule:
      - merge: {axis: -2}
      - split: {axis: -1, factor: 4}
      - reorder: [-1, 1, 0]
      - outer_split: {axis: 2, factor: 2}
      - parallelize: {axis: -2, type: DIDx}
`
	f, err := Parse("s.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	tv := f.Tensor("tv0")
	want := []ScheduleStep{
		{Kind: StepMerge, Axis: 1},
		{Kind: StepSplit, Axis: 1, Factor: 4},
		{Kind: StepReorder, Order: []int{2, 1, 0}},
		{Kind: StepOuterSplit, Axis: 2, Factor: 2},
		{Kind: StepParallelize, Axis: 2, Type: DIDx},
	}
	if diff := cmp.Diff(want, tv.Schedule, cmpopts.IgnoreFields(ScheduleStep{}, "Pos")); diff != "" {
		t.Errorf("Schedule mismatch (-want +got):\n%s", diff)
	}
	for i, s := range tv.Schedule {
		if int(s.Pos.Line) != 8+i || s.Pos.Col != 9 {
			t.Errorf("step %d at %v, want %d:9", i, s.Pos, 8+i)
		}
	}
	// [4, 6, 2] -> merge [4, 12] -> split [4, 3, 4] -> reorder [4, 3, 4]
	// -> outer_split [4, 3, 2, 2] with DIDx on the 2 that is the outer half
	// of logical axis 0.
	var loop []int
	for _, id := range tv.Loop {
		loop = append(loop, id.Extent)
	}
	if diff := cmp.Diff([]int{4, 3, 2, 2}, loop); diff != "" {
		t.Errorf("loop extents mismatch (-want +got):\n%s", diff)
	}
	wantSh := []Sharding{{Type: DIDx, Digits: []Digit{{Axis: 0, Stride: 2, Extent: 2}}, Kind: Block}}
	if diff := cmp.Diff(wantSh, tv.Shardings()); diff != "" {
		t.Errorf("Shardings mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]int{2, 6, 2}, tv.LocalShape()); diff != "" {
		t.Errorf("LocalShape mismatch (-want +got):\n%s", diff)
	}
	if got := tv.Pos; got.Line != 4 || got.Col != 3 {
		t.Errorf("tensor at %v, want 4:3", got)
	}
	if f.Name != "s" || f.File != "s.yaml" {
		t.Errorf("Name, File = %q, %q, want \"s\", \"s.yaml\"", f.Name, f.File)
	}
}

// TestParseMesh checks the mesh helpers on the meshes Parse builds.
func TestParseMesh(t *testing.T) {
	src := `meshes:
  a: [3, 1]
  b: [[0, 1, 2], [3, 4, 5]]
  c: [[[0, 1], [2, 3]], [[4, 5], [6, 7]]]
`
	f, err := Parse("m.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	type meshInfo struct {
		Rank           int
		SizeX, SizeY   int
		SizeZ          int
		HasY, HasZ     bool
		TeamsX, TeamsY [][]int
	}
	got := map[string]meshInfo{}
	for _, m := range f.Meshes {
		got[m.Name] = meshInfo{
			Rank: m.Rank(), SizeX: m.Size(DIDx), SizeY: m.Size(DIDy), SizeZ: m.Size(DIDz),
			HasY: m.Has(DIDy), HasZ: m.Has(DIDz),
			TeamsX: m.Teams(DIDx), TeamsY: m.Teams(DIDy),
		}
	}
	want := map[string]meshInfo{
		"a": {Rank: 1, SizeX: 2, SizeY: 1, SizeZ: 1,
			TeamsX: [][]int{{3, 1}}, TeamsY: [][]int{{3}, {1}}},
		"b": {Rank: 2, SizeX: 3, SizeY: 2, SizeZ: 1, HasY: true,
			TeamsX: [][]int{{0, 1, 2}, {3, 4, 5}}, TeamsY: [][]int{{0, 3}, {1, 4}, {2, 5}}},
		"c": {Rank: 3, SizeX: 2, SizeY: 2, SizeZ: 2, HasY: true, HasZ: true,
			TeamsX: [][]int{{0, 1}, {2, 3}, {4, 5}, {6, 7}}, TeamsY: [][]int{{0, 2}, {1, 3}, {4, 6}, {5, 7}}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("mesh mismatch (-want +got):\n%s", diff)
	}
}

// TestParseLongSchedule splits an axis and merges the halves back many times:
// resolving the sharding must not take time exponential in the schedule.
func TestParseLongSchedule(t *testing.T) {
	var b strings.Builder
	b.WriteString("meshes:\n  m: [0, 1]\ntensors:\n  tv0:\n    mesh: m\n    shape: [4, 6]\n    schedule:\n")
	for range 100 {
		b.WriteString("      - split: {axis: 0, factor: 2}\n      - merge: {axis: 0}\n")
	}
	b.WriteString("      - outer_split: {axis: 0, factor: 2}\n      - parallelize: {axis: 0, type: DIDx}\n    allocation: [1, 2]\n")
	done := make(chan *Fusion, 1)
	go func() {
		f, err := Parse("long.yaml", []byte(b.String()))
		if err != nil {
			t.Error(err)
		}
		done <- f
	}()
	var f *Fusion
	select {
	case f = <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("Parse did not finish in 20s")
	}
	if f == nil {
		return
	}
	tv := f.Tensor("tv0")
	want := []Sharding{{Type: DIDx, Digits: []Digit{{Axis: 0, Stride: 2, Extent: 2}}, Kind: Block}}
	if diff := cmp.Diff(want, tv.Shardings()); diff != "" {
		t.Errorf("Shardings mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]int{2, 6}, tv.LocalShape()); diff != "" {
		t.Errorf("LocalShape mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]int{0, 1}, tv.Layout()); diff != "" {
		t.Errorf("Layout mismatch (-want +got):\n%s", diff)
	}
}
