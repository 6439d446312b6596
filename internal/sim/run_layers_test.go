package sim

import (
	"strings"
	"testing"

	"github.com/nvcomm/nvcomm/internal/plan"
)

// halves splits axis of a tensor in two blocks over the devices of mesh m.
func halves(axis int) []plan.ScheduleStep {
	return []plan.ScheduleStep{osplit(axis, 2), par(axis, "DIDx")}
}

// onBoth builds a local step of op 0 run by devices 0 and 1.
func onBoth(id int, typ, out string, count [2]int, dims []int, ins ...string) plan.Step {
	s := plan.Step{ID: id, Kind: plan.KindLocal, Type: typ, Devices: []int{0, 1}, Output: out,
		Count: plan.Count{Input: count[0], Output: count[1]}, Dims: dims}
	if len(ins) == 1 {
		s.Input = ins[0]
	} else {
		s.Inputs = ins
	}
	return s
}

// rowParallelLinear is Megatron's row-parallel linear on two devices: y =
// linear(x, w) with x [2, 4] and w [3, 4] both split along k. Each device
// arranges its half of w as [k, n], multiplies into the partial product
// "y/product", and an Allreduce sums the partials into y.
func rowParallelLinear() *plan.Plan { return rowParallelLinearSized(2, 3, 4) }

// rowParallelLinearSized is rowParallelLinear with x [rows, k] and w [n,
// k]; k must be even.
func rowParallelLinearSized(rows, n, k int) *plan.Plan {
	half := k / 2
	permute := onBoth(0, plan.Permute, "y/w", [2]int{n * half, n * half}, []int{n, half}, "w")
	permute.Perm = []int{1, 0}
	bytes := int64(4 * rows * n) // ⌊2(T−1)·count·4/T⌋ with T = 2
	allreduce := plan.Step{ID: 2, Kind: plan.KindCollective, Type: plan.Allreduce, Teams: [][]int{{0, 1}},
		ReduceOp: sp("sum"), Input: "y/product", Output: "y", Axis: ip(1), Count: plan.Count{Input: rows * n, Output: rows * n},
		Bytes: &plan.Bytes{SentPerDevice: bytes, ReceivedPerDevice: bytes}}
	return &plan.Plan{
		Format: 1, Fusion: "row_parallel_linear", Policy: "nvfuser",
		Meshes: map[string]plan.Mesh{"m": mesh1(0, 1)},
		Tensors: []plan.Tensor{
			{Name: "x", DType: "float32", Mesh: "m", Shape: []int{rows, k}, Schedule: halves(1)},
			{Name: "w", DType: "float32", Mesh: "m", Shape: []int{n, k}, Schedule: halves(1)},
			{Name: "y", DType: "float32", Mesh: "m", Shape: []int{rows, n, k}, ReductionAxes: []int{2}},
		},
		Ops: []plan.Op{{Index: 0, Op: "linear", Inputs: []string{"x", "w"}, Output: "y"}},
		Steps: []plan.Step{
			permute,
			onBoth(1, plan.Matmul, "y/product", [2]int{rows * half, rows * n}, []int{1, rows, half, n}, "x", "y/w"),
			allreduce,
		},
		Summary: plan.Summary{BytesReceivedMax: bytes},
	}
}

// rowParallelLinearBias adds a replicated bias after the Allreduce, as
// nvFuser decomposes a biased row-parallel linear.
func rowParallelLinearBias() *plan.Plan {
	p := rowParallelLinear()
	p.Tensors = append(p.Tensors[:2:2], plan.Tensor{Name: "bias", DType: "float32", Mesh: "m", Shape: []int{3}}, p.Tensors[2])
	p.Ops[0].Inputs = []string{"x", "w", "bias"}
	p.Steps[2].Output = "y/sum"
	add := onBoth(3, plan.Pointwise, "y", [2]int{6, 6}, []int{2, 3}, "y/sum", "bias")
	add.Func, add.InputDims = sp("add"), [][]int{{2, 3}, {1, 3}}
	p.Steps = append(p.Steps, add)
	return p
}

