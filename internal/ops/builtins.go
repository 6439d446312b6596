package ops

import "math"

// builtins is the registry of the ops of docs/fusion.md ("ops"), in its
// order: the copy, the reductions, the elementwise binary and unary ops,
// broadcast and the contractions.
func builtins() *Registry {
	r := &Registry{byName: map[string]*Op{}}
	r.MustRegister(Op{Name: "set", Family: Copy, Operands: []string{"x"}, Rule: pointwiseRule,
		Doc: "a copy of its input, resharded as its output says"})
	for _, red := range []struct{ name, doc string }{
		{"sum", "the sum over one axis"},
		{"prod", "the product over one axis"},
		{"max", "the largest element along one axis"},
		{"min", "the smallest element along one axis"},
	} {
		r.MustRegister(Op{Name: red.name, Family: Reduction, Operands: []string{"x"}, Attrs: []Attr{AttrAxis},
			Combine: red.name, Rule: reductionRule, Doc: red.doc})
	}
	for _, e := range []Op{
		passesSums(binary("add", "a + b", Kernel{Ring: func(a, b, _ int64) int64 { return a + b }},
			Torch{Func: "torch.add", Rounding: Additive})),
		passesSums(binary("sub", "a - b", Kernel{Ring: func(a, b, _ int64) int64 { return a - b }},
			Torch{Func: "torch.sub", Magnitude: "torch.add", Rounding: Additive})),
		binary("mul", "a * b", Kernel{Ring: ringMul},
			Torch{Func: "torch.mul", Rounding: Multiplicative}),
		binary("maximum", "the larger of a and b", Kernel{Value: func(a, b float64) float64 { return max(a, b) }},
			Torch{Func: "torch.maximum", Rounding: Selecting}),
		binary("minimum", "the smaller of a and b", Kernel{Value: func(a, b float64) float64 { return min(a, b) }},
			Torch{Func: "torch.minimum", Magnitude: "torch.maximum", Rounding: Selecting}),
		binary("gt", "1 where a > b, else 0: the mask of torch.gt, in the operands' dtype", Kernel{Value: func(a, b float64) float64 { return mask(a > b) }},
			Torch{Func: "_gt", Magnitude: "_mask_magnitude", Rounding: Exact}),
		binary("eq", "1 where a = b, else 0: the mask of torch.eq, in the operands' dtype", Kernel{Value: func(a, b float64) float64 { return mask(a == b) }},
			Torch{Func: "_eq", Magnitude: "_mask_magnitude", Rounding: Exact}),
		unary("relu", "max(x, 0)", Kernel{Value: func(a, _ float64) float64 { return max(a, 0) }},
			Torch{Func: "torch.relu", Magnitude: "_same", Rounding: Exact}),
		passesSums(unary("neg", "-x", Kernel{Value: func(a, _ float64) float64 { return 0 - a }},
			Torch{Func: "torch.neg", Magnitude: "_same", Rounding: Exact})),
		unary("abs", "|x|", Kernel{Value: func(a, _ float64) float64 { return math.Abs(a) }},
			Torch{Func: "torch.abs", Magnitude: "_same", Rounding: Exact}),
	} {
		r.MustRegister(e)
	}
	for _, e := range transformerElementwise() {
		r.MustRegister(e)
	}
	r.MustRegister(Op{Name: "broadcast", Family: Broadcast, Operands: []string{"x"}, Attrs: []Attr{AttrAxes},
		Rule: broadcastRule, Doc: "its input with new axes, repeated along them"})
	r.MustRegister(Op{Name: "matmul", Family: Contraction, Operands: []string{"a", "b"}, Attrs: []Attr{AttrOverlap, AttrChunks}, Rule: matmulRule,
		Torch: &Torch{Func: "torch.matmul"}, Doc: "a @ b, torch.matmul of a [..., m, k] and b [k, n] or [..., k, n]"})
	r.MustRegister(Op{Name: "linear", Family: Contraction, Operands: []string{"x", "w", "bias"}, Optional: 1, Attrs: []Attr{AttrOverlap, AttrChunks},
		Rule: linearRule, Torch: &Torch{Func: "_linear"}, Doc: "x @ wᵀ + bias, torch.nn.functional.linear"})
	registerLookupOps(r)
	registerScatter(r)
	registerShapeOps(r)
	registerSliceOps(r)
	registerTril(r)
	registerComposites(r)
	registerLossOps(r)
	registerMoE(r)
	registerGrads(r)
	return r
}

// registerShapeOps adds the ops that move or retype data without
// computing on it: permute and reshape (views), cast.
func registerShapeOps(r *Registry) {
	r.MustRegister(Op{Name: "permute", Family: View, Operands: []string{"x"}, Attrs: []Attr{AttrDims},
		Rule: permuteRule, Shape: permuteShape, Torch: &Torch{Func: "torch.permute", Rounding: Exact},
		Doc: "its input with its dims reordered, torch.permute"})
	r.MustRegister(Op{Name: "reshape", Family: View, Operands: []string{"x"}, Attrs: []Attr{AttrShape},
		Rule: reshapeRule, Shape: reshapeShape, Torch: &Torch{Func: "torch.reshape", Rounding: Exact},
		Doc: "its input's elements, row-major, in another shape, torch.reshape"})
	r.MustRegister(Op{Name: "cast", Family: View, Operands: []string{"x"}, Attrs: []Attr{AttrDType},
		Rule: pointwiseRule, Shape: castShape, Torch: &Torch{Func: "_cast", Rounding: Multiplicative},
		Doc: "its input converted to another dtype, x.to(dtype): the one op whose output's dtype is not its operands'"})
}

