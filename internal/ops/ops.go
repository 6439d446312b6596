// Package ops is nvcomm's op registry: one entry per op of a fusion and
// of a plan, holding every fact about the op that more than one package
// needs — its name and family, its operands and attributes (each
// attribute a spec of its own: its key, kind, documentation and checks),
// its sharding rule in factors, a view op's output shape, its scalar
// kernel for the simulator, its torch function and rounding rule for the
// exported program, and its gradient rule.
//
// The parser, the plan's codec and validator, certify, auto, the
// simulator, the exporter, the random generator and the schema tests read
// the registry, so adding an elementwise op is one entry (and its
// documentation line): docs/architecture.md, "How to add an op". What an
// op of another family does to a whole tensor (how a reduction's or a
// contraction's output shape follows from its operands') is written once
// per family, in the package that needs it, keyed by [Family].
//
// The package imports nothing of nvcomm: the simulator, which must not
// share the compiler's arithmetic of shards, may read it.
package ops

import (
	"fmt"
	"slices"
	"strings"
)

// Family is the kind of computation an op performs; the parser's shape
// inference, the lowering and the simulator's reference semantics are
// written per family.
type Family int

// The families, in documentation order.
const (
	// Copy is set: the output is the input, resharded.
	Copy Family = iota
	// Reduction reduces one axis of its input ("axis") with the op's
	// combining function.
	Reduction
	// Binary applies a scalar function to elements at equal indices of
	// two operands, broadcasting extent-1 axes as torch does.
	Binary
	// Unary applies a scalar function to each element of one operand.
	Unary
	// Broadcast inserts new axes ("axes") and repeats the input along them.
	Broadcast
	// Contraction multiplies two operands and sums over a shared axis.
	Contraction
	// View moves data without computing: each output element is one
	// input element (permute, reshape), or that element converted to
	// another dtype (cast); its Shape gives the output's shape.
	View
	// Composite ops (softmax, mean, the norms) are written as primitive
	// ops by their entry's Expand, which the IR builder runs: no plan, no
	// lowering and no kernel ever sees one (composite.go).
	Composite
)

var familyNames = [...]string{"copy", "reduction", "binary", "unary", "broadcast", "contraction", "view", "composite"}

// String names the family as docs/fusion.md does.
func (f Family) String() string {
	if f < 0 || int(f) >= len(familyNames) {
		return fmt.Sprintf("Family(%d)", int(f))
	}
	return familyNames[f]
}

// Elementwise reports whether the family applies a scalar function
// elementwise (Binary and Unary).
func (f Family) Elementwise() bool { return f == Binary || f == Unary }

// Attr is a key an op takes besides its operands.
type Attr string

// The attributes of the ops.
const (
	// AttrAxis is a reduction's axis, or the axis slice and cat work
	// along: a position among its input's non-reduction axes.
	AttrAxis Attr = "axis"
	// AttrAxes are broadcast's new axes: increasing positions among its
	// output's non-reduction axes.
	AttrAxes Attr = "axes"
)

// Rounding says how an op's floating-point result may round, for the
// error bound the exported program checks its results against
// (docs/export.md, "Data and the check"): how the bound on the magnitude
// of the result (log2) and the number of roundings follow from its
// operands'.
type Rounding string

// The rounding rules of the elementwise ops. Reductions and contractions
// have their own, which depend on the summed extent.
const (
	// Exact ops never round: relu, neg, abs, copies.
	Exact Rounding = "exact"
	// Additive ops round once and may double the magnitude: add, sub.
	Additive Rounding = "additive"
	// Selecting ops return one of their operands: maximum, minimum, and
	// cat, each of whose elements is one of an operand's.
	Selecting Rounding = "selecting"
	// Multiplicative ops round once and multiply magnitudes: mul.
	Multiplicative Rounding = "multiplicative"
)

