package ops

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestNamesByFamily checks the built-in ops (extend_test.go registers one
// more in the default registry).
func TestNamesByFamily(t *testing.T) {
	r := builtins()
	want := []string{"set", "sum", "prod", "max", "min", "add", "sub", "mul", "maximum", "minimum", "gt", "eq", "relu", "neg", "abs",
		"div", "exp", "log", "tanh", "sigmoid", "silu", "gelu", "gelu_tanh", "erf", "sqrt", "rsqrt", "reciprocal", "square",
		"broadcast", "matmul", "linear", "embedding", "gather", "scatter_add", "permute", "reshape", "cast", "slice", "cat", "tril", "softmax", "mean", "rms_norm", "layer_norm", "sdpa", "log_softmax", "cross_entropy", "moe_topk", "moe_dispatch"}
	if d := cmp.Diff(want, r.Names()); d != "" {
		t.Errorf("Names() (-want +got):\n%s", d)
	}
	got := map[Family][]string{}
	for _, f := range []Family{Copy, Reduction, Binary, Unary, Broadcast, Contraction, View, Composite} {
		got[f] = r.Family(f)
	}
	wantFam := map[Family][]string{
		Copy: {"set"}, Reduction: {"sum", "prod", "max", "min"}, Binary: {"add", "sub", "mul", "maximum", "minimum", "gt", "eq", "div"},
		Unary:     {"relu", "neg", "abs", "exp", "log", "tanh", "sigmoid", "silu", "gelu", "gelu_tanh", "erf", "sqrt", "rsqrt", "reciprocal", "square"},
		Broadcast: {"broadcast"}, Contraction: {"matmul", "linear", "embedding", "gather", "scatter_add"},
		View: {"permute", "reshape", "cast", "slice", "cat", "tril"}, Composite: {"softmax", "mean", "rms_norm", "layer_norm", "sdpa", "log_softmax", "cross_entropy", "moe_topk", "moe_dispatch"},
	}
	if d := cmp.Diff(wantFam, got); d != "" {
		t.Errorf("FamilyNames (-want +got):\n%s", d)
	}
	if d := cmp.Diff(append(FamilyNames(Binary), append(FamilyNames(Unary), "copy")...), PointwiseFuncs()); d != "" {
		t.Errorf("PointwiseFuncs (-want +got):\n%s", d)
	}
}

func TestOperandList(t *testing.T) {
	for name, want := range map[string]string{"set": "one tensor", "add": "[a, b]", "matmul": "[a, b]", "linear": "[x, w] or [x, w, bias]", "cat": "[a, b, ...]"} {
		if got := Lookup(name).OperandList(); got != want {
			t.Errorf("%s: OperandList() = %q, want %q", name, got, want)
		}
	}
	lo, hi := Lookup("linear").Arity()
	if lo != 2 || hi != 3 {
		t.Errorf("linear: Arity() = %d, %d, want 2, 3", lo, hi)
	}
}

// TestRules checks every built-in op's rule: for each operand, the operand
// dimension of each result dimension (-1: none), and its reduction
// dimension.
func TestRules(t *testing.T) {
	for _, tc := range []struct {
		name  string
		op    string
		in    [][]int
		out   []int
		attrs Attrs
		dims  [][]int // per operand, OperandDim(i, j) for every result dim j
		red   []int   // per operand, ReductionDim(i)
	}{
		{"set", "set", [][]int{{4, 6}}, []int{4, 6}, Attrs{Axis: -1}, [][]int{{0, 1}}, []int{-1}},
		{"relu", "relu", [][]int{{4, 6}}, []int{4, 6}, Attrs{Axis: -1}, [][]int{{0, 1}}, []int{-1}},
		{"sum axis 1", "sum", [][]int{{4, 6, 8}}, []int{4, 8}, Attrs{Axis: 1}, [][]int{{0, 2}}, []int{1}},
		{"max axis 0", "max", [][]int{{4, 6}}, []int{6}, Attrs{Axis: 0}, [][]int{{1}}, []int{0}},
		{"add broadcasting", "add", [][]int{{4, 1}, {1, 6}}, []int{4, 6}, Attrs{Axis: -1}, [][]int{{0, -1}, {-1, 1}}, []int{-1, -1}},
		{"add extent 1 both", "add", [][]int{{1, 6}, {1, 6}}, []int{1, 6}, Attrs{Axis: -1}, [][]int{{0, 1}, {0, 1}}, []int{-1, -1}},
		{"broadcast", "broadcast", [][]int{{6}}, []int{4, 6, 2}, Attrs{Axis: -1, Axes: []int{0, 2}}, [][]int{{-1, 0, -1}}, []int{-1}},
		{"matmul 2-D", "matmul", [][]int{{4, 8}, {8, 6}}, []int{4, 6}, Attrs{Axis: -1}, [][]int{{0, -1}, {-1, 1}}, []int{1, 0}},
		{"matmul batched", "matmul", [][]int{{2, 4, 8}, {2, 8, 6}}, []int{2, 4, 6}, Attrs{Axis: -1}, [][]int{{0, 1, -1}, {0, -1, 2}}, []int{2, 1}},
		{"matmul shared b", "matmul", [][]int{{2, 4, 8}, {8, 6}}, []int{2, 4, 6}, Attrs{Axis: -1}, [][]int{{0, 1, -1}, {-1, -1, 1}}, []int{2, 0}},
		{"embedding", "embedding", [][]int{{2, 5}, {10, 6}}, []int{2, 5, 6}, Attrs{Axis: -1}, [][]int{{0, 1, -1}, {-1, -1, 1}}, []int{-1, 0}},
		{"gather", "gather", [][]int{{2, 3, 10}, {2, 3, 1}}, []int{2, 3, 1}, Attrs{Axis: 2}, [][]int{{0, 1, -1}, {0, 1, 2}}, []int{2, -1}},
		{"scatter_add", "scatter_add", [][]int{{2, 5}, {2, 5, 6}}, []int{2, 10, 6}, Attrs{Axis: -1}, [][]int{{0, -1, -1}, {0, -1, 2}}, []int{1, 1}},
		{"linear bias", "linear", [][]int{{3, 4, 8}, {6, 8}, {6}}, []int{3, 4, 6}, Attrs{Axis: -1}, [][]int{{0, 1, -1}, {-1, -1, 0}, {-1, -1, 0}}, []int{2, 1, -1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := Lookup(tc.op).Rule(tc.in, tc.out, tc.attrs)
			var dims [][]int
			var red []int
			for i := range tc.in {
				row := make([]int, len(tc.out))
				for j := range tc.out {
					row[j] = r.OperandDim(i, j)
				}
				dims = append(dims, row)
				red = append(red, r.ReductionDim(i))
			}
			if d := cmp.Diff(tc.dims, dims); d != "" {
				t.Errorf("OperandDim (-want +got):\n%s", d)
			}
			if d := cmp.Diff(tc.red, red); d != "" {
				t.Errorf("ReductionDim (-want +got):\n%s", d)
			}
			if got := r.OperandDim(len(tc.in), 0) + r.OperandDim(0, len(tc.out)) + r.ReductionDim(-1); got != -3 {
				t.Errorf("out-of-range arguments give %d in all, want -1 each", got)
			}
		})
	}
}

// TestRuleFactorSizes checks that a rule's factors have the extents of the
// dimensions they make, a contraction's k included.
func TestRuleFactorSizes(t *testing.T) {
	r := Lookup("linear").Rule([][]int{{3, 8}, {6, 8}, {6}}, []int{3, 6}, Attrs{Axis: -1})
	want := []Factor{{3, PassThrough}, {6, PassThrough}, {8, ReductionFactor}}
	if d := cmp.Diff(want, r.Factors); d != "" {
		t.Errorf("linear's factors (-want +got):\n%s", d)
	}
}

func TestRegisterRefuses(t *testing.T) {
	rule := Lookup("relu").Rule
	kernel := &Kernel{Value: func(a, _ float64) float64 { return a }}
	torch := &Torch{Func: "torch.exp"}
	for _, tc := range []struct {
		name string
		op   Op
		want string
	}{
		{"taken name", Op{Name: "relu", Family: Unary, Operands: []string{"x"}, Rule: rule, Kernel: kernel, Torch: torch}, "registered already"},
		{"no name", Op{Family: Unary, Operands: []string{"x"}, Rule: rule, Kernel: kernel, Torch: torch}, "empty"},
		{"no operands", Op{Name: "f", Family: Unary, Rule: rule, Kernel: kernel, Torch: torch}, "at least one operand"},
		{"all optional", Op{Name: "f", Family: Unary, Operands: []string{"x"}, Optional: 1, Rule: rule, Kernel: kernel, Torch: torch}, "at least one operand"},
		{"no rule", Op{Name: "f", Family: Unary, Operands: []string{"x"}, Kernel: kernel, Torch: torch}, "no sharding rule"},
		{"no kernel", Op{Name: "f", Family: Unary, Operands: []string{"x"}, Rule: rule, Torch: torch}, "needs a kernel"},
		{"two kernels", Op{Name: "f", Family: Unary, Operands: []string{"x"}, Rule: rule, Torch: torch,
			Kernel: &Kernel{Value: kernel.Value, Ring: func(a, _, _ int64) int64 { return a }}}, "needs a kernel"},
		{"no torch", Op{Name: "f", Family: Unary, Operands: []string{"x"}, Rule: rule, Kernel: kernel}, "torch function"},
		{"binary of one", Op{Name: "f", Family: Binary, Operands: []string{"x"}, Rule: rule, Kernel: kernel, Torch: torch}, "takes two operands"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := builtins()
			before := len(r.Names())
			err := r.Register(tc.op)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Register = %v, want an error with %q", err, tc.want)
			}
			if len(r.Names()) != before {
				t.Errorf("a refused op was added")
			}
		})
	}
}

