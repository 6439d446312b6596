package plan

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nvcomm/nvcomm/internal/diag"
)

// replicatedTensor is an unsharded tensor of mesh "m".
func replicatedTensor(name string, shape []int, reduction ...int) Tensor {
	t := Tensor{Name: name, DType: "float32", Mesh: "m", Shape: shape, ReductionAxes: reduction, Sharding: []Sharding{}}
	for k, e := range shape {
		if !slices.Contains(reduction, k) {
			t.LocalShape = append(t.LocalShape, e)
			t.Layout = append(t.Layout, len(t.Layout))
		}
	}
	return t
}

// splitOnAxis1 is a [rows, 4] tensor whose axis 1 is split over the two
// devices of mesh "m".
func splitOnAxis1(name string, rows int) Tensor {
	return Tensor{
		Name: name, DType: "float32", Mesh: "m", Shape: []int{rows, 4},
		Schedule: []ScheduleStep{
			{OuterSplit: &SplitArgs{Axis: 1, Factor: 2}},
			{Parallelize: &ParallelizeArgs{Axis: 1, Type: "DIDx"}},
		},
		Sharding:   []Sharding{{Type: "DIDx", LogicalAxis: 1, Kind: "block"}},
		LocalShape: []int{rows, 2},
		Layout:     []int{0, 1},
	}
}

// linearPlan is a row-parallel linear with bias on two devices, y =
// linear(x, w, bias) with x [2, 4] and w [3, 4] split along k: each device
// multiplies its halves (w's arranged [k, n] first), an Allreduce sums the
// partial products, and a Pointwise adds the bias.
func linearPlan() *Plan {
	sum := "sum"
	return &Plan{
		Format: Format, Fusion: "row_parallel_linear", Policy: "nvfuser",
		Meshes: map[string]Mesh{"m": {Shape: []int{2}, Devices: []int{0, 1}}},
		Tensors: []Tensor{
			splitOnAxis1("x", 2),
			splitOnAxis1("w", 3),
			replicatedTensor("bias", []int{3}),
			replicatedTensor("y", []int{2, 3, 4}, 2),
		},
		Ops: []Op{{Index: 0, Op: "linear", Inputs: []string{"x", "w", "bias"}, Output: "y"}},
		Steps: []Step{
			{ID: 0, Op: 0, Expr: "y = linear(x, w, bias)", Kind: KindLocal, Type: Permute, Devices: []int{0, 1},
				Input: "w", Output: "y/w-arranged", Count: Count{Input: 6, Output: 6}, Dims: []int{3, 2}, Perm: []int{1, 0}},
			{ID: 1, Op: 0, Expr: "y = linear(x, w, bias)", Kind: KindLocal, Type: Matmul, Devices: []int{0, 1},
				Inputs: []string{"x", "y/w-arranged"}, Output: "y/product", Count: Count{Input: 4, Output: 6}, Dims: []int{1, 2, 2, 3}},
			{ID: 2, Op: 0, Expr: "y = linear(x, w, bias)", Kind: KindCollective, Type: Allreduce, Teams: [][]int{{0, 1}},
				ReduceOp: &sum, Input: "y/product", Output: "y/sum", Axis: new(1), Count: Count{Input: 6, Output: 6},
				Bytes: &Bytes{SentPerDevice: 24, ReceivedPerDevice: 24, LowerBound: 24}},
			{ID: 3, Op: 0, Expr: "y = linear(x, w, bias)", Kind: KindLocal, Type: Pointwise, Devices: []int{0, 1},
				Func: new("add"), Inputs: []string{"y/sum", "bias"}, Output: "y", Count: Count{Input: 6, Output: 6},
				Dims: []int{2, 3}, InputDims: [][]int{{2, 3}, {1, 3}}},
		},
		Summary: Summary{Collectives: 1, LocalSteps: 3, ByType: map[string]int{Allreduce: 1},
			BytesReceivedMax: 24, BytesLowerBound: 24, BytesRatio: new(1.0)},
	}
}

