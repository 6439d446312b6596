package ops

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// An op's attributes are the keys it takes besides "in" and "out". Each
// is a registry fact ([AttrSpec]): its key (the same in fusion files and
// plans), the kind of its value, its documentation and the checks of a
// value as written. The YAML front end, the plan's encoder and decoders,
// validate, certify, auto and the simulator read the specs, so an op with
// a new attribute is an entry and a spec.
//
// axis and axes, the attributes of the first ops, are specs like the
// others, but their values live in fields of their own (ir.Op.Axis and
// Axes, plan.Op.Axis and Axes): a plan writes "axis" on every op, null on
// most, and the lowering reads them per axis. Every other attribute's
// value is one of an op's [Values].

// AttrKind is the type of an attribute's value.
type AttrKind int

// The kinds of attribute values.
const (
	// IntAttr is an integer.
	IntAttr AttrKind = iota
	// IntsAttr is a list of integers.
	IntsAttr
	// DTypeAttr is the name of an element type (float32, bfloat16, ...).
	DTypeAttr
	// FloatAttr is a number.
	FloatAttr
	// BoolAttr is true or false.
	BoolAttr
	// NameAttr is one of the names its spec lists (cross_entropy's
	// reduction: mean or none).
	NameAttr
)

var kindNames = [...]string{"an integer", "a list of integers", "a dtype name", "a number", "true or false", "a name"}

// String says what a value of the kind is, for messages: "an integer".
func (k AttrKind) String() string {
	if k < 0 || int(k) >= len(kindNames) {
		return "AttrKind(" + strconv.Itoa(int(k)) + ")"
	}
	return kindNames[k]
}

// AttrSpec is one attribute's entry in the registry.
type AttrSpec struct {
	// Key is the attribute's key in fusion files and plans.
	Key Attr
	// Kind is its value's type.
	Kind AttrKind
	// Doc is one line for docs and the schemas: what it says.
	Doc string
	// NonEmpty requires a list to have an entry, with this hint when it
	// has none.
	NonEmpty string
	// Check, when set, checks a value as written, before the operands'
	// shapes are known: a message (after "KEY: ") and a hint, or "".
	Check func(v Value) (msg, hint string)
	// Names are, for a NameAttr, the values it may take; the first is its
	// value where an op leaves an optional one out.
	Names []string
	// Optional says that an op that takes it may leave it out, as torch's
	// keyword arguments with a default (cross_entropy's reduction).
	Optional bool
	// Planning says that it chooses how the op is planned, not what it
	// computes (a linear's overlap): the reference and the exported
	// program's torch function do not take it.
	Planning bool
}

// The attributes of the reshaping ops.
const (
	// AttrDims is permute's order of its input's dims.
	AttrDims Attr = "dims"
	// AttrShape is reshape's output shape, one -1 allowed.
	AttrShape Attr = "shape"
	// AttrDType is cast's output dtype.
	AttrDType Attr = "dtype"
)

// attrSpecs are the attributes of the ops of docs/fusion.md.
var attrSpecs = slices.Concat([]AttrSpec{
	{Key: AttrAxis, Kind: IntAttr, Doc: "the reduced axis, the axis slice and cat work along, or the dim gather selects along, among the input's non-reduction axes (negative from the end)"},
	{Key: AttrAxes, Kind: IntsAttr, Doc: "broadcast's new axes, increasing positions in the output; a norm's normalized axes, the input's last (negative from the end)"},
	{Key: AttrDims, Kind: IntsAttr, Doc: "the input's dims in the output's order (negative from the end), a permutation",
		NonEmpty: "a rank-0 tensor has nothing to permute: use set"},
	{Key: AttrShape, Kind: IntsAttr, Doc: "the output's shape, row-major over the input's elements; one extent may be -1 (inferred)",
		Check: checkViewShape},
	{Key: AttrDType, Kind: DTypeAttr, Doc: "the output's element type"},
	{Key: AttrEps, Kind: FloatAttr, Doc: "a norm's epsilon, added to the mean square (rms_norm) or variance (layer_norm)",
		Check: checkEps},
}, sliceAttrSpecs, lossAttrSpecs, sdpaAttrSpecs, trilAttrSpecs, scatterAttrSpecs, overlapAttrSpecs, moeAttrSpecs)

