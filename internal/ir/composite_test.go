package ir

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nvcomm/nvcomm/internal/ops"
)

// compositeHead is the top of the fusions of the composite tests: x
// [8, 32] sharded on its last axis over 4 devices, and vectors g and b
// of that extent.
const compositeHead = `format: 2
meshes:
  m: [0, 1, 2, 3]
tensors:
  x: {mesh: m, shape: [8, 32], placements: [Shard(1)]}
  g: {mesh: m, shape: [32]}
  b: {mesh: m, shape: [32]}
ops:
`

// opSum is an op as the composite tests see it: its expression, the
// composite it comes from and its output's placements.
type opSum struct {
	Expr, Of, Out string
}

// opSums lists f's ops as opSums.
func opSums(f *Fusion) []opSum {
	var out []opSum
	for _, op := range f.Ops {
		s := opSum{Expr: op.Expr(), Out: op.Out.Mesh.Name}
		if op.Of != nil {
			s.Of = string(op.Of.Kind) + "->" + op.Of.Output
		}
		if op.Out.Propagated {
			s.Out += " propagated"
		}
		out = append(out, s)
	}
	return out
}

// TestCompositeExpansion parses each composite op and a binary op of a
// number, and checks the primitive ops the builder writes: names y/NAME,
// the composite recorded on each, intermediates propagated.
func TestCompositeExpansion(t *testing.T) { checkExpansions(t, compositeHead, compositeTests) }

// expansionTest is a fusion's ops and the primitive ops the builder makes
// of them.
type expansionTest = struct {
	name, ops string
	want      []opSum
}

// checkExpansions parses each test's ops after head and checks the ops
// the builder writes.
func checkExpansions(t *testing.T, head string, tests []expansionTest) {
	t.Helper()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, err := Parse("in.yaml", []byte(head+tc.ops))
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, opSums(f)); d != "" {
				t.Errorf("ops (-want +got):\n%s", d)
			}
		})
	}
}

// of names a composite kind and output as opSum does.
func of(kind, out string) string { return kind + "->" + out }

