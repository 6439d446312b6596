package ir

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/nvcomm/nvcomm/internal/ops"
)

// layerTests are well-formed fusions with the ops of layers (elementwise,
// broadcast, matmul, linear) and what Parse makes of them. TestParseValid
// runs them, and the fuzz test seeds from them.
var layerTests = []validTest{
	{
		// Megatron's MLP: a column-parallel linear (w1 split by rows, so h
		// by columns), relu, then a row-parallel linear whose contracted
		// axis rk its schedule splits over the devices, which sums it, and
		// a copy.
		name: "megatron_mlp",
		src: `meshes:
  m: [0, 1, 2, 3]
tensors:
  x: {mesh: m, shape: [8, 16]}
  w1: {mesh: m, shape: [32, 16], placements: [Shard(0)]}
  w2: {mesh: m, shape: [16, 32], placements: [Shard(1)]}
  h: {placements: [Shard(1)]}
  r: {placements: [Shard(-1)]}
  y: {shape: [8, 16], schedule: [{outer_split: {axis: 2, factor: 4}}, {parallelize: {axis: 2, type: DIDx}}]}
ops:
  - {op: linear, in: [x, w1], out: h}
  - {op: relu, in: h, out: r}
  - {op: linear, in: [r, w2], out: y}
  - {op: set, in: y, out: z}
`,
		want: fusionSum{
			Name:   "in",
			Meshes: []meshSum{mesh4},
			Tensors: []tensorSum{{
				Name: "x", Mesh: "m", DType: "float32", Declared: true,
				Logical: []int{8, 16}, Loop: []int{8, 16},
				Shape: []int{8, 16}, LocalShape: []int{8, 16}, Layout: []int{0, 1},
			}, {
				Name: "w1", Mesh: "m", DType: "float32", Declared: true,
				Logical: []int{32, 16}, Loop: []int{4, 8, 16},
				Shape: []int{32, 16}, LocalShape: []int{8, 16}, Layout: []int{0, 1},
				Shardings: []Sharding{{Type: DIDx, Digits: []Digit{{Axis: 0, Stride: 8, Extent: 4}}, Kind: Block}},
			}, {
				Name: "w2", Mesh: "m", DType: "float32", Declared: true,
				Logical: []int{16, 32}, Loop: []int{16, 4, 8},
				Shape: []int{16, 32}, LocalShape: []int{16, 8}, Layout: []int{0, 1},
				Shardings: []Sharding{{Type: DIDx, Digits: []Digit{{Axis: 1, Stride: 8, Extent: 4}}, Kind: Block}},
			}, {
				// [m, n, rk]: Shard(1) counts the value dims only.
				Name: "h", Mesh: "m", DType: "float32", Declared: true, Producer: "h = linear(x, w1)",
				Logical: []int{8, 32, 16}, Reductions: []int{2}, Loop: []int{8, 4, 8, 16},
				Shape: []int{8, 32}, LocalShape: []int{8, 8}, Layout: []int{0, 1},
				Shardings: []Sharding{{Type: DIDx, Digits: []Digit{{Axis: 1, Stride: 8, Extent: 4}}, Kind: Block}},
			}, {
				Name: "r", Mesh: "m", DType: "float32", Declared: true, Producer: "r = relu(h)",
				Logical: []int{8, 32}, Loop: []int{8, 4, 8},
				Shape: []int{8, 32}, LocalShape: []int{8, 8}, Layout: []int{0, 1},
				Shardings: []Sharding{{Type: DIDx, Digits: []Digit{{Axis: 1, Stride: 8, Extent: 4}}, Kind: Block}},
			}, {
				// The schedule splits rk over the devices, which
				// shards nothing: y is replicated once summed.
				Name: "y", Mesh: "m", DType: "float32", Declared: true, Producer: "y = linear(r, w2)",
				Logical: []int{8, 16, 32}, Reductions: []int{2}, Loop: []int{8, 16, 4, 8},
				Shape: []int{8, 16}, LocalShape: []int{8, 16}, Layout: []int{0, 1},
			}, {
				Name: "z", Mesh: "m", DType: "float32", Producer: "z = set(y)",
				Logical: []int{8, 16}, Loop: []int{8, 16},
				Shape: []int{8, 16}, LocalShape: []int{8, 16}, Layout: []int{0, 1},
			}},
			Ops:     []string{"h = linear(x, w1)", "r = relu(h)", "y = linear(r, w2)", "z = set(y)"},
			Inputs:  []string{"x", "w1", "w2"},
			Outputs: []string{"z"},
		},
	},
	{
		// Extent-1 axes broadcast; the output takes the first operand's
		// mesh unless it declares one; "in" may be a list of one.
		name: "elementwise_broadcasting_and_meshes",
		src: `meshes:
  m: [0, 1]
  n: [2, 3]
tensors:
  a: {mesh: m, dtype: int32, shape: [4, 1, 6]}
  b: {mesh: n, dtype: int32, shape: [1, 5, 6]}
  c: {placements: [Shard(1)]}
  g: {mesh: m, dtype: int32, shape: [4, 5, 6]}
ops:
  - {op: add, in: [a, b], out: c}
  - {op: sub, in: [c, c], out: d}
  - {op: mul, in: [d, a], out: e}
  - {op: maximum, in: [b, e], out: f}
  - {op: minimum, in: [b, f], out: g}
  - {op: neg, in: g, out: h}
  - {op: abs, in: [h], out: i}
`,
		want: fusionSum{
			Name:   "in",
			Meshes: []meshSum{{"m", []int{2}, []int{0, 1}}, {"n", []int{2}, []int{2, 3}}},
			Tensors: []tensorSum{{
				Name: "a", Mesh: "m", DType: "int32", Declared: true,
				Logical: []int{4, 1, 6}, Loop: []int{4, 1, 6},
				Shape: []int{4, 1, 6}, LocalShape: []int{4, 1, 6}, Layout: []int{0, 1, 2},
			}, {
				Name: "b", Mesh: "n", DType: "int32", Declared: true,
				Logical: []int{1, 5, 6}, Loop: []int{1, 5, 6},
				Shape: []int{1, 5, 6}, LocalShape: []int{1, 5, 6}, Layout: []int{0, 1, 2},
			}, {
				// 5 over 2 devices: torch.chunk's 3 and 2.
				Name: "c", Mesh: "m", DType: "int32", Declared: true, Producer: "c = add(a, b)",
				Logical: []int{4, 5, 6}, Loop: []int{4, 2, 3, 6},
				Shape: []int{4, 5, 6}, LocalShape: []int{4, 3, 6}, Layout: []int{0, 1, 2},
				Shardings: []Sharding{{Type: DIDx, Digits: []Digit{{Axis: 1, Stride: 3, Extent: 2}}, Kind: Block}},
			}, {
				Name: "d", Mesh: "m", DType: "int32", Producer: "d = sub(c, c)",
				Logical: []int{4, 5, 6}, Loop: []int{4, 5, 6},
				Shape: []int{4, 5, 6}, LocalShape: []int{4, 5, 6}, Layout: []int{0, 1, 2},
			}, {
				Name: "e", Mesh: "m", DType: "int32", Producer: "e = mul(d, a)",
				Logical: []int{4, 5, 6}, Loop: []int{4, 5, 6},
				Shape: []int{4, 5, 6}, LocalShape: []int{4, 5, 6}, Layout: []int{0, 1, 2},
			}, {
				Name: "f", Mesh: "n", DType: "int32", Producer: "f = maximum(b, e)",
				Logical: []int{4, 5, 6}, Loop: []int{4, 5, 6},
				Shape: []int{4, 5, 6}, LocalShape: []int{4, 5, 6}, Layout: []int{0, 1, 2},
			}, {
				Name: "g", Mesh: "m", DType: "int32", Declared: true, Producer: "g = minimum(b, f)",
				Logical: []int{4, 5, 6}, Loop: []int{4, 5, 6},
				Shape: []int{4, 5, 6}, LocalShape: []int{4, 5, 6}, Layout: []int{0, 1, 2},
			}, {
				Name: "h", Mesh: "m", DType: "int32", Producer: "h = neg(g)",
				Logical: []int{4, 5, 6}, Loop: []int{4, 5, 6},
				Shape: []int{4, 5, 6}, LocalShape: []int{4, 5, 6}, Layout: []int{0, 1, 2},
			}, {
				Name: "i", Mesh: "m", DType: "int32", Producer: "i = abs(h)",
				Logical: []int{4, 5, 6}, Loop: []int{4, 5, 6},
				Shape: []int{4, 5, 6}, LocalShape: []int{4, 5, 6}, Layout: []int{0, 1, 2},
			}},
			Ops: []string{"c = add(a, b)", "d = sub(c, c)", "e = mul(d, a)", "f = maximum(b, e)",
				"g = minimum(b, f)", "h = neg(g)", "i = abs(h)"},
			Inputs:  []string{"a", "b"},
			Outputs: []string{"i"},
		},
	},
	{
		// broadcast takes its output's shape from the declaration;
		// negative axes count from the output's end. Rank-0 tensors are
		// operands like any other.
		name: "broadcast_and_rank0",
		src: `meshes:
  m: [0, 1]
tensors:
  v: {mesh: m, shape: [6]}
  w: {shape: [4, 6]}
  u: {shape: [6, 3], placements: [Shard(0)]}
  s: {mesh: m, shape: []}
  t: {mesh: m, shape: []}
ops:
  - {op: broadcast, in: v, out: w, axes: [0]}
  - {op: broadcast, in: v, out: u, axes: [-1]}
  - {op: add, in: [s, t], out: st}
  - {op: set, in: s, out: s2}
`,
		want: fusionSum{
			Name:   "in",
			Meshes: []meshSum{{"m", []int{2}, []int{0, 1}}},
			Tensors: []tensorSum{{
				Name: "v", Mesh: "m", DType: "float32", Declared: true,
				Logical: []int{6}, Loop: []int{6},
				Shape: []int{6}, LocalShape: []int{6}, Layout: []int{0},
			}, {
				Name: "s", Mesh: "m", DType: "float32", Declared: true,
			}, {
				Name: "t", Mesh: "m", DType: "float32", Declared: true,
			}, {
				Name: "w", Mesh: "m", DType: "float32", Declared: true, Producer: "w = broadcast(v, axes=[0])",
				Logical: []int{4, 6}, Loop: []int{4, 6},
				Shape: []int{4, 6}, LocalShape: []int{4, 6}, Layout: []int{0, 1},
			}, {
				Name: "u", Mesh: "m", DType: "float32", Declared: true, Producer: "u = broadcast(v, axes=[1])",
				Logical: []int{6, 3}, Loop: []int{2, 3, 3},
				Shape: []int{6, 3}, LocalShape: []int{3, 3}, Layout: []int{0, 1},
				Shardings: []Sharding{{Type: DIDx, Digits: []Digit{{Axis: 0, Stride: 3, Extent: 2}}, Kind: Block}},
			}, {
				Name: "st", Mesh: "m", DType: "float32", Producer: "st = add(s, t)",
			}, {
				Name: "s2", Mesh: "m", DType: "float32", Producer: "s2 = set(s)",
			}},
			Ops: []string{"w = broadcast(v, axes=[0])", "u = broadcast(v, axes=[1])",
				"st = add(s, t)", "s2 = set(s)"},
			Inputs:  []string{"v", "s", "t"},
			Outputs: []string{"w", "u", "st", "s2"},
		},
	},
	{
		// matmul: equal batch axes, or a 2-D b shared by every batch. The
		// output is [...batch, m, n, rk]; schedule positions count rk.
		name: "matmul_shapes",
		src: `meshes:
  m: [0, 1, 2, 3]
tensors:
  a: {mesh: m, dtype: bfloat16, shape: [2, 3, 8, 4]}
  b: {mesh: m, dtype: bfloat16, shape: [2, 3, 4, 5]}
  b2: {mesh: m, dtype: bfloat16, shape: [4, 5]}
  a2: {mesh: m, dtype: bfloat16, shape: [8, 4]}
  c:
    shape: [2, 3, 8, 5, 4]
    schedule:
      - outer_split: {axis: -1, factor: 4}
      - parallelize: {axis: -2, type: DIDx}
  d: {shape: [2, 3, 8, 5], placements: [Shard(2)]}
ops:
  - {op: matmul, in: [a, b], out: c}
  - {op: matmul, in: [a, b2], out: d}
  - {op: matmul, in: [a2, b2], out: e}
`,
		want: fusionSum{
			Name:   "in",
			Meshes: []meshSum{mesh4},
			Tensors: []tensorSum{{
				Name: "a", Mesh: "m", DType: "bfloat16", Declared: true,
				Logical: []int{2, 3, 8, 4}, Loop: []int{2, 3, 8, 4},
				Shape: []int{2, 3, 8, 4}, LocalShape: []int{2, 3, 8, 4}, Layout: []int{0, 1, 2, 3},
			}, {
				Name: "b", Mesh: "m", DType: "bfloat16", Declared: true,
				Logical: []int{2, 3, 4, 5}, Loop: []int{2, 3, 4, 5},
				Shape: []int{2, 3, 4, 5}, LocalShape: []int{2, 3, 4, 5}, Layout: []int{0, 1, 2, 3},
			}, {
				Name: "b2", Mesh: "m", DType: "bfloat16", Declared: true,
				Logical: []int{4, 5}, Loop: []int{4, 5},
				Shape: []int{4, 5}, LocalShape: []int{4, 5}, Layout: []int{0, 1},
			}, {
				Name: "a2", Mesh: "m", DType: "bfloat16", Declared: true,
				Logical: []int{8, 4}, Loop: []int{8, 4},
				Shape: []int{8, 4}, LocalShape: []int{8, 4}, Layout: []int{0, 1},
			}, {
				// DIDx on rk: a device-split contraction, nothing sharded.
				Name: "c", Mesh: "m", DType: "bfloat16", Declared: true, Producer: "c = matmul(a, b)",
				Logical: []int{2, 3, 8, 5, 4}, Reductions: []int{4}, Loop: []int{2, 3, 8, 5, 4, 1},
				Shape: []int{2, 3, 8, 5}, LocalShape: []int{2, 3, 8, 5}, Layout: []int{0, 1, 2, 3},
			}, {
				Name: "d", Mesh: "m", DType: "bfloat16", Declared: true, Producer: "d = matmul(a, b2)",
				Logical: []int{2, 3, 8, 5, 4}, Reductions: []int{4}, Loop: []int{2, 3, 4, 2, 5, 4},
				Shape: []int{2, 3, 8, 5}, LocalShape: []int{2, 3, 2, 5}, Layout: []int{0, 1, 2, 3},
				Shardings: []Sharding{{Type: DIDx, Digits: []Digit{{Axis: 2, Stride: 2, Extent: 4}}, Kind: Block}},
			}, {
				Name: "e", Mesh: "m", DType: "bfloat16", Producer: "e = matmul(a2, b2)",
				Logical: []int{8, 5, 4}, Reductions: []int{2}, Loop: []int{8, 5, 4},
				Shape: []int{8, 5}, LocalShape: []int{8, 5}, Layout: []int{0, 1},
			}},
			Ops:     []string{"c = matmul(a, b)", "d = matmul(a, b2)", "e = matmul(a2, b2)"},
			Inputs:  []string{"a", "b", "b2", "a2"},
			Outputs: []string{"c", "d", "e"},
		},
	},
	{
		// linear: x[..., k], w[n, k], bias[n] gives [..., n, rk]. On a 2-D
		// mesh, a schedule splits rk along one mesh axis while another
		// split shards a dim along the other.
		name: "linear_shapes_on_2d_mesh",
		src: `meshes:
  g: [[0, 1], [2, 3]]
tensors:
  x: {mesh: g, dtype: float16, shape: [2, 8, 16]}
  w: {mesh: g, dtype: float16, shape: [32, 16], placements: [Replicate(), Shard(0)]}
  bias: {mesh: g, dtype: float16, shape: [32], placements: [Replicate(), Shard(0)]}
  v: {mesh: g, dtype: float16, shape: [16]}
  z: {dtype: float16, placements: [Replicate(), Shard(-1)]}
  y:
    shape: [2, 8, 32, 16]
    schedule:
      - {outer_split: {axis: 3, factor: 2}}
      - {parallelize: {axis: 3, type: DIDx}}
      - {outer_split: {axis: 0, factor: 2}}
      - {parallelize: {axis: 0, type: DIDy}}
ops:
  - {op: linear, in: [x, w, bias], out: z}
  - {op: linear, in: [v, w], out: y1}
  - {op: linear, in: [x, w], out: y}
`,
		want: fusionSum{
			Name:   "in",
			Meshes: []meshSum{{"g", []int{2, 2}, []int{0, 1, 2, 3}}},
			Tensors: []tensorSum{{
				Name: "x", Mesh: "g", DType: "float16", Declared: true,
				Logical: []int{2, 8, 16}, Loop: []int{2, 8, 16},
				Shape: []int{2, 8, 16}, LocalShape: []int{2, 8, 16}, Layout: []int{0, 1, 2},
			}, {
				Name: "w", Mesh: "g", DType: "float16", Declared: true,
				Logical: []int{32, 16}, Loop: []int{2, 16, 16},
				Shape: []int{32, 16}, LocalShape: []int{16, 16}, Layout: []int{0, 1},
				Shardings: []Sharding{{Type: DIDx, Digits: []Digit{{Axis: 0, Stride: 16, Extent: 2}}, Kind: Block}},
			}, {
				Name: "bias", Mesh: "g", DType: "float16", Declared: true,
				Logical: []int{32}, Loop: []int{2, 16},
				Shape: []int{32}, LocalShape: []int{16}, Layout: []int{0},
				Shardings: []Sharding{{Type: DIDx, Digits: []Digit{{Axis: 0, Stride: 16, Extent: 2}}, Kind: Block}},
			}, {
				Name: "v", Mesh: "g", DType: "float16", Declared: true,
				Logical: []int{16}, Loop: []int{16},
				Shape: []int{16}, LocalShape: []int{16}, Layout: []int{0},
			}, {
				Name: "z", Mesh: "g", DType: "float16", Declared: true, Producer: "z = linear(x, w, bias)",
				Logical: []int{2, 8, 32, 16}, Reductions: []int{3}, Loop: []int{2, 8, 2, 16, 16},
				Shape: []int{2, 8, 32}, LocalShape: []int{2, 8, 16}, Layout: []int{0, 1, 2},
				Shardings: []Sharding{{Type: DIDx, Digits: []Digit{{Axis: 2, Stride: 16, Extent: 2}}, Kind: Block}},
			}, {
				Name: "y1", Mesh: "g", DType: "float16", Producer: "y1 = linear(v, w)",
				Logical: []int{32, 16}, Reductions: []int{1}, Loop: []int{32, 16},
				Shape: []int{32}, LocalShape: []int{32}, Layout: []int{0},
			}, {
				Name: "y", Mesh: "g", DType: "float16", Declared: true, Producer: "y = linear(x, w)",
				Logical: []int{2, 8, 32, 16}, Reductions: []int{3}, Loop: []int{2, 1, 8, 32, 2, 8},
				Shape: []int{2, 8, 32}, LocalShape: []int{1, 8, 32}, Layout: []int{0, 1, 2},
				Shardings: []Sharding{{Type: DIDy, Digits: []Digit{{Axis: 0, Stride: 1, Extent: 2}}, Kind: Block}},
			}},
			Ops:     []string{"z = linear(x, w, bias)", "y1 = linear(v, w)", "y = linear(x, w)"},
			Inputs:  []string{"x", "w", "bias", "v"},
			Outputs: []string{"z", "y1", "y"},
		},
	},
}