// checkEps checks a norm's epsilon: not negative.
func checkEps(v Value) (string, string) {
	if v.Float < 0 {
		return "epsilon " + strconv.FormatFloat(v.Float, 'g', -1, 64) + " is negative", "eps is a small positive number, 1e-05 or 1e-06"
	}
	return "", ""
}

// checkViewShape checks a reshape's shape as written: positive extents,
// but for one -1.
func checkViewShape(v Value) (string, string) {
	inferred := 0
	for _, e := range v.Ints {
		switch {
		case e == -1:
			inferred++
		case e < 1:
			return "extent " + strconv.Itoa(e) + " is not positive", "extents are positive; one may be -1, inferred from the element count"
		}
	}
	if inferred > 1 {
		return "more than one extent is -1", "one extent may be -1: the others fix it"
	}
	return "", ""
}

// RegisterAttr adds an attribute's spec, for programs and tests that
// extend nvcomm with an op of a new attribute before they use the
// registry, as Registry.Register.
func RegisterAttr(s AttrSpec) error {
	if s.Key == "" || AttrOf(string(s.Key)) != nil || slices.Contains([]string{"op", "in", "out"}, string(s.Key)) {
		return fmt.Errorf("attribute %q: empty, an op's own key, or registered already", s.Key)
	}
	if s.Kind < IntAttr || s.Kind > NameAttr {
		return fmt.Errorf("attribute %q: unknown kind %d", s.Key, s.Kind)
	}
	attrSpecs = append(attrSpecs, s)
	return nil
}

// AttrOf returns the spec of the attribute called key, or nil.
func AttrOf(key string) *AttrSpec {
	for i := range attrSpecs {
		if string(attrSpecs[i].Key) == key {
			return &attrSpecs[i]
		}
	}
	return nil
}

// AttrSpecs returns every attribute's spec in documentation order, a new
// slice.
func AttrSpecs() []AttrSpec { return slices.Clone(attrSpecs) }

// NumAttrs returns the number of attributes.
func NumAttrs() int { return len(attrSpecs) }

// AttrKeys returns every attribute's key in documentation order, a new
// slice.
func AttrKeys() []string {
	keys := make([]string, len(attrSpecs))
	for i, s := range attrSpecs {
		keys[i] = string(s.Key)
	}
	return keys
}

// Stored reports whether an attribute's value is one of an op's Values:
// every attribute but axis and axes, which have fields of their own.
func (s *AttrSpec) Stored() bool { return s.Key != AttrAxis && s.Key != AttrAxes }

// Value is one attribute's value: the field of its kind is set.
type Value struct {
	Key   Attr
	Int   int
	Ints  []int
	Str   string
	Float float64
	Bool  bool
}

// Ptr returns a pointer to the field of v that holds a value of its
// attribute's kind (*int, *[]int, *string, *float64, *bool), for a
// decoder to read into; a key with no spec gets the string's.
func (v *Value) Ptr() any {
	spec := AttrOf(string(v.Key))
	if spec == nil {
		return &v.Str
	}
	switch spec.Kind {
	case IntAttr:
		return &v.Int
	case IntsAttr:
		return &v.Ints
	case FloatAttr:
		return &v.Float
	case BoolAttr:
		return &v.Bool
	}
	return &v.Str
}

// Values are an op's attribute values but axis and axes, in the order of
// its entry's Attrs.
type Values []Value

// Get returns the value of attribute k, and whether the op has it.
func (vs Values) Get(k Attr) (Value, bool) {
	for _, v := range vs {
		if v.Key == k {
			return v, true
		}
	}
	return Value{}, false
}

// Ints returns list attribute k, nil when absent.
func (vs Values) Ints(k Attr) []int {
	v, _ := vs.Get(k)
	return v.Ints
}

// Str returns dtype or name attribute k, "" when absent.
func (vs Values) Str(k Attr) string {
	v, _ := vs.Get(k)
	return v.Str
}

// Clone returns a copy that shares no list with vs; nil for none.
func (vs Values) Clone() Values {
	if len(vs) == 0 {
		return nil
	}
	out := slices.Clone(vs)
	for i := range out {
		out[i].Ints = slices.Clone(out[i].Ints)
	}
	return out
}

