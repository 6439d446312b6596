package ir

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestSliceCatErrors checks that a slice's and a cat's mistakes are
// reported where they are written, with a hint.
func TestSliceCatErrors(t *testing.T) {
	const head = `meshes:
  m: [0, 1]
tensors:
  x: {mesh: m, shape: [4, 16]}
  y: {mesh: m, shape: [4, 8]}
  z: {mesh: m, shape: [4, 8], dtype: bfloat16}
ops:
`
	for _, tc := range []struct{ name, op, want string }{
		{"end past the axis", `{op: slice, in: x, out: a, axis: 1, start: 0, end: 17}`,
			`in.yaml:8:56: error: ops[0]: slice of "x": end 17 is out of range for axis 1 of extent 16; end lies in [-16, 16]: nvcomm does not clamp slice bounds as torch does`},
		{"start from the end, out of range", `{op: slice, in: x, out: a, axis: -1, start: -17, end: 4}`,
			`in.yaml:8:49: error: ops[0]: slice of "x": start -17 is out of range for axis 1 of extent 16; start lies in [-16, 16]: nvcomm does not clamp slice bounds as torch does`},
		{"axis out of range", `{op: slice, in: x, out: a, axis: 2, start: 0, end: 1}`,
			`in.yaml:8:38: error: ops[0]: slice axis 2 is out of range for "x", which has 2 non-reduction axes; axes count from 0, or from -1 at the end`},
		{"empty", `{op: slice, in: x, out: a, axis: 1, start: 5, end: -12}`,
			`in.yaml:8:56: error: ops[0]: slice of "x": slice [5, 4) of axis 1 is empty (start 5, end -12); end is past start: a slice keeps at least one entry`},
		{"end missing", `{op: slice, in: x, out: a, axis: 1, start: 0}`,
			`in.yaml:8:5: error: ops[0]: slice needs "end"; end: slice's index past the last kept one along its axis (negative from the end); start < end`},
		{"extents differ off the axis", `{op: cat, in: [x, y], out: a, axis: 0}`,
			`in.yaml:8:23: error: ops[0]: cat of "y": operand 1 [4, 8] differs from operand 0 [4, 16] in axis 1 (8, not 16), which is not the joined axis 0; cat's operands have equal extents on every axis but the one they are joined along`},
		{"one operand", `{op: cat, in: [x], out: a, axis: 1}`,
			`in.yaml:8:19: error: ops[0]: cat takes 2 or more inputs ([a, b, ...]), got 1; write in: [a, b, ...]`},
		{"dtypes differ", `{op: cat, in: [y, z], out: a, axis: 1}`,
			`in.yaml:8:23: error: ops[0]: cat operands have different dtypes: "y" is float32 and "z" is bfloat16 (operands share a dtype; use cast); convert one first, e.g. {op: cast, in: z, out: z_float32, dtype: float32}`},
		{"axis missing", `{op: cat, in: [x, y], out: a}`,
			`in.yaml:8:5: error: ops[0]: cat needs an "axis" to work along`},
		{"another op's attribute", `{op: slice, in: x, out: a, axis: 1, start: 0, end: 4, dims: [0]}`,
			`in.yaml:8:65: error: ops[0]: slice takes no "dims"; "dims" is an attribute of permute`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("in.yaml", []byte(head+"  - "+tc.op+"\n"))
			if err == nil {
				t.Fatal("Parse succeeded")
			}
			if d := cmp.Diff(tc.want, err.Error()); d != "" {
				t.Errorf("diagnostics (-want +got):\n%s", d)
			}
		})
	}
}
