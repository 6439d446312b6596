package ops

import (
	"math/rand/v2"
	"slices"
	"testing"
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

// number is the arithmetic the evaluator computes in: dual numbers over
// the field (dual) or over float64 (fdual).
type number[T any] interface {
	add(T) T
	mul(T) T
	neg() T
	inv() T
	// apply is the unary function op (exp, tanh, ...), ok false for one
	// the arithmetic has none of.
	apply(op string) (T, bool)
	// less orders values, for max.
	less(T) bool
	// index is the value as an integer index (a lookup's), -1 for one
	// that is none.
	index() int
	// primal and tangent are the value and the derivative part, each
	// as a number of no derivative.
	primal() T
	tangent() T
	// close reports whether two values agree: exactly in the field,
	// within rounding in floats.
	close(T) bool
}

func (a dual) apply(string) (dual, bool) { return dual{}, false }
func (a dual) less(b dual) bool          { return a.v < b.v }
func (a dual) primal() dual              { return dual{v: a.v} }
func (a dual) index() int                { return int(a.v) }
func (a dual) tangent() dual             { return dual{v: a.d} }
func (a dual) close(b dual) bool         { return a.v == b.v }

// tensorOf is a row-major tensor of numbers.
type tensorOf[T number[T]] struct {
	shape []int
	data  []T
}

// tensorD is a tensor of duals over the field.
type tensorD = tensorOf[dual]

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
	for range Product(shape) {
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

// evalStep computes step s on its operands ins, lift making its number
// one of T's.
func evalStep[T number[T]](t *testing.T, s ExpandStep, ins []tensorOf[T], lift func(float64) T) tensorOf[T] {
	t.Helper()
	if s.Scalar != nil {
		c := tensorOf[T]{shape: slices.Repeat([]int{1}, len(ins[0].shape)), data: []T{lift(s.Scalar.Value)}}
		ins = slices.Insert(slices.Clone(ins), s.Scalar.Slot, c)
	}
	var zero T
	mask := func(c bool) T {
		if c {
			return lift(1)
		}
		return lift(0)
	}
	pick := func(c bool, a, b T) T {
		if c {
			return a
		}
		return b
	}
	binary := map[string]func(a, b T) T{"add": T.add,
		"gt": func(a, b T) T { return mask(b.less(a)) }, "eq": func(a, b T) T { return mask(!a.less(b) && !b.less(a)) },
		"maximum": func(a, b T) T { return pick(a.less(b), b, a) }, "minimum": func(a, b T) T { return pick(b.less(a), b, a) },
		"relu": func(a, _ T) T { return pick(zero.less(a), a, zero) }, "abs": func(a, _ T) T { return pick(a.less(zero), a.neg(), a) }, "sub": func(a, b T) T { return a.add(b.neg()) }, "mul": T.mul,
		"div": func(a, b T) T { return a.mul(b.inv()) }, "neg": func(a, _ T) T { return a.neg() },
		"square": func(a, _ T) T { return a.mul(a) }, "set": func(a, _ T) T { return a }}
	switch s.Op {
	case "sum", "prod", "max", "min":
		return reduceAxis(ins[0], s.Axis, s.Op)
	case "broadcast":
		return broadcastD(ins[0], s.Axes, s.Shape)
	case "permute":
		return permuteD(ins[0], s.Values.Ints(AttrDims))
	case "reshape":
		return tensorOf[T]{shape: s.Values.Ints(AttrShape), data: ins[0].data}
	case "matmul":
		return matmulD(ins[0], ins[1])
	case "linear":
		return linearD(ins)
	case "slice":
		return sliceD(ins[0], s.Axis, s.Values.Int(AttrStart), s.Values.Int(AttrEnd))
	case "cat":
		return catD(ins, s.Axis)
	case "tril":
		return trilD(ins[0], s.Values.Int(AttrDiagonal))
	case "embedding":
		return embeddingD(ins[0], ins[1])
	case "gather":
		return gatherD(ins[0], ins[1])
	case "scatter_add":
		return scatterD(ins[0], ins[1], s.Values.Int(AttrRows))
	}
	if f := binary[s.Op]; f != nil {
		return pointwise(ins, f)
	}
	if _, ok := zero.apply(s.Op); !ok {
		t.Fatalf("no evaluation of %s", s.Op)
	}
	return pointwise(ins, func(a, _ T) T { v, _ := a.apply(s.Op); return v })
}

// pointwise applies f elementwise, broadcasting extent-1 axes.
func pointwise[T number[T]](ins []tensorOf[T], f func(a, b T) T) tensorOf[T] {
	shape := slices.Clone(ins[0].shape)
	for _, in := range ins[1:] {
		for k, e := range in.shape {
			shape[k] = max(shape[k], e)
		}
	}
	out := tensorOf[T]{shape: shape}
	each(shape, func(c []int) {
		var b T
		a := ins[0].data[index(ins[0].shape, c)]
		if len(ins) > 1 {
			b = ins[1].data[index(ins[1].shape, c)]
		}
		out.data = append(out.data, f(a, b))
	})
	return out
}

// reduceAxis reduces x over axis by op (sum, prod, max, min) and removes
// it.
func reduceAxis[T number[T]](x tensorOf[T], axis int, op string) tensorOf[T] {
	out := tensorOf[T]{shape: slices.Delete(slices.Clone(x.shape), axis, axis+1)}
	out.data = make([]T, Product(out.shape))
	seen := make([]bool, len(out.data))
	each(x.shape, func(c []int) {
		i, v := index(out.shape, slices.Delete(slices.Clone(c), axis, axis+1)), x.data[index(x.shape, c)]
		switch {
		case !seen[i]:
			out.data[i] = v
		case op == "sum":
			out.data[i] = out.data[i].add(v)
		case op == "prod":
			out.data[i] = out.data[i].mul(v)
		case op == "max" && out.data[i].less(v), op == "min" && v.less(out.data[i]):
			out.data[i] = v
		}
		seen[i] = true
	})
	return out
}

// broadcastD inserts axes (of extent 1, or shape's) and repeats x along
// them.
func broadcastD[T number[T]](x tensorOf[T], axes, shape []int) tensorOf[T] {
	if shape == nil {
		shape = slices.Clone(x.shape)
		for _, a := range axes {
			shape = slices.Insert(shape, a, 1)
		}
	}
	out := tensorOf[T]{shape: shape}
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
func permuteD[T number[T]](x tensorOf[T], dims []int) tensorOf[T] {
	shape := make([]int, len(dims))
	for j, d := range dims {
		shape[j] = x.shape[d]
	}
	out := tensorOf[T]{shape: shape}
	each(shape, func(c []int) {
		src := make([]int, len(dims))
		for j, d := range dims {
			src[d] = c[j]
		}
		out.data = append(out.data, x.data[index(x.shape, src)])
	})
	return out
}

// sliceD is x's entries start to end along axis.
func sliceD[T number[T]](x tensorOf[T], axis, start, end int) tensorOf[T] {
	shape := slices.Clone(x.shape)
	shape[axis] = end - start
	out := tensorOf[T]{shape: shape}
	each(shape, func(c []int) {
		src := slices.Clone(c)
		src[axis] += start
		out.data = append(out.data, x.data[index(x.shape, src)])
	})
	return out
}

// catD joins xs along axis.
func catD[T number[T]](xs []tensorOf[T], axis int) tensorOf[T] {
	shape := slices.Clone(xs[0].shape)
	shape[axis] = 0
	for _, x := range xs {
		shape[axis] += x.shape[axis]
	}
	out := tensorOf[T]{shape: shape}
	each(shape, func(c []int) {
		src, k := slices.Clone(c), 0
		for src[axis] >= xs[k].shape[axis] {
			src[axis] -= xs[k].shape[axis]
			k++
		}
		out.data = append(out.data, xs[k].data[index(xs[k].shape, src)])
	})
	return out
}

// embeddingD is the rows of table [v, e] at ids [...], a zero row for an
// index outside them.
func embeddingD[T number[T]](ids, table tensorOf[T]) tensorOf[T] {
	v, e := table.shape[0], table.shape[1]
	out := tensorOf[T]{shape: append(slices.Clone(ids.shape), e), data: make([]T, len(ids.data)*e)}
	for i, id := range ids.data {
		if r := id.index(); r >= 0 && r < v {
			copy(out.data[i*e:(i+1)*e], table.data[r*e:(r+1)*e])
		}
	}
	return out
}

// gatherD is x [..., v] at index [..., 1] along the last dim.
func gatherD[T number[T]](x, index tensorOf[T]) tensorOf[T] {
	v := x.shape[len(x.shape)-1]
	out := tensorOf[T]{shape: slices.Clone(index.shape), data: make([]T, len(index.data))}
	for b, id := range index.data {
		if r := id.index(); r >= 0 && r < v {
			out.data[b] = x.data[b*v+r]
		}
	}
	return out
}

// scatterD is zeros [..., rows, e] with src [..., n, e]'s rows added at
// index [..., n].
func scatterD[T number[T]](index, src tensorOf[T], rows int) tensorOf[T] {
	r := len(src.shape)
	n, e := src.shape[r-2], src.shape[r-1]
	shape := slices.Concat(src.shape[:r-2], []int{rows, e})
	out := tensorOf[T]{shape: shape, data: make([]T, Product(shape))}
	for k, id := range index.data {
		if at := id.index(); at >= 0 && at < rows {
			for j := range e {
				o := (k/n*rows+at)*e + j
				out.data[o] = out.data[o].add(src.data[k*e+j])
			}
		}
	}
	return out
}

// trilD is x with the entries of its last two dims above diagonal d
// zeroed.
func trilD[T number[T]](x tensorOf[T], d int) tensorOf[T] {
	out := tensorOf[T]{shape: slices.Clone(x.shape), data: slices.Clone(x.data)}
	r := len(x.shape)
	each(x.shape, func(c []int) {
		if !TrilKeeps(c[r-2], c[r-1], d) {
			var zero T
			out.data[index(x.shape, c)] = zero
		}
	})
	return out
}

// matmulD is a [..., m, k] @ b [k, n] or [..., k, n].
func matmulD[T number[T]](a, b tensorOf[T]) tensorOf[T] {
	r := len(a.shape)
	k, n := a.shape[r-1], b.shape[len(b.shape)-1]
	out := tensorOf[T]{shape: append(slices.Clone(a.shape[:r-1]), n)}
	each(out.shape, func(c []int) {
		var acc T
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
func linearD[T number[T]](ins []tensorOf[T]) tensorOf[T] {
	x := ins[0]
	if len(x.shape) == 1 {
		x = tensorOf[T]{shape: []int{1, x.shape[0]}, data: x.data}
	}
	y := matmulD(x, permuteD(ins[1], []int{1, 0}))
	if len(ins) > 2 {
		bias := ins[2]
		shape := append(slices.Repeat([]int{1}, len(y.shape)-1), bias.shape[0])
		y = pointwise([]tensorOf[T]{y, {shape: shape, data: bias.data}}, T.add)
	}
	if len(ins[0].shape) == 1 {
		y.shape = y.shape[1:]
	}
	return y
}

// evalSteps runs steps on the operands refs names: Ref k ≥ 0 is
// operands[k], Ref −1−j step j's output.
func evalSteps[T number[T]](t *testing.T, steps []ExpandStep, operands []tensorOf[T], lift func(float64) T) []tensorOf[T] {
	outs := make([]tensorOf[T], len(steps))
	for j, s := range steps {
		ins := make([]tensorOf[T], len(s.In))
		for i, r := range s.In {
			if k, ok := r.Operand(); ok {
				ins[i] = operands[k]
			} else {
				ins[i] = outs[r.Step()]
			}
		}
		outs[j] = evalStep(t, s, ins, lift)
	}
	return outs
}

// randomD is a tensor of shape of random values of the field with
// random derivative parts (the direction).
func randomD(rng *rand.Rand, shape []int) tensorD {
	x := tensorD{shape: shape}
	for range Product(shape) {
		x.data = append(x.data, dual{v: rng.Int64N(proofPrime), d: rng.Int64N(proofPrime)})
	}
	return x
}

// ruleCase is an op, its operands' shapes and attributes, and its forward
// as steps (the op itself, or a composite's expansion).
type ruleCase struct {
	name, op string
	in       [][]int
	attrs    Attrs
	sc       *Scalar
	fwd      []ExpandStep
}

// mapped is x with f applied to each element.
func mapped[T number[T]](x tensorOf[T], f func(T) T) tensorOf[T] {
	out := tensorOf[T]{shape: x.shape}
	for _, e := range x.data {
		out.data = append(out.data, f(e))
	}
	return out
}

// dotTangent is ⟨a's values, b's derivative parts⟩.
func dotTangent[T number[T]](a, b tensorOf[T]) T {
	var s T
	for i, e := range a.data {
		s = s.add(e.primal().mul(b.data[i].tangent()))
	}
	return s
}

// checkVJP evaluates tc's forward on xs (values with directions v) and
// its rule on dy, and checks ⟨dy, J·v⟩ = Σₖ ⟨gₖ, vₖ⟩.
func checkVJP[T number[T]](t *testing.T, tc ruleCase, xs []tensorOf[T], dyOf func(shape []int) tensorOf[T], lift func(float64) T) {
	t.Helper()
	checkVJPOf(t, tc, xs, slices.Repeat([]bool{true}, len(xs)), dyOf, lift)
}

// checkVJPOf is checkVJP of the operands that need a gradient: the
// others (a lookup's indices) must get none, and their directions are
// zero.
func checkVJPOf[T number[T]](t *testing.T, tc ruleCase, xs []tensorOf[T], need []bool, dyOf func(shape []int) tensorOf[T], lift func(float64) T) {
	t.Helper()
	fwd := evalSteps(t, tc.fwd, xs, lift)
	y := fwd[len(fwd)-1]
	dy := dyOf(y.shape)
	want := dotTangent(dy, y) // ⟨dy, J·v⟩
	// The rule reads values: the forward's operands, output, the upstream
	// gradient and the composite's intermediates.
	operands := make([]tensorOf[T], 0, len(xs)+2)
	for _, x := range xs {
		operands = append(operands, mapped(x, T.primal))
	}
	operands = append(operands, mapped(y, T.primal), dy)
	var saved []string
	for j, st := range tc.fwd {
		if st.Name != "" && j < len(tc.fwd)-1 {
			saved = append(saved, st.Name)
			operands = append(operands, mapped(fwd[j], T.primal))
		}
	}
	steps, grads, err := Lookup(tc.op).Grad(&GradIn{In: tc.in, DTypes: slices.Repeat([]string{"float32"}, len(xs)),
		Out: y.shape, Attrs: tc.attrs, Scalar: tc.sc, Need: need, Saved: saved})
	if err != nil {
		t.Fatal(err.Msg)
	}
	outs := evalSteps(t, steps, operands, lift)
	var got T
	for k, r := range grads {
		if !need[k] {
			if r != NoGrad {
				t.Fatalf("operand %d needs no gradient, but the rule gives one", k)
			}
			continue
		}
		g := operands[0]
		if i, ok := r.Operand(); ok {
			g = operands[i]
		} else {
			g = outs[r.Step()]
		}
		if !slices.Equal(g.shape, tc.in[k]) {
			t.Fatalf("gradient of operand %d has shape %v, want %v", k, g.shape, tc.in[k])
		}
		got = got.add(dotTangent(g, xs[k]))
	}
	if !want.close(got) {
		t.Errorf("⟨dy, J·v⟩ = %v differs from Σ ⟨g, v⟩ = %v", want, got)
	}
}

// step is op's forward, one step of in operands, mod setting its
// attributes.
func step(op string, in int, mod func(*ExpandStep)) []ExpandStep {
	s := ExpandStep{Op: op}
	for k := range in {
		s.In = append(s.In, Ref(k))
	}
	if mod != nil {
		mod(&s)
	}
	return []ExpandStep{s}
}

// expanded is composite name's expansion.
func expanded(t *testing.T, name string, in [][]int, a Attrs) []ExpandStep {
	steps, err := Lookup(name).Expand(in, a)
	if err != nil {
		t.Fatal(err.Msg)
	}
	return steps
}

// sliceCase is a slice of x's entries start to end along axis.
func sliceCase(name string, x []int, axis, start, end int) ruleCase {
	vs := Values{{Key: AttrStart, Int: start}, {Key: AttrEnd, Int: end}}
	return ruleCase{name, "slice", [][]int{x}, Attrs{Axis: axis, Values: vs}, nil,
		step("slice", 1, func(s *ExpandStep) { s.Axis, s.Values = axis, vs })}
}

// trilCase is tril of x with diagonal d.
func trilCase(name string, x []int, d int) ruleCase {
	vs := Values{{Key: AttrDiagonal, Int: d}}
	return ruleCase{name, "tril", [][]int{x}, Attrs{Values: vs}, nil,
		step("tril", 1, func(s *ExpandStep) { s.Values = vs })}
}

// TestGradRulesAreDerivatives checks each ring op's rule against its
// exact directional derivative.
func TestGradRulesAreDerivatives(t *testing.T) {
	vals := func(ints []int, key Attr) Values { return Values{{Key: key, Ints: ints}} }
	for _, tc := range []ruleCase{
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
		{"mean", "mean", [][]int{{3, 5}}, Attrs{Axis: 1}, nil, expanded(t, "mean", [][]int{{3, 5}}, Attrs{Axis: 1})},
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
		sliceCase("slice middle", []int{3, 7}, 1, 2, 5), sliceCase("slice head", []int{6, 2}, 0, 0, 4),
		sliceCase("slice tail", []int{2, 5}, 1, 3, 5), sliceCase("slice whole", []int{4}, 0, 0, 4),
		{"cat", "cat", [][]int{{2, 3}, {2, 1}, {2, 4}}, Attrs{Axis: 1}, nil, step("cat", 3, func(s *ExpandStep) { s.Axis = 1 })},
		{"cat axis 0", "cat", [][]int{{1, 3}, {2, 3}}, Attrs{Axis: 0}, nil, step("cat", 2, nil)},
		trilCase("tril", []int{4, 5}, 0), trilCase("tril above", []int{2, 3, 4}, 2), trilCase("tril below", []int{5, 3}, -1),
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, uint64(len(tc.name))))
			xs := make([]tensorD, len(tc.in))
			for k, s := range tc.in {
				xs[k] = randomD(rng, s)
			}
			checkVJP(t, tc, xs, func(shape []int) tensorD { return mapped(randomD(rng, shape), dual.primal) }, scalarD)
		})
	}
}

// randomIndex is a tensor of shape of indices below rows, and now and
// then rows itself (outside: a zero row read, nothing added), with no
// direction.
func randomIndex(rng *rand.Rand, shape []int, rows int) tensorD {
	x := tensorD{shape: shape}
	for range Product(shape) {
		x.data = append(x.data, dual{v: int64(rng.IntN(rows + 1))})
	}
	return x
}

// TestGradRulesOfLookups proves the rules of embedding and gather, and
// scatter_add's semantics they rest on, exactly over the field: the
// lookups are linear in their tables, so ⟨dy, J·v⟩ = ⟨g, v⟩ for random
// directions of the table, the indices (with repeats, and some outside
// the rows) fixed.
func TestGradRulesOfLookups(t *testing.T) {
	for _, tc := range []struct {
		rc      ruleCase
		indices int // the operand of the indices
		rows    int
	}{
		{ruleCase{"embedding", "embedding", [][]int{{2, 5}, {4, 3}}, Attrs{}, nil, step("embedding", 2, nil)}, 0, 4},
		{ruleCase{"embedding 1-D", "embedding", [][]int{{7}, {3, 2}}, Attrs{}, nil, step("embedding", 2, nil)}, 0, 3},
		{ruleCase{"embedding 3-D", "embedding", [][]int{{2, 2, 3}, {5, 2}}, Attrs{}, nil, step("embedding", 2, nil)}, 0, 5},
		{ruleCase{"embedding one id", "embedding", [][]int{{}, {3, 4}}, Attrs{}, nil, step("embedding", 2, nil)}, 0, 3},
		{ruleCase{"gather", "gather", [][]int{{3, 5}, {3, 1}}, Attrs{Axis: 1}, nil, step("gather", 2, func(s *ExpandStep) { s.Axis = 1 })}, 1, 5},
		{ruleCase{"gather 3-D", "gather", [][]int{{2, 3, 4}, {2, 3, 1}}, Attrs{Axis: 2}, nil, step("gather", 2, func(s *ExpandStep) { s.Axis = 2 })}, 1, 4},
		{ruleCase{"gather 1-D", "gather", [][]int{{6}, {1}}, Attrs{Axis: 0}, nil, step("gather", 2, func(s *ExpandStep) { s.Axis = 0 })}, 1, 6},
	} {
		t.Run(tc.rc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(3, uint64(len(tc.rc.name))))
			xs := make([]tensorD, len(tc.rc.in))
			need := make([]bool, len(xs))
			for k, s := range tc.rc.in {
				xs[k], need[k] = randomD(rng, s), k != tc.indices
				if k == tc.indices {
					xs[k] = randomIndex(rng, s, tc.rows)
				}
			}
			checkVJPOf(t, tc.rc, xs, need, func(shape []int) tensorD { return mapped(randomD(rng, shape), dual.primal) }, scalarD)
		})
	}
}

