package ir

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestIndependentErrors checks that an error stops only the checks that
// depend on what is wrong: every independent error of a file is reported in
// one run, in file order, and none that repeats an earlier error's cause
// (issue 24).
func TestIndependentErrors(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want string
	}{
		{
			// An op left out for its errors loses its output: the
			// matmul and relu reading s are not checked, nor outputs'
			// s; nor is the add reading the broken v.
			name: "a broken op's readers are not checked",
			src: `meshes:
  m: [0, 1]
tensors:
  a: {mesh: m, shape: [4, 8]}
  w: {mesh: m, shape: [8, 2]}
  v: {mesh: m, shape: [4, 8], placements: [Shard(3)]}
ops:
  - {op: sum, in: a, out: s}
  - {op: matmul, in: [s, w], out: y}
  - {op: relu, in: y, out: r}
  - {op: add, in: [v, a], out: z}
  - {op: relu, in: z, out: q}
  - {op: max, in: a, out: mx, axis: 2}
outputs: [r, q, s, nope]
`,
			want: `in.yaml:6:44: error: tensor "v" placements: Shard(3) is out of range for a tensor of 2 dims
in.yaml:8:5: error: ops[0]: sum needs an "axis" to reduce
in.yaml:13:37: error: ops[5]: max axis 2 is out of range for "a", which has 2 non-reduction axes
in.yaml:14:20: error: outputs: unknown tensor "nope"`,
		},
		{
			// A tensor whose declaration has an error is not used: no
			// "an input needs a shape" for a, no dtype check of y =
			// add(c, c).
			name: "a broken declaration is checked no further",
			src: `meshes:
  m: [0, 1]
tensors:
  a: {mesh: m, shap: [4, 8]}
  b: {mesh: m, shape: [4, 8], dtype: float33}
  c: {mesh: m, shape: [4, 8], placements: [Shard(0), Shard(1)]}
  y: {mesh: m, dtype: float16}
ops:
  - {op: relu, in: a, out: x}
  - {op: relu, in: b, out: x2}
  - {op: relu, in: c, out: x3}
  - {op: add, in: [c, c], out: y}
  - {op: relu, in: y, out: x4}
`,
			want: `in.yaml:4:16: error: tensor "a": unknown key "shap" (expected one of mesh, dtype, shape, schedule, allocation, placements); did you mean "shape"?
in.yaml:5:38: error: tensor "b": unknown dtype "float33" (expected one of bfloat16, float16, float32, float64, int32, int64); did you mean "float32"?
in.yaml:6:43: error: tensor "c" placements: expected one placement per axis of mesh "m" (1), got 2`,
		},
		{
			// A tensor on a broken mesh is not checked, nor are the ops
			// reading it.
			name: "a broken mesh",
			src: `meshes:
  m: [[0, 1], [2]]
  n: [0, 1]
tensors:
  a: {mesh: m, shape: [4, 8]}
  b: {mesh: n, shape: [4, 8], placements: [Shard(2)]}
ops:
  - {op: relu, in: a, out: x}
  - {op: relu, in: b, out: y}
`,
			want: `in.yaml:2:15: error: mesh "m": ragged mesh: this list has 1 entries, expected 2 like the first at its depth
in.yaml:6:44: error: tensor "b" placements: Shard(2) is out of range for a tensor of 2 dims`,
		},
		{
			// Its output and operands are unknown: x is not "neither declared nor
			// produced", u not "never used", inputs may omit u.
			name: "an op that is not a mapping",
			src: `meshes:
  m: [0, 1]
tensors:
  a: {mesh: m, shape: [4, 8]}
  u: {mesh: m}
  b: {mesh: m, shape: [4, 8], placements: [Shard(2)]}
ops:
  - [relu, a, x]
  - {op: relu, in: x, out: y}
  - {op: relu, in: b, out: z}
inputs: [a, b]
`,
			want: `in.yaml:6:44: error: tensor "b" placements: Shard(2) is out of range for a tensor of 2 dims
in.yaml:8:5: error: ops[0]: expected a mapping, got a list`,
		},
		{
			// The ops on a cycle, after it (d, e), writing a tensor twice (g, h) or
			// reading their own output (k, l) are not checked; f is.
			name: "cycles and second producers",
			src: `meshes:
  m: [0, 1]
tensors:
  a: {mesh: m, shape: [4, 8]}
  w: {mesh: m, shape: [6, 2]}
ops:
  - {op: relu, in: c, out: b}
  - {op: relu, in: b, out: c}
  - {op: add, in: [a, c], out: d}
  - {op: relu, in: d, out: e}
  - {op: matmul, in: [a, w], out: f}
  - {op: relu, in: a, out: g}
  - {op: neg, in: a, out: g}
  - {op: relu, in: g, out: h}
  - {op: abs, in: k, out: k}
  - {op: relu, in: k, out: l}
`,
			want: `in.yaml:7:5: error: ops form a cycle through tensor "b"; every tensor must be computable from the fusion inputs
in.yaml:11:26: error: ops[4]: matmul contracts axis 1 of "a" (k = 8) with axis 0 of "w" (k = 6): the extents differ; a is [..., m, k] and b [..., k, n]; for x @ w.T with w of shape [n, k], use linear
in.yaml:13:27: error: tensor "g" is produced twice (first by the op at 12:5)
in.yaml:15:27: error: op reads and writes the same tensor "k"`,
		},
		{
			// A top-level key misspelled: the tensors are unknown, so nothing that needs
			// them is checked.
			name: "the file's frame",
			src: `meshes:
  m: [0, 1]
tensor:
  a: {mesh: m, shape: [4, 8]}
ops:
  - {op: sum, in: a, out: s}
`,
			want: `in.yaml:3:1: error: fusion: unknown key "tensor" (expected one of format, name, meshes, tensors, ops, inputs, outputs, backward, pipeline); did you mean "tensors"?
in.yaml:6:5: error: ops[0]: sum needs an "axis" to reduce`,
		},
		{
			// The first 10 errors by position, whichever check found them: the
			// placements' (found after the ops') before the ops'.
			name: "the first errors by position",
			src: `meshes:
  m: [0, 1]
tensors:
  t0: {mesh: m, shape: [4], placements: [Shard(1)]}
  t1: {mesh: m, shape: [4], placements: [Shard(1)]}
  t2: {mesh: m, shape: [4], placements: [Shard(1)]}
  t3: {mesh: m, shape: [4], placements: [Shard(1)]}
  t4: {mesh: m, shape: [4], placements: [Shard(1)]}
  t5: {mesh: m, shape: [4], placements: [Shard(1)]}
  t6: {mesh: m, shape: [4], placements: [Shard(1)]}
  t7: {mesh: m, shape: [4], placements: [Shard(1)]}
  t8: {mesh: m, shape: [4], placements: [Shard(1)]}
  t9: {mesh: m, shape: [4], placements: [Shard(1)]}
  t10: {mesh: m, shape: [4], placements: [Shard(1)]}
ops:
  - {op: sum, in: t0, out: s0}
  - {op: sum, in: t1, out: s1}
`,
			want: `in.yaml:4:42: error: tensor "t0" placements: Shard(1) is out of range for a tensor of 1 dims
in.yaml:5:42: error: tensor "t1" placements: Shard(1) is out of range for a tensor of 1 dims
in.yaml:6:42: error: tensor "t2" placements: Shard(1) is out of range for a tensor of 1 dims
in.yaml:7:42: error: tensor "t3" placements: Shard(1) is out of range for a tensor of 1 dims
in.yaml:8:42: error: tensor "t4" placements: Shard(1) is out of range for a tensor of 1 dims
in.yaml:9:42: error: tensor "t5" placements: Shard(1) is out of range for a tensor of 1 dims
in.yaml:10:42: error: tensor "t6" placements: Shard(1) is out of range for a tensor of 1 dims
in.yaml:11:42: error: tensor "t7" placements: Shard(1) is out of range for a tensor of 1 dims
in.yaml:12:42: error: tensor "t8" placements: Shard(1) is out of range for a tensor of 1 dims
in.yaml:13:42: error: tensor "t9" placements: Shard(1) is out of range for a tensor of 1 dims
in.yaml: too many errors (3 more)`,
		},
		{
			// b, read only by the op left out, gets no mesh; that is not reported.
			name: "format 2",
			src: `format: 2
meshes:
  m: [0, 1]
tensors:
  x: {mesh: m, shape: [4, 8], placements: [Shard(0)]}
  w: {mesh: m, shape: [6, 2]}
  b: {shape: [4, 8]}
ops:
  - {op: sum, in: b, out: s}
  - {op: matmul, in: [x, w], out: y}
  - {op: relu, in: x, out: r}
`,
			want: `in.yaml:9:5: error: ops[0]: sum needs an "axis" to reduce
in.yaml:10:26: error: ops[1]: matmul contracts axis 1 of "x" (k = 8) with axis 0 of "w" (k = 6): the extents differ; a is [..., m, k] and b [..., k, n]; for x @ w.T with w of shape [n, k], use linear`,
		},
		{
			// The op's operands are still checked; the relu reading y is not, nor
			// outputs' r.
			name: "a broken output declaration",
			src: `meshes:
  m: [0, 1]
tensors:
  x: {mesh: m, shape: [4, 8]}
  w: {mesh: m, shape: [6, 2]}
  y: {mesh: mm}
ops:
  - {op: matmul, in: [x, w], out: y}
  - {op: relu, in: y, out: r}
  - {op: sum, in: x, out: s}
outputs: [r, s, nope]
`,
			want: `in.yaml:6:13: error: tensor "y": unknown mesh "mm"; did you mean "m"?
in.yaml:8:26: error: ops[0]: matmul contracts axis 1 of "x" (k = 8) with axis 0 of "w" (k = 6): the extents differ; a is [..., m, k] and b [..., k, n]; for x @ w.T with w of shape [n, k], use linear
in.yaml:10:5: error: ops[2]: sum needs an "axis" to reduce
in.yaml:11:17: error: outputs: unknown tensor "nope"`,
		},
		{
			// A placements list's own errors are reported when the op
			// producing the tensor is broken (s2); an output whose
			// placements are wrong still has its shape, so the add
			// reading y is checked.
			name: "an output's placements",
			src: `meshes:
  m: [0, 1]
tensors:
  x: {mesh: m, shape: [4, 8]}
  z: {mesh: m, shape: [4, 3]}
  y: {mesh: m, placements: [Shard(0), Shard(1)]}
  s2: {mesh: m, placements: [Shard(0), Replicate()]}
ops:
  - {op: relu, in: x, out: y}
  - {op: add, in: [y, z], out: r}
  - {op: sum, in: x, out: s}
  - {op: relu, in: s, out: s2}
`,
			want: `in.yaml:6:28: error: tensor "y" placements: expected one placement per axis of mesh "m" (1), got 2
in.yaml:7:29: error: tensor "s2" placements: expected one placement per axis of mesh "m" (1), got 2
in.yaml:10:23: error: ops[1]: add operands do not broadcast: axis 1 has extent 8 in "y" and 3 in "z"; extents must be equal, or 1 in one operand, which is then repeated (torch's broadcasting rule)
in.yaml:11:5: error: ops[2]: sum needs an "axis" to reduce`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := Parse("in.yaml", []byte(tt.src))
			if err == nil {
				t.Fatalf("Parse succeeded with %d tensors, want errors", len(f.Tensors))
			}
			if diff := cmp.Diff(tt.want, err.Error()); diff != "" {
				t.Errorf("Parse diagnostics mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