// columnParallelRelu is a column-parallel linear followed by a relu on two
// devices: y = linear(x, w) with x [2, 4] replicated and w [6, 4] split
// along n, so each device computes its half of y's n without
// communicating; z = relu(y) keeps the sharding.
func columnParallelRelu() *plan.Plan {
	permute := onBoth(0, plan.Permute, "y/w", [2]int{12, 12}, []int{3, 4}, "w")
	permute.Perm = []int{1, 0}
	relu := onBoth(2, plan.Pointwise, "z", [2]int{6, 6}, []int{2, 3}, "y")
	relu.Op, relu.Func, relu.InputDims = 1, sp("relu"), [][]int{{2, 3}}
	return &plan.Plan{
		Format: 1, Fusion: "column_parallel_relu", Policy: "nvfuser",
		Meshes: map[string]plan.Mesh{"m": mesh1(0, 1)},
		Tensors: []plan.Tensor{
			{Name: "x", DType: "float32", Mesh: "m", Shape: []int{2, 4}},
			{Name: "w", DType: "float32", Mesh: "m", Shape: []int{6, 4}, Schedule: halves(0)},
			{Name: "y", DType: "float32", Mesh: "m", Shape: []int{2, 6, 4}, ReductionAxes: []int{2}, Schedule: halves(1)},
			{Name: "z", DType: "float32", Mesh: "m", Shape: []int{2, 6}, Schedule: halves(1)},
		},
		Ops: []plan.Op{
			{Index: 0, Op: "linear", Inputs: []string{"x", "w"}, Output: "y"},
			{Index: 1, Op: "relu", Input: "y", Output: "z"},
		},
		Steps: []plan.Step{
			permute,
			onBoth(1, plan.Matmul, "y", [2]int{8, 6}, []int{1, 2, 4, 3}, "x", "y/w"),
			relu,
		},
	}
}

// replicatedLayers runs the other layer ops on two devices that hold every
// tensor whole: v2 = broadcast(v, axes=[0, 1]), a batched c = matmul(a, b)
// with b shared by the batches, d = relu(c) and e = sub(d, v2).
func replicatedLayers() *plan.Plan {
	bcast := onBoth(0, plan.Pointwise, "v2", [2]int{3, 6}, []int{1, 2, 3}, "v")
	bcast.Func, bcast.InputDims = sp("copy"), [][]int{{1, 1, 3}}
	mul := onBoth(1, plan.Matmul, "c", [2]int{16, 12}, []int{2, 2, 4, 3}, "a", "b")
	mul.Op, mul.BroadcastB = 1, true
	relu := onBoth(2, plan.Pointwise, "d", [2]int{12, 12}, []int{2, 2, 3}, "c")
	relu.Op, relu.Func, relu.InputDims = 2, sp("relu"), [][]int{{2, 2, 3}}
	sub := onBoth(3, plan.Pointwise, "e", [2]int{12, 12}, []int{2, 2, 3}, "d", "v2")
	sub.Op, sub.Func, sub.InputDims = 3, sp("sub"), [][]int{{2, 2, 3}, {1, 2, 3}}
	tensor := func(name string, shape []int, reduction ...int) plan.Tensor {
		return plan.Tensor{Name: name, DType: "float32", Mesh: "m", Shape: shape, ReductionAxes: reduction}
	}
	return &plan.Plan{
		Format: 1, Fusion: "layers", Policy: "optimal",
		Meshes: map[string]plan.Mesh{"m": mesh1(0, 1)},
		Tensors: []plan.Tensor{
			tensor("v", []int{3}), tensor("a", []int{2, 2, 4}), tensor("b", []int{4, 3}),
			tensor("v2", []int{1, 2, 3}), tensor("c", []int{2, 2, 3, 4}, 3), tensor("d", []int{2, 2, 3}),
			tensor("e", []int{2, 2, 3}),
		},
		Ops: []plan.Op{
			{Index: 0, Op: "broadcast", Input: "v", Output: "v2", Axes: []int{0, 1}},
			{Index: 1, Op: "matmul", Inputs: []string{"a", "b"}, Output: "c"},
			{Index: 2, Op: "relu", Input: "c", Output: "d"},
			{Index: 3, Op: "sub", Inputs: []string{"d", "v2"}, Output: "e"},
		},
		Steps: []plan.Step{bcast, mul, relu, sub},
	}
}