// transformerElementwise are the elementwise ops of transformer blocks:
// div, and the unary functions of activations and norms. Their kernels
// are exact in the simulator's field (field.go); their torch functions
// round (Transcendental, Quotient), and the fusions that use them get
// positive input data where their domain needs it.
func transformerElementwise() []Op {
	// bounded is the torch function of an op whose rounding the exported
	// program bounds from its operands' values, by runtime.py's _err_NAME.
	bounded := func(name, fn string, r Rounding, positive bool) Torch {
		return Torch{Func: fn, Magnitude: "_err_" + name, Rounding: r, PositiveData: positive}
	}
	transcendental := func(name, doc, fn string, k func(a, b, p int64) int64, positive bool) Op {
		return unary(name, doc, Kernel{Field: k}, bounded(name, fn, Transcendental, positive))
	}
	return []Op{
		binary("div", "a / b", Kernel{Field: divField}, bounded("div", "torch.div", Quotient, true)),
		unary("exp", "eˣ", Kernel{Exp: ExpKernel}, bounded("exp", "torch.exp", Transcendental, true)),
		transcendental("log", "the natural logarithm of x", "torch.log", fixedMap(keyLog), true),
		transcendental("tanh", "tanh(x)", "torch.tanh", fixedMap(keyTanh), false),
		transcendental("sigmoid", "1 / (1 + e⁻ˣ)", "torch.sigmoid", sigmoidField, false),
		transcendental("silu", "x · sigmoid(x), torch.nn.functional.silu", "torch.nn.functional.silu", siluField, false),
		transcendental("gelu", "x · Φ(x), torch.nn.functional.gelu", "torch.nn.functional.gelu", fixedMap(keyGelu), false),
		transcendental("gelu_tanh", "gelu's tanh approximation, torch.nn.functional.gelu(approximate='tanh')", "_gelu_tanh",
			fixedMap(keyGeluTanh), false),
		transcendental("erf", "the error function, 2/√π ∫₀ˣ e^(−t²) dt, torch.erf", "torch.erf", fixedMap(keyErf), false),
		transcendental("sqrt", "√x", "torch.sqrt", sqrtField, true),
		transcendental("rsqrt", "1 / √x", "torch.rsqrt", rsqrtField, true),
		unary("reciprocal", "1 / x", Kernel{Field: reciprocalField}, bounded("reciprocal", "torch.reciprocal", Quotient, true)),
		unary("square", "x · x", Kernel{Ring: func(a, _, m int64) int64 { return ringMul(a, a, m) }},
			Torch{Func: "torch.square", Rounding: Multiplicative}),
	}
}

// mask is 1 for true and 0 for false: a comparison's value, which the
// gradient rules of the selecting ops (relu, abs, maximum, max) multiply
// the upstream gradient by.
func mask(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// binary is the entry of an elementwise op of two operands.
func binary(name, doc string, k Kernel, t Torch) Op {
	return Op{Name: name, Family: Binary, Operands: []string{"a", "b"}, Rule: pointwiseRule, Kernel: &k, Torch: &t, Doc: doc}
}

// passesSums marks e as an op of sums that is the sum of the op of their
// terms (Op.PassesSums).
func passesSums(e Op) Op {
	e.PassesSums = true
	return e
}

// unary is the entry of an elementwise op of one operand.
func unary(name, doc string, k Kernel, t Torch) Op {
	return Op{Name: name, Family: Unary, Operands: []string{"x"}, Rule: pointwiseRule, Kernel: &k, Torch: &t, Doc: doc}
}

// PointwiseFuncs are the functions a plan's Pointwise step applies: every
// elementwise op, and copy (its one input, as it is), in that order.
func PointwiseFuncs() []string {
	return append(append(FamilyNames(Binary), FamilyNames(Unary)...), CopyFunc)
}

// CopyFunc is the Pointwise function that copies its one input: what a
// local step that repeats an operand along a broadcast axis applies.
const CopyFunc = "copy"

// Func returns the entry of Pointwise function name — an elementwise op,
// or for copy an entry of its own — or nil.
func Func(name string) *Op {
	if name == CopyFunc {
		return copyFunc
	}
	if o := Lookup(name); o != nil && o.Family.Elementwise() {
		return o
	}
	return nil
}

// copyFunc is the entry of the copy function, which is not an op.
var copyFunc = &Op{Name: CopyFunc, Family: Unary, Operands: []string{"x"}, Rule: pointwiseRule,
	Kernel: &Kernel{Value: func(a, _ float64) float64 { return a }}, Torch: &Torch{Func: "", Rounding: Exact}}
