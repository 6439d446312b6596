package ops

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// TestViewRules checks the factors of permute's and reshape's rules and
// how a block split crosses them: which result dim a split of an operand
// dim cuts alike (ResultSplit), which operand dim a split of a result dim
// does (OperandSplit), and why one that has none is lost.
func TestViewRules(t *testing.T) {
	dims := func(xs ...int) Attrs { return Attrs{Axis: -1, Values: Values{{Key: AttrDims, Ints: xs}}} }
	for _, tc := range []struct {
		name        string
		op          string
		in, out     []int
		a           Attrs
		operand     []Dim
		result      []Dim
		sizes       []int
		resultSplit [][2]int // operand dim, parts -> result dim
		want        []int
		lost        string // LostSplit of the first resultSplit, when it is -1
	}{
		{name: "permute", op: "permute", in: []int{2, 3, 4}, out: []int{4, 2, 3}, a: dims(2, 0, 1),
			operand: []Dim{{1}, {2}, {0}}, result: []Dim{{0}, {1}, {2}}, sizes: []int{4, 2, 3},
			resultSplit: [][2]int{{0, 2}, {2, 2}}, want: []int{1, 0}},
		{name: "permute, negative dims", op: "permute", in: []int{2, 3}, out: []int{3, 2}, a: dims(-1, 0),
			operand: []Dim{{1}, {0}}, result: []Dim{{0}, {1}}, sizes: []int{3, 2},
			resultSplit: [][2]int{{1, 3}}, want: []int{0}},
		{name: "heads split: [s, h·d] -> [s, h, d]", op: "reshape", in: []int{8, 24}, out: []int{8, 4, 6},
			operand: []Dim{{0}, {1, 2}}, result: []Dim{{0}, {1}, {2}}, sizes: []int{8, 4, 6},
			resultSplit: [][2]int{{1, 4}, {1, 2}, {0, 8}}, want: []int{1, 1, 0}},
		{name: "a split the outer piece does not divide", op: "reshape", in: []int{6}, out: []int{3, 2},
			operand: []Dim{{0, 1}}, result: []Dim{{0}, {1}}, sizes: []int{3, 2},
			resultSplit: [][2]int{{0, 2}}, want: []int{-1},
			lost: `becomes a dim whose outer piece has extent 3, which 2 devices do not divide (nvFuser: "Require the sharded ID to be divisible by the split factor")`},
		{name: "merge, outer piece sharded", op: "reshape", in: []int{4, 6}, out: []int{24},
			operand: []Dim{{0}, {1}}, result: []Dim{{0, 1}}, sizes: []int{4, 6},
			resultSplit: [][2]int{{0, 2}}, want: []int{0}},
		{name: "merge, inner piece sharded", op: "reshape", in: []int{3, 10}, out: []int{30},
			operand: []Dim{{0}, {1}}, result: []Dim{{0, 1}}, sizes: []int{3, 10},
			resultSplit: [][2]int{{1, 2}}, want: []int{-1},
			lost: `becomes an inner piece of a reshaped dim (nvFuser: "Expected the sharding to be on the outer reshaped id")`},
		{name: "extent-1 dims have no factor", op: "reshape", in: []int{1, 6}, out: []int{6, 1},
			operand: []Dim{nil, {0}}, result: []Dim{{0}, nil}, sizes: []int{6},
			resultSplit: [][2]int{{1, 3}}, want: []int{0}},
		{name: "no common factor: 3x2 -> 2x3", op: "reshape", in: []int{3, 2}, out: []int{2, 3},
			operand: []Dim{{0}, {1}}, result: []Dim{{2}, {3}}, sizes: []int{3, 2, 2, 3},
			resultSplit: [][2]int{{0, 3}}, want: []int{-1},
			lost: `becomes an inner piece of a reshaped dim (nvFuser: "Expected the sharding to be on the outer reshaped id")`},
		{name: "a common outer factor: 4x6 -> 6x4", op: "reshape", in: []int{4, 6}, out: []int{6, 4},
			operand: []Dim{{0, 1}, {2}}, result: []Dim{{0, 3}, {4}}, sizes: []int{2, 2, 6, 3, 4},
			resultSplit: [][2]int{{0, 2}, {0, 4}}, want: []int{0, -1},
			lost: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := Lookup(tc.op).Rule([][]int{tc.in}, tc.out, tc.a)
			var sizes []int
			for _, f := range r.Factors {
				sizes = append(sizes, f.Size)
			}
			if d := cmp.Diff([][]Dim{tc.operand}, r.Operands); d != "" {
				t.Errorf("operand dims (-want +got):\n%s", d)
			}
			if d := cmp.Diff(tc.result, r.Result); d != "" {
				t.Errorf("result dims (-want +got):\n%s", d)
			}
			if d := cmp.Diff(tc.sizes, sizes); d != "" {
				t.Errorf("factor sizes (-want +got):\n%s", d)
			}
			var got []int
			for _, s := range tc.resultSplit {
				got = append(got, r.ResultSplit(0, s[0], s[1]))
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("ResultSplit (-want +got):\n%s", d)
			}
			if tc.want[0] < 0 && tc.lost != "" {
				if d := cmp.Diff(tc.lost, r.LostSplit(0, tc.resultSplit[0][0], tc.resultSplit[0][1])); d != "" {
					t.Errorf("LostSplit (-want +got):\n%s", d)
				}
			}
			for j, want := range tc.want {
				if want >= 0 { // the split maps back
					if back := r.OperandSplit(0, want, tc.resultSplit[j][1]); back != tc.resultSplit[j][0] {
						t.Errorf("OperandSplit(0, %d, %d) = %d, want %d", want, tc.resultSplit[j][1], back, tc.resultSplit[j][0])
					}
				}
			}
		})
	}
}