func TestRegisterAdds(t *testing.T) {
	r := builtins()
	ops := []string{"x"}
	err := r.Register(Op{Name: "expm1", Family: Unary, Operands: ops, Rule: pointwiseRule,
		Kernel: &Kernel{Value: func(a, _ float64) float64 { return a }}, Torch: &Torch{Func: "torch.expm1", Rounding: Exact}})
	if err != nil {
		t.Fatal(err)
	}
	ops[0] = "changed"
	unary := r.Family(Unary)
	if got := r.Lookup("expm1"); got == nil || got.Operands[0] != "x" || unary[len(unary)-1] != "expm1" {
		t.Errorf("the registered op is not kept as given: %+v", got)
	}
	if Default.Lookup("expm1") != nil {
		t.Errorf("registering in one registry changed the default one")
	}
}

// TestSplitAlikeThroughReshape checks OperandSplit and ResultSplit on the
// rules of a reshape [s, h·d] -> [s, h, d] (the split of a projection into
// heads) and of its inverse, written in factors s = 8, h = 4, d = 16.
func TestSplitAlikeThroughReshape(t *testing.T) {
	factors := []Factor{{8, PassThrough}, {4, PassThrough}, {16, PassThrough}}
	split := Rule{Factors: factors, Operands: [][]Dim{{{0}, {1, 2}}}, Result: []Dim{{0}, {1}, {2}}}
	merge := Rule{Factors: factors, Operands: [][]Dim{{{0}, {1}, {2}}}, Result: []Dim{{0}, {1, 2}}}
	for _, tc := range []struct {
		name string
		got  int
		want int
	}{
		{"heads split: h in 2 cuts the outer factor of h·d", split.OperandSplit(0, 1, 2), 1},
		{"heads split: h in 4", split.OperandSplit(0, 1, 4), 1},
		{"heads split: h in 3 does not divide it", split.OperandSplit(0, 1, 3), -1},
		{"heads split: d is an inner factor", split.OperandSplit(0, 2, 2), -1},
		{"heads split: s, unevenly", split.OperandSplit(0, 0, 3), 0},
		{"heads split backwards: h·d in 4 is h", split.ResultSplit(0, 1, 4), 1},
		{"heads split backwards: h·d in 8 is more than h", split.ResultSplit(0, 1, 8), -1},
		{"heads merge: h·d in 2 cuts h", merge.OperandSplit(0, 1, 2), 1},
		{"heads merge backwards: h in 2 cuts h·d", merge.ResultSplit(0, 1, 2), 1},
		{"heads merge backwards: d has no block counterpart", merge.ResultSplit(0, 2, 2), -1},
		{"out of range", split.OperandSplit(0, 3, 2) + split.ResultSplit(1, 0, 2) + split.ResultSplit(0, 2, 2), -3},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: got %d, want %d", tc.name, tc.got, tc.want)
		}
	}
}