// Kernel is an elementwise op's scalar function on the simulator's exact
// values: integers, and the infinities a Pad may fill with
// (docs/simulate.md, "Exactness"). One of its fields is set. A
// unary kernel ignores b.
type Kernel struct {
	// Ring computes a ring operation (add, sub, mul, square) modulo m on
	// integers below m in magnitude (the simulator's representatives): the
	// result need only be congruent to the operation's modulo m, which the
	// simulator reduces, so that any sum or product may be split into
	// partial ones and still match the reference exactly. m is the
	// simulator's prime, or the second sort's ([ExpModulus]) for an
	// operand computed from an exp, whose products pass 2⁶³ ([MulMod]).
	Ring func(a, b, m int64) int64
	// Field computes in the integers modulo the prime p, which it is given
	// (the simulator's, or [ExpModulus] for an operand of the second
	// sort), on integers (the simulator's representatives, which the
	// kernel reduces itself); the simulator takes the result modulo p. It
	// is for what needs p itself: inverses, and the fixed maps that stand
	// in for the transcendental functions (field.go).
	Field func(a, b, p int64) int64
	// Exp maps a residue modulo the simulator's prime p to one modulo
	// [ExpModulus], a homomorphism from addition to multiplication: exp's
	// kernel ([ExpKernel]), whose result is of the second sort.
	Exp func(a, p int64) int64
	// Value computes on the values as they are.
	Value func(a, b float64) float64
}

// Torch is how the exported program computes an op with torch.
type Torch struct {
	// Func is the torch function of the op's operands ("torch.add"), a
	// Python expression that evaluates to a function.
	Func string
	// Magnitude is the function of the operands' absolute values that
	// bounds the rounding of the result (Σ|x| for sub is torch.add);
	// empty means Func itself.
	Magnitude string
	// Rounding is the elementwise op's rounding rule.
	Rounding Rounding
	// PositiveData says that the exported program can bound the op's
	// rounding only on operands away from 0 and negatives (log, sqrt,
	// rsqrt, div, reciprocal) or not large (exp): the fusions that use it
	// get simulate's positive input data (docs/simulate.md, "What it
	// does").
	PositiveData bool
}

// Op is one entry of the registry.
type Op struct {
	// Name is the op's name in fusion and plan files.
	Name string
	// Family is what kind of computation it is.
	Family Family
	// Operands names the operands in order, as docs and messages write
	// them ("x", "w", "bias"); the last Optional of them may be left out.
	Operands []string
	Optional int
	// Variadic says that the last operand may be given any number of
	// times more (cat's [a, b, ...]): the op takes len(Operands) or more.
	Variadic bool
	// Attrs are the keys it takes besides "in" and "out", each with a
	// spec ([AttrOf]); all are required.
	Attrs []Attr
	// Combine is, for a reduction, the op that combines two partial
	// results (the reduction's own name): what a Partial placement or a
	// reducing collective of this op applies.
	Combine string
	// Rule is the op's sharding rule in factors, from its operands' and
	// result's shapes (non-reduction axes) and its attributes.
	Rule func(in [][]int, out []int, a Attrs) Rule
	// Shape is, for an op of the View family, its output's shape from its
	// operands' (non-reduction) shapes and its attributes, with the
	// attributes normalized (positions counted from the start, a -1
	// inferred); an error says what is wrong.
	Shape func(in [][]int, a Attrs) ([]int, Values, *ShapeError)
	// Expand is, for a composite op, its expansion into primitive ops,
	// from its operands' (non-reduction) shapes and its attributes (Axis
	// as written, negative from the end); an error says what is wrong.
	Expand func(in [][]int, a Attrs) ([]ExpandStep, *ExpandError)
	// Kernel is an elementwise op's scalar function for the simulator.
	Kernel *Kernel
	// Indexed is, for a lookup (embedding, gather), which operand holds
	// integer indices into which operand's rows: the indices are of an
	// integer dtype, the output takes the table's dtype, and simulate and
	// export fill such an input with valid indices. Nil for other ops.
	Indexed *Indexed
	// Positional is, for an op whose output varies with an element's
	// position along some of its axes whatever its operands hold there
	// (tril's mask over its last two dims), those axes of an output of
	// rank dims. Along them the output has no broadcast axis even where
	// every operand has one: rows a broadcast made equal differ once
	// masked. Nil for other ops.
	Positional func(rank int) []int
	// Scatters is, for scatter_add, which operand holds integer indices
	// into the output's rows and which the values added there. Nil for
	// other ops.
	Scatters *Scattered
	// Torch is an elementwise or contraction op's torch function for the
	// exported program.
	Torch *Torch
	// Doc is one line for messages and docs: what the op computes.
	Doc string
	// Grad is the op's gradient rule (grad.go), nil for an op without
	// one: the vector-Jacobian products that a fusion's backward section
	// appends for it.
	Grad GradRule
	// PassesSums says that the op of sums is the sum of the op of their
	// terms, f(Σᵢ aᵢ, Σᵢ bᵢ) = Σᵢ f(aᵢ, bᵢ): add, sub and neg. Such an op
	// reads pending Partial(sum) terms and writes pending terms, as
	// DTensor's linear pointwise ops keep Partial(sum), so that one
	// reduction after it serves every operand.
	PassesSums bool
	// Constant says that the op's output is a selection, constant almost
	// everywhere in its operands (a 0/1 mask: moe_topk, moe_dispatch): no
	// gradient flows through it, as none flows through torch.topk's
	// indices, and the backward reads it as a constant.
	Constant bool
}

