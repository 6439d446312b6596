package sim

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/nvcomm/nvcomm/internal/ops"
	"github.com/nvcomm/nvcomm/internal/plan"
)

// in is an operand of a reference test.
func in(name string, shape []int, vals ...float64) operand {
	return operand{name: name, vals: vals, shape: shape}
}

// layerOp builds an op reading operands, one in input and several in
// inputs, as plans write them.
func layerOp(op string, operands ...string) plan.Op {
	o := plan.Op{Index: 3, Op: op, Output: "out"}
	if len(operands) == 1 {
		o.Input = operands[0]
	} else {
		o.Inputs = operands
	}
	return o
}

func broadcastOp(axes ...int) plan.Op {
	o := layerOp("broadcast", "v")
	o.Axes = axes
	return o
}

// TestLayerReference evaluates every layer op on tiny tensors with known
// values, and the logical domain its output must have.
func TestLayerReference(t *testing.T) {
	const half = modulus / 2
	tests := map[string]struct {
		op       plan.Op
		ins      []operand
		declared []int // the output's shape, for a broadcast
		want     logicalDomain
		vals     []float64
	}{
		"permute moves each element to its index in the permuted dims": {
			op:   withAttrs(layerOp("permute", "a"), ops.Value{Key: ops.AttrDims, Ints: []int{1, -1, 0}}),
			ins:  []operand{in("a", []int{2, 3, 1}, 1, 2, 3, 4, 5, 6)},
			want: logicalDomain{shape: []int{3, 1, 2}},
			vals: []float64{1, 4, 2, 5, 3, 6},
		},
		"reshape keeps the values row-major": {
			op:   withAttrs(layerOp("reshape", "a"), ops.Value{Key: ops.AttrShape, Ints: []int{3, -1}}),
			ins:  []operand{in("a", []int{2, 3}, 1, 2, 3, 4, 5, 6)},
			want: logicalDomain{shape: []int{3, 2}},
			vals: []float64{1, 2, 3, 4, 5, 6},
		},
		"cast keeps the values": {
			op:   withAttrs(layerOp("cast", "a"), ops.Value{Key: ops.AttrDType, Str: "bfloat16"}),
			ins:  []operand{in("a", []int{2}, -7, 300)},
			want: logicalDomain{shape: []int{2}},
			vals: []float64{-7, 300},
		},
		"add broadcasts extent-1 axes both ways": {
			op:   layerOp("add", "a", "b"),
			ins:  []operand{in("a", []int{2, 1}, 1, 2), in("b", []int{1, 3}, 10, 20, 30)},
			want: logicalDomain{shape: []int{2, 3}},
			vals: []float64{11, 21, 31, 12, 22, 32},
		},
		"add wraps modulo p": {
			op:   layerOp("add", "a", "b"),
			ins:  []operand{in("a", []int{1}, half), in("b", []int{1}, 1)},
			want: logicalDomain{shape: []int{1}},
			vals: []float64{-half},
		},
		"sub": {
			op:   layerOp("sub", "a", "b"),
			ins:  []operand{in("a", []int{2, 2}, 5, 6, 7, 8), in("b", []int{2, 2}, 1, 1, 1, 10)},
			want: logicalDomain{shape: []int{2, 2}},
			vals: []float64{4, 5, 6, -2},
		},
		"mul is plain while small and 2^31 is 1": {
			op:   layerOp("mul", "a", "b"),
			ins:  []operand{in("a", []int{2}, -3, 1<<16), in("b", []int{2}, 4, 1<<15)},
			want: logicalDomain{shape: []int{2}},
			vals: []float64{-12, 1},
		},
		"maximum with a broadcast operand": {
			op:   layerOp("maximum", "a", "b"),
			ins:  []operand{in("a", []int{3}, 1, -5, 0), in("b", []int{1}, -1)},
			want: logicalDomain{shape: []int{3}},
			vals: []float64{1, -1, 0},
		},
		"minimum": {
			op:   layerOp("minimum", "a", "b"),
			ins:  []operand{in("a", []int{2}, 1, -5), in("b", []int{2}, 0, -7)},
			want: logicalDomain{shape: []int{2}},
			vals: []float64{0, -7},
		},
		"relu": {
			op:   layerOp("relu", "a"),
			ins:  []operand{in("a", []int{3}, -2, 0, 3)},
			want: logicalDomain{shape: []int{3}},
			vals: []float64{0, 0, 3},
		},
		"neg": {
			op:   layerOp("neg", "a"),
			ins:  []operand{in("a", []int{3}, -2, 0, 3)},
			want: logicalDomain{shape: []int{3}},
			vals: []float64{2, 0, -3},
		},
		"abs of a rank-0 tensor": {
			op:   layerOp("abs", "a"),
			ins:  []operand{in("a", nil, -7)},
			want: logicalDomain{},
			vals: []float64{7},
		},
		"broadcast a leading axis": {
			op:       broadcastOp(0),
			ins:      []operand{in("v", []int{3}, 1, 2, 3)},
			declared: []int{2, 3},
			want:     logicalDomain{shape: []int{2, 3}},
			vals:     []float64{1, 2, 3, 1, 2, 3},
		},
		"broadcast a trailing axis": {
			op:       broadcastOp(1),
			ins:      []operand{in("v", []int{3}, 1, 2, 3)},
			declared: []int{3, 2},
			want:     logicalDomain{shape: []int{3, 2}},
			vals:     []float64{1, 1, 2, 2, 3, 3},
		},
		"broadcast around the input": {
			op:       broadcastOp(0, 2),
			ins:      []operand{in("v", []int{3}, 1, 2, 3)},
			declared: []int{2, 3, 2},
			want:     logicalDomain{shape: []int{2, 3, 2}},
			vals:     []float64{1, 1, 2, 2, 3, 3, 1, 1, 2, 2, 3, 3},
		},
		"matmul 2-D": {
			op:   layerOp("matmul", "a", "b"),
			ins:  []operand{in("a", []int{2, 3}, 1, 2, 3, 4, 5, 6), in("b", []int{3, 2}, 7, 8, 9, 10, 11, 12)},
			want: logicalDomain{shape: []int{2, 2, 3}, reduction: []int{2}},
			vals: []float64{58, 64, 139, 154},
		},
		"matmul batched": {
			op:   layerOp("matmul", "a", "b"),
			ins:  []operand{in("a", []int{2, 1, 2}, 1, 2, 3, 4), in("b", []int{2, 2, 1}, 5, 6, 7, 8)},
			want: logicalDomain{shape: []int{2, 1, 1, 2}, reduction: []int{3}},
			vals: []float64{17, 53},
		},
		"matmul with b shared by the batches": {
			op:   layerOp("matmul", "a", "b"),
			ins:  []operand{in("a", []int{2, 1, 2}, 1, 2, 3, 4), in("b", []int{2, 2}, 1, 2, 3, 4)},
			want: logicalDomain{shape: []int{2, 1, 2, 2}, reduction: []int{3}},
			vals: []float64{7, 10, 15, 22},
		},
		"matmul sums modulo p": {
			op:   layerOp("matmul", "a", "b"),
			ins:  []operand{in("a", []int{1, 2}, 1<<15, 1<<15), in("b", []int{2, 1}, 1<<15, 1<<15)},
			want: logicalDomain{shape: []int{1, 1, 2}, reduction: []int{2}},
			vals: []float64{1}, // 2^30 + 2^30 = 2^31
		},
		"linear": {
			op:   layerOp("linear", "x", "w"),
			ins:  []operand{in("x", []int{2, 3}, 1, 2, 3, 4, 5, 6), in("w", []int{2, 3}, 1, 0, 0, 0, 1, 1)},
			want: logicalDomain{shape: []int{2, 2, 3}, reduction: []int{2}},
			vals: []float64{1, 5, 4, 11},
		},
		"linear with bias": {
			op: layerOp("linear", "x", "w", "bias"),
			ins: []operand{in("x", []int{2, 3}, 1, 2, 3, 4, 5, 6), in("w", []int{2, 3}, 1, 0, 0, 0, 1, 1),
				in("bias", []int{2}, 10, 20)},
			want: logicalDomain{shape: []int{2, 2, 3}, reduction: []int{2}},
			vals: []float64{11, 25, 14, 31},
		},
		"linear of a vector": {
			op:   layerOp("linear", "x", "w"),
			ins:  []operand{in("x", []int{3}, 1, 2, 3), in("w", []int{2, 3}, 1, 0, 0, 0, 1, 1)},
			want: logicalDomain{shape: []int{2, 3}, reduction: []int{1}},
			vals: []float64{1, 5},
		},
		"linear of a 3-D input": {
			op:   layerOp("linear", "x", "w"),
			ins:  []operand{in("x", []int{2, 1, 2}, 1, 2, 3, 4), in("w", []int{1, 2}, 1, 1)},
			want: logicalDomain{shape: []int{2, 1, 1, 2}, reduction: []int{3}},
			vals: []float64{3, 7},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if err := checkArity(tc.op); err != nil {
				t.Fatal(err)
			}
			dom, err := opDomain(tc.op, tc.ins, tc.declared)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, dom, cmp.AllowUnexported(logicalDomain{}), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("domain (-want +got):\n%s", diff)
			}
			got := evalOp(tc.op, tc.ins, valueShape(dom))
			if diff := cmp.Diff(tc.vals, got); diff != "" {
				t.Errorf("values (-want +got):\n%s", diff)
			}
		})
	}
}