func TestRunLayersPass(t *testing.T) {
	tests := map[string]*plan.Plan{
		"row-parallel linear":           rowParallelLinear(),
		"row-parallel linear with bias": rowParallelLinearBias(),
		"column-parallel linear, relu":  columnParallelRelu(),
		"broadcast, matmul, relu, sub":  replicatedLayers(),
	}
	for name, p := range tests {
		t.Run(name, func(t *testing.T) {
			for seed := range uint64(3) {
				res, err := Run(p, Options{Seed: seed})
				if err != nil {
					t.Fatal(err)
				}
				if !res.Pass {
					t.Fatalf("seed %d: %+v", seed, res.Mismatch)
				}
			}
		})
	}
}

// TestRunLayersMismatch checks that layer plans that run but compute the
// wrong numbers fail at the op they get wrong.
func TestRunLayersMismatch(t *testing.T) {
	noPermute := rowParallelLinear() // multiplies by w's [n, k] halves read as [k, n]
	noPermute.Steps[1].Inputs = []string{"x", "w"}
	noAllreduce := rowParallelLinear() // each device keeps its partial product
	noAllreduce.Steps[1].Output = "y"
	noAllreduce.Steps, noAllreduce.Summary.BytesReceivedMax = noAllreduce.Steps[:2], 0
	maxReduce := rowParallelLinear()
	maxReduce.Steps[2].ReduceOp = sp("max")
	neg := columnParallelRelu()
	neg.Steps[2].Func = sp("neg")
	biasFirst := rowParallelLinearBias() // adds the bias on both devices before summing
	biasFirst.Steps[2].Input, biasFirst.Steps[2].Output = "y/biased", "y"
	biasFirst.Steps[3].Inputs, biasFirst.Steps[3].Output = []string{"y/product", "bias"}, "y/biased"
	biasFirst.Steps[2], biasFirst.Steps[3] = biasFirst.Steps[3], biasFirst.Steps[2]
	tests := map[string]struct {
		p      *plan.Plan
		op     int
		reason string
	}{
		"weight not arranged":         {noPermute, 0, "value differs"},
		"partial products not summed": {noAllreduce, 0, "value differs"},
		"partials combined by max":    {maxReduce, 0, "value differs"},
		"neg instead of relu":         {neg, 1, "value differs"},
		"bias added on every device":  {biasFirst, 0, "value differs"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			res, err := Run(tc.p, Options{Seed: 1})
			if err != nil {
				t.Fatal(err)
			}
			if res.Pass || res.Mismatch == nil || res.Mismatch.Op != tc.op || !strings.Contains(res.Mismatch.Reason, tc.reason) {
				t.Errorf("Run = pass %v, mismatch %+v; want op %d to fail with %q", res.Pass, res.Mismatch, tc.op, tc.reason)
			}
		})
	}
}

// TestRunLayersErrors checks that layer plans that cannot run, or whose
// ops do not fit their tensors, are errors naming the step or op.
func TestRunLayersErrors(t *testing.T) {
	missing := rowParallelLinear()
	missing.Steps[1].Inputs = []string{"x", "y/wt"}
	wrongDims := rowParallelLinear()
	wrongDims.Steps[1].Dims = []int{2, 1, 2, 3} // Bt 2 wants B [2, 2, 3]
	noReduction := rowParallelLinear()
	noReduction.Tensors[2].Shape, noReduction.Tensors[2].ReductionAxes = []int{2, 3}, nil
	kMismatch := rowParallelLinear()
	kMismatch.Tensors[1].Shape = []int{3, 6}
	arity := columnParallelRelu()
	arity.Ops[0].Inputs = []string{"x"}
	both := columnParallelRelu()
	both.Ops[1].Inputs = []string{"y"}
	tests := map[string]struct {
		p    *plan.Plan
		want string
	}{
		"Matmul input missing":  {missing, `step 1 (Matmul): device 0 has no buffer "y/wt"`},
		"Matmul dims wrong":     {wrongDims, `step 1 (Matmul): buffer "y/w" on device 0 has 6 elements, want 12 (Bt·K·N of dims [2 1 2 3])`},
		"linear output domain":  {noReduction, `op 0 (linear): output "y" has logical shape [2 3] with reduction axes [], expected [2 3 4] with reduction axes [2]`},
		"linear k mismatch":     {kMismatch, `op 0 (linear): input "x" [2 4] and weight "w" [3 6] do not contract`},
		"linear of one input":   {arity, "op 0 (linear): takes 2 or 3 inputs, got 1"},
		"input and inputs both": {both, `op 1: input "y" and inputs ["y"] are both set`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := Run(tc.p, Options{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Run error = %v, want one containing %q", err, tc.want)
			}
		})
	}
}