// MaxOperands is the most operands a variadic op takes: far above any
// real program's, and small enough that counts derived from it never
// overflow.
const MaxOperands = 1 << 16

// Arity returns the fewest and the most operands the op takes; the most
// is MaxOperands for a variadic op.
func (o *Op) Arity() (lo, hi int) {
	if o.Variadic {
		return len(o.Operands), MaxOperands
	}
	return len(o.Operands) - o.Optional, len(o.Operands)
}

// TakesOperands reports whether the op takes n operands.
func (o *Op) TakesOperands(n int) bool {
	lo, hi := o.Arity()
	return n >= lo && n <= hi
}

// ArityText says how many operands the op takes, for messages: "1
// input", "2 inputs", "2 or 3 inputs", "2 or more inputs".
func (o *Op) ArityText() string {
	lo, hi := o.Arity()
	switch {
	case o.Variadic:
		return fmt.Sprintf("%d or more inputs", lo)
	case lo != hi:
		return fmt.Sprintf("%d or %d inputs", lo, hi)
	case lo == 1:
		return "1 input"
	}
	return fmt.Sprintf("%d inputs", lo)
}

// OperandList names the operands as docs write them: "one tensor", "[a,
// b]", "[x, w] or [x, w, bias]", or "[a, b, ...]".
func (o *Op) OperandList() string {
	lo, hi := o.Arity()
	list := func(n int) string { return "[" + strings.Join(o.Operands[:n], ", ") + "]" }
	switch {
	case o.Variadic:
		return strings.TrimSuffix(list(lo), "]") + ", ...]"
	case hi == 1:
		return "one tensor"
	case lo == hi:
		return list(hi)
	}
	return list(lo) + " or " + list(hi)
}

// Takes reports whether the op takes attribute a.
func (o *Op) Takes(a Attr) bool { return slices.Contains(o.Attrs, a) }

// Attrs are an op's attribute values, for its rule.
type Attrs struct {
	// Axis is a reduction's axis, or slice's and cat's, -1 for other ops.
	Axis int
	// Axes are broadcast's new axes, nil for other ops.
	Axes []int
	// Values are the op's other attributes.
	Values Values
}

// Registry is a list of ops by name.
type Registry struct {
	ops    []*Op
	byName map[string]*Op
}

// Lookup returns the op called name, or nil.
func (r *Registry) Lookup(name string) *Op { return r.byName[name] }

// All returns the ops in documentation order. The slice is the caller's.
func (r *Registry) All() []*Op { return slices.Clone(r.ops) }