// layersPlan runs the other layer ops on two devices that hold every
// tensor whole: v2 = broadcast(v, axes=[0, 1]), a batched c = matmul(a, b)
// with b shared by the batches, d = relu(c) and e = sub(d, v2).
func layersPlan() *Plan {
	local := func(id, op int, expr, typ string) Step {
		return Step{ID: id, Op: op, Expr: expr, Kind: KindLocal, Type: typ, Devices: []int{0, 1}}
	}
	copyStep := local(0, 0, "v2 = broadcast(v, axes=[0, 1])", Pointwise)
	copyStep.Func, copyStep.Input, copyStep.Output = new("copy"), "v", "v2"
	copyStep.Count, copyStep.Dims, copyStep.InputDims = Count{Input: 3, Output: 6}, []int{1, 2, 3}, [][]int{{1, 1, 3}}
	mm := local(1, 1, "c = matmul(a, b)", Matmul)
	mm.Inputs, mm.Output, mm.Count, mm.Dims, mm.BroadcastB = []string{"a", "b"}, "c", Count{Input: 16, Output: 12}, []int{2, 2, 4, 3}, true
	relu := local(2, 2, "d = relu(c)", Pointwise)
	relu.Func, relu.Input, relu.Output = new("relu"), "c", "d"
	relu.Count, relu.Dims, relu.InputDims = Count{Input: 12, Output: 12}, []int{2, 2, 3}, [][]int{{2, 2, 3}}
	sub := local(3, 3, "e = sub(d, v2)", Pointwise)
	sub.Func, sub.Inputs, sub.Output = new("sub"), []string{"d", "v2"}, "e"
	sub.Count, sub.Dims, sub.InputDims = Count{Input: 12, Output: 12}, []int{2, 2, 3}, [][]int{{2, 2, 3}, {1, 2, 3}}
	return &Plan{
		Format: Format, Fusion: "layers", Policy: "optimal",
		Meshes: map[string]Mesh{"m": {Shape: []int{2}, Devices: []int{0, 1}}},
		Tensors: []Tensor{
			replicatedTensor("v", []int{3}),
			replicatedTensor("a", []int{2, 2, 4}),
			replicatedTensor("b", []int{4, 3}),
			replicatedTensor("v2", []int{1, 2, 3}),
			replicatedTensor("c", []int{2, 2, 3, 4}, 3),
			replicatedTensor("d", []int{2, 2, 3}),
			replicatedTensor("e", []int{2, 2, 3}),
		},
		Ops: []Op{
			{Index: 0, Op: "broadcast", Input: "v", Output: "v2", Axes: []int{0, 1}},
			{Index: 1, Op: "matmul", Inputs: []string{"a", "b"}, Output: "c"},
			{Index: 2, Op: "relu", Input: "c", Output: "d"},
			{Index: 3, Op: "sub", Inputs: []string{"d", "v2"}, Output: "e"},
		},
		Steps:   []Step{copyStep, mm, relu, sub},
		Summary: Summary{LocalSteps: 4, ByType: map[string]int{}, BytesRatio: new(1.0)},
	}
}

func TestOpExpr(t *testing.T) {
	for _, tc := range []struct {
		op   Op
		want string
	}{
		{Op{Op: "set", Input: "a", Output: "b"}, "b = set(a)"},
		{Op{Op: "sum", Input: "a", Output: "b", Axis: new(1)}, "b = sum(a, axis=1)"},
		{Op{Op: "add", Inputs: []string{"a", "b"}, Output: "c"}, "c = add(a, b)"},
		{Op{Op: "relu", Input: "a", Output: "b"}, "b = relu(a)"},
		{Op{Op: "linear", Inputs: []string{"x", "w", "bias"}, Output: "y"}, "y = linear(x, w, bias)"},
		{Op{Op: "broadcast", Input: "v", Output: "w", Axes: []int{0}}, "w = broadcast(v, axes=[0])"},
		{Op{Op: "broadcast", Input: "v", Output: "w", Axes: []int{0, 2}}, "w = broadcast(v, axes=[0, 2])"},
	} {
		if got := tc.op.Expr(); got != tc.want {
			t.Errorf("%+v.Expr() = %q, want %q", tc.op, got, tc.want)
		}
	}
}

