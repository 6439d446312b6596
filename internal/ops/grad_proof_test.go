package ops

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The gradient rules of the ops whose arithmetic is a ring's (add, sub,
// mul, square, neg, matmul, linear, sum, broadcast, permute, reshape, a
// division by a constant, mean) are proven here against the derivative
// itself, exactly: each op is a polynomial in its operands, so computed
// on dual numbers a + bε (ε² = 0) over the simulator's field its output
// carries the directional derivative J·v exactly, modulo the prime; the
// rule's vector-Jacobian product must then satisfy ⟨dy, J·v⟩ = Σₖ ⟨gₖ,
// vₖ⟩ for random dy and directions vₖ.

// proofPrime is the simulator's prime, 2³¹ − 1.
const proofPrime = 1<<31 - 1

// dual is a + bε over the field.
type dual struct{ v, d int64 }

func fieldOf(a int64) int64 { return canonical(a, proofPrime) }

func (a dual) add(b dual) dual { return dual{fieldOf(a.v + b.v), fieldOf(a.d + b.d)} }
func (a dual) neg() dual       { return dual{fieldOf(-a.v), fieldOf(-a.d)} }
func (a dual) mul(b dual) dual {
	return dual{mulMod(a.v, b.v, proofPrime), fieldOf(mulMod(a.v, b.d, proofPrime) + mulMod(a.d, b.v, proofPrime))}
}

// inv is 1 / a: (1/a.v) − (a.d / a.v²)ε.
func (a dual) inv() dual {
	r := Reciprocal(a.v, proofPrime)
	return dual{r, fieldOf(-mulMod(a.d, mulMod(r, r, proofPrime), proofPrime))}
}

// tensorD is a row-major tensor of duals.
type tensorD struct {
	shape []int
	data  []dual
}

// strides are shape's row-major strides.
func strides(shape []int) []int {
	s := make([]int, len(shape))
	n := 1
	for k := len(shape) - 1; k >= 0; k-- {
		s[k], n = n, n*shape[k]
	}
	return s
}

// index is the flat index of coordinates c in shape, an extent-1 axis
// read at 0 (broadcasting).
func index(shape, c []int) int {
	i := 0
	for k, st := range strides(shape) {
		if shape[k] > 1 {
			i += c[k] * st
		}
	}
	return i
}

// each calls f with the coordinates of every element of shape, in
// row-major order.
func each(shape []int, f func(c []int)) {
	c := make([]int, len(shape))
	for range product(shape) {
		f(c)
		for k := len(c) - 1; k >= 0; k-- {
			if c[k]++; c[k] < shape[k] {
				break
			}
			c[k] = 0
		}
	}
}

// scalarD is a step's number as a constant of the field.
func scalarD(x float64) dual { return dual{v: fieldOf(int64(x))} }

// evalStep computes step s on its operands ins.
func evalStep(t *testing.T, s ExpandStep, ins []tensorD) tensorD {
	t.Helper()
	if s.Scalar != nil {
		c := tensorD{shape: make([]int, len(ins[0].shape)), data: []dual{scalarD(s.Scalar.Value)}}
		for k := range c.shape {
			c.shape[k] = 1
		}
		ins = slices.Insert(slices.Clone(ins), s.Scalar.Slot, c)
	}
	switch s.Op {
	case "add", "sub", "mul", "div":
		return pointwise(ins, map[string]func(a, b dual) dual{
			"add": dual.add, "sub": func(a, b dual) dual { return a.add(b.neg()) }, "mul": dual.mul,
			"div": func(a, b dual) dual { return a.mul(b.inv()) }}[s.Op])
	case "neg", "square", "set":
		return pointwise(ins, map[string]func(a, b dual) dual{"neg": func(a, _ dual) dual { return a.neg() },
			"square": func(a, _ dual) dual { return a.mul(a) }, "set": func(a, _ dual) dual { return a }}[s.Op])
	case "sum":
		return sumAxis(ins[0], s.Axis)
	case "broadcast":
		return broadcastD(ins[0], s.Axes, s.Shape)
	case "permute":
		return permuteD(ins[0], s.Values.Ints(AttrDims))
	case "reshape":
		return tensorD{shape: s.Values.Ints(AttrShape), data: ins[0].data}
	case "matmul":
		return matmulD(ins[0], ins[1])
	case "linear":
		return linearD(ins)
	}
	t.Fatalf("no evaluation of %s", s.Op)
	return tensorD{}
}