// Names returns the ops' names in documentation order, a new slice.
func (r *Registry) Names() []string {
	names := make([]string, len(r.ops))
	for i, o := range r.ops {
		names[i] = o.Name
	}
	return names
}

// Family returns the names of the ops of family f in documentation
// order, a new slice.
func (r *Registry) Family(f Family) []string {
	var names []string
	for _, o := range r.ops {
		if o.Family == f {
			names = append(names, o.Name)
		}
	}
	return names
}

// Register adds an op. It is for programs and tests that extend nvcomm
// with an op before they use the registry (an init function, TestMain):
// the registry is read without locks.
func (r *Registry) Register(o Op) error {
	switch {
	case o.Name == "" || r.byName[o.Name] != nil:
		return fmt.Errorf("op %q: empty or registered already", o.Name)
	case len(o.Operands) == 0 || o.Optional < 0 || o.Optional >= len(o.Operands):
		return fmt.Errorf("op %q: needs at least one operand that is not optional", o.Name)
	case (o.Family == Composite) != (o.Expand != nil):
		return fmt.Errorf("op %q: a composite op, and only a composite op, has an Expand", o.Name)
	case o.Variadic && o.Optional > 0:
		return fmt.Errorf("op %q: a variadic op has no optional operands", o.Name)
	case o.Rule == nil && o.Family != Composite:
		return fmt.Errorf("op %q: has no sharding rule", o.Name)
	case (o.Family == View) != (o.Shape != nil):
		return fmt.Errorf("op %q: a view op, and only a view op, has a Shape", o.Name)
	case slices.ContainsFunc(o.Attrs, func(a Attr) bool { return AttrOf(string(a)) == nil }):
		return fmt.Errorf("op %q: takes an attribute the registry has no spec of", o.Name)
	case o.Family.Elementwise() && (o.Kernel == nil || o.Kernel.count() != 1 || o.Torch == nil):
		return fmt.Errorf("op %q: an elementwise op needs a kernel (one function) and a torch function", o.Name)
	case o.Family == Unary && len(o.Operands) != 1, o.Family == Binary && len(o.Operands) != 2:
		return fmt.Errorf("op %q: a %s op takes %s operands", o.Name, o.Family, map[Family]string{Unary: "one", Binary: "two"}[o.Family])
	}
	entry := o
	entry.Operands, entry.Attrs = slices.Clone(o.Operands), slices.Clone(o.Attrs)
	r.ops = append(r.ops, &entry)
	r.byName[o.Name] = &entry
	return nil
}

// MustRegister is Register for the built-in ops and tests: it panics on
// an entry Register refuses.
func (r *Registry) MustRegister(o Op) {
	if err := r.Register(o); err != nil {
		panic(err)
	}
}

// Default is the registry nvcomm reads: the ops of docs/fusion.md.
var Default = builtins()

// Lookup returns the op of the default registry called name, or nil.
func Lookup(name string) *Op { return Default.Lookup(name) }

// Names returns the names of the default registry's ops in documentation
// order, a new slice.
func Names() []string { return Default.Names() }

// PlanNames returns the names of the default registry's ops that a
// plan may hold, in documentation order: every op but the composites,
// which a plan holds expanded. A new slice.
func PlanNames() []string {
	var names []string
	for _, o := range Default.ops {
		if o.Family != Composite {
			names = append(names, o.Name)
		}
	}
	return names
}

// InPlan returns the entry of op name of the default registry when a
// plan may hold it (every op but the composites), or nil.
func InPlan(name string) *Op {
	if o := Lookup(name); o != nil && o.Family != Composite {
		return o
	}
	return nil
}

// FamilyNames returns the names of the default registry's ops of family
// f, a new slice.
func FamilyNames(f Family) []string { return Default.Family(f) }

// Is reports whether name is an op of the default registry of family f.
func Is(name string, f Family) bool {
	o := Default.Lookup(name)
	return o != nil && o.Family == f
}
