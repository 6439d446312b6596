package plan

import (
	"bytes"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nvcomm/nvcomm/internal/ops"
)

// attrsPlan has ops with attributes of every kind the built-in specs
// have: a list, an empty list and a dtype name.
func attrsPlan() *Plan {
	return &Plan{Format: Format, Ops: []Op{
		{Index: 0, Op: "permute", Input: "x", Output: "y", Attrs: ops.Values{{Key: ops.AttrDims, Ints: []int{1, 0}}}},
		{Index: 1, Op: "reshape", Input: "y", Output: "z", Attrs: ops.Values{{Key: ops.AttrShape, Ints: []int{}}}},
		{Index: 2, Op: "cast", Input: "z", Output: "w", Attrs: ops.Values{{Key: ops.AttrDType, Str: "bfloat16"}}},
	}}
}

// TestOpAttrsRoundTrip encodes ops with attributes and decodes them with
// both decoders, from the encoder's bytes and from the attributes
// written before the op's other fields, which only the library reads.
func TestOpAttrsRoundTrip(t *testing.T) {
	p := attrsPlan()
	src, err := Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"axis": null, "dims": [1, 0] }`, `"axis": null, "shape": [] }`, `"axis": null, "dtype": "bfloat16" }`} {
		if !bytes.Contains(bytes.Join(bytes.Fields(src), []byte(" ")), []byte(want)) {
			t.Errorf("the encoding has no %s:\n%s", want, src)
		}
	}
	moved := bytes.Replace(src, []byte(`"index": 0,`), []byte(`"dims": [1, 0], "index": 0,`), 1)
	moved = bytes.Replace(moved, []byte(",\n      \"dims\": [1, 0]"), nil, 1)
	for _, tc := range []struct {
		name string
		src  []byte
		dec  func(string, []byte) (*Plan, error)
	}{
		{"fast", src, Decode},
		{"library", src, decodeLibrary},
		{"library, attribute first", moved, decodeLibrary},
		{"any, attribute first", moved, Decode},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q, err := tc.dec("p.json", tc.src)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(p.Ops, q.Ops, cmp.Comparer(func(a, b ops.Values) bool { return a.Equal(b) })); d != "" {
				t.Errorf("ops (-encoded +decoded):\n%s", d)
			}
		})
	}
	if bytes.Equal(moved, src) {
		t.Error("the attribute was not moved")
	}
}

// TestOpAttrsDecodeErrors checks the library decoder's messages of an
// op's fields: an unknown one, an attribute of the wrong type, or null.
func TestOpAttrsDecodeErrors(t *testing.T) {
	for _, tc := range []struct{ name, src, want string }{
		{"unknown field", `{"format": 1, "ops": [{"index": 0, "dimz": [1]}]}`,
			`p.json:1:36: error: invalid plan: unknown field "dimz" in ops[0]`},
		{"a list of the wrong type", `{"format": 1, "ops": [{"dims": "x"}]}`,
			`p.json:1:32: error: invalid plan: field "ops[0].dims": expected an array, got JSON string "x"`},
		{"a dtype of null", `{"format": 1, "ops": [{"dtype": null}]}`,
			`p.json:1:33: error: invalid plan: field "ops[0].dtype": expected a string, got JSON null`},
		{"a field of the wrong type", `{"format": 1, "ops": [{"index": "0"}]}`,
			`p.json:1:33: error: invalid plan: field "ops[0].index": expected an integer, got JSON string "0"`},
		{"an op not an object", `{"format": 1, "ops": [3]}`,
			`p.json:1:23: error: invalid plan: field "ops[0]": expected an object, got JSON number 3`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Decode("p.json", []byte(tc.src))
			got := ""
			if err != nil {
				got = err.Error()
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("error (-want +got):\n%s", d)
			}
		})
	}
}