// TestViewShapes checks the view ops' output shapes, normalized
// attributes and errors.
func TestViewShapes(t *testing.T) {
	vals := func(k Attr, xs ...int) Attrs { return Attrs{Axis: -1, Values: Values{{Key: k, Ints: xs}}} }
	for _, tc := range []struct {
		name, op string
		in       []int
		a        Attrs
		want     []int
		norm     Values
		err      *ShapeError
	}{
		{"permute", "permute", []int{2, 3, 4}, vals(AttrDims, -1, 0, 1), []int{4, 2, 3}, Values{{Key: AttrDims, Ints: []int{2, 0, 1}}}, nil},
		{"permute, too few dims", "permute", []int{2, 3}, vals(AttrDims, 0), nil, nil,
			&ShapeError{Attr: AttrDims, Index: -1, Msg: "dims [0] has 1 entries, but the input has rank 2", Hint: "list every dim of the input once, in the output's order"}},
		{"permute, a dim twice", "permute", []int{2, 3}, vals(AttrDims, 0, -2), nil, nil,
			&ShapeError{Attr: AttrDims, Index: 1, Msg: "dims [0, -2] is not a permutation: dim 0 appears twice", Hint: "list every dim of the input once, in the output's order"}},
		{"permute, out of range", "permute", []int{2, 3}, vals(AttrDims, 0, 2), nil, nil,
			&ShapeError{Attr: AttrDims, Index: 1, Msg: "dim 2 is out of range for rank 2", Hint: "dims count from 0, or from -1 at the end"}},
		{"reshape", "reshape", []int{8, 24}, vals(AttrShape, 8, 4, -1), []int{8, 4, 6}, Values{{Key: AttrShape, Ints: []int{8, 4, 6}}}, nil},
		{"reshape to a scalar", "reshape", []int{1, 1}, vals(AttrShape), []int{}, Values{{Key: AttrShape, Ints: []int{}}}, nil},
		{"reshape, count differs", "reshape", []int{8, 24}, vals(AttrShape, 8, 4, 5), nil, nil,
			&ShapeError{Attr: AttrShape, Index: -1, Msg: "shape [8, 4, 5] has 160 elements, but the input [8, 24] has 192", Hint: "a reshape keeps the element count; write -1 for the extent to infer"}},
		{"reshape, -1 does not fit", "reshape", []int{8, 24}, vals(AttrShape, 5, -1), nil, nil,
			&ShapeError{Attr: AttrShape, Index: -1, Msg: "shape [5, -1] does not fit the input's 192 elements: 192 is not a multiple of 5", Hint: "the input [8, 24] has 192 elements"}},
		{"cast", "cast", []int{2, 3}, Attrs{Axis: -1, Values: Values{{Key: AttrDType, Str: "bfloat16"}}}, []int{2, 3}, Values{{Key: AttrDType, Str: "bfloat16"}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, norm, err := Lookup(tc.op).Shape([][]int{tc.in}, tc.a)
			if d := cmp.Diff(tc.err, err); d != "" {
				t.Fatalf("error (-want +got):\n%s", d)
			}
			if d := cmp.Diff(tc.want, got, cmpopts.EquateEmpty()); d != "" {
				t.Errorf("shape (-want +got):\n%s", d)
			}
			if d := cmp.Diff(tc.norm, norm, cmpopts.EquateEmpty()); d != "" {
				t.Errorf("attributes (-want +got):\n%s", d)
			}
		})
	}
}