// TestResultWithin checks where each result dimension of the reshapes of
// TestSplitAlikeThroughReshape lies in the operand: a split's dimensions
// within the operand's compound one, at the stride of the factors after
// them; a merge's compound dimension in none.
func TestResultWithin(t *testing.T) {
	factors := []Factor{{8, PassThrough}, {4, PassThrough}, {16, PassThrough}}
	split := Rule{Factors: factors, Operands: [][]Dim{{{0}, {1, 2}}}, Result: []Dim{{0}, {1}, {2}}}
	merge := Rule{Factors: factors, Operands: [][]Dim{{{0}, {1}, {2}}}, Result: []Dim{{0}, {1, 2}}}
	within := func(r Rule, i, j int) [2]int {
		d, s := r.ResultWithin(i, j)
		return [2]int{d, s}
	}
	for _, tc := range []struct {
		name      string
		got, want [2]int
	}{
		{"split: s is the operand's s", within(split, 0, 0), [2]int{0, 1}},
		{"split: h is the outer part of h·d", within(split, 0, 1), [2]int{1, 16}},
		{"split: d is the inner part of h·d", within(split, 0, 2), [2]int{1, 1}},
		{"merge: s is the operand's s", within(merge, 0, 0), [2]int{0, 1}},
		{"merge: h·d spans two operand dimensions", within(merge, 0, 1), [2]int{-1, 0}},
		{"out of range", within(split, 0, 3), [2]int{-1, 0}},
		{"no such operand", within(split, 1, 0), [2]int{-1, 0}},
	} {
		if diff := cmp.Diff(tc.want, tc.got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.name, diff)
		}
	}
}

