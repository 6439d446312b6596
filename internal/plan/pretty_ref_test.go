package plan

// This file keeps the encoder plan.Encode used before it wrote plans in one
// streaming pass, as the
// definition of the format: encoding/json's compact output, re-indented by
// a parser that keeps short values on one line. It is the oracle of the
// streaming encoder's tests (TestEncodeMatchesReference, FuzzEncode): a
// field the streaming encoder forgets, or writes differently, differs.

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
)

// referenceEncode is the encoding of p as plan.Encode wrote it before the
// streaming encoder.
func referenceEncode(p *Plan) ([]byte, error) {
	var compact bytes.Buffer
	enc := json.NewEncoder(&compact)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(p); err != nil {
		return nil, err
	}
	dec := json.NewDecoder(&compact)
	dec.UseNumber()
	n, err := parseNode(dec)
	if err != nil {
		return nil, err
	}
	if err := withAttrs(n, p); err != nil {
		return nil, err
	}
	// Re-indented with two spaces, every value that fits in inlineWidth
	// on one line.
	var b strings.Builder
	writeNode(&b, n, 0)
	b.WriteString("\n")
	return []byte(b.String()), nil
}

// withAttrs adds each op's attributes (Op.Attrs, which encoding/json
// leaves out) to the parsed plan n as fields of the op, after its other
// fields but scalar, of and inserted (the permute of a composite's
// expansion has both attributes and of), each value as encoding/json
// writes its kind's Go value.
func withAttrs(n *jsonNode, p *Plan) error {
	k := slices.Index(n.keys, "ops")
	if k < 0 || n.items[k].scalar != "" {
		return nil // null
	}
	for i, op := range p.Ops {
		obj := n.items[k].items[i]
		at := len(obj.keys)
		for _, later := range []string{"scalar", "of", "inserted"} {
			if j := slices.Index(obj.keys, later); j >= 0 {
				at = min(at, j)
			}
		}
		for _, v := range op.Attrs {
			val := reflect.ValueOf(v.Ptr()).Elem().Interface()
			if ints, ok := val.([]int); ok {
				val = append([]int{}, ints...) // [] for none, as the encoder writes it
			}
			lit, err := json.Marshal(val)
			if err != nil {
				return err
			}
			dec := json.NewDecoder(bytes.NewReader(lit))
			dec.UseNumber()
			child, err := parseNode(dec)
			if err != nil {
				return err
			}
			obj.keys = slices.Insert(obj.keys, at, string(v.Key))
			obj.items = slices.Insert(obj.items, at, child)
			at++
		}
	}
	return nil
}

// jsonNode is a parsed JSON value that keeps object keys in order.
type jsonNode struct {
	scalar string // the literal for a scalar; empty otherwise
	isObj  bool
	keys   []string
	items  []*jsonNode
}

func parseNode(dec *json.Decoder) (*jsonNode, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		n := &jsonNode{isObj: t == '{'}
		for dec.More() {
			if n.isObj {
				k, err := dec.Token()
				if err != nil {
					return nil, err
				}
				n.keys = append(n.keys, k.(string))
			}
			child, err := parseNode(dec)
			if err != nil {
				return nil, err
			}
			n.items = append(n.items, child)
		}
		_, err := dec.Token() // closing delimiter
		return n, err
	default:
		lit, err := refMarshalNoEscape(t)
		return &jsonNode{scalar: lit}, err
	}
}

func refMarshalNoEscape(v any) (string, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	err := enc.Encode(v)
	return strings.TrimSuffix(b.String(), "\n"), err
}

// inline renders n on one line.
func inline(n *jsonNode) string {
	if n.scalar != "" {
		return n.scalar
	}
	parts := make([]string, len(n.items))
	for i, c := range n.items {
		parts[i] = inline(c)
		if n.isObj {
			k, _ := refMarshalNoEscape(n.keys[i])
			parts[i] = k + ": " + parts[i]
		}
	}
	if n.isObj {
		return "{" + strings.Join(parts, ", ") + "}"
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

func writeNode(b *strings.Builder, n *jsonNode, depth int) {
	if s := inline(n); n.scalar != "" || len(n.items) == 0 || len(s)+2*depth <= inlineWidth {
		b.WriteString(s)
		return
	}
	open, close := "[", "]"
	if n.isObj {
		open, close = "{", "}"
	}
	b.WriteString(open)
	for i, c := range n.items {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString("\n" + strings.Repeat("  ", depth+1))
		if n.isObj {
			k, _ := refMarshalNoEscape(n.keys[i])
			b.WriteString(k + ": ")
		}
		writeNode(b, c, depth+1)
	}
	b.WriteString("\n" + strings.Repeat("  ", depth) + close)
}
