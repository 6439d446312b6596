package sim

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nvcomm/nvcomm/internal/ops"
	"github.com/nvcomm/nvcomm/internal/plan"
)

// TestScalarResidue checks the exact map of numbers to residues: an
// integer is itself, 2⁻ᵏ is the inverse of 2ᵏ, so that a division by a
// power of two is the multiplication by its inverse exactly.
func TestScalarResidue(t *testing.T) {
	inv2 := residue((modulus + 1) / 2)
	for _, tc := range []struct {
		c    float64
		want float64
	}{
		{0, 0}, {1, 1}, {-3, -3}, {32, 32}, {1 << 40, residue(int64(1<<40) % modulus)},
		{0.5, inv2}, {-0.5, residue(-(modulus + 1) / 2)}, {0.25, residue(((modulus + 1) / 2) * ((modulus + 1) / 2) % modulus)},
		{1.5, residue(3 * ((modulus + 1) / 2) % modulus)},
	} {
		if got := scalarResidue(tc.c); got != tc.want {
			t.Errorf("scalarResidue(%v) = %v, want %v", tc.c, got, tc.want)
		}
	}
	div, mul := pointwiseFuncOf("div"), pointwiseFuncOf("mul")
	for _, x := range []float64{1, -7, 123456, -1 << 29} {
		for _, n := range []float64{2, 4, 1024} {
			if a, b := div(x, scalarResidue(n)), mul(x, scalarResidue(1/n)); a != b {
				t.Errorf("div(%v, %v) = %v, but mul(%v, 1/%v) = %v", x, n, a, x, n, b)
			}
		}
		if got := mul(scalarResidue(1e-5), 1); got != scalarResidue(1e-5) {
			t.Errorf("1e-05 is not one fixed residue: %v", got)
		}
	}
}

// expanded computes composite name on ins as a plan holds it: the ops of
// the registry's expansion, one after the other, by the simulator's
// reference semantics of each (opDomain, evalOp).
func expanded(t *testing.T, name string, ins []operand, a ops.Attrs) []float64 {
	t.Helper()
	shapes := make([][]int, len(ins))
	for k, in := range ins {
		shapes[k] = in.shape
	}
	steps, err := ops.Lookup(name).Expand(shapes, a)
	if err != nil {
		t.Fatalf("%s: %s", name, err.Msg)
	}
	return runSteps(t, name, steps, ins)
}

// runSteps computes the steps of an expansion of composite name on its
// operands ins with the reference's op semantics, and returns the last
// step's values.
func runSteps(t *testing.T, name string, steps []ops.ExpandStep, ins []operand) []float64 {
	t.Helper()
	var outs []operand
	for j, s := range steps {
		var args []operand
		for _, r := range s.In {
			if k, ok := r.Operand(); ok {
				args = append(args, ins[k])
			} else {
				args = append(args, outs[r.Step()])
			}
		}
		op := plan.Op{Index: j, Op: s.Op, Output: s.Name, Axes: s.Axes, Attrs: s.Values, Scalar: s.Scalar}
		var declared []int
		switch {
		case ops.Is(s.Op, ops.Reduction), s.Op == "gather":
			op.Axis = new(s.Axis)
		case s.Op == "broadcast" && s.Shape != nil: // the new axes' extents given
			declared = slices.Clone(s.Shape)
		case s.Op == "broadcast":
			declared = slices.Clone(args[0].shape)
			for _, ax := range s.Axes {
				declared = slices.Insert(declared, ax, 1)
			}
		}
		dom, err := opDomain(op, args, declared)
		if err != nil {
			t.Fatalf("%s step %d: %v", name, j, err)
		}
		shape := valueShape(dom)
		vals := evalOp(op, args, shape)
		outs = append(outs, operand{name: s.Name, v: stored(vals), vals: vals, shape: shape})
	}
	return outs[len(outs)-1].vals
}

// randomOperand is a tensor of shape of values the simulator's data
// sets hold, and beyond.
func randomOperand(r *rand.Rand, name string, shape []int) operand {
	vals := make([]float64, product(shape))
	for i := range vals {
		vals[i] = float64(r.IntN(2049) - 1024)
	}
	return operand{name: name, v: stored(vals), vals: vals, shape: shape}
}

