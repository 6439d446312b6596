package sim

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nvcomm/nvcomm/internal/plan"
)

// mm builds a Matmul reading "a" and "b" and writing "c" on devices.
func mm(count [2]int, dims []int, devices ...int) plan.Step {
	return plan.Step{ID: 7, Kind: plan.KindLocal, Type: plan.Matmul, Devices: devices,
		Inputs: []string{"a", "b"}, Output: "c", Count: plan.Count{Input: count[0], Output: count[1]}, Dims: dims}
}

func sharedB(s plan.Step) plan.Step {
	s.BroadcastB = true
	return s
}

// pw builds a Pointwise applying f to the named buffers, writing "c" on
// device 0.
func pw(f string, count [2]int, dims []int, inputDims [][]int, inputs ...string) plan.Step {
	s := plan.Step{ID: 7, Kind: plan.KindLocal, Type: plan.Pointwise, Devices: []int{0}, Func: sp(f),
		Output: "c", Count: plan.Count{Input: count[0], Output: count[1]}, Dims: dims, InputDims: inputDims}
	if len(inputs) == 1 {
		s.Input = inputs[0]
	} else {
		s.Inputs = inputs
	}
	return s
}

// viaInputs names a one-input step's buffer in inputs, as the contract
// allows a Pointwise to.
func viaInputs(s plan.Step) plan.Step {
	s.Input, s.Inputs = "", []string{s.Input}
	return s
}

// named is every device's buffers by name.
type named map[string]bufs

// TestComputeSteps runs Matmul and Pointwise on hand-built buffers.
func TestComputeSteps(t *testing.T) {
	const half = modulus / 2
	tests := map[string]struct {
		step plan.Step
		in   named
		want bufs // buffer "c" per device afterwards
	}{
		"Matmul 2-D on two devices": {
			step: mm([2]int{6, 4}, []int{1, 2, 3, 2}, 0, 1),
			in: named{
				"a": {0: {1, 2, 3, 4, 5, 6}, 1: {1, 0, 0, 0, 1, 0}},
				"b": {0: {7, 8, 9, 10, 11, 12}, 1: {7, 8, 9, 10, 11, 12}},
			},
			want: bufs{0: {58, 64, 139, 154}, 1: {7, 8, 9, 10}},
		},
		"Matmul batched": {
			step: mm([2]int{4, 2}, []int{2, 1, 2, 1}, 0),
			in:   named{"a": {0: {1, 2, 3, 4}}, "b": {0: {5, 6, 7, 8}}},
			want: bufs{0: {17, 53}},
		},
		"Matmul with broadcast_b": {
			step: sharedB(mm([2]int{4, 4}, []int{2, 1, 2, 2}, 0)),
			in:   named{"a": {0: {1, 2, 3, 4}}, "b": {0: {1, 2, 3, 4}}},
			want: bufs{0: {7, 10, 15, 22}},
		},
		"Matmul sums modulo p": {
			step: mm([2]int{2, 1}, []int{1, 1, 2, 1}, 0),
			in:   named{"a": {0: {1 << 15, 1 << 15}}, "b": {0: {1 << 15, 1 << 15}}},
			want: bufs{0: {1}},
		},
		"Matmul gives the representative nearest 0": {
			step: mm([2]int{2, 2}, []int{1, 2, 1, 1}, 0),
			in:   named{"a": {0: {half, -half}}, "b": {0: {2}}},
			want: bufs{0: {-1, 1}}, // 2·half = p − 1
		},
		"Pointwise add broadcasts both inputs": {
			step: pw("add", [2]int{2, 6}, []int{2, 3}, [][]int{{2, 1}, {1, 3}}, "a", "b"),
			in:   named{"a": {0: {1, 2}}, "b": {0: {10, 20, 30}}},
			want: bufs{0: {11, 21, 31, 12, 22, 32}},
		},
		"Pointwise add of a bias row": {
			step: pw("add", [2]int{6, 6}, []int{2, 3}, [][]int{{2, 3}, {1, 3}}, "a", "b"),
			in:   named{"a": {0: {1, 2, 3, 4, 5, 6}}, "b": {0: {10, 20, 30}}},
			want: bufs{0: {11, 22, 33, 14, 25, 36}},
		},
		"Pointwise sub": {
			step: pw("sub", [2]int{2, 2}, []int{2}, [][]int{{2}, {2}}, "a", "b"),
			in:   named{"a": {0: {5, 1}}, "b": {0: {2, 3}}},
			want: bufs{0: {3, -2}},
		},
		"Pointwise mul modulo p": {
			step: pw("mul", [2]int{2, 2}, []int{2}, [][]int{{2}, {1}}, "a", "b"),
			in:   named{"a": {0: {1 << 16, -3}}, "b": {0: {1 << 15}}},
			want: bufs{0: {1, -3 << 15}},
		},
		"Pointwise maximum": {
			step: pw("maximum", [2]int{3, 3}, []int{3}, [][]int{{3}, {1}}, "a", "b"),
			in:   named{"a": {0: {-4, 0, 9}}, "b": {0: {1}}},
			want: bufs{0: {1, 1, 9}},
		},
		"Pointwise minimum": {
			step: pw("minimum", [2]int{3, 3}, []int{3}, [][]int{{3}, {3}}, "a", "b"),
			in:   named{"a": {0: {-4, 0, 9}}, "b": {0: {1, 1, 1}}},
			want: bufs{0: {-4, 0, 1}},
		},
		"Pointwise relu": {
			step: pw("relu", [2]int{4, 4}, []int{2, 2}, [][]int{{2, 2}}, "a"),
			in:   named{"a": {0: {-1, 2, 0, -7}}},
			want: bufs{0: {0, 2, 0, 0}},
		},
		"Pointwise neg": {
			step: pw("neg", [2]int{2, 2}, []int{2}, [][]int{{2}}, "a"),
			in:   named{"a": {0: {-1, 0}}},
			want: bufs{0: {1, 0}},
		},
		"Pointwise abs": {
			step: pw("abs", [2]int{2, 2}, []int{2}, [][]int{{2}}, "a"),
			in:   named{"a": {0: {-1, 3}}},
			want: bufs{0: {1, 3}},
		},
		"Pointwise copy broadcasts its input": {
			step: pw("copy", [2]int{3, 6}, []int{3, 2}, [][]int{{3, 1}}, "a"),
			in:   named{"a": {0: {1, 2, 3}}},
			want: bufs{0: {1, 1, 2, 2, 3, 3}},
		},
		"Pointwise relu read from inputs": {
			step: viaInputs(pw("relu", [2]int{2, 2}, []int{2}, [][]int{{2}}, "a")),
			in:   named{"a": {0: {-1, 1}}},
			want: bufs{0: {0, 1}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			m := newMachine(0)
			for buf, byDev := range tc.in {
				for d, b := range byDev {
					m.put(d, buf, b)
				}
			}
			flows, err := m.exec(&tc.step, 4)
			if err != nil {
				t.Fatal(err)
			}
			got := bufs{}
			for d, b := range m.named("c") {
				got[d] = b.flat()
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("buffers (-want +got):\n%s", diff)
			}
			for d, f := range flows {
				if f != (flow{}) {
					t.Errorf("device %d moved %+v in a local step", d, f)
				}
			}
		})
	}
}

