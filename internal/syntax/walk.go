package syntax

import (
	"errors"
	"math"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/nvcomm/nvcomm/internal/diag"
	"github.com/nvcomm/nvcomm/internal/ir"
)

// walker decodes yaml.Node trees strictly and records every problem in errs.
// Its methods return ok=false after reporting, so callers can skip a broken
// subtree and go on looking for more errors.
type walker struct {
	errs *diag.Collector
}

func posOf(n *yaml.Node) diag.Pos { return diag.At(n.Line, n.Column) }

// kindName says what a node is, for "expected X, got Y" messages.
func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias"
	case yaml.ScalarNode:
		switch n.Tag {
		case "!!int":
			return "integer " + n.Value
		case "!!float":
			return "number " + n.Value
		case "!!bool":
			return "boolean " + n.Value
		case "!!null":
			return "null"
		}
		return strconv.Quote(n.Value)
	}
	return "nothing"
}

// field is one key of a mapping with its value.
type field struct {
	Key   string
	KeyN  *yaml.Node
	Value *yaml.Node
}

// mapping checks that n is a mapping whose keys are all in known and none
// repeated, and returns its fields in file order. what names the mapping in
// messages ("tensor \"tv0\"").
func (w *walker) mapping(n *yaml.Node, what string, known []string) ([]field, bool) {
	if n.Kind != yaml.MappingNode {
		w.expected(posOf(n), what, "a mapping", kindName(n))
		return nil, false
	}
	fields := make([]field, 0, len(n.Content)/2)
	// A map finds repeated keys in the long mappings (tensors: one key a
	// tensor); the short ones, nearly all of a fusion, are searched.
	var seen map[string]*yaml.Node
	if len(n.Content) > 2*smallMapping {
		seen = make(map[string]*yaml.Node, len(n.Content)/2)
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode || k.Tag == "!!null" {
			w.errs.Add(posOf(k), "%s: expected a string key, got %s", what, kindName(k))
			continue
		}
		if prev := firstKey(n, i, seen); prev != nil {
			w.errs.Add(posOf(k), "%s: duplicate key %q (first at %s)", what, k.Value, posOf(prev))
			continue
		}
		if seen != nil {
			seen[k.Value] = k
		}
		if known != nil && !slices.Contains(known, k.Value) {
			w.errs.AddHint(posOf(k), diag.Suggest(k.Value, known),
				"%s: unknown key %q (expected one of %s)", what, k.Value, strings.Join(known, ", "))
			continue
		}
		fields = append(fields, field{k.Value, k, v})
	}
	return fields, true
}

// smallMapping is the number of keys up to which mapping searches the
// keys before a key rather than keeping a map of them.
const smallMapping = 16

// firstKey returns the string key before position i of mapping n that
// equals the key at i, or nil: from seen when there is one, else by
// search.
func firstKey(n *yaml.Node, i int, seen map[string]*yaml.Node) *yaml.Node {
	key := n.Content[i].Value
	if seen != nil {
		return seen[key]
	}
	for j := 0; j < i; j += 2 {
		if k := n.Content[j]; k.Kind == yaml.ScalarNode && k.Tag != "!!null" && k.Value == key {
			return k
		}
	}
	return nil
}

// misspelled reports whether mapping n has an unknown key (not in known)
// that [diag.Suggest] maps to key. A "missing key" error would then only
// repeat the unknown-key error reported for it.
func misspelled(n *yaml.Node, known []string, key string) bool {
	if n == nil || n.Kind != yaml.MappingNode {
		return false
	}
	want := diag.Suggest(key, []string{key})
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i]
		if k.Kind == yaml.ScalarNode && !slices.Contains(known, k.Value) && diag.Suggest(k.Value, known) == want {
			return true
		}
	}
	return false
}

// hasKey reports whether mapping n has the string key.
func hasKey(n *yaml.Node, key string) bool {
	for i := 0; n != nil && i+1 < len(n.Content); i += 2 {
		if n.Content[i].Kind == yaml.ScalarNode && n.Content[i].Value == key {
			return true
		}
	}
	return false
}

// sequence checks that n is a list and returns its items.
func (w *walker) sequence(n *yaml.Node, what string) ([]*yaml.Node, bool) {
	if n.Kind != yaml.SequenceNode {
		w.expected(posOf(n), what, "a list", kindName(n))
		return nil, false
	}
	return n.Content, true
}

// expected reports a value at pos that is not what it should be: got, as
// kindName says it, where want was expected.
func (w *walker) expected(pos diag.Pos, what, want, got string) {
	ir.Expected(w.errs, pos, what, want, got)
}