// TestCompositeDefinition proves each composite's expansion (the
// registry's Expand, as the builder writes it) equal, exactly, to the
// simulator's own definition of the composite (compositeDef), on random
// data of several shapes and axes: the expansion is checked, not assumed.
func TestCompositeDefinition(t *testing.T) {
	r := rand.New(rand.NewPCG(26, 1))
	eps := 1e-5
	for _, tc := range []struct {
		name  string
		shape []int
		axis  int // softmax's and mean's; the norms normalize the last
		aff   int // the norms' weight and bias given
	}{
		{"softmax", []int{4, 8}, 1, 0}, {"softmax", []int{4, 8}, 0, 0}, {"softmax", []int{2, 3, 5}, 1, 0}, {"softmax", []int{7}, 0, 0},
		{"mean", []int{4, 8}, 1, 0}, {"mean", []int{2, 3, 5}, 0, 0}, {"mean", []int{6}, 0, 0},
		{"rms_norm", []int{4, 8}, 1, 0}, {"rms_norm", []int{2, 3, 5}, 2, 1}, {"rms_norm", []int{9}, 0, 1},
		{"layer_norm", []int{4, 8}, 1, 0}, {"layer_norm", []int{2, 3, 5}, 2, 1}, {"layer_norm", []int{3, 6}, 1, 2},
	} {
		ins := []operand{randomOperand(r, "x", tc.shape)}
		last := tc.shape[len(tc.shape)-1:]
		for k := range tc.aff {
			ins = append(ins, randomOperand(r, []string{"w", "b"}[k], last))
		}
		a := ops.Attrs{Axis: tc.axis}
		def := &plan.Of{Op: tc.name, Axis: new(tc.axis)}
		if tc.name == "rms_norm" || tc.name == "layer_norm" {
			a = ops.Attrs{Axis: -1, Axes: []int{-1}, Values: ops.Values{{Key: ops.AttrEps, Float: eps}}}
			def = &plan.Of{Op: tc.name, Axes: []int{len(tc.shape) - 1}, Eps: &eps}
		}
		want, err := compositeDef(def, ins)
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(want, expanded(t, tc.name, ins, a)); d != "" {
			t.Errorf("%s of %v over %d: the expansion differs from the definition (-definition +expansion):\n%s", tc.name, tc.shape, tc.axis, d)
		}
	}
}

// TestCompositeDefinitionDetects checks that the definition tells a
// wrong expansion apart: a softmax normalized over the wrong axis, a mean
// by another n, a norm without eps. A softmax without its maximum is not
// wrong: exp's homomorphism (sort.go) makes the shift cancel exactly, as
// in real numbers, which TestSoftmaxShiftCancels shows.
func TestCompositeDefinitionDetects(t *testing.T) {
	r := rand.New(rand.NewPCG(26, 2))
	x := randomOperand(r, "x", []int{4, 8})
	eps := 1e-6
	wrong := map[string]func() []float64{
		"softmax over the other axis": func() []float64 {
			return mustDef(t, &plan.Of{Op: "softmax", Axis: new(0)}, x)
		},
		"mean by n-1": func() []float64 {
			s := reduceAxis("sum", x.vals, x.shape, 1)
			return evalOp(plan.Op{Op: "div", Scalar: &ops.Scalar{Slot: 1, Value: 7}}, []operand{{v: stored(s), vals: s, shape: []int{4}}}, []int{4})
		},
	}
	defs := map[string]*plan.Of{"softmax over the other axis": {Op: "softmax", Axis: new(1)}, "mean by n-1": {Op: "mean", Axis: new(1)}}
	for name, f := range wrong {
		want, err := compositeDef(defs[name], []operand{x})
		if err != nil {
			t.Fatal(err)
		}
		if slices.Equal(want, f()) {
			t.Errorf("%s: equal to the definition, want a difference", name)
		}
	}
	if a, b := mustDef(t, &plan.Of{Op: "rms_norm", Axes: []int{1}, Eps: &eps}, x), mustDef(t, &plan.Of{Op: "rms_norm", Axes: []int{1}}, x); slices.Equal(a, b) {
		t.Error("rms_norm: eps changes nothing")
	}
}

// TestSoftmaxShiftCancels shows exp's homomorphism at work: softmax
// computed as exp(x − c) / Σ exp(x − c) is the definition's (shifted by
// the row max) exactly, whatever c — none, the row min, any constant —
// as online softmax's rescaling by exp(m − m') needs.
func TestSoftmaxShiftCancels(t *testing.T) {
	r := rand.New(rand.NewPCG(26, 3))
	x := randomOperand(r, "x", []int{4, 8})
	want := mustDef(t, &plan.Of{Op: "softmax", Axis: new(1)}, x)
	for _, c := range []float64{0, 1, -511, 1 << 29, float64(-modulus / 2)} {
		e := make([]float64, len(x.vals))
		for i, v := range x.vals {
			e[i] = fnExp(fnSub(v, c), 0)
		}
		s := reduceAxis("sum", e, x.shape, 1)
		got := make([]float64, len(e))
		for i := range e {
			got[i] = fnDiv(e[i], s[i/8])
		}
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("softmax shifted by %v differs from the definition (-want +got):\n%s", c, d)
		}
	}
}

// mustDef is compositeDef, failing the test on an error.
func mustDef(t *testing.T, of *plan.Of, ins ...operand) []float64 {
	t.Helper()
	v, err := compositeDef(of, ins)
	if err != nil {
		t.Fatal(err)
	}
	return v
}