func TestStepOperands(t *testing.T) {
	for _, tc := range []struct {
		s    Step
		want []string
	}{
		{Step{Input: "a"}, []string{"a"}},
		{Step{Inputs: []string{"a", "b"}}, []string{"a", "b"}},
		{Step{}, []string{""}},
	} {
		if diff := cmp.Diff(tc.want, tc.s.Operands()); diff != "" {
			t.Errorf("%+v.Operands() mismatch (-want +got):\n%s", tc.s, diff)
		}
	}
}

// layerOpCases break the rules of layer ops: how they name their operands,
// their arity, axis and axes, dtypes, and the shapes their operands and
// output must have.
func layerOpCases() []validateCase {
	return []validateCase{
		{name: "layer op with input and inputs", base: linearPlan, mutate: func(p *Plan) { p.Ops[0].Input = "x" },
			want: []diag.Diagnostic{pp(`op 0: has both input "x" and inputs; an op with several inputs lists them in inputs alone`)}},
		{name: "layer op with one-entry inputs", base: layersPlan, mutate: func(p *Plan) {
			p.Ops[2].Input, p.Ops[2].Inputs = "", []string{"c"}
		},
			want: []diag.Diagnostic{pp("op 2: inputs lists one tensor; an op with one input names it in input")}},
		{name: "linear arity", base: linearPlan, mutate: func(p *Plan) { p.Ops[0].Inputs = []string{"x", "w", "bias", "x"} },
			want: []diag.Diagnostic{pp("op 0: linear takes 2 or 3 inputs, got 4")}},
		{name: "relu arity", base: layersPlan, mutate: func(p *Plan) { p.Ops[2].Input, p.Ops[2].Inputs = "", []string{"c", "d"} },
			want: []diag.Diagnostic{pp("op 2: relu takes 1 input, got 2")}},
		{name: "layer op operand missing", base: layersPlan, mutate: func(p *Plan) { p.Ops[3].Inputs[1] = "nope" },
			want: []diag.Diagnostic{
				pp(`op 3: input "nope" is not a tensor`),
				sp(3, Pointwise, `input "v2" is neither an input nor the output of op 3`),
			}},
		{name: "matmul axis", base: layersPlan, mutate: func(p *Plan) { p.Ops[1].Axis = new(0) },
			want: []diag.Diagnostic{pp("op 1: matmul takes no axis")}},
		{name: "axes on matmul", base: layersPlan, mutate: func(p *Plan) { p.Ops[1].Axes = []int{0} },
			want: []diag.Diagnostic{pp("op 1: matmul takes no axes (only broadcast inserts axes)")}},
		{name: "broadcast axes unsorted", base: layersPlan, mutate: func(p *Plan) { p.Ops[0].Axes = []int{1, 0} },
			want: []diag.Diagnostic{pp("op 0: axes [1 0] are not increasing positions among the 3 axes of the output (the input's 1 and 2 new)")}},
		{name: "broadcast axes out of range", base: layersPlan, mutate: func(p *Plan) { p.Ops[0].Axes = []int{0, 3} },
			want: []diag.Diagnostic{pp("op 0: axes [0 3] are not increasing positions among the 3 axes of the output (the input's 1 and 2 new)")}},
		{name: "broadcast output extent kept", base: layersPlan, mutate: func(p *Plan) { p.Ops[0].Axes = []int{0, 2} },
			want: []diag.Diagnostic{pp(`op 0: output "v2" has shape [1 2 3] and reduction_axes [], want [1 3 3] and [] (the input's non-reduction shape, new axes at axes with the output's extents)`)}},
		{name: "broadcast output shape", base: layersPlan, mutate: func(p *Plan) { p.Ops[0].Axes = []int{0} },
			want: []diag.Diagnostic{pp(`op 0: output "v2" has shape [1 2 3] and reduction_axes [], want [1 3] and [] (the input's non-reduction shape, new axes at axes with the output's extents)`)}},
		{name: "linear mixed dtypes", base: linearPlan, mutate: func(p *Plan) { p.Tensors[2].DType = "float16" },
			want: []diag.Diagnostic{pp(`op 0: output "y" has dtype float32, but its input "bias" has float16 (operands share a dtype; use cast)`)}},
		{name: "matmul k mismatch", base: layersPlan, mutate: func(p *Plan) {
			p.Tensors[2].Shape, p.Tensors[2].LocalShape = []int{5, 3}, []int{5, 3}
		},
			want: []diag.Diagnostic{
				pp(`op 1: matmul's operands "a" [2 2 4] and "b" [5 3] do not contract: the first's last extent 4 is not the second's second-to-last 5`),
				sp(1, Matmul, `input "b" holds 15 elements per device, but the step reads 12 (K·N of dims [2 2 4 3], broadcast_b)`),
			}},
		{name: "matmul batch mismatch", base: layersPlan, mutate: func(p *Plan) {
			p.Tensors[2].Shape, p.Tensors[2].LocalShape, p.Tensors[2].Layout = []int{3, 4, 3}, []int{3, 4, 3}, []int{0, 1, 2}
		},
			want: []diag.Diagnostic{
				pp(`op 1: matmul's operands "a" [2 2 4] and "b" [3 4 3] differ in their batch extents`),
				sp(1, Matmul, `input "b" holds 36 elements per device, but the step reads 12 (K·N of dims [2 2 4 3], broadcast_b)`),
			}},
		{name: "matmul first operand rank", base: layersPlan, mutate: func(p *Plan) { p.Ops[1].Inputs = []string{"v", "b"} },
			want: []diag.Diagnostic{
				pp(`op 1: matmul's first operand "v" has 1 axes, want at least 2 ([..., m, k])`),
				sp(1, Matmul, `input "a" is neither an input nor the output of op 1`),
			}},
		{name: "matmul output k", base: layersPlan, mutate: func(p *Plan) { p.Tensors[4].Shape[3] = 5 },
			want: []diag.Diagnostic{pp(`op 1: output "c" has shape [2 2 3 5] and reduction_axes [3], want [2 2 3 4] and [3] ([...batch, m, n] and the contracted k as a trailing reduction axis)`)}},
		{name: "linear k mismatch", base: linearPlan, mutate: func(p *Plan) {
			p.Tensors = append(p.Tensors, replicatedTensor("w5", []int{3, 5}))
			p.Ops[0].Inputs[1] = "w5"
		},
			want: []diag.Diagnostic{
				pp(`op 0: linear's input "x" [2 4] and weight "w5" [3 5] do not contract: the input's last extent 4 is not the weight's second 5`),
				sp(0, Permute, `input "w" is neither an input nor the output of op 0`),
			}},
		{name: "linear bias of another n", base: linearPlan, mutate: func(p *Plan) { p.Ops[0].Inputs = []string{"w", "x", "bias"} },
			want: []diag.Diagnostic{pp(`op 0: linear's bias "bias" has shape [3], want [2] (the weight's n)`)}},
		{name: "linear bias shape", base: linearPlan, mutate: func(p *Plan) { p.Ops[0].Inputs = []string{"x", "w", "x"} },
			want: []diag.Diagnostic{
				pp(`op 0: linear's bias "x" has shape [2 4], want [3] (the weight's n)`),
				sp(3, Pointwise, `input "bias" is neither an input nor the output of op 0`),
			}},
		{name: "linear weight rank", base: linearPlan, mutate: func(p *Plan) { p.Ops[0].Inputs = []string{"x", "bias"} },
			want: []diag.Diagnostic{
				pp(`op 0: linear's weight "bias" has 1 axes, want 2 ([n, k])`),
				sp(0, Permute, `input "w" is neither an input nor the output of op 0`),
			}},
		{name: "elementwise broadcast mismatch", base: layersPlan, mutate: func(p *Plan) { p.Ops[3].Inputs = []string{"d", "a"} },
			want: []diag.Diagnostic{
				pp(`op 3: operands "d" [2 2 3] and "a" [2 2 4] do not broadcast: axis 2 has extents 3 and 4, and neither is 1`),
				sp(3, Pointwise, `input "v2" is neither an input nor the output of op 3`),
			}},
		{name: "elementwise rank mismatch", base: layersPlan, mutate: func(p *Plan) { p.Ops[3].Inputs = []string{"d", "b"} },
			want: []diag.Diagnostic{
				pp(`op 3: operands "d" [2 2 3] and "b" [4 3] differ in rank; elementwise operands have equal rank (broadcast adds axes)`),
				sp(3, Pointwise, `input "v2" is neither an input nor the output of op 3`),
			}},
		{name: "layer expr edited", base: layersPlan, mutate: func(p *Plan) { p.Steps[0].Expr = "v2 = broadcast(v, axes=[0])" },
			want: []diag.Diagnostic{sp(0, Pointwise, `expr is "v2 = broadcast(v, axes=[0])", but op 0 is "v2 = broadcast(v, axes=[0, 1])"`)}},
	}
}

