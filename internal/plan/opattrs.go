package plan

import (
	"cmp"
	"reflect"
	"slices"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/nvcomm/nvcomm/internal/ops"
)

// An op's attributes but axis and axes are fields of its object named by
// the op registry's attribute specs (ops.AttrSpec), so the library
// decoder reads an op member by member: a field of Op's struct goes to
// it, an attribute's by its spec's kind, any other name is an unknown
// field, as RejectUnknownMembers words it.

// opFields is Op without its methods, for the library to decode a field
// of it into.
type opFields Op

// UnmarshalJSONFrom reads an op for decodeLibrary (null leaves it zero).
func (o *Op) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	if dec.PeekKind() == 'n' {
		_, err := dec.ReadToken()
		return err
	}
	if _, err := readDelim(dec, '{'); err != nil {
		return err
	}
	*o = Op{}
	for dec.PeekKind() != '}' {
		tok, err := dec.ReadToken()
		if err != nil {
			return err
		}
		if err := o.member(dec, tok.String()); err != nil {
			return err
		}
	}
	_, err := dec.ReadToken()
	o.Attrs = inEntryOrder(o.Op, o.Attrs)
	return err
}

// readDelim reads a delimiter token, which must be want.
func readDelim(dec *jsontext.Decoder, want jsontext.Kind) (jsontext.Token, error) {
	if k := dec.PeekKind(); k != want {
		// Let the library word a value of the wrong type.
		return jsontext.Token{}, jsonv2.UnmarshalDecode(dec, new(opFields), dec.Options())
	}
	return dec.ReadToken()
}

// member reads the value of the op's field name.
func (o *Op) member(dec *jsontext.Decoder, name string) error {
	f := (*opFields)(o)
	var dst any
	switch name {
	case "index":
		dst = &f.Index
	case "op":
		dst = &f.Op
	case "input":
		dst = &f.Input
	case "inputs":
		dst = &f.Inputs
	case "output":
		dst = &f.Output
	case "axis":
		dst = &f.Axis
	case "axes":
		dst = &f.Axes
	case "inserted":
		dst = &f.Inserted
	case "scalar":
		dst = &f.Scalar
	case "of":
		dst = &f.Of
	case "within":
		dst = &f.Within
	default:
		return o.attrMember(dec, name)
	}
	return jsonv2.UnmarshalDecode(dec, dst, dec.Options())
}

// attrMember reads attribute name's value by its spec's kind; a name that
// is no attribute's is an unknown field.
func (o *Op) attrMember(dec *jsontext.Decoder, name string) error {
	spec := ops.AttrOf(name)
	if spec == nil || !spec.Stored() {
		return &jsonv2.SemanticError{Err: jsonv2.ErrUnknownName}
	}
	v := ops.Value{Key: spec.Key}
	dst := v.Ptr()
	if dec.PeekKind() == 'n' { // the library would leave the value zero
		ptr := dec.StackPointer()
		_, err := dec.ReadToken()
		return cmp.Or(err, error(&jsonv2.SemanticError{JSONPointer: ptr, JSONKind: 'n', GoType: reflect.TypeOf(dst).Elem()}))
	}
	if err := jsonv2.UnmarshalDecode(dec, dst, dec.Options()); err != nil {
		return err
	}
	o.Attrs = append(o.Attrs, v)
	return nil
}

// inEntryOrder puts an op's attributes in the order of its registry
// entry, as Encode writes them; those of an op the registry does not
// have, or that it does not take, follow in the order read (Validate
// reports them).
func inEntryOrder(op string, vs ops.Values) ops.Values {
	e := ops.Lookup(op)
	if e == nil || len(vs) < 2 {
		return vs
	}
	rank := func(v ops.Value) int {
		if i := slices.Index(e.Attrs, v.Key); i >= 0 {
			return i
		}
		return len(e.Attrs)
	}
	slices.SortStableFunc(vs, func(a, b ops.Value) int { return rank(a) - rank(b) })
	return vs
}