// TestAttrChecks checks the specs' checks of values as written.
func TestAttrChecks(t *testing.T) {
	for _, tc := range []struct {
		op   string
		vs   Values
		want []Problem
	}{
		{"reshape", Values{{Key: AttrShape, Ints: []int{2, -1, -1}}}, []Problem{{Index: 0, Key: AttrShape, What: Bad, Msg: "more than one extent is -1", Hint: "one extent may be -1: the others fix it"}}},
		{"reshape", Values{{Key: AttrShape, Ints: []int{0, 2}}}, []Problem{{Index: 0, Key: AttrShape, What: Bad, Msg: "extent 0 is not positive", Hint: "extents are positive; one may be -1, inferred from the element count"}}},
		{"permute", Values{{Key: AttrDims, Ints: []int{}}}, []Problem{{Index: 0, Key: AttrDims, What: Bad, Msg: "expected at least one entry, got an empty list", Hint: "a rank-0 tensor has nothing to permute: use set"}}},
		{"permute", Values{{Key: AttrShape, Ints: []int{1}}}, []Problem{{Index: 0, Key: AttrShape, What: NotTaken}, {Index: -1, Key: AttrDims, What: Missing}}},
		{"cast", Values{{Key: AttrDType, Str: "float32"}}, nil},
	} {
		if d := cmp.Diff(tc.want, Lookup(tc.op).CheckValues(tc.vs)); d != "" {
			t.Errorf("%s %v (-want +got):\n%s", tc.op, tc.vs, d)
		}
	}
}

// TestValueTextAndPtr checks how a value of each built-in attribute is
// written and which field a decoder reads it into.
func TestValueTextAndPtr(t *testing.T) {
	for _, tc := range []struct {
		v    Value
		text string
		ptr  any
	}{
		{Value{Key: AttrAxis, Int: -1}, "-1", new(int)},
		{Value{Key: AttrDims, Ints: []int{1, 0}}, "[1, 0]", new([]int)},
		{Value{Key: AttrShape}, "[]", new([]int)},
		{Value{Key: AttrDType, Str: "bfloat16"}, "bfloat16", new(string)},
	} {
		if d := cmp.Diff(tc.text, tc.v.Text()); d != "" {
			t.Errorf("%s: Text (-want +got):\n%s", tc.v.Key, d)
		}
		if got, want := fmt.Sprintf("%T", tc.v.Ptr()), fmt.Sprintf("%T", tc.ptr); got != want {
			t.Errorf("%s: Ptr is %s, want %s", tc.v.Key, got, want)
		}
	}
}
