package plan

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nvcomm/nvcomm/internal/diag"
)

// TestDecodeStrict: every rule of strict decoding (docs/plan.md,
// "Decoding"), each error at the line and column of its fault. A repeated
// key matters most: a decoder that kept the last of two could show a reader
// one value and mean another (issue 10).
func TestDecodeStrict(t *testing.T) {
	for _, tc := range []struct {
		name, src, want string
	}{
		// Accepted.
		{"minimal", `{"format": 1}`, ""},
		{"map names differ in case", `{"format": 1, "meshes": {"m": {"shape": [1], "devices": [0]}, "M": {"shape": [1], "devices": [1]}}}`, ""},
		{"by_type names differ in case", `{"format": 1, "summary": {"by_type": {"Gather": 1, "gather": 2}}}`, ""},
		{"a key as a value", `{"format": 1, "fusion": "format", "policy": "format"}`, ""},
		{"escaped key", `{"form\u0061t": 1}`, ""},
		{"null plan fields", `{"format": 1, "fusion": null, "steps": null}`, ""},

		// Empty and truncated input.
		{"empty input", ``, `p.json:1:1: error: invalid plan: empty input`},
		{"blanks only", " \n ", `p.json:1:1: error: invalid plan: empty input`},
		{"truncated", "{\n  \"format\": 1", `p.json:2:14: error: invalid plan: unexpected end of input`},
		{"truncated in a step", `{"format": 1, "steps": [{"id": 0`, `p.json:1:33: error: invalid plan: unexpected end of input in steps[0]`},

		// The grammar.
		{"missing comma", "{\n  \"format\": 1\n  \"fusion\": \"x\"\n}",
			`p.json:3:3: error: invalid plan: invalid character '"' after object value (expecting ',' or '}')`},
		{"missing comma in a list", `{"format": 1, "meshes": {"m": {"shape": [1 2]}}}`,
			`p.json:1:44: error: invalid plan: invalid character '2' after array element (expecting ',' or ']') in meshes.m.shape`},
		{"trailing comma", `{"format": 1,}`, `p.json:1:13: error: invalid plan: invalid character ',' at start of value`},
		{"leading zero", `{"format": 01}`, `p.json:1:13: error: invalid plan: invalid character '1' after object value (expecting ',' or '}')`},
		{"truncated literal", `{"format": 1, "fusion": nul}`, `p.json:1:28: error: invalid plan: invalid character '}' in literal null (expecting 'l') in fusion`},
		{"bad escape", `{"format": 1, "fusion": "\x"}`, "p.json:1:26: error: invalid plan: invalid escape sequence `\\x` in string in fusion"},
		{"invalid utf-8", "{\"format\": 1, \"fusion\": \"a\xffb\"}", `p.json:1:27: error: invalid plan: invalid UTF-8 in fusion`},
		{"columns count characters", `{"fusion": "fusión €", "format": 1, "x": 0}`, `p.json:1:37: error: invalid plan: unknown field "x"`},

		// Data after the plan.
		{"a second plan", "{\"format\": 1}\n{\"format\": 1}\n", `p.json:2:1: error: invalid plan: unexpected data after the plan`},
		{"a closing brace", `{"format": 1}}`, `p.json:1:14: error: invalid plan: unexpected data after the plan`},

		// Unknown fields: names match exactly.
		{"unknown field", "{\n  \"format\": 1,\n  \"frobs\": 2\n}", `p.json:3:3: error: invalid plan: unknown field "frobs"`},
		{"unknown field in a step", `{"format": 1, "steps": [{"id": 0}, {"frob": 1}]}`,
			`p.json:1:37: error: invalid plan: unknown field "frob" in steps[1]`},
		{"field case", `{"format": 1, "Format": 1}`,
			`p.json:1:15: error: invalid plan: unknown field "Format" (field names are case-sensitive: did you mean "format"?)`},
		{"unknown field in an odd mesh", `{"format": 1, "meshes": {"": {"x": 1}, "m 1": {"x": 1}}}`,
			`p.json:1:31: error: invalid plan: unknown field "x" in meshes[""]`},
		{"unknown field in a numbered mesh", `{"format": 1, "meshes": {"01": {"x": 1}}}`,
			`p.json:1:33: error: invalid plan: unknown field "x" in meshes["01"]`},
		{"field case in a mesh", `{"format": 1, "meshes": {"m": {"Shape": [1]}}}`,
			`p.json:1:32: error: invalid plan: unknown field "Shape" in meshes.m (field names are case-sensitive: did you mean "shape"?)`},

		// Repeated keys, compared after unescaping.
		{"duplicate", "{\n  \"format\": 1,\n  \"format\": 1\n}",
			`p.json:3:3: error: invalid plan: duplicate key "format" (first at 2:3); a plan states each field once`},
		{"duplicate nested", `{"format": 1, "summary": {"collectives": 1, "local_steps": 0, "collectives": 2}}`,
			`p.json:1:63: error: invalid plan: duplicate key "collectives" in summary (first at 1:27); a plan states each field once`},
		{"duplicate in an array", `{"format": 1, "steps": [{"id": 0}, {"id": 1, "op": 0, "id": 2}]}`,
			`p.json:1:55: error: invalid plan: duplicate key "id" in steps[1] (first at 1:37); a plan states each field once`},
		{"duplicate escaped", `{"format": 1, "fusion": "a", "fusio\u006e": "b"}`,
			`p.json:1:30: error: invalid plan: duplicate key "fusion" (first at 1:15); a plan states each field once`},
		{"duplicate object", `{"format": 1, "summary": {"collectives": 1}, "summary": {}}`,
			`p.json:1:46: error: invalid plan: duplicate key "summary" (first at 1:15); a plan states each field once`},
		{"duplicate mesh", `{"format": 1, "meshes": {"m": {"shape": [1], "devices": [0]}, "m": {"shape": [1], "devices": [1]}}}`,
			`p.json:1:63: error: invalid plan: duplicate key "m" in meshes (first at 1:26); a plan states each field once`},
		{"duplicate step type", `{"format": 1, "summary": {"by_type": {"Gather": 1, "Gather": 2}}}`,
			`p.json:1:52: error: invalid plan: duplicate key "Gather" in summary.by_type (first at 1:39); a plan states each field once`},

		// Values of the wrong type.
		{"string for an integer", "{\n  \"format\": \"one\"\n}", `p.json:2:13: error: invalid plan: field "format": expected an integer, got JSON string "one"`},
		{"fraction", `{"format": 1.0}`, `p.json:1:12: error: invalid plan: field "format": expected an integer, got JSON number 1.0`},
		{"exponent", `{"format": 1e0}`, `p.json:1:12: error: invalid plan: field "format": expected an integer, got JSON number 1e0`},
		{"integer out of range", `{"format": 1, "summary": {"bytes_received_max": 9223372036854775808}}`,
			`p.json:1:49: error: invalid plan: field "summary.bytes_received_max": expected an integer, got JSON number 9223372036854775808 (out of range)`},
		{"number out of range", `{"format": 1, "summary": {"bytes_ratio": 1e400}}`,
			`p.json:1:42: error: invalid plan: field "summary.bytes_ratio": expected a number, got JSON number 1e400 (out of range)`},
		{"string for a pointer", `{"format": 1, "steps": [{"root": "x"}]}`,
			`p.json:1:34: error: invalid plan: field "steps[0].root": expected an integer, got JSON string "x"`},
		{"number for a bool", `{"format": 1, "tensors": [{"propagated": 1}]}`,
			`p.json:1:42: error: invalid plan: field "tensors[0].propagated": expected true or false, got JSON number 1`},
		{"object for a list", `{"format": 1, "tensors": {}}`, `p.json:1:26: error: invalid plan: field "tensors": expected an array, got JSON object`},
		{"list for an object", `{"format": 1, "summary": []}`, `p.json:1:26: error: invalid plan: field "summary": expected an object, got JSON array`},
		{"nested too deep", `{"format": 1, "steps": [{"teams": [[[0]]]}]}`,
			`p.json:1:37: error: invalid plan: field "steps[0].teams[0][0]": expected an integer, got JSON array`},
		{"long string", `{"format": "` + strings.Repeat("x", 50) + `"}`, `p.json:1:12: error: invalid plan: field "format": expected an integer, got JSON string`},
		{"a list", `[]`, `p.json:1:1: error: invalid plan: expected an object, got JSON array`},
		{"a string", ` "plan"`, `p.json:1:2: error: invalid plan: expected an object, got JSON string "plan"`},

		// The format.
		{"other format", `{"format": 3}`, `p.json:1:1: error: unsupported plan format 3 (expected 1, or 2 for a step graph)`},
		{"no format", `{}`, `p.json:1:1: error: unsupported plan format 0 (expected 1, or 2 for a step graph)`},
		{"null", `null`, `p.json:1:1: error: unsupported plan format 0 (expected 1, or 2 for a step graph)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Decode("p.json", []byte(tc.src))
			got := ""
			if err != nil {
				got = err.Error()
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Decode error mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestDecodeManyKeys: a repeat is found however far apart its two keys
// are in an object of many (a map of meshes).
func TestDecodeManyKeys(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"format": 1, "meshes": {`)
	for i := range 100 {
		fmt.Fprintf(&b, `"m%d": {"shape": [1], "devices": [%d]}, `, i, i)
	}
	b.WriteString(`"m7": {"shape": [1], "devices": [7]}}}`)
	src := b.String()
	_, err := Decode("p.json", []byte(src))
	want := fmt.Sprintf(`duplicate key "m7" in meshes (first at 1:%d)`, strings.Index(src, `"m7"`)+1)
	var dl *diag.List
	if !errors.As(err, &dl) || !strings.Contains(dl.Items[0].Message, want) {
		t.Errorf("Decode = %v, want %s", err, want)
	}
}