// TestSplitAlikeIsOperandDim checks that for the built-in ops, whose
// dimensions are single factors, a split maps as the index does.
func TestSplitAlikeIsOperandDim(t *testing.T) {
	cases := []struct {
		op    string
		in    [][]int
		out   []int
		attrs Attrs
	}{
		{"set", [][]int{{4, 1, 6}}, []int{4, 1, 6}, Attrs{Axis: -1}},
		{"add", [][]int{{4, 1}, {1, 6}}, []int{4, 6}, Attrs{Axis: -1}},
		{"sum", [][]int{{4, 6, 8}}, []int{4, 8}, Attrs{Axis: 1}},
		{"broadcast", [][]int{{6}}, []int{4, 6, 2}, Attrs{Axis: -1, Axes: []int{0, 2}}},
		{"matmul", [][]int{{2, 4, 8}, {8, 6}}, []int{2, 4, 6}, Attrs{Axis: -1}},
		{"linear", [][]int{{3, 4, 8}, {6, 8}, {6}}, []int{3, 4, 6}, Attrs{Axis: -1}},
	}
	for _, tc := range cases {
		r := Lookup(tc.op).Rule(tc.in, tc.out, tc.attrs)
		for i := range tc.in {
			for j := range tc.out {
				if got, want := r.OperandSplit(i, j, 2), r.OperandDim(i, j); got != want {
					t.Errorf("%s: OperandSplit(%d, %d) = %d, OperandDim %d", tc.op, i, j, got, want)
				}
				d := r.OperandDim(i, j)
				if got, stride := r.ResultWithin(i, j); got != d || stride != min(d+1, 1) {
					t.Errorf("%s: ResultWithin(%d, %d) = %d, %d, want %d, %d", tc.op, i, j, got, stride, d, min(d+1, 1))
				}
				if d >= 0 {
					if got := r.ResultSplit(i, d, 2); got != j {
						t.Errorf("%s: ResultSplit(%d, %d) = %d, want %d", tc.op, i, d, got, j)
					}
				}
			}
		}
	}
}