// Equal reports whether vs and ws hold the same values in the same order.
func (vs Values) Equal(ws Values) bool {
	return slices.EqualFunc(vs, ws, func(a, b Value) bool {
		return a.Key == b.Key && slices.Equal(a.Ints, b.Ints) && a.Int == b.Int && a.Str == b.Str &&
			a.Float == b.Float && a.Bool == b.Bool
	})
}

// Text writes the value as fusion files and op expressions do: 3, [0, 2],
// float32, 1e-05, true.
func (v Value) Text() string {
	switch spec := AttrOf(string(v.Key)); {
	case spec == nil:
		return ""
	case spec.Kind == IntAttr:
		return strconv.Itoa(v.Int)
	case spec.Kind == IntsAttr:
		return intText(v.Ints)
	case spec.Kind == FloatAttr:
		return strconv.FormatFloat(v.Float, 'g', -1, 64)
	case spec.Kind == BoolAttr:
		return strconv.FormatBool(v.Bool)
	}
	return v.Str
}

// AppendArgs appends the values as an op expression's arguments, ",
// dims=[1, 0]" for each.
func (vs Values) AppendArgs(b []byte) []byte {
	for _, v := range vs {
		b = append(b, ", "...)
		b = append(b, v.Key...)
		b = append(b, '=')
		b = append(b, v.Text()...)
	}
	return b
}

// Key is the values as text for memo keys: equal for equal values.
func (vs Values) Key() string { return string(vs.AppendArgs(nil)) }

// Problem says what is wrong with an op's attribute values.
type Problem struct {
	// Index is the value's position in the values checked; -1 for an
	// attribute the op takes and was not given.
	Index int
	Key   Attr
	// What is the kind of problem.
	What ProblemKind
	// Msg and Hint are, for a Bad value, what is wrong and how to fix it.
	Msg, Hint string
}

// ProblemKind is the kind of an attribute's problem.
type ProblemKind int

// The kinds of problems.
const (
	// Missing is an attribute the op takes and was not given.
	Missing ProblemKind = iota
	// NotTaken is a value of an attribute the op does not take.
	NotTaken
	// Bad is a value its spec's checks reject.
	Bad
)

// CheckValues checks values vs of an op of entry o: each attribute o takes
// but axis and axes is given and passes its spec's checks, and no other
// is given. It returns the problems in the order of vs, then the missing
// attributes in the entry's order.
func (o *Op) CheckValues(vs Values) []Problem {
	var probs []Problem
	for j, v := range vs {
		spec := AttrOf(string(v.Key))
		switch msg, hint := spec.problem(v); {
		case spec == nil || !spec.Stored() || !o.Takes(v.Key):
			probs = append(probs, Problem{Index: j, Key: v.Key, What: NotTaken})
		case msg != "":
			probs = append(probs, Problem{Index: j, Key: v.Key, What: Bad, Msg: msg, Hint: hint})
		}
	}
	for _, a := range o.Attrs {
		if s := AttrOf(string(a)); s.Stored() && !s.Optional && !slices.ContainsFunc(vs, func(v Value) bool { return v.Key == a }) {
			probs = append(probs, Problem{Index: -1, Key: a, What: Missing})
		}
	}
	return probs
}

// problem is what is wrong with value v as written, and a hint; "" when
// nothing is or s is nil.
func (s *AttrSpec) problem(v Value) (msg, hint string) {
	switch {
	case s == nil:
		return "", ""
	case s.Kind == IntsAttr && len(v.Ints) == 0 && s.NonEmpty != "":
		return "expected at least one entry, got an empty list", s.NonEmpty
	case s.Kind == NameAttr && !slices.Contains(s.Names, v.Str):
		return fmt.Sprintf("%q is not one of %s", v.Str, strings.Join(s.Names, ", ")), "write one of " + strings.Join(s.Names, ", ")
	case s.Check != nil:
		return s.Check(v)
	}
	return "", ""
}

// Takers names the ops of the default registry that take attribute a, in
// documentation order.
func Takers(a Attr) []string {
	var names []string
	for _, o := range Default.ops {
		if o.Takes(a) {
			names = append(names, o.Name)
		}
	}
	return names
}