// TestContractionPartial checks that Partial(sum) on a contraction's output
// makes it pending terms, one per device along that mesh axis, and the
// schedule of what the op computes (its Combined): its trailing reduction
// axis outer-split by the mesh axis size, the outer part parallelized on
// that axis's type.
func TestContractionPartial(t *testing.T) {
	src := `meshes:
  g: [[0, 1, 2], [3, 4, 5]]
tensors:
  a: {mesh: g, shape: [4, 12]}
  b: {mesh: g, shape: [12, 6]}
  c: {placements: [Shard(1), Partial(sum)]}
ops:
  - {op: matmul, in: [a, b], out: c}
`
	f, err := Parse("p.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	c := f.Tensor("c")
	if diff := cmp.Diff([]int{3, 4, 6}, c.Shape()); diff != "" || c.Partial != OpSum {
		t.Errorf("pending terms: Partial %q, shape mismatch (-want +got):\n%s", c.Partial, diff)
	}
	c = c.Combined
	want := []ScheduleStep{
		{Kind: StepOuterSplit, Axis: 2, Factor: 3}, {Kind: StepParallelize, Axis: 2, Type: DIDx},
		{Kind: StepOuterSplit, Axis: 1, Factor: 2}, {Kind: StepParallelize, Axis: 1, Type: DIDy},
	}
	if diff := cmp.Diff(want, c.Schedule, cmpopts.IgnoreFields(ScheduleStep{}, "Pos")); diff != "" {
		t.Errorf("Schedule mismatch (-want +got):\n%s", diff)
	}
	type axis struct {
		Extent    int
		Reduction bool
		Parallel  ParallelType
	}
	var loop []axis
	for _, id := range c.Loop {
		loop = append(loop, axis{id.Extent, id.Reduction, id.Parallel})
	}
	wantLoop := []axis{{4, false, Serial}, {2, false, DIDy}, {3, false, Serial}, {3, true, DIDx}, {4, true, Serial}}
	if diff := cmp.Diff(wantLoop, loop); diff != "" {
		t.Errorf("Loop mismatch (-want +got):\n%s", diff)
	}
}

// TestReductionPartial checks that Partial(op) on a reduction's output
// makes it pending terms, one per device along that mesh axis, and that
// what the op computes (its Combined) splits the reduced axis, in its
// place, over that mesh axis, as a schedule splitting it would say.
func TestReductionPartial(t *testing.T) {
	src := `meshes:
  g: [[0, 1, 2], [3, 4, 5]]
tensors:
  x: {mesh: g, shape: [4, 6, 8], placements: [Replicate(), Shard(1)]}
  y: {placements: [Shard(0), Partial(max)]}
ops:
  - {op: max, in: x, out: y, axis: 1}
`
	f, err := Parse("p.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	want := []ScheduleStep{
		{Kind: StepOuterSplit, Axis: 1, Factor: 3}, {Kind: StepParallelize, Axis: 1, Type: DIDx},
		{Kind: StepOuterSplit, Axis: 0, Factor: 2}, {Kind: StepParallelize, Axis: 0, Type: DIDy},
	}
	if y := f.Tensor("y"); y.Partial != OpMax || !slices.Equal(y.Shape(), []int{3, 4, 8}) {
		t.Errorf("y: Partial %q, shape %v, want max, [3 4 8]", y.Partial, y.Shape())
	}
	if diff := cmp.Diff(want, f.Tensor("y").Combined.Schedule, cmpopts.IgnoreFields(ScheduleStep{}, "Pos")); diff != "" {
		t.Errorf("Schedule mismatch (-want +got):\n%s", diff)
	}
}

// TestOpAxes checks InputAxis and ContractedAxis for every kind of op:
// for each input, the input axis of each output axis, then its contracted
// axis.
func TestOpAxes(t *testing.T) {
	src := `meshes:
  m: [0, 1]
tensors:
  a: {mesh: m, shape: [4, 6, 2]}
  p: {mesh: m, shape: [6], placements: [Partial(sum)]}
  e1: {mesh: m, shape: [4, 1, 6]}
  e2: {mesh: m, shape: [1, 5, 6]}
  o1: {mesh: m, shape: [1, 6]}
  v: {mesh: m, shape: [6]}
  bv: {shape: [4, 6, 3]}
  ma: {mesh: m, shape: [2, 8, 4]}
  mb: {mesh: m, shape: [2, 4, 5]}
  mb2: {mesh: m, shape: [4, 5]}
  x: {mesh: m, shape: [2, 8, 16]}
  w: {mesh: m, shape: [32, 16]}
  bias: {mesh: m, shape: [32]}
ops:
  - {op: set, in: a, out: set_a}
  - {op: sum, in: a, out: sum_a, axis: 1}
  - {op: set, in: p, out: set_p}
  - {op: add, in: [e1, e2], out: add_e}
  - {op: mul, in: [o1, o1], out: mul_o}
  - {op: relu, in: a, out: relu_a}
  - {op: broadcast, in: v, out: bv, axes: [0, 2]}
  - {op: matmul, in: [ma, mb], out: mm}
  - {op: matmul, in: [ma, mb2], out: mm2}
  - {op: linear, in: [x, w, bias], out: lin}
`
	f, err := Parse("axes.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	type inputAxes struct {
		Axes       []int // InputAxis(i, j) for each output axis j
		Contracted int
	}
	got := map[string][]inputAxes{}
	for _, op := range f.Ops {
		for i := range op.Inputs {
			var ia inputAxes
			for j := range op.Out.Shape() {
				ia.Axes = append(ia.Axes, op.InputAxis(i, j))
			}
			ia.Contracted = op.ContractedAxis(i)
			got[op.Expr()] = append(got[op.Expr()], ia)
		}
	}
	want := map[string][]inputAxes{
		"set_a = set(a)":                 {{[]int{0, 1, 2}, -1}},
		"sum_a = sum(a, axis=1)":         {{[]int{0, 2}, -1}},
		"set_p = sum(p, axis=0)":         {{[]int{1}, -1}}, // the Partial terms' axis 0 is reduced
		"add_e = add(e1, e2)":            {{[]int{0, -1, 2}, -1}, {[]int{-1, 1, 2}, -1}},
		"mul_o = mul(o1, o1)":            {{[]int{0, 1}, -1}, {[]int{0, 1}, -1}}, // 1 against 1 maps
		"relu_a = relu(a)":               {{[]int{0, 1, 2}, -1}},
		"bv = broadcast(v, axes=[0, 2])": {{[]int{-1, 0, -1}, -1}},
		"mm = matmul(ma, mb)":            {{[]int{0, 1, -1}, 2}, {[]int{0, -1, 2}, 1}},
		"mm2 = matmul(ma, mb2)":          {{[]int{0, 1, -1}, 2}, {[]int{-1, -1, 1}, 0}},
		"lin = linear(x, w, bias)":       {{[]int{0, 1, -1}, 2}, {[]int{-1, -1, 0}, 1}, {[]int{-1, -1, 0}, -1}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("axis maps mismatch (-want +got):\n%s", diff)
	}
	// Out-of-range arguments give -1, never a panic.
	mm := f.Ops[7]
	for _, c := range [][2]int{{-1, 0}, {2, 0}, {0, -1}, {0, 3}} {
		if a := mm.InputAxis(c[0], c[1]); a != -1 {
			t.Errorf("%s: InputAxis(%d, %d) = %d, want -1", mm.Expr(), c[0], c[1], a)
		}
	}
	if a := mm.ContractedAxis(2); a != -1 {
		t.Errorf("%s: ContractedAxis(2) = %d, want -1", mm.Expr(), a)
	}
}

// TestOpKindPredicates checks that every op kind is exactly one of set, a
// reduction, elementwise, broadcast, a contraction or a view.
func TestOpKindPredicates(t *testing.T) {
	got := map[string][]string{}
	for _, name := range ops.Names() {
		k := OpKind(name)
		class := "set"
		switch {
		case k.IsReduction():
			class = "reduction"
		case k.IsElementwise():
			class = "elementwise"
		case k.IsContraction():
			class = "contraction"
		case k == OpBroadcast:
			class = "broadcast"
		case k.family() == ops.View:
			class = "view"
		case k.family() == ops.Composite:
			class = "composite"
		}
		n := 0
		for _, b := range []bool{k.IsReduction(), k.IsElementwise(), k.IsContraction()} {
			if b {
				n++
			}
		}
		if n > 1 {
			t.Errorf("%s: %d predicates hold, want at most 1", name, n)
		}
		got[class] = append(got[class], name)
	}
	want := map[string][]string{
		"set":       {"set"},
		"reduction": {"sum", "prod", "max", "min"},
		"elementwise": {"add", "sub", "mul", "maximum", "minimum", "gt", "eq", "relu", "neg", "abs",
			"div", "exp", "log", "tanh", "sigmoid", "silu", "gelu", "gelu_tanh", "erf", "sqrt", "rsqrt", "reciprocal", "square"},
		"broadcast":   {"broadcast"},
		"contraction": {"matmul", "linear", "embedding", "gather", "scatter_add"},
		"view":        {"permute", "reshape", "cast", "slice", "cat", "tril"},
		"composite":   {"softmax", "mean", "rms_norm", "layer_norm", "sdpa", "log_softmax", "cross_entropy", "moe_topk", "moe_dispatch"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("op classes mismatch (-want +got):\n%s", diff)
	}
}