// compositeTests are fusions of number operands and composite ops, and
// the primitive ops the builder makes of them; FuzzParse seeds from them.
var compositeTests = []struct {
	name, ops string
	want      []opSum
}{
	{"scalar operands", `  - {op: add, in: [x, 1.0e-5], out: w}
  - {op: sub, in: [2, w], out: z}
`, []opSum{{"w = add(x, 1e-05)", "", "m propagated"}, {"z = sub(2, w)", "", "m propagated"}}},
	{"softmax", "  - {op: softmax, in: x, out: y, axis: -1}\n", []opSum{
		{"y/max = max(x, axis=1)", of("softmax", "y"), "m propagated"},
		{"y/max_b = broadcast(y/max, axes=[1])", of("softmax", "y"), "m propagated"},
		{"y/sub = sub(x, y/max_b)", of("softmax", "y"), "m propagated"},
		{"y/exp = exp(y/sub)", of("softmax", "y"), "m propagated"},
		{"y/sum = sum(y/exp, axis=1)", of("softmax", "y"), "m propagated"},
		{"y/sum_b = broadcast(y/sum, axes=[1])", of("softmax", "y"), "m propagated"},
		{"y = div(y/exp, y/sum_b)", of("softmax", "y"), "m propagated"},
	}},
	{"mean", "  - {op: mean, in: x, out: y, axis: 0}\n", []opSum{
		{"y/mean_sum = sum(x, axis=0)", of("mean", "y"), "m propagated"},
		{"y = div(y/mean_sum, 8)", of("mean", "y"), "m propagated"},
	}},
	{"rms_norm", "  - {op: rms_norm, in: [x, g], out: y, axes: [-1], eps: 1.0e-6}\n", []opSum{
		{"y/square = square(x)", of("rms_norm", "y"), "m propagated"},
		{"y/mean_square_sum = sum(y/square, axis=1)", of("rms_norm", "y"), "m propagated"},
		{"y/mean_square = div(y/mean_square_sum, 32)", of("rms_norm", "y"), "m propagated"},
		{"y/eps = add(y/mean_square, 1e-06)", of("rms_norm", "y"), "m propagated"},
		{"y/rsqrt = rsqrt(y/eps)", of("rms_norm", "y"), "m propagated"},
		{"y/rsqrt_b = broadcast(y/rsqrt, axes=[1])", of("rms_norm", "y"), "m propagated"},
		{"y/norm = mul(x, y/rsqrt_b)", of("rms_norm", "y"), "m propagated"},
		{"y/weight = broadcast(g, axes=[0])", of("rms_norm", "y"), "m propagated"},
		{"y = mul(y/norm, y/weight)", of("rms_norm", "y"), "m propagated"},
	}},
	{"layer_norm", "  - {op: layer_norm, in: [x, g, b], out: y, axes: [1], eps: 1.0e-5}\n", []opSum{
		{"y/mean_sum = sum(x, axis=1)", of("layer_norm", "y"), "m propagated"},
		{"y/mean = div(y/mean_sum, 32)", of("layer_norm", "y"), "m propagated"},
		{"y/mean_b = broadcast(y/mean, axes=[1])", of("layer_norm", "y"), "m propagated"},
		{"y/centered = sub(x, y/mean_b)", of("layer_norm", "y"), "m propagated"},
		{"y/square = square(y/centered)", of("layer_norm", "y"), "m propagated"},
		{"y/var_sum = sum(y/square, axis=1)", of("layer_norm", "y"), "m propagated"},
		{"y/var = div(y/var_sum, 32)", of("layer_norm", "y"), "m propagated"},
		{"y/eps = add(y/var, 1e-05)", of("layer_norm", "y"), "m propagated"},
		{"y/rsqrt = rsqrt(y/eps)", of("layer_norm", "y"), "m propagated"},
		{"y/rsqrt_b = broadcast(y/rsqrt, axes=[1])", of("layer_norm", "y"), "m propagated"},
		{"y/norm = mul(y/centered, y/rsqrt_b)", of("layer_norm", "y"), "m propagated"},
		{"y/weight = broadcast(g, axes=[0])", of("layer_norm", "y"), "m propagated"},
		{"y/scaled = mul(y/norm, y/weight)", of("layer_norm", "y"), "m propagated"},
		{"y/bias = broadcast(b, axes=[0])", of("layer_norm", "y"), "m propagated"},
		{"y = add(y/scaled, y/bias)", of("layer_norm", "y"), "m propagated"},
	}},
}

// TestCompositeFormat1 checks that a composite's intermediates take
// their sharding from their operands in format 1 too: the statistics of
// a softmax over a sharded axis are replicated, its elementwise
// intermediates sharded as x.
func TestCompositeFormat1(t *testing.T) {
	src := `meshes:
  m: [0, 1, 2, 3]
tensors:
  x: {mesh: m, shape: [8, 32], placements: [Shard(1)]}
  y: {mesh: m, placements: [Shard(1)]}
ops:
  - {op: softmax, in: x, out: y, axis: 1}
`
	f, err := Parse("in.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, tt := range f.Tensors {
		got[tt.Name] = len(tt.Shardings())
	}
	want := map[string]int{"x": 1, "y": 1, "y/max": 0, "y/max_b": 0, "y/sub": 1, "y/exp": 1, "y/sum": 0, "y/sum_b": 0}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("shardings per tensor (-want +got):\n%s", d)
	}
}

// TestCompositeErrors checks the errors of number operands and composite
// ops: each at the value at fault, with a hint.
func TestCompositeErrors(t *testing.T) { checkParseErrors(t, compositeHead, compositeErrorTests) }

// checkParseErrors parses each test's ops after head and checks the error.
func checkParseErrors(t *testing.T, head string, tests []struct{ name, ops, want string }) {
	t.Helper()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("in.yaml", []byte(head+tc.ops))
			if err == nil {
				t.Fatal("Parse succeeded, want an error")
			}
			if d := cmp.Diff(tc.want, err.Error()); d != "" {
				t.Errorf("error (-want +got):\n%s", d)
			}
		})
	}
}