// pointwise applies f elementwise, broadcasting extent-1 axes.
func pointwise(ins []tensorD, f func(a, b dual) dual) tensorD {
	shape := slices.Clone(ins[0].shape)
	for _, in := range ins[1:] {
		for k, e := range in.shape {
			shape[k] = max(shape[k], e)
		}
	}
	out := tensorD{shape: shape}
	each(shape, func(c []int) {
		a, b := ins[0].data[index(ins[0].shape, c)], dual{}
		if len(ins) > 1 {
			b = ins[1].data[index(ins[1].shape, c)]
		}
		out.data = append(out.data, f(a, b))
	})
	return out
}

// sumAxis sums x over axis, which it removes.
func sumAxis(x tensorD, axis int) tensorD {
	out := tensorD{shape: slices.Delete(slices.Clone(x.shape), axis, axis+1)}
	out.data = make([]dual, product(out.shape))
	each(x.shape, func(c []int) {
		i := index(out.shape, slices.Delete(slices.Clone(c), axis, axis+1))
		out.data[i] = out.data[i].add(x.data[index(x.shape, c)])
	})
	return out
}

// broadcastD inserts axes (of extent 1, or shape's) and repeats x along
// them.
func broadcastD(x tensorD, axes, shape []int) tensorD {
	if shape == nil {
		shape = slices.Clone(x.shape)
		for _, a := range axes {
			shape = slices.Insert(shape, a, 1)
		}
	}
	out := tensorD{shape: shape}
	each(shape, func(c []int) {
		var src []int
		for k, ck := range c {
			if !slices.Contains(axes, k) {
				src = append(src, ck)
			}
		}
		out.data = append(out.data, x.data[index(x.shape, src)])
	})
	return out
}

// permuteD reorders x's dims as dims lists them.
func permuteD(x tensorD, dims []int) tensorD {
	shape := make([]int, len(dims))
	for j, d := range dims {
		shape[j] = x.shape[d]
	}
	out := tensorD{shape: shape}
	each(shape, func(c []int) {
		src := make([]int, len(dims))
		for j, d := range dims {
			src[d] = c[j]
		}
		out.data = append(out.data, x.data[index(x.shape, src)])
	})
	return out
}

// matmulD is a [..., m, k] @ b [k, n] or [..., k, n].
func matmulD(a, b tensorD) tensorD {
	r := len(a.shape)
	k, n := a.shape[r-1], b.shape[len(b.shape)-1]
	out := tensorD{shape: append(slices.Clone(a.shape[:r-1]), n)}
	each(out.shape, func(c []int) {
		var acc dual
		for l := range k {
			ac := append(slices.Clone(c[:r-1]), l)
			bc := []int{l, c[r-1]}
			if len(b.shape) == r {
				bc = append(slices.Clone(c[:r-2]), l, c[r-1])
			}
			acc = acc.add(a.data[index(a.shape, ac)].mul(b.data[index(b.shape, bc)]))
		}
		out.data = append(out.data, acc)
	})
	return out
}

// linearD is x @ wᵀ (+ bias); a vector x is one row.
func linearD(ins []tensorD) tensorD {
	x := ins[0]
	if len(x.shape) == 1 {
		x = tensorD{shape: []int{1, x.shape[0]}, data: x.data}
	}
	y := matmulD(x, permuteD(ins[1], []int{1, 0}))
	if len(ins) > 2 {
		bias := ins[2]
		shape := append(slices.Repeat([]int{1}, len(y.shape)-1), bias.shape[0])
		y = pointwise([]tensorD{y, {shape: shape, data: bias.data}}, dual.add)
	}
	if len(ins[0].shape) == 1 {
		y.shape = y.shape[1:]
	}
	return y
}