// computeStepCases break the Matmul and Pointwise rules and those that
// follow every input of a step that reads several.
func computeStepCases() []validateCase {
	return []validateCase{
		{name: "matmul one input", base: layersPlan, mutate: func(p *Plan) { p.Steps[1].Input, p.Steps[1].Inputs = "a", nil },
			want: []diag.Diagnostic{sp(1, Matmul, "a Matmul reads 2 buffers (inputs [A, B]), got 1")}},
		{name: "matmul dims rank", base: layersPlan, mutate: func(p *Plan) { p.Steps[1].Dims = []int{4, 4, 3} },
			want: []diag.Diagnostic{sp(1, Matmul, "dims [4 4 3] are not [Bt, M, K, N], four positive extents")}},
		{name: "matmul counts", base: layersPlan, mutate: func(p *Plan) { p.Steps[1].Dims = []int{2, 2, 4, 2} },
			want: []diag.Diagnostic{
				sp(1, Matmul, `input "b" holds 12 elements per device, but the step reads 8 (K·N of dims [2 2 4 2], broadcast_b)`),
				sp(1, Matmul, "count.output is 12, want Bt·M·N = 8 (dims [2 2 4 2])"),
			}},
		{name: "matmul B count", base: layersPlan, mutate: func(p *Plan) { p.Steps[1].BroadcastB = false },
			want: []diag.Diagnostic{sp(1, Matmul, `input "b" holds 12 elements per device, but the step reads 24 (Bt·K·N of dims [2 2 4 3])`)}},
		{name: "matmul broadcast_b with one batch", base: linearPlan, mutate: func(p *Plan) { p.Steps[1].BroadcastB = true }},
		{name: "pointwise without func", base: layersPlan, mutate: func(p *Plan) { p.Steps[2].Func = nil },
			want: []diag.Diagnostic{sp(2, Pointwise, "a Pointwise needs a func (one of add, sub, mul, maximum, minimum, gt, eq, div, relu, neg, abs, exp, log, tanh, sigmoid, silu, gelu, gelu_tanh, erf, sqrt, rsqrt, reciprocal, square, copy)")}},
		{name: "pointwise func unknown", base: layersPlan, mutate: func(p *Plan) { p.Steps[2].Func = new("erfc") },
			want: []diag.Diagnostic{sp(2, Pointwise, `func "erfc" is not one of add, sub, mul, maximum, minimum, gt, eq, div, relu, neg, abs, exp, log, tanh, sigmoid, silu, gelu, gelu_tanh, erf, sqrt, rsqrt, reciprocal, square, copy`)}},
		{name: "pointwise func arity", base: layersPlan, mutate: func(p *Plan) { p.Steps[2].Func = new("add") },
			want: []diag.Diagnostic{sp(2, Pointwise, "func add takes 2 inputs, got 1")}},
		{name: "pointwise input_dims count", base: layersPlan, mutate: func(p *Plan) { p.Steps[3].InputDims = p.Steps[3].InputDims[:1] },
			want: []diag.Diagnostic{sp(3, Pointwise, "input_dims has 1 entries for 2 inputs")}},
		{name: "pointwise input_dims rank", base: layersPlan, mutate: func(p *Plan) { p.Steps[3].InputDims[1] = []int{2, 3} },
			want: []diag.Diagnostic{sp(3, Pointwise, "input_dims[1] [2 3] does not broadcast to dims [2 2 3]: 2 dims, want 3")}},
		{name: "pointwise input_dims extent", base: layersPlan, mutate: func(p *Plan) { p.Steps[3].InputDims[1] = []int{1, 2, 2} },
			want: []diag.Diagnostic{sp(3, Pointwise, "input_dims[1] [1 2 2] does not broadcast to dims [2 2 3]: dim 2 is 2, neither 3 nor 1")}},
		{name: "pointwise dims extent", base: layersPlan, mutate: func(p *Plan) { p.Steps[2].Dims[0] = 0 },
			want: []diag.Diagnostic{sp(2, Pointwise, "dims[0] is 0, want >= 1")}},
		{name: "pointwise count output", base: layersPlan, mutate: func(p *Plan) { p.Steps[0].Count.Output = 3 },
			want: []diag.Diagnostic{
				sp(0, Pointwise, `count.output is 3, but "v2" holds 6 elements per device`),
				sp(0, Pointwise, "count.output is 3, want 6 (the product of dims [1 2 3])"),
				sp(3, Pointwise, `input "v2": step 0 wrote 3 elements, but the step reads 6 (the product of input_dims[1] [1 2 3])`),
			}},
		{name: "pointwise second input count", base: linearPlan, mutate: func(p *Plan) { p.Steps[3].InputDims[1] = []int{2, 3} },
			want: []diag.Diagnostic{sp(3, Pointwise, `input "bias" holds 3 elements per device, but the step reads 6 (the product of input_dims[1] [2 3])`)}},
		{name: "pointwise extent-1 broadcast", base: layersPlan, mutate: func(p *Plan) {
			p.Tensors[0] = replicatedTensor("v", []int{1})
			p.Tensors[3] = replicatedTensor("v2", []int{1, 2, 1})
			s := &p.Steps[0]
			s.Count, s.Dims, s.InputDims = Count{Input: 1, Output: 2}, []int{1, 2, 1}, [][]int{{1, 1, 1}}
			p.Steps[3].InputDims[1] = []int{1, 2, 1}
		}},
		{name: "pointwise of a scalar", base: layersPlan, mutate: func(p *Plan) {
			p.Tensors = append(p.Tensors, replicatedTensor("r", []int{}), replicatedTensor("q", []int{}))
			p.Ops = append(p.Ops, Op{Index: 4, Op: "neg", Input: "r", Output: "q"})
			p.Steps = append(p.Steps, Step{ID: 4, Op: 4, Expr: "q = neg(r)", Kind: KindLocal, Type: Pointwise,
				Devices: []int{0, 1}, Func: new("neg"), Input: "r", Output: "q", Count: Count{Input: 1, Output: 1},
				InputDims: [][]int{{}}})
			p.Summary.LocalSteps = 5
		}},
		{name: "func on Permute", base: linearPlan, mutate: func(p *Plan) { p.Steps[0].Func = new("add") },
			want: []diag.Diagnostic{sp(0, Permute, "func is set, but only a Pointwise takes one")}},
		{name: "input_dims on Allreduce", base: linearPlan, mutate: func(p *Plan) { p.Steps[2].InputDims = [][]int{{6}} },
			want: []diag.Diagnostic{sp(2, Allreduce, "input_dims is set, but only a Pointwise takes them")}},
		{name: "broadcast_b on Pointwise", base: linearPlan, mutate: func(p *Plan) { p.Steps[3].BroadcastB = true },
			want: []diag.Diagnostic{sp(3, Pointwise, "broadcast_b is set, but only a Matmul takes it")}},
		{name: "inputs on Permute", base: linearPlan, mutate: func(p *Plan) { p.Steps[0].Input, p.Steps[0].Inputs = "", []string{"w", "x"} },
			want: []diag.Diagnostic{sp(0, Permute, "inputs is set, but type Permute reads one buffer (input)")}},
		{name: "step with input and inputs", base: linearPlan, mutate: func(p *Plan) { p.Steps[1].Input = "x" },
			want: []diag.Diagnostic{sp(1, Matmul, `has both input "x" and inputs; a step that reads several buffers lists them in inputs alone`)}},
		{name: "step with one-entry inputs", base: layersPlan, mutate: func(p *Plan) { p.Steps[2].Input, p.Steps[2].Inputs = "", []string{"c"} },
			want: []diag.Diagnostic{sp(2, Pointwise, "inputs lists one buffer; a step that reads one names it in input")}},
		{name: "step reads another op's tensor", base: layersPlan, mutate: func(p *Plan) { p.Steps[3].Inputs[1] = "a" },
			want: []diag.Diagnostic{
				sp(3, Pointwise, `input "a" is neither an input nor the output of op 3`),
				sp(3, Pointwise, `input "a" holds 16 elements per device, but the step reads 6 (the product of input_dims[1] [1 2 3])`),
			}},
		{name: "step reads a later buffer", base: linearPlan, mutate: func(p *Plan) { p.Steps[1].Inputs[1] = "y/sum" },
			want: []diag.Diagnostic{sp(1, Matmul, `input "y/sum" is neither a fusion input nor written by an earlier step`)}},
		{name: "matmul reader lacks its second input", base: linearPlan, mutate: func(p *Plan) { p.Steps[0].Devices = []int{0} },
			want: []diag.Diagnostic{sp(1, Matmul, `device 1 reads "y/w-arranged", which it does not hold`)}},
		{name: "pointwise reader lacks its second input", base: linearPlan, mutate: func(p *Plan) {
			p.Meshes["one"] = Mesh{Shape: []int{1}, Devices: []int{0}}
			p.Tensors[2].Mesh = "one"
		},
			want: []diag.Diagnostic{sp(3, Pointwise, `device 1 reads "bias", which it does not hold`)}},
		{name: "contraction reduce op", base: linearPlan, mutate: func(p *Plan) { p.Steps[2].ReduceOp = new("max") },
			want: []diag.Diagnostic{sp(2, Allreduce, `reduce_op is "max", but op 0 is a linear`)}},
		{name: "contraction Allreduce axis", base: linearPlan, mutate: func(p *Plan) { p.Steps[2].Axis = new(0) },
			want: []diag.Diagnostic{sp(2, Allreduce, "axis is 0, but the step changes the sharding of axis 1")}},
		{name: "contraction Allreduce axis range", base: linearPlan, mutate: func(p *Plan) { p.Steps[2].Axis = new(2) },
			want: []diag.Diagnostic{sp(2, Allreduce, `axis 2 is not among the 2 non-reduction axes of "x"`)}},
	}
}
