package ir

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/nvcomm/nvcomm/internal/ops"
	"github.com/nvcomm/nvcomm/internal/shard"
)

// builderFusions are fusions with what the examples lack: Partial inputs
// read by sets, a broadcast, a propagated format-2 chain, a Partial
// output of a reduction.
var builderFusions = map[string]string{
	"partial_inputs": `
meshes:
  m: [0, 1]
  g: [[0, 1], [2, 3]]
tensors:
  p: {mesh: m, shape: [8, 6], placements: [Partial(sum)]}
  q: {mesh: g, shape: [4, 6], placements: [Shard(1), Partial(max)]}
  r: {mesh: m, placements: [Shard(0)]}
ops:
  - {op: set, in: p, out: r}
  - {op: set, in: q, out: s}
`,
	"broadcast_reduce": `
format: 2
meshes:
  m: [0, 1, 2, 3]
tensors:
  x: {mesh: m, shape: [8, 6], placements: [Shard(1)]}
  b: {shape: [8, 2, 6]}
  s: {placements: [Partial(max)]}
ops:
  - {op: broadcast, in: x, out: b, axes: [-2]}
  - {op: max, in: b, out: s, axis: 0}
  - {op: relu, in: s, out: y}
`,
}

// builderSources are the fusions TestBuilderAsParse rebuilds: the
// examples, the conformance and regression cases, and builderFusions.
func builderSources(t *testing.T) map[string][]byte {
	srcs := map[string][]byte{}
	for _, dir := range []string{"examples", "conformance", "regress"} {
		files, err := filepath.Glob(filepath.Join("../../testdata", dir, "*.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		for _, path := range files {
			src, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			srcs[dir+"/"+filepath.Base(path)] = src
		}
	}
	for name, src := range builderFusions {
		srcs[name] = []byte(src)
	}
	return srcs
}

// rebuild builds f again from its values: its fusion inputs by NewTensor,
// its ops and their outputs by NewOp, the whole by NewFusion.
func rebuild(f *Fusion) (*Fusion, error) {
	built := map[*Tensor]*Tensor{}
	var tensors []*Tensor
	for _, t := range f.Inputs {
		nt, err := NewTensor(TensorSpec{Name: t.Name, Mesh: t.Mesh, DType: t.DType, Shape: t.LogicalExtents(),
			Schedule: t.Schedule, Allocation: t.Allocation, Partial: t.Partial, Propagated: t.Propagated})
		if err != nil {
			return nil, err
		}
		built[t] = nt
		tensors = append(tensors, nt)
	}
	var ops []*Op
	for _, op := range f.Ops {
		spec := OpSpec{Index: op.Index, Kind: op.Kind, Axis: op.Axis, Axes: op.Axes, Attrs: op.Attrs, Scalar: op.Scalar, Of: op.Of, Out: TensorSpec{
			Name: op.Out.Name, Mesh: op.Out.Mesh, Shape: op.Out.LogicalExtents(), Schedule: op.Out.Schedule, Allocation: op.Out.Allocation,
			Partial: op.Out.Partial}}
		for _, in := range op.Inputs {
			spec.Inputs = append(spec.Inputs, built[in])
			if in.Partial != "" && !op.Kind.PassesSums() {
				spec.Kind = OpSet // as written: the set of its terms is their reduction
			}
		}
		nop, err := NewOp(spec)
		if err != nil {
			return nil, err
		}
		built[op.Out] = nop.Out
		ops = append(ops, nop)
		tensors = append(tensors, nop.Out)
	}
	return NewFusion(f.Name, tensors, ops)
}

// fusionSummary is what lowering reads of a fusion, but for the tensors'
// domains, which analysis and Schedule stand for.
type fusionSummary struct {
	Meshes, Tensors, Inputs, Outputs []string
	Analyses                         map[string]analysis
	Schedules                        map[string][]ScheduleStep
	Allocations                      map[string][]int
	Partial                          map[string]OpKind
	Ops                              []string
}

func summaryOf(f *Fusion) fusionSummary {
	names := func(ts []*Tensor) []string {
		var out []string
		for _, t := range ts {
			out = append(out, t.Name)
		}
		return out
	}
	s := fusionSummary{Tensors: names(f.Tensors), Inputs: names(f.Inputs), Outputs: names(f.Outputs),
		Analyses: map[string]analysis{}, Schedules: map[string][]ScheduleStep{}, Allocations: map[string][]int{}, Partial: map[string]OpKind{}}
	for _, m := range f.Meshes {
		s.Meshes = append(s.Meshes, m.Name)
	}
	for _, t := range f.Tensors {
		s.Analyses[t.Name], s.Schedules[t.Name], s.Allocations[t.Name], s.Partial[t.Name] = analysisOf(t), t.Schedule, t.Allocation, t.Partial
	}
	for _, op := range f.Ops {
		s.Ops = append(s.Ops, fmt.Sprintf("%d: %s axis %d axes %v, its output's producer %v", op.Index, op.Expr(), op.Axis, op.Axes, op.Out.Producer == op))
	}
	return s
}

// TestBuilderAsParse rebuilds every fusion of builderSources from its
// values and requires what Parse gave it: the builder and the file make
// the same fusion.
func TestBuilderAsParse(t *testing.T) {
	for name, src := range builderSources(t) {
		t.Run(name, func(t *testing.T) {
			f, err := Parse(name, src)
			if err != nil {
				t.Skip("rejected by Parse") // the error goldens' fusions
			}
			got, err := rebuild(f)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(summaryOf(f), summaryOf(got), cmpopts.IgnoreFields(ScheduleStep{}, "Pos"), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("built fusion differs (-parsed +built):\n%s", diff)
			}
		})
	}
}

// TestNewTensorPlacements builds tensors from placements and requires
// the schedules and analyses of the same placements in a file.
func TestNewTensorPlacements(t *testing.T) {
	f, err := Parse("p.yaml", []byte(builderFusions["partial_inputs"]))
	if err != nil {
		t.Fatal(err)
	}
	sh := func(d int) shard.Placement { return shard.Placement{Kind: shard.Shard, Dim: d} }
	partial := func(op string) shard.Placement { return shard.Placement{Kind: shard.Partial, Op: op} }
	for _, tc := range []struct {
		name string
		pls  []shard.Placement
	}{
		{"p", []shard.Placement{partial("sum")}},
		{"q", []shard.Placement{sh(1), partial("max")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := f.Tensor(tc.name)
			got, err := NewTensor(TensorSpec{Name: want.Name, Mesh: want.Mesh, DType: want.DType, Shape: want.LogicalExtents(), Placements: tc.pls})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(summaryOf(&Fusion{Tensors: []*Tensor{want}}), summaryOf(&Fusion{Tensors: []*Tensor{got}}), cmpopts.IgnoreFields(ScheduleStep{}, "Pos")); diff != "" {
				t.Errorf("built tensor differs (-parsed +built):\n%s", diff)
			}
		})
	}
}

// TestBuilderErrors: what a fusion file cannot say, the builder's values
// cannot either.
func TestBuilderErrors(t *testing.T) {
	m, err := NewMesh("m", []int{2}, []int{0, 1})
	if err != nil {
		t.Fatal(err)
	}
	x, err := NewTensor(TensorSpec{Name: "x", Mesh: m, DType: "float32", Shape: []int{4, 6}})
	if err != nil {
		t.Fatal(err)
	}
	w, err := NewTensor(TensorSpec{Name: "w", Mesh: m, DType: "float16", Shape: []int{6, 3}})
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewTensor(TensorSpec{Name: "p", Mesh: m, DType: "float32", Shape: []int{2, 6}, Placements: []shard.Placement{{Kind: shard.Partial, Op: "sum"}}})
	if err != nil {
		t.Fatal(err)
	}
	partial := []shard.Placement{{Kind: shard.Partial, Op: "sum"}}
	for _, tc := range []struct {
		name string
		spec OpSpec
		want string
	}{
		{"unknown op", OpSpec{Kind: "erfc", Inputs: []*Tensor{x}},
			`error: ops[0]: unknown op "erfc" (ops are: set; reductions sum, prod, max, min; elementwise add, sub, mul, maximum, minimum, gt, eq, div, relu, neg, abs, exp, log, tanh, sigmoid, silu, gelu, gelu_tanh, erf, sqrt, rsqrt, reciprocal, square; broadcast; contractions matmul, linear, embedding, gather, scatter_add; data movement permute, reshape, cast, slice, cat, tril; composite softmax, mean, rms_norm, layer_norm, sdpa, log_softmax, cross_entropy, moe_topk, moe_dispatch); docs/fusion.md ("ops") describes what each op does`},
		{"arity", OpSpec{Index: 2, Kind: OpMatmul, Inputs: []*Tensor{x}}, `error: ops[2]: matmul takes [a, b], got 1 operands`},
		{"nil operand", OpSpec{Kind: "relu", Inputs: []*Tensor{nil}}, `error: ops[0]: operand 0 is not a built tensor`},
		{"dtypes", OpSpec{Kind: OpMatmul, Inputs: []*Tensor{x, w}, Out: TensorSpec{Name: "y"}},
			`error: ops[0]: matmul operands have different dtypes: "x" is float32 and "w" is float16 (operands share a dtype; use cast); convert one first, e.g. {op: cast, in: w, out: w_float32, dtype: float32}`},
		{"reduced axis", OpSpec{Kind: OpSum, Inputs: []*Tensor{x}, Axis: 2, Out: TensorSpec{Name: "y"}},
			`error: ops[0]: sum axis 2 is out of range for "x", which has 2 non-reduction axes`},
		{"broadcast shape", OpSpec{Kind: OpBroadcast, Inputs: []*Tensor{x}, Axes: []int{0}, Out: TensorSpec{Name: "y"}},
			`error: ops[0]: broadcast needs the shape of its output "y"; declare tensor "y" with its full shape: the new axes' extents come from it`},
		{"broadcast axes", OpSpec{Kind: OpBroadcast, Inputs: []*Tensor{x}, Out: TensorSpec{Name: "y", Shape: []int{1, 4, 6}}},
			`error: ops[0]: broadcast axes: expected at least one new axis, got an empty list; a broadcast without new axes is a set`},
		{"shape", OpSpec{Kind: "relu", Inputs: []*Tensor{x}, Out: TensorSpec{Name: "y", Shape: []int{6, 4}}},
			`error: tensor "y": shape [6, 4] does not match the shape [4, 6] inferred from the op that produces it`},
		{"dtype", OpSpec{Kind: "relu", Inputs: []*Tensor{x}, Out: TensorSpec{Name: "y", DType: "float64"}},
			`error: tensor "y": dtype float64 differs from its input's float32 (operands share a dtype; use cast); remove its dtype, or declare it float32; a cast op converts to another`},
		{"permute without dims", OpSpec{Kind: OpPermute, Inputs: []*Tensor{x}, Out: TensorSpec{Name: "y"}},
			`error: ops[0]: permute needs "dims"; dims: the input's dims in the output's order (negative from the end), a permutation`},
		{"dims on a relu", OpSpec{Kind: "relu", Inputs: []*Tensor{x}, Attrs: ops.Values{{Key: ops.AttrDims, Ints: []int{1, 0}}}, Out: TensorSpec{Name: "y"}},
			`error: ops[0]: relu takes no "dims"; "dims" is an attribute of permute`},
		{"reshape count", OpSpec{Kind: OpReshape, Inputs: []*Tensor{x}, Attrs: ops.Values{{Key: ops.AttrShape, Ints: []int{5, 5}}}, Out: TensorSpec{Name: "y"}},
			`error: ops[0]: reshape of "x": shape [5, 5] has 25 elements, but the input [4, 6] has 24; a reshape keeps the element count; write -1 for the extent to infer`},
		{"cast output dtype", OpSpec{Kind: OpCast, Inputs: []*Tensor{x}, Attrs: ops.Values{{Key: ops.AttrDType, Str: "bfloat16"}}, Out: TensorSpec{Name: "y", DType: "float32"}},
			`error: tensor "y": dtype float32 differs from bfloat16, which its cast gives; remove its dtype, or declare it bfloat16`},
		{"reduction axes", OpSpec{Kind: OpSum, Inputs: []*Tensor{x}, Axis: 1, Out: TensorSpec{Name: "y", ReductionAxes: []int{0}}},
			`error: tensor "y": reduction axes [0] are not the op's, [1]`},
		{"partial output", OpSpec{Kind: "relu", Inputs: []*Tensor{x}, Out: TensorSpec{Name: "y", Placements: partial}},
			`error: tensor "y" placements: Partial is only allowed on fusion inputs, on the outputs of matmul, linear and the reductions, and on add, sub and neg of terms of sums; declare the partial terms as a fusion input and reduce them with a set`},
		{"partial read", OpSpec{Kind: OpSum, Inputs: []*Tensor{p}, Out: TensorSpec{Name: "y"}},
			`error: ops[0]: "p" has a Partial placement and can only be read by set; read it with a set, which reduces its partial terms`},
		{"partial terms out", OpSpec{Kind: "relu", Inputs: []*Tensor{x}, Out: TensorSpec{Name: "y", Partial: OpSum}},
			`error: tensor "y": Partial is only allowed on fusion inputs, on the outputs of matmul, linear and the reductions, and on add, sub and neg of terms of sums; declare the partial terms as a fusion input and reduce them with a set`},
		{"pending terms of another op", OpSpec{Kind: OpSum, Inputs: []*Tensor{x}, Axis: 1, Out: TensorSpec{Name: "y", Partial: OpMax}},
			`error: tensor "y": sum combines its terms with sum, not max; write Partial(sum)`},
		{"pending terms shape", OpSpec{Kind: OpSum, Inputs: []*Tensor{x}, Axis: 1, Out: TensorSpec{Name: "y", Partial: OpSum, Shape: []int{4}}},
			`error: tensor "y": the pending terms of sum have the shape [terms, [4]...] and no reduction axes, got shape [4] and reduction axes []`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := NewOp(tc.spec)
			if err == nil {
				t.Fatalf("NewOp = %v, want an error", got.Expr())
			}
			if diff := cmp.Diff(tc.want, err.Error()); diff != "" {
				t.Errorf("error mismatch (-want +got):\n%s", diff)
			}
		})
	}
	for _, tc := range []struct {
		name string
		spec TensorSpec
		want string
	}{
		{"placements and schedule", TensorSpec{Placements: partial, Schedule: []ScheduleStep{{Kind: StepParallelize, Type: DIDx}}},
			`error: tensor "t": both placements and schedule are given; placements are sugar for a schedule; keep one of them`},
		{"placement count", TensorSpec{Placements: append(partial, partial...)},
			`error: tensor "t" placements: expected one placement per axis of mesh "m" (1), got 2`},
		{"placement", TensorSpec{Placements: []shard.Placement{{Kind: "Split"}}},
			`error: tensor "t" placements: Split() is not a placement (Shard(d), Replicate() or Partial(op))`},
		{"shard dim", TensorSpec{Placements: []shard.Placement{{Kind: shard.Shard, Dim: 2}}},
			`error: tensor "t" placements: Shard(2) is out of range for a tensor of 2 dims`},
		{"terms axis", TensorSpec{Shape: []int{4, 6}, Placements: partial},
			`error: tensor "t" placements: Partial(sum) on mesh axis 0 holds 2 terms on logical axis 0, of extent 4`},
		{"partial op", TensorSpec{Shape: []int{2, 6}, Partial: OpAdd, Schedule: []ScheduleStep{{Kind: StepParallelize, Type: DIDx}}},
			`error: tensor "t": Partial(add): the terms combine with sum, prod, max or min`},
		{"terms not spread", TensorSpec{Shape: []int{2, 6}, Partial: OpSum},
			`error: tensor "t": Partial(sum) terms lie on logical axis 0, which its schedule does not spread over a mesh axis; parallelize logical axis 0 on the mesh axis whose devices hold the terms`},
		{"partial without placement", TensorSpec{Shape: []int{2, 6}, Partial: OpSum, Placements: []shard.Placement{{Kind: shard.Replicate}}},
			`error: tensor "t" placements: the tensor is Partial(sum), but none of its placements is`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := tc.spec
			spec.Name, spec.Mesh, spec.DType = "t", m, "float32"
			if spec.Shape == nil {
				spec.Shape = []int{4, 6}
			}
			got, err := NewTensor(spec)
			if err == nil {
				t.Fatalf("NewTensor = %v, want an error", got.Name)
			}
			if diff := cmp.Diff(tc.want, err.Error()); diff != "" {
				t.Errorf("error mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestNewFusionErrors: a fusion's ops come in topological order, over its
// tensors, each tensor produced once.
func TestNewFusionErrors(t *testing.T) {
	m, err := NewMesh("m", []int{2}, []int{0, 1})
	if err != nil {
		t.Fatal(err)
	}
	x, err := NewTensor(TensorSpec{Name: "x", Mesh: m, DType: "float32", Shape: []int{4}})
	if err != nil {
		t.Fatal(err)
	}
	op := func(in *Tensor, out string) *Op {
		o, err := NewOp(OpSpec{Kind: "relu", Inputs: []*Tensor{in}, Out: TensorSpec{Name: out}})
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	a := op(x, "a")
	b := op(a.Out, "b")
	twice := op(x, "a")
	twice.Out = a.Out
	for _, tc := range []struct {
		name    string
		tensors []*Tensor
		ops     []*Op
		want    string
	}{
		{"order", []*Tensor{x, a.Out, b.Out}, []*Op{b, a}, `error: ops[0]: operand "a" is produced by a later op, ops[1]; list the ops in topological order`},
		{"operand", []*Tensor{a.Out}, []*Op{a}, `error: ops[0]: operand "x" is not among the fusion's tensors`},
		{"output", []*Tensor{x}, []*Op{a}, `error: ops[0]: output "a" is not among the fusion's tensors`},
		{"outside", []*Tensor{a.Out, b.Out}, []*Op{b}, `error: ops[0]: operand "a" is produced by an op not in the fusion`},
		{"twice", []*Tensor{x, a.Out}, []*Op{a, twice}, `error: tensor "a" is produced twice (by ops[0] and ops[1])`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := NewFusion("f", tc.tensors, tc.ops)
			if err == nil {
				t.Fatalf("NewFusion = %v, want an error", f.Name)
			}
			if diff := cmp.Diff(tc.want, err.Error()); diff != "" {
				t.Errorf("error mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