// compositeErrorTests are ops of number operands and composites that are
// wrong, and their errors; FuzzParse seeds from them.
var compositeErrorTests = []struct{ name, ops, want string }{
	{"number of a unary op", "  - {op: relu, in: [x, 1.0], out: y}\n",
		`in.yaml:9:24: error: ops[0]: relu takes no number as an operand; only the binary elementwise ops (add, sub, mul, maximum, minimum, div) take a number as one of their operands`},
	{"two numbers", "  - {op: add, in: [x, 1, 2], out: y}\n",
		`in.yaml:9:26: error: ops[0] in: at most one operand may be a number, got a second, 2; compute a constant's value yourself: one operand is a tensor`},
	{"only a number", "  - {op: add, in: [1.0], out: y}\n",
		"in.yaml:9:19: error: ops[0] in: expected a tensor name among the operands, got only numbers; a binary op takes one number and one tensor"},
	{"norm of another axis", "  - {op: rms_norm, in: [x, g], out: y, axes: [0], eps: 1.0e-6}\n",
		`in.yaml:9:46: error: ops[0]: rms_norm of "x": normalizes [0], but only the last axis is supported; write axes: [-1]; to normalize other axes, permute them last, or write the statistics with sum, div and rsqrt`},
	{"norm weight", "  - {op: layer_norm, in: [x, x], out: y, axes: [-1], eps: 1.0e-5}\n",
		`in.yaml:9:30: error: ops[0]: layer_norm of "x": has shape [8, 32], want [32] (the normalized axis's extent); weight and bias are vectors over the normalized axis`},
	{"softmax axis", "  - {op: softmax, in: x, out: y, axis: 2}\n",
		`in.yaml:9:40: error: ops[0]: softmax of "x": axis 2 is out of range for rank 2; an axis is among the input's axes, negative from the end`},
	{"negative eps", "  - {op: rms_norm, in: x, out: y, axes: [-1], eps: -1.0}\n",
		`in.yaml:9:52: error: ops[0] eps: epsilon -1 is negative; eps is a small positive number, 1e-05 or 1e-06`},
	{"norm without axes", "  - {op: layer_norm, in: x, out: y, eps: 1.0e-5}\n",
		`in.yaml:9:5: error: ops[0]: layer_norm needs "axes", the axes it normalizes; write axes: [-1]: a norm normalizes the last axis`},
	{"norm with axis", "  - {op: rms_norm, in: x, out: y, axis: 1, eps: 1.0e-5}\n",
		`in.yaml:9:41: error: ops[0]: rms_norm takes "axes", a list, not "axis"; write axes: [-1]: a norm normalizes the last axis`},
	{"norm without eps", "  - {op: rms_norm, in: x, out: y, axes: [-1]}\n",
		`in.yaml:9:5: error: ops[0]: rms_norm needs "eps"; eps: a norm's epsilon, added to the mean square (rms_norm) or variance (layer_norm)`},
}

// TestNewOpComposite checks that the builder refuses a composite op,
// which only the parser expands, and builds a binary op of a number.
func TestNewOpComposite(t *testing.T) {
	m, err := NewMesh("m", []int{4}, []int{0, 1, 2, 3})
	if err != nil {
		t.Fatal(err)
	}
	x, err := NewTensor(TensorSpec{Name: "x", Mesh: m, DType: "float32", Shape: []int{8, 32}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewOp(OpSpec{Kind: "softmax", Inputs: []*Tensor{x}, Axis: 1, Out: TensorSpec{Name: "y"}}); err == nil {
		t.Error("NewOp built a softmax, want an error")
	}
	if _, err := NewOp(OpSpec{Kind: "relu", Inputs: []*Tensor{x}, Scalar: &opsScalar, Out: TensorSpec{Name: "y"}}); err == nil {
		t.Error("NewOp built a relu of a number, want an error")
	}
	op, err := NewOp(OpSpec{Kind: "add", Inputs: []*Tensor{x}, Scalar: &opsScalar, Out: TensorSpec{Name: "y"}})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := op.Expr(), "y = add(x, 0.5)"; got != want {
		t.Errorf("Expr() = %q, want %q", got, want)
	}
}

// opsScalar is the number of TestNewOpComposite's ops.
var opsScalar = ops.Scalar{Slot: 1, Value: 0.5}