// evalSteps runs steps on the operands refs names: Ref k ≥ 0 is
// operands[k], Ref −1−j step j's output.
func evalSteps(t *testing.T, steps []ExpandStep, operands []tensorD) []tensorD {
	outs := make([]tensorD, len(steps))
	for j, s := range steps {
		ins := make([]tensorD, len(s.In))
		for i, r := range s.In {
			if k, ok := r.Operand(); ok {
				ins[i] = operands[k]
			} else {
				ins[i] = outs[r.Step()]
			}
		}
		outs[j] = evalStep(t, s, ins)
	}
	return outs
}

// randomD is a tensor of shape of random values with random derivative
// parts (the direction), or none.
func randomD(rng *rand.Rand, shape []int, direction bool) tensorD {
	x := tensorD{shape: shape}
	for range product(shape) {
		d := dual{v: rng.Int64N(proofPrime)}
		if direction {
			d.d = rng.Int64N(proofPrime)
		}
		x.data = append(x.data, d)
	}
	return x
}

// dot is ⟨a, b⟩ of the values of a and the given parts of b.
func dot(a tensorD, b []int64) int64 {
	var s int64
	for i, x := range a.data {
		s = fieldOf(s + mulMod(x.v, b[i], proofPrime))
	}
	return s
}

// TestGradRulesAreDerivatives checks each ring op's rule against its
// exact directional derivative.
func TestGradRulesAreDerivatives(t *testing.T) {
	step := func(op string, in int, mod func(*ExpandStep)) []ExpandStep {
		s := ExpandStep{Op: op}
		for k := range in {
			s.In = append(s.In, Ref(k))
		}
		if mod != nil {
			mod(&s)
		}
		return []ExpandStep{s}
	}
	expand := func(name string, in [][]int, a Attrs) []ExpandStep {
		steps, err := Lookup(name).Expand(in, a)
		if err != nil {
			t.Fatal(err.Msg)
		}
		return steps
	}
	vals := func(ints []int, key Attr) Values { return Values{{Key: key, Ints: ints}} }
	for _, tc := range []struct {
		name  string
		op    string
		in    [][]int
		attrs Attrs
		sc    *Scalar
		fwd   []ExpandStep
	}{
		{"add", "add", [][]int{{3, 4}, {3, 4}}, Attrs{}, nil, step("add", 2, nil)},
		{"add broadcast", "add", [][]int{{3, 4}, {1, 4}}, Attrs{}, nil, step("add", 2, nil)},
		{"sub broadcast", "sub", [][]int{{3, 1}, {3, 4}}, Attrs{}, nil, step("sub", 2, nil)},
		{"sub number", "sub", [][]int{{3, 4}}, Attrs{}, &Scalar{Slot: 0, Value: 1}, step("sub", 1, func(s *ExpandStep) { s.Scalar = &Scalar{Slot: 0, Value: 1} })},
		{"mul", "mul", [][]int{{2, 3}, {2, 3}}, Attrs{}, nil, step("mul", 2, nil)},
		{"mul broadcast", "mul", [][]int{{2, 3}, {2, 1}}, Attrs{}, nil, step("mul", 2, nil)},
		{"mul number", "mul", [][]int{{5}}, Attrs{}, &Scalar{Slot: 1, Value: 3}, step("mul", 1, func(s *ExpandStep) { s.Scalar = &Scalar{Slot: 1, Value: 3} })},
		{"div by a number", "div", [][]int{{4, 2}}, Attrs{}, &Scalar{Slot: 1, Value: 7}, step("div", 1, func(s *ExpandStep) { s.Scalar = &Scalar{Slot: 1, Value: 7} })},
		{"div", "div", [][]int{{4, 2}, {4, 2}}, Attrs{}, nil, step("div", 2, nil)},
		{"neg", "neg", [][]int{{6}}, Attrs{}, nil, step("neg", 1, nil)},
		{"square", "square", [][]int{{2, 3}}, Attrs{}, nil, step("square", 1, nil)},
		{"set", "set", [][]int{{2, 3}}, Attrs{}, nil, step("set", 1, nil)},
		{"sum", "sum", [][]int{{3, 4, 2}}, Attrs{Axis: 1}, nil, step("sum", 1, func(s *ExpandStep) { s.Axis = 1 })},
		{"broadcast", "broadcast", [][]int{{3, 2}}, Attrs{Axes: []int{0, 2}}, nil,
			step("broadcast", 1, func(s *ExpandStep) { s.Axes, s.Shape = []int{0, 2}, []int{4, 3, 5, 2} })},
		{"mean", "mean", [][]int{{3, 5}}, Attrs{Axis: 1}, nil, expand("mean", [][]int{{3, 5}}, Attrs{Axis: 1})},
		{"permute", "permute", [][]int{{2, 3, 4}}, Attrs{Values: vals([]int{2, 0, 1}, AttrDims)}, nil,
			step("permute", 1, func(s *ExpandStep) { s.Values = vals([]int{2, 0, 1}, AttrDims) })},
		{"reshape", "reshape", [][]int{{2, 6}}, Attrs{Values: vals([]int{3, 4}, AttrShape)}, nil,
			step("reshape", 1, func(s *ExpandStep) { s.Values = vals([]int{3, 4}, AttrShape) })},
		{"matmul", "matmul", [][]int{{3, 4}, {4, 2}}, Attrs{}, nil, step("matmul", 2, nil)},
		{"matmul batched", "matmul", [][]int{{2, 3, 4}, {2, 4, 5}}, Attrs{}, nil, step("matmul", 2, nil)},
		{"matmul shared b", "matmul", [][]int{{2, 3, 4}, {4, 5}}, Attrs{}, nil, step("matmul", 2, nil)},
		{"linear", "linear", [][]int{{3, 4}, {5, 4}}, Attrs{}, nil, step("linear", 2, nil)},
		{"linear bias 3-D", "linear", [][]int{{2, 3, 4}, {5, 4}, {5}}, Attrs{}, nil, step("linear", 3, nil)},
		{"linear vector", "linear", [][]int{{4}, {5, 4}}, Attrs{}, nil, step("linear", 2, nil)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, uint64(len(tc.name))))
			xs := make([]tensorD, len(tc.in))
			for k, s := range tc.in {
				xs[k] = randomD(rng, s, true)
			}
			fwd := evalSteps(t, tc.fwd, xs)
			y := fwd[len(fwd)-1]
			dy := randomD(rng, y.shape, false)
			ds := make([]int64, len(y.data))
			for i, e := range y.data {
				ds[i] = e.d
			}
			want := dot(dy, ds) // ⟨dy, J·v⟩
			// The rule reads values: the duals' parts dropped.
			plain := func(x tensorD) tensorD {
				p := tensorD{shape: x.shape}
				for _, e := range x.data {
					p.data = append(p.data, dual{v: e.v})
				}
				return p
			}
			operands := make([]tensorD, 0, len(xs)+2)
			for _, x := range xs {
				operands = append(operands, plain(x))
			}
			operands = append(operands, plain(y), dy)
			need := slices.Repeat([]bool{true}, len(xs))
			steps, grads, err := Lookup(tc.op).Grad(&GradIn{In: tc.in, DTypes: slices.Repeat([]string{"float32"}, len(xs)),
				Out: y.shape, Attrs: tc.attrs, Scalar: tc.sc, Need: need})
			if err != nil {
				t.Fatal(err.Msg)
			}
			outs := evalSteps(t, steps, operands)
			var got int64
			for k, r := range grads {
				g := operands[0]
				if k, ok := r.Operand(); ok {
					g = operands[k]
				} else {
					g = outs[r.Step()]
				}
				if !slices.Equal(g.shape, tc.in[k]) {
					t.Fatalf("gradient of operand %d has shape %v, want %v", k, g.shape, tc.in[k])
				}
				vs := make([]int64, len(xs[k].data))
				for i, e := range xs[k].data {
					vs[i] = e.d
				}
				got = fieldOf(got + dot(g, vs))
			}
			if d := cmp.Diff(fmt.Sprint(want), fmt.Sprint(got)); d != "" {
				t.Errorf("⟨dy, J·v⟩ differs from Σ ⟨g, v⟩ (-want +got):\n%s", d)
			}
		})
	}
}