// valueShape drops a domain's reduction axes.
func valueShape(d logicalDomain) []int {
	var shape []int
	for k, e := range d.shape {
		if !slices.Contains(d.reduction, k) {
			shape = append(shape, e)
		}
	}
	return shape
}

// TestLayerDomainErrors checks that operands that do not fit together are
// errors naming the op and why.
func TestLayerDomainErrors(t *testing.T) {
	axis := layerOp("relu", "a")
	axis.Axis = ip(0)
	axes := layerOp("add", "a", "b")
	axes.Axes = []int{0}
	tests := map[string]struct {
		op   plan.Op
		ins  []operand
		want string
	}{
		"add of different ranks": {
			layerOp("add", "a", "b"), []operand{in("a", []int{2}), in("b", []int{1, 2})},
			`op 3 (add): operands "a" [2] and "b" [1 2] differ in rank`,
		},
		"add that does not broadcast": {
			layerOp("add", "a", "b"), []operand{in("a", []int{2, 3}), in("b", []int{2, 2})},
			`op 3 (add): operands "a" [2 3] and "b" [2 2] do not broadcast: axis 1 has extents 3 and 2, and neither is 1`,
		},
		"matmul k mismatch": {
			layerOp("matmul", "a", "b"), []operand{in("a", []int{2, 3}), in("b", []int{2, 2})},
			`op 3 (matmul): operands "a" [2 3] and "b" [2 2] do not multiply: the first's last extent 3 is not the second's second-to-last 2`,
		},
		"matmul of a vector": {
			layerOp("matmul", "a", "b"), []operand{in("a", []int{3}), in("b", []int{3, 2})},
			"the first has 1 axes, want at least 2",
		},
		"matmul batch mismatch": {
			layerOp("matmul", "a", "b"), []operand{in("a", []int{2, 1, 3}), in("b", []int{3, 3, 1})},
			"their batch extents differ",
		},
		"matmul b of another rank": {
			layerOp("matmul", "a", "b"), []operand{in("a", []int{2, 2, 1, 3}), in("b", []int{2, 3, 1})},
			"the second has 3 axes, want 2 or 4",
		},
		"linear weight of rank 1": {
			layerOp("linear", "x", "w"), []operand{in("x", []int{2, 3}), in("w", []int{3})},
			`op 3 (linear): weight "w" [3] has 1 axes, want 2 ([n, k])`,
		},
		"linear k mismatch": {
			layerOp("linear", "x", "w"), []operand{in("x", []int{2, 3}), in("w", []int{3, 2})},
			`do not contract: 3 is not 2`,
		},
		"linear bias of the wrong extent": {
			layerOp("linear", "x", "w", "bias"), []operand{in("x", []int{2, 3}), in("w", []int{4, 3}), in("bias", []int{3})},
			`bias "bias" has shape [3], want [4] (the weight's n)`,
		},
		"broadcast axes out of order": {
			broadcastOp(1, 0), []operand{in("v", []int{3})},
			"op 3 (broadcast): axes [1 0] must be increasing positions among the output's 3 axes",
		},
		"broadcast axis beyond the output": {
			broadcastOp(2), []operand{in("v", []int{3})},
			"axes [2] must be increasing positions among the output's 2 axes",
		},
		"axis on an elementwise op": {axis, []operand{in("a", []int{3})}, "op 3 (relu): takes no axis, got 0"},
		"axes on an add":            {axes, []operand{in("a", []int{3}), in("b", []int{3})}, "op 3 (add): takes no axes, got [0]"},
		"dims on a relu": {withAttrs(layerOp("relu", "a"), ops.Value{Key: ops.AttrDims, Ints: []int{0}}), []operand{in("a", []int{3})},
			`op 3 (relu): takes no other attribute, got "dims=[0]"`},
		"permute without dims": {layerOp("permute", "a"), []operand{in("a", []int{3})}, `op 3 (permute): takes dims, got ""`},
		"permute of a non-permutation": {withAttrs(layerOp("permute", "a"), ops.Value{Key: ops.AttrDims, Ints: []int{0, 0}}),
			[]operand{in("a", []int{3, 2})}, "op 3 (permute): dims [0, 0] is not a permutation: dim 0 appears twice"},
		"reshape of another count": {withAttrs(layerOp("reshape", "a"), ops.Value{Key: ops.AttrShape, Ints: []int{5}}),
			[]operand{in("a", []int{3, 2})}, "op 3 (reshape): shape [5] has 5 elements, but the input [3, 2] has 6"},
		"reshape with two -1": {withAttrs(layerOp("reshape", "a"), ops.Value{Key: ops.AttrShape, Ints: []int{-1, -1}}),
			[]operand{in("a", []int{3, 2})}, "op 3 (reshape): shape: more than one extent is -1"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := opDomain(tc.op, tc.ins, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("opDomain error = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// withAttrs is op with attribute values vs.
func withAttrs(op plan.Op, vs ...ops.Value) plan.Op {
	op.Attrs = vs
	return op
}

func TestCheckArity(t *testing.T) {
	tests := map[string]struct {
		op   plan.Op
		want string
	}{
		"add of one":     {layerOp("add", "a"), "op 3 (add): takes 2 inputs, got 1"},
		"relu of two":    {layerOp("relu", "a", "b"), "op 3 (relu): takes 1 input, got 2"},
		"linear of four": {layerOp("linear", "x", "w", "b", "c"), "op 3 (linear): takes 2 or 3 inputs, got 4"},
		"unknown op":     {layerOp("erfc", "a"), `op 3: unknown op "erfc"`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := checkArity(tc.op)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("checkArity error = %v, want one containing %q", err, tc.want)
			}
		})
	}
}
