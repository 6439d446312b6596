package ops

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestSliceCatShapes checks slice's and cat's output shapes, their
// normalized attributes and their errors.
func TestSliceCatShapes(t *testing.T) {
	bounds := func(axis, start, end int) Attrs {
		return Attrs{Axis: axis, Values: Values{{Key: AttrStart, Int: start}, {Key: AttrEnd, Int: end}}}
	}
	for _, tc := range []struct {
		name, op string
		in       [][]int
		a        Attrs
		want     []int
		norm     Values
		err      *ShapeError
	}{
		{"slice", "slice", [][]int{{2, 16}}, bounds(1, 0, 8), []int{2, 8}, bounds(1, 0, 8).Values, nil},
		{"slice from the end", "slice", [][]int{{2, 16}}, bounds(1, -8, 16), []int{2, 8}, bounds(1, 8, 16).Values, nil},
		{"slice, end from the end", "slice", [][]int{{2, 16}}, bounds(1, 1, -1), []int{2, 14}, bounds(1, 1, 15).Values, nil},
		{"slice, start out of range", "slice", [][]int{{2, 16}}, bounds(1, -17, 4), nil, nil,
			&ShapeError{Attr: AttrStart, Index: -1, Msg: "start -17 is out of range for axis 1 of extent 16", Hint: "start lies in [-16, 16]: nvcomm does not clamp slice bounds as torch does"}},
		{"slice, end past the axis", "slice", [][]int{{2, 16}}, bounds(0, 0, 3), nil, nil,
			&ShapeError{Attr: AttrEnd, Index: -1, Msg: "end 3 is out of range for axis 0 of extent 2", Hint: "end lies in [-2, 2]: nvcomm does not clamp slice bounds as torch does"}},
		{"slice, empty", "slice", [][]int{{2, 16}}, bounds(1, 8, -8), nil, nil,
			&ShapeError{Attr: AttrEnd, Index: -1, Msg: "slice [8, 8) of axis 1 is empty (start 8, end -8)", Hint: "end is past start: a slice keeps at least one entry"}},
		{"slice, axis out of range", "slice", [][]int{{2, 16}}, bounds(2, 0, 1), nil, nil,
			&ShapeError{Attr: AttrAxis, Index: -1, Msg: "axis 2 is out of range for rank 2", Hint: "axes count from 0, or from -1 at the end"}},
		{"cat", "cat", [][]int{{2, 3}, {2, 5}, {2, 1}}, Attrs{Axis: 1}, []int{2, 9}, nil, nil},
		{"cat, extents differ", "cat", [][]int{{2, 3}, {4, 5}}, Attrs{Axis: 1}, nil, nil,
			&ShapeError{Index: 1, Msg: "operand 1 [4, 5] differs from operand 0 [2, 3] in axis 0 (4, not 2), which is not the joined axis 1",
				Hint: "cat's operands have equal extents on every axis but the one they are joined along"}},
		{"cat, ranks differ", "cat", [][]int{{2, 3}, {2, 3}, {6}}, Attrs{Axis: 0}, nil, nil,
			&ShapeError{Index: 2, Msg: "operand 2 has rank 1, but operand 0 has rank 2",
				Hint: "cat joins tensors of one rank; insert the missing axes with a broadcast or reshape first"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, norm, err := Lookup(tc.op).Shape(tc.in, tc.a)
			if d := cmp.Diff(tc.err, err); d != "" {
				t.Fatalf("error (-want +got):\n%s", d)
			}
			if d := cmp.Diff([]any{tc.want, tc.norm}, []any{got, norm}); d != "" {
				t.Errorf("shape, attributes (-want +got):\n%s", d)
			}
		})
	}
}

// TestSliceCatRules checks that slice and cat share every dim but their
// axis with the result, and that a split of the axis has no counterpart.
func TestSliceCatRules(t *testing.T) {
	for _, tc := range []struct {
		name    string
		op      string
		in      [][]int
		out     []int
		axis    int
		dims    [][]int // per operand, OperandDim(i, j) for every result dim j
		through [][]int // per operand, ResultSplit(i, d, 2) for every operand dim d
	}{
		{"slice", "slice", [][]int{{4, 16, 6}}, []int{4, 8, 6}, 1, [][]int{{0, -1, 2}}, [][]int{{0, -1, 2}}},
		{"cat", "cat", [][]int{{4, 2}, {4, 6}}, []int{4, 8}, 1, [][]int{{0, -1}, {0, -1}}, [][]int{{0, -1}, {0, -1}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := Lookup(tc.op).Rule(tc.in, tc.out, Attrs{Axis: tc.axis})
			var dims, through [][]int
			for i, shape := range tc.in {
				row := make([]int, len(tc.out))
				for j := range tc.out {
					row[j] = r.OperandDim(i, j)
				}
				dims = append(dims, row)
				row = make([]int, len(shape))
				for d := range shape {
					row[d] = r.ResultSplit(i, d, 2)
				}
				through = append(through, row)
				if k := r.Operands[i][tc.axis][0]; r.Factors[k].Kind != NeedReplication {
					t.Errorf("operand %d's axis is a factor of kind %d, want NeedReplication", i, r.Factors[k].Kind)
				}
			}
			if d := cmp.Diff([][][]int{tc.dims, tc.through}, [][][]int{dims, through}); d != "" {
				t.Errorf("OperandDim, ResultSplit (-want +got):\n%s", d)
			}
		})
	}
}

// TestArity checks the operand counts each kind of entry takes and how
// messages say them.
func TestArity(t *testing.T) {
	for _, tc := range []struct {
		op     string
		lo, hi int
		text   string
	}{
		{"relu", 1, 1, "1 input"}, {"add", 2, 2, "2 inputs"}, {"linear", 2, 3, "2 or 3 inputs"}, {"cat", 2, MaxOperands, "2 or more inputs"},
	} {
		o := Lookup(tc.op)
		lo, hi := o.Arity()
		if d := cmp.Diff([]any{tc.lo, tc.hi, tc.text, true, false}, []any{lo, hi, o.ArityText(), o.TakesOperands(tc.lo), o.TakesOperands(tc.lo - 1)}); d != "" {
			t.Errorf("%s: (-want +got):\n%s", tc.op, d)
		}
	}
	r := &Registry{byName: map[string]*Op{}}
	if err := r.Register(Op{Name: "x", Family: Copy, Operands: []string{"a", "b"}, Optional: 1, Variadic: true, Rule: pointwiseRule}); err == nil {
		t.Error("Register took a variadic op with an optional operand")
	}
}

// TestWindows checks the windows of slice's and cat's operands.
func TestWindows(t *testing.T) {
	for _, tc := range []struct {
		op   string
		in   []int
		vs   Values
		want []Window
	}{
		{"slice", []int{16}, Values{{Key: AttrStart, Int: 4}, {Key: AttrEnd, Int: 12}}, []Window{{Start: 4, Len: 8}}},
		{"cat", []int{3, 5, 1}, nil, []Window{{Len: 3}, {Len: 5}, {Len: 1}}},
		{"permute", []int{3}, nil, nil},
	} {
		if d := cmp.Diff(tc.want, Windows(tc.op, tc.in, tc.vs)); d != "" {
			t.Errorf("%s (-want +got):\n%s", tc.op, d)
		}
	}
}