// TestComputeStepErrors checks that a Matmul or a Pointwise whose geometry,
// counts or buffers disagree is an error naming the step (and the device
// and buffer where one is at fault).
func TestComputeStepErrors(t *testing.T) {
	both := pw("add", [2]int{2, 2}, []int{2}, [][]int{{2}, {2}}, "a", "b")
	both.Input = "a"
	noFunc := pw("relu", [2]int{2, 2}, []int{2}, [][]int{{2}}, "a")
	noFunc.Func = nil
	copyInputs := loc(plan.Copy, [2]int{2, 2}, 0)
	copyInputs.Input, copyInputs.Inputs = "", []string{"a", "b"}
	gatherInputs := coll(plan.Allgather, [2]int{2, 4}, []int{0, 1})
	gatherInputs.Input, gatherInputs.Inputs = "", []string{"a"}
	twoBuffers := named{"a": {0: {1, 2, 3, 4, 5, 6}, 1: {1, 2, 3, 4, 5, 6}}, "b": {0: {1, 2, 3, 4, 5, 6}, 1: {1, 2, 3, 4, 5, 6}}}
	tests := map[string]struct {
		step plan.Step
		in   named
		want string
	}{
		"Matmul device without B": {
			step: mm([2]int{6, 4}, []int{1, 2, 3, 2}, 0, 1),
			in:   named{"a": {0: {1, 2, 3, 4, 5, 6}, 1: {1, 2, 3, 4, 5, 6}}, "b": {0: {1, 2, 3, 4, 5, 6}}},
			want: `step 7 (Matmul): device 1 has no buffer "b"`,
		},
		"Matmul B of the wrong size": {
			step: mm([2]int{6, 4}, []int{1, 2, 3, 2}, 0),
			in:   named{"a": {0: {1, 2, 3, 4, 5, 6}}, "b": {0: {1, 2, 3, 4}}},
			want: `step 7 (Matmul): buffer "b" on device 0 has 4 elements, want 6 (Bt·K·N of dims [1 2 3 2])`,
		},
		"Matmul shared B of a batch's size": {
			step: sharedB(mm([2]int{4, 4}, []int{2, 1, 2, 2}, 0)),
			in:   named{"a": {0: {1, 2, 3, 4}}, "b": {0: {1, 2, 3, 4, 5, 6, 7, 8}}},
			want: `buffer "b" on device 0 has 8 elements, want 4 (K·N, broadcast_b of dims [2 1 2 2])`,
		},
		"Matmul A of the wrong size": {
			step: mm([2]int{6, 4}, []int{1, 2, 3, 2}, 0),
			in:   named{"a": {0: {1, 2, 3, 4, 5}}, "b": {0: {1, 2, 3, 4, 5, 6}}},
			want: `step 7 (Matmul): buffer "a" on device 0 has 5 elements, count.input is 6`,
		},
		"Matmul dims disagree with count.input": {
			step: mm([2]int{6, 4}, []int{1, 2, 2, 2}, 0),
			in:   twoBuffers,
			want: "step 7 (Matmul): count.input is 6, dims [1 2 2 2] give Bt·M·K = 4",
		},
		"Matmul dims disagree with count.output": {
			step: mm([2]int{6, 6}, []int{1, 2, 3, 2}, 0),
			in:   twoBuffers,
			want: "step 7 (Matmul): count.output is 6, dims [1 2 3 2] give Bt·M·N = 4",
		},
		"Matmul dims of rank 3": {
			step: mm([2]int{6, 4}, []int{2, 3, 2}, 0),
			in:   twoBuffers,
			want: "dims [2 3 2] must be [Bt, M, K, N], four non-negative extents",
		},
		"Matmul of one buffer": {
			step: viaInputs(loc(plan.Matmul, [2]int{6, 4}, 0)),
			in:   twoBuffers,
			want: "step 7 (Matmul): a Matmul reads 2 buffers (inputs [A, B]), got 1",
		},
		"Pointwise without func": {
			step: noFunc,
			in:   twoBuffers,
			want: "step 7 (Pointwise): a Pointwise needs a func",
		},
		"Pointwise unknown func": {
			step: pw("erfc", [2]int{2, 2}, []int{2}, [][]int{{2}}, "a"),
			in:   twoBuffers,
			want: `func "erfc" is not add, sub, mul`,
		},
		"Pointwise add of one buffer": {
			step: pw("add", [2]int{2, 2}, []int{2}, [][]int{{2}}, "a"),
			in:   twoBuffers,
			want: "func add reads 2 buffers, got 1",
		},
		"Pointwise input_dims missing": {
			step: pw("add", [2]int{2, 2}, []int{2}, [][]int{{2}}, "a", "b"),
			in:   twoBuffers,
			want: "input_dims has 1 entries for 2 inputs",
		},
		"Pointwise input_dims of another rank": {
			step: pw("add", [2]int{6, 6}, []int{2, 3}, [][]int{{2, 3}, {3}}, "a", "b"),
			in:   twoBuffers,
			want: "input_dims[1] [3] has 1 dims, dims [2 3] has 2",
		},
		"Pointwise input_dims that do not broadcast": {
			step: pw("add", [2]int{6, 6}, []int{2, 3}, [][]int{{2, 3}, {2, 2}}, "a", "b"),
			in:   twoBuffers,
			want: "input_dims[1] [2 2] does not broadcast to dims [2 3]: dim 1 is 2, neither 3 nor 1",
		},
		"Pointwise count.input": {
			step: pw("relu", [2]int{4, 6}, []int{2, 3}, [][]int{{2, 3}}, "a"),
			in:   twoBuffers,
			want: "count.input is 4, input_dims[0] [2 3] hold 6",
		},
		"Pointwise count.output": {
			step: pw("relu", [2]int{6, 4}, []int{2, 3}, [][]int{{2, 3}}, "a"),
			in:   twoBuffers,
			want: "count.output is 4, dims [2 3] hold 6",
		},
		"Pointwise second input of the wrong size": {
			step: pw("add", [2]int{6, 6}, []int{2, 3}, [][]int{{2, 3}, {1, 3}}, "a", "b"),
			in:   twoBuffers,
			want: `step 7 (Pointwise): buffer "b" on device 0 has 6 elements, want 3 (input_dims[1] [1 3])`,
		},
		"Pointwise device without its second input": {
			step: pw("add", [2]int{6, 6}, []int{2, 3}, [][]int{{2, 3}, {2, 3}}, "a", "z"),
			in:   twoBuffers,
			want: `step 7 (Pointwise): device 0 has no buffer "z"`,
		},
		"input and inputs both set": {
			step: both,
			in:   twoBuffers,
			want: `step 7 (Pointwise): input "a" and inputs ["a" "b"] are both set`,
		},
		"inputs on a Copy": {
			step: copyInputs,
			in:   twoBuffers,
			want: `step 7 (Copy): reads one buffer, named by input, not inputs ["a" "b"]`,
		},
		"inputs on a collective": {
			step: gatherInputs,
			in:   twoBuffers,
			want: `step 7 (Allgather): reads one buffer, named by input, not inputs ["a"]`,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			m := newMachine(0)
			for buf, byDev := range tc.in {
				for d, b := range byDev {
					m.put(d, buf, b)
				}
			}
			_, err := m.exec(&tc.step, 4)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("exec error = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// TestMatmulTransposeB checks that a Matmul reading B transposed
// (transpose_b, B as [n, k]) computes what it computes on B transposed
// beforehand, batched and with broadcast_b, values across the modulus.
func TestMatmulTransposeB(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, shared := range []bool{false, true} {
		bt, m, k, n := 3, 4, 5, 6
		nb := bt
		if shared {
			nb = 1
		}
		a, bT := make([]float64, bt*m*k), make([]float64, nb*n*k)
		for i := range a {
			a[i] = float64(r.IntN(modulus) - modulus/2)
		}
		for i := range bT {
			bT[i] = float64(r.IntN(modulus) - modulus/2)
		}
		b := make([]float64, len(bT)) // bT's matrices transposed: [nb, k, n]
		for t := range nb {
			for j := range n {
				for l := range k {
					b[(t*k+l)*n+j] = bT[(t*n+j)*k+l]
				}
			}
		}
		s := mm([2]int{bt * m * k, bt * m * n}, []int{bt, m, k, n}, 0)
		s.BroadcastB = shared
		plain, err := matmulStep(&s)
		if err != nil {
			t.Fatal(err)
		}
		s.TransposeB = true
		transposed, err := matmulStep(&s)
		if err != nil {
			t.Fatal(err)
		}
		want, got := plain.f(0, [][]float64{a, b}), transposed.f(0, [][]float64{a, bT})
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("broadcast_b %v: transpose_b (-want +got):\n%s", shared, diff)
		}
	}
}

// TestPointwiseKernelsOnPads checks what the scalar functions make of a
// Pad's infinities: an exact (ring or field) kernel gives NaN, which
// equals nothing, so a padded element computed on can never match the
// reference where it is checked; max, min, relu, neg and abs keep them,
// as a max or min reduction's pads need.
func TestPointwiseKernelsOnPads(t *testing.T) {
	inf := math.Inf(1)
	for _, tc := range []struct {
		fn   string
		a, b float64
		want float64 // NaN: want NaN
	}{
		{"add", inf, 1, math.NaN()},
		{"mul", 2, -inf, math.NaN()},
		{"square", -inf, 0, math.NaN()},
		{"div", 3, inf, math.NaN()},
		{"reciprocal", inf, 0, math.NaN()},
		{"exp", -inf, 0, math.NaN()},
		{"silu", inf, 0, math.NaN()},
		{"add", 1 << 30, 1 << 30, 1<<31 - modulus},
		{"div", 6, 3, 2},
		{"div", 6, 0, 0},
		{"square", -3, 0, 9},
		{"maximum", -inf, 3, 3},
		{"minimum", inf, -3, -3},
		{"relu", -inf, 0, 0},
		{"neg", -inf, 0, inf},
		{"abs", -inf, 0, inf},
	} {
		got := pointwiseFuncOf(tc.fn)(tc.a, tc.b)
		if math.IsNaN(tc.want) != math.IsNaN(got) || !math.IsNaN(got) && got != tc.want {
			t.Errorf("%s(%v, %v) = %v, want %v", tc.fn, tc.a, tc.b, got, tc.want)
		}
	}
}

// TestCombineOfInfinities checks that sum and prod, which are padded with
// 0 and 1, make NaN of an infinity (a wrong plan's pad), and max and min
// keep it.
func TestCombineOfInfinities(t *testing.T) {
	inf := math.Inf(1)
	for _, tc := range []struct {
		op   string
		a, b float64
		nan  bool
	}{
		{"sum", -inf, 3, true}, {"sum", 2, inf, true}, {"prod", inf, 2, true}, {"prod", -inf, 0, true},
		{"max", -inf, 3, false}, {"min", inf, -3, false}, {"sum", 1 << 30, 1 << 30, false},
	} {
		got := combine(tc.op, tc.a, tc.b)
		if math.IsNaN(got) != tc.nan {
			t.Errorf("%s(%v, %v) = %v, want NaN: %v", tc.op, tc.a, tc.b, got, tc.nan)
		}
		dst := []float64{tc.a}
		combineInto(tc.op, dst, []float64{tc.b})
		if math.IsNaN(dst[0]) != math.IsNaN(got) || !math.IsNaN(got) && dst[0] != got {
			t.Errorf("combineInto %s(%v, %v) = %v, combine gives %v", tc.op, tc.a, tc.b, dst[0], got)
		}
	}
}
