package ops

import (
	"fmt"
	"slices"
)

// slice and cat move data along one axis without computing: slice keeps
// the entries start to end (exclusive, step 1) of its input's axis, as
// torch's x.narrow(axis, start, end - start) and x[..., start:end] do;
// cat joins its operands along axis, as torch.cat does. Both are view
// ops: each output element is one element of one operand. Their sharding
// rules give the axis a factor of its own in each tensor, marked
// NeedReplication where an operand holds it: a block of the output along
// that axis is not a block of any operand's, so a device can compute its
// block only from operands that hold the axis whole. Every other dim is
// shared alike, as the pointwise rule shares it (Shardy's rules of
// SliceOp and ConcatenateOp: a factor that needs a collective permute, or
// replication, along the sliced or joined dim).

// The attributes of slice.
const (
	// AttrStart is slice's first kept index along its axis (negative from
	// the end).
	AttrStart Attr = "start"
	// AttrEnd is slice's index past the last kept one (negative from the
	// end).
	AttrEnd Attr = "end"
)

// sliceAttrSpecs are the specs of slice's attributes besides axis.
var sliceAttrSpecs = []AttrSpec{
	{Key: AttrStart, Kind: IntAttr, Doc: "slice's first kept index along its axis (negative from the end)"},
	{Key: AttrEnd, Kind: IntAttr, Doc: "slice's index past the last kept one along its axis (negative from the end); start < end"},
}

// registerSliceOps adds slice and cat.
func registerSliceOps(r *Registry) {
	r.MustRegister(Op{Name: "slice", Family: View, Operands: []string{"x"}, Attrs: []Attr{AttrAxis, AttrStart, AttrEnd},
		Rule: alongAxisRule, Shape: sliceShape, Torch: &Torch{Func: "_slice", Rounding: Exact},
		Doc: "the entries start to end (exclusive) of its input along axis, torch.narrow"})
	r.MustRegister(Op{Name: "cat", Family: View, Operands: []string{"a", "b"}, Variadic: true, Attrs: []Attr{AttrAxis},
		Rule: alongAxisRule, Shape: catShape, Torch: &Torch{Func: "_cat", Rounding: Selecting},
		Doc: "its operands joined along axis, in order, torch.cat"})
}

// NormalizeAxis returns axis of a tensor of rank, counted from the start
// (negative counts from the end), and whether it is one of its axes.
func NormalizeAxis(axis, rank int) (int, bool) {
	if axis < 0 {
		axis += rank
	}
	return axis, axis >= 0 && axis < rank
}

// axisError says that axis a.Axis is not one of the operand's.
func axisError(a Attrs, rank int) *ShapeError {
	return &ShapeError{Attr: AttrAxis, Index: -1,
		Msg:  fmt.Sprintf("axis %d is out of range for rank %d", a.Axis, rank),
		Hint: "axes count from 0, or from -1 at the end"}
}

// sliceShape is slice's output shape: its input's, with end - start along
// axis; start and end are normalized (counted from the start). Bounds out
// of the axis, or an empty slice, are errors: nvcomm does not clamp them
// as torch does, since a bound past the end is more often a mistake than
// a wish for the whole axis.
func sliceShape(in [][]int, a Attrs) ([]int, Values, *ShapeError) {
	x := in[0]
	if _, ok := NormalizeAxis(a.Axis, len(x)); !ok || a.Axis < 0 {
		return nil, nil, axisError(a, len(x))
	}
	n := x[a.Axis]
	start, end := a.Values.Int(AttrStart), a.Values.Int(AttrEnd)
	bound := func(key Attr, v int) (int, *ShapeError) {
		w := v
		if v < 0 {
			w += n
		}
		if w >= 0 && w <= n {
			return w, nil
		}
		return 0, &ShapeError{Attr: key, Index: -1,
			Msg:  fmt.Sprintf("%s %d is out of range for axis %d of extent %d", key, v, a.Axis, n),
			Hint: fmt.Sprintf("%s lies in [-%d, %d]: nvcomm does not clamp slice bounds as torch does", key, n, n)}
	}
	s, err := bound(AttrStart, start)
	if err != nil {
		return nil, nil, err
	}
	e, err := bound(AttrEnd, end)
	if err != nil {
		return nil, nil, err
	}
	if s >= e {
		return nil, nil, &ShapeError{Attr: AttrEnd, Index: -1,
			Msg:  fmt.Sprintf("slice [%d, %d) of axis %d is empty (start %d, end %d)", s, e, a.Axis, start, end),
			Hint: "end is past start: a slice keeps at least one entry"}
	}
	out := slices.Clone(x)
	out[a.Axis] = e - s
	return out, Values{{Key: AttrStart, Int: s}, {Key: AttrEnd, Int: e}}, nil
}

// catShape is cat's output shape: its operands' (equal ranks, equal
// extents off axis), the sum of their extents along axis.
func catShape(in [][]int, a Attrs) ([]int, Values, *ShapeError) {
	x := in[0]
	if _, ok := NormalizeAxis(a.Axis, len(x)); !ok || a.Axis < 0 {
		return nil, nil, axisError(a, len(x))
	}
	out := slices.Clone(x)
	for k, y := range in[1:] {
		if len(y) != len(x) {
			return nil, nil, &ShapeError{Index: k + 1,
				Msg:  fmt.Sprintf("operand %d has rank %d, but operand 0 has rank %d", k+1, len(y), len(x)),
				Hint: "cat joins tensors of one rank; insert the missing axes with a broadcast or reshape first"}
		}
		for d, e := range y {
			if d != a.Axis && e != x[d] {
				return nil, nil, &ShapeError{Index: k + 1,
					Msg:  fmt.Sprintf("operand %d %s differs from operand 0 %s in axis %d (%d, not %d), which is not the joined axis %d", k+1, intText(y), intText(x), d, e, x[d], a.Axis),
					Hint: "cat's operands have equal extents on every axis but the one they are joined along"}
			}
		}
		out[a.Axis] += y[a.Axis]
	}
	return out, a.Values, nil
}

// alongAxisRule is the rule of an op that moves data along a.Axis (slice,
// cat): each operand dim but axis is the result's; each operand's axis is
// a NeedReplication factor of its own extent, which the result does not
// share.
func alongAxisRule(in [][]int, out []int, a Attrs) Rule {
	var b ruleBuilder
	b.resultFactors(out)
	for _, shape := range in {
		dims := make([]Dim, len(shape))
		for d, e := range shape {
			switch {
			case d == a.Axis:
				dims[d] = b.factor(e, NeedReplication)
			case d < len(out):
				dims[d] = b.r.Result[d]
			}
		}
		b.r.Operands = append(b.r.Operands, dims)
	}
	return b.r
}

// Int returns integer attribute k, 0 when absent.
func (vs Values) Int(k Attr) int {
	v, _ := vs.Get(k)
	return v.Int
}

// Window is the part of one operand that a slice or a cat writes into its
// output along the op's axis, all of it along the other axes: the
// operand's entries Start to Start+Len along axis, after the windows of
// the operands before it.
type Window struct {
	Start, Len int
}

// Windows returns the windows of the operands of a slice or a cat, of
// extents along its axis in (in operand order), whose normalized
// attributes are vs; nil for another op.
func Windows(op string, in []int, vs Values) []Window {
	switch op {
	case "slice":
		s := vs.Int(AttrStart)
		return []Window{{Start: s, Len: vs.Int(AttrEnd) - s}}
	case "cat":
		w := make([]Window, len(in))
		for k, n := range in {
			w[k] = Window{Len: n}
		}
		return w
	}
	return nil
}