// TestGradRuleOfProd proves prod's rule as the other ring ops', along
// each axis and with zeros: the first `zeros` entries along the axis of
// every row made 0 (their directions kept), where the rule of a
// division by x would give 0/0. With one zero a row's only nonzero
// gradient is at the zero; with two, every gradient is 0.
func TestGradRuleOfProd(t *testing.T) {
	for _, tc := range []struct {
		name        string
		x           []int
		axis, zeros int
	}{
		{"last axis", []int{3, 4}, 1, 0}, {"axis 0", []int{4, 3, 2}, 0, 0}, {"middle axis", []int{2, 5, 3}, 1, 0},
		{"vector", []int{6}, 0, 0}, {"one zero", []int{3, 4}, 1, 1}, {"two zeros", []int{2, 5}, 1, 2},
		{"zeros along axis 0", []int{4, 3}, 0, 3}, {"extent 1", []int{3, 1}, 1, 0}, {"all zero", []int{2, 3}, 1, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc := ruleCase{"prod " + tc.name, "prod", [][]int{tc.x}, Attrs{Axis: tc.axis}, nil,
				step("prod", 1, func(s *ExpandStep) { s.Axis = tc.axis })}
			rng := rand.New(rand.NewPCG(5, uint64(len(tc.name))))
			x := randomD(rng, tc.x)
			each(x.shape, func(c []int) {
				if c[tc.axis] < tc.zeros {
					x.data[index(x.shape, c)].v = 0
				}
			})
			checkVJP(t, rc, []tensorD{x}, func(shape []int) tensorD { return mapped(randomD(rng, shape), dual.primal) }, scalarD)
		})
	}
}