// integer decodes an integer scalar that fits in an int32-sized range, so
// a product of two extents cannot overflow (ir bounds whole tensors).
func (w *walker) integer(n *yaml.Node, what string) (int, bool) {
	if n.Kind != yaml.ScalarNode || n.Tag != "!!int" {
		w.expected(posOf(n), what, "an integer", kindName(n))
		return 0, false
	}
	v, err := strconv.ParseInt(strings.ReplaceAll(n.Value, "_", ""), 0, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		// An explicit !!int tag on something that is not a number.
		w.errs.Add(posOf(n), "%s: expected an integer, got %q", what, n.Value)
		return 0, false
	}
	if err != nil || v > math.MaxInt32 || v < math.MinInt32 {
		w.errs.Add(posOf(n), "%s: integer %s is out of range (expected %d to %d)", what, n.Value, math.MinInt32, math.MaxInt32)
		return 0, false
	}
	return int(v), true
}

// positive decodes an integer >= 1.
func (w *walker) positive(n *yaml.Node, what string) (int, bool) {
	v, ok := w.integer(n, what)
	if ok && !ir.CheckPositive(w.errs, v, posOf(n), what) {
		return 0, false
	}
	return v, ok
}

// number decodes a number: an integer or a float.
func (w *walker) number(n *yaml.Node, what string) (float64, bool) {
	if n.Kind != yaml.ScalarNode || (n.Tag != "!!int" && n.Tag != "!!float") {
		w.expected(posOf(n), what, "a number", kindName(n))
		return 0, false
	}
	v, err := strconv.ParseFloat(strings.ReplaceAll(n.Value, "_", ""), 64)
	if err != nil || math.IsInf(v, 0) || math.IsNaN(v) {
		w.errs.Add(posOf(n), "%s: expected a finite number, got %q", what, n.Value)
		return 0, false
	}
	return v, true
}

// boolean decodes true or false.
func (w *walker) boolean(n *yaml.Node, what string) (bool, bool) {
	if n.Kind != yaml.ScalarNode || n.Tag != "!!bool" {
		w.expected(posOf(n), what, "true or false", kindName(n))
		return false, false
	}
	return n.Value == "true", true
}

// str decodes a string scalar. Plain scalars that YAML would read as numbers,
// booleans or null are rejected so that "name: 1" is not silently a name.
func (w *walker) str(n *yaml.Node, what string) (string, bool) {
	return scalarOf(n).String(w.errs, what)
}

// ident decodes a name: a string that is a C-like identifier, so generated
// buffer names such as "tv1/partial" never collide with user names.
func (w *walker) ident(n *yaml.Node, what string) (string, bool) {
	return scalarOf(n).Ident(w.errs, what)
}

// name decodes a tensor's name: an identifier, or a string that also
// passes also (a gradient's name, t.grad, or a part, y/NAME), whose
// errors are an identifier's.
func (w *walker) name(n *yaml.Node, what string, also func(string) bool) (string, bool) {
	if s := scalarOf(n); s.Got == "" && also(s.Value) {
		return s.Value, true
	}
	return w.ident(n, what)
}

// scalarOf is n as a value that should be a string.
func scalarOf(n *yaml.Node) ir.Str {
	if n.Kind != yaml.ScalarNode || n.Tag != "!!str" {
		return ir.Str{Got: kindName(n), Pos: posOf(n)}
	}
	return ir.Str{Value: n.Value, Pos: posOf(n)}
}

// listOf is n as a list of strings.
func listOf(n *yaml.Node) *ir.StrList {
	if n.Kind != yaml.SequenceNode {
		return &ir.StrList{At: posOf(n), Got: kindName(n)}
	}
	l := &ir.StrList{At: posOf(n), Items: make([]ir.Str, len(n.Content))}
	for i, it := range n.Content {
		l.Items[i] = scalarOf(it)
	}
	return l
}

// names decodes a list of names, and keeps those that are names
// (ir.IsIdent).
func (w *walker) names(n *yaml.Node, what string) []ir.Str {
	items, _ := listOf(n).Entries(w.errs, what)
	var out []ir.Str
	for _, it := range items {
		if _, ok := it.Ident(w.errs, what); ok {
			out = append(out, it)
		}
	}
	return out
}

// keyIdent checks a mapping key used as a name.
func (w *walker) keyIdent(k *yaml.Node, what string) bool {
	if !ir.IsIdent(k.Value) {
		w.errs.Add(posOf(k), "%s name %q is not valid (expected letters, digits and _, not starting with a digit)", what, k.Value)
		return false
	}
	return true
}
