package ops

import (
	"slices"
	"strconv"
)

// A composite op (softmax, mean, rms_norm, layer_norm; sdpa, sdpa.go) is written as
// primitive ops, as nvFuser itself builds softmax and the norms from
// max, sub, exp, sum and div (csrc/ops/normalization.cpp): its entry
// holds no sharding rule and no kernel but an Expand, which the IR
// builder runs when it builds the op, so that propagation, the lowering
// under both policies, certify, auto and the resharding planner see only
// primitive ops. Over a sharded axis the expansion's reductions are the
// small Allreduces of the row statistics (Megatron's vocab-parallel
// softmax: one of the maximum, one of the sum of exponentials); over an
// unsharded axis (sequence parallelism) nothing moves.

// AttrEps is the norms' epsilon, added to the variance (or mean square)
// before its inverse square root.
const AttrEps Attr = "eps"

// Expansion step operands: Ref k >= 0 is the composite's operand k, and
// Ref -1-j the output of step j.
type Ref int

// StepOut is the Ref of step j's output.
func StepOut(j int) Ref { return Ref(-1 - j) }

// Operand reports whether r is one of the composite's operands, and which.
func (r Ref) Operand() (int, bool) { return int(r), r >= 0 }

// Step reports the step whose output r is.
func (r Ref) Step() int { return int(-1 - r) }

// ExpandStep is one primitive op of a composite's expansion: op Op of
// operands In (and Scalar), over Axis for a reduction; a broadcast
// inserts extent-1 axes at Axes (the binary ops then repeat them, as
// torch broadcasts); a view takes its other attributes from Attrs (a
// permute's dims). Its output is the composite's intermediate "y/Name"
// (y the composite's output), or y itself for the last step.
type ExpandStep struct {
	Name   string
	Op     string
	In     []Ref
	Axis   int
	Axes   []int
	Attrs  Values
	Scalar *Scalar
}

// ExpandError says why a composite cannot be expanded: at attribute
// Attr (its entry Index, or -1), or with Attr "" at operand Index; Msg
// and a Hint.
type ExpandError = ShapeError

// registerComposites adds the composite ops.
func registerComposites(r *Registry) {
	for _, c := range []Op{
		{Name: "softmax", Operands: []string{"x"}, Attrs: []Attr{AttrAxis}, Expand: expandSoftmax,
			Doc: "exp(x − max) / Σ exp(x − max) along one axis, torch.softmax"},
		{Name: "mean", Operands: []string{"x"}, Attrs: []Attr{AttrAxis}, Expand: expandMean,
			Doc: "the mean over one axis, torch.mean"},
		{Name: "rms_norm", Operands: []string{"x", "weight"}, Optional: 1, Attrs: []Attr{AttrAxes, AttrEps}, Expand: expandNorm(false),
			Doc: "x · rsqrt(mean(x²) + eps) (· weight) over the last axis, torch.nn.functional.rms_norm"},
		{Name: "layer_norm", Operands: []string{"x", "weight", "bias"}, Optional: 2, Attrs: []Attr{AttrAxes, AttrEps},
			Expand: expandNorm(true),
			Doc:    "(x − mean) · rsqrt(var + eps) (· weight) (+ bias) over the last axis, torch.nn.functional.layer_norm"},
	} {
		c.Family = Composite
		r.MustRegister(c)
	}
	registerSDPA(r)
}

// expansion builds a composite's steps, each step's output named for
// later steps by its Ref.
type expansion struct{ steps []ExpandStep }

// add appends a step and returns its output.
func (e *expansion) add(s ExpandStep) Ref {
	e.steps = append(e.steps, s)
	return StepOut(len(e.steps) - 1)
}

// reduce is op over axis.
func (e *expansion) reduce(name, op string, x Ref, axis int) Ref {
	return e.add(ExpandStep{Name: name, Op: op, In: []Ref{x}, Axis: axis})
}

// unary is op of x.
func (e *expansion) unary(name, op string, x Ref) Ref {
	return e.add(ExpandStep{Name: name, Op: op, In: []Ref{x}})
}

// binary is op of a and b.
func (e *expansion) binary(name, op string, a, b Ref) Ref {
	return e.add(ExpandStep{Name: name, Op: op, In: []Ref{a, b}})
}

// withScalar is op of x and the number c, x in slot 0.
func (e *expansion) withScalar(name, op string, x Ref, c float64) Ref {
	return e.add(ExpandStep{Name: name, Op: op, In: []Ref{x}, Scalar: &Scalar{Slot: 1, Value: c}})
}

// back broadcasts x, reduced over axis, back to extent 1 there.
func (e *expansion) back(name string, x Ref, axis int) Ref {
	return e.add(ExpandStep{Name: name, Op: "broadcast", In: []Ref{x}, Axes: []int{axis}})
}

// mean is the mean of x over axis of extent n, broadcast back.
func (e *expansion) mean(name string, x Ref, axis, n int) Ref {
	s := e.reduce(name+"_sum", "sum", x, axis)
	return e.withScalar(name, "div", s, float64(n))
}

// affine multiplies by operand weight and adds operand bias, each
// broadcast over the leading axes of a rank-rank x, where given
// (operand index < count).
func (e *expansion) affine(x Ref, rank, count, weight, bias int) Ref {
	lead := make([]int, rank-1)
	for k := range lead {
		lead[k] = k
	}
	if weight < count {
		if rank > 1 {
			x = e.binary("scaled", "mul", x, e.add(ExpandStep{Name: "weight", Op: "broadcast", In: []Ref{Ref(weight)}, Axes: lead}))
		} else {
			x = e.binary("scaled", "mul", x, Ref(weight))
		}
	}
	if bias < count {
		if rank > 1 {
			x = e.binary("shifted", "add", x, e.add(ExpandStep{Name: "bias", Op: "broadcast", In: []Ref{Ref(bias)}, Axes: lead}))
		} else {
			x = e.binary("shifted", "add", x, Ref(bias))
		}
	}
	return x
}

// done returns the steps, the last one's output renamed as the
// composite's own.
func (e *expansion) done() []ExpandStep {
	e.steps[len(e.steps)-1].Name = ""
	return e.steps
}

// expandSoftmax is softmax(x, axis): m = max(x); e = exp(x − m); e / Σe.
var expandSoftmax = alongAxis(func(e *expansion, _, ex Ref, axis int) { e.normalize(ex, axis, "div") })

// alongAxis is the Expand of a composite over one axis of its operand
// x (softmax, log_softmax): softmax's head (shiftedExp), then what tail
// writes of x − max and its exp.
func alongAxis(tail func(e *expansion, sub, ex Ref, axis int)) func(in [][]int, a Attrs) ([]ExpandStep, *ExpandError) {
	return func(in [][]int, a Attrs) ([]ExpandStep, *ExpandError) {
		axis, err := oneAxis(in[0], a.Axis, AttrAxis)
		if err != nil {
			return nil, err
		}
		var e expansion
		sub, ex := e.shiftedExp(0, axis)
		tail(&e, sub, ex, axis)
		return e.done(), nil
	}
}

// shiftedExp is the head that softmax, log_softmax and cross_entropy
// share: x − max(x) along axis (the max broadcast back) and its exp, so
// that no exponential overflows; over an axis split across devices the
// max is the one small Allreduce of the row maxima.
func (e *expansion) shiftedExp(x Ref, axis int) (sub, ex Ref) {
	m := e.back("max_b", e.reduce("max", "max", x, axis), axis)
	sub = e.binary("sub", "sub", x, m)
	return sub, e.unary("exp", "exp", sub)
}

// softmax is softmax(x, axis), its quotient named name: the softmax
// composite's expansion, which sdpa's scores take too.
func (e *expansion) softmax(x Ref, axis int, name string) Ref {
	_, ex := e.shiftedExp(x, axis)
	return e.normalize(ex, axis, name)
}

// normalize is ex / Σ ex along axis, the quotient named name.
func (e *expansion) normalize(ex Ref, axis int, name string) Ref {
	return e.binary(name, "div", ex, e.back("sum_b", e.reduce("sum", "sum", ex, axis), axis))
}

// expandMean is mean(x, axis) = sum(x, axis) / n, n the axis's extent.
func expandMean(in [][]int, a Attrs) ([]ExpandStep, *ExpandError) {
	axis, err := oneAxis(in[0], a.Axis, AttrAxis)
	if err != nil {
		return nil, err
	}
	var e expansion
	e.mean("mean", 0, axis, in[0][axis])
	return e.done(), nil
}

// expandNorm is the Expand of a norm over x's last axis: (x − μ) ·
// rsqrt(mean((x − μ)²) + eps) (· weight) (+ bias), μ = mean(x) when
// centred (layer_norm) and 0 otherwise (rms_norm: x · rsqrt(mean(x²) +
// eps) (· weight)).
func expandNorm(centred bool) func(in [][]int, a Attrs) ([]ExpandStep, *ExpandError) {
	return func(in [][]int, a Attrs) ([]ExpandStep, *ExpandError) {
		axis, err := lastAxis(in, a.Axes)
		if err != nil {
			return nil, err
		}
		eps, _ := a.Values.Get(AttrEps)
		n := in[0][axis]
		var e expansion
		c, stat := Ref(0), "mean_square"
		if centred {
			mu := e.back("mean_b", e.mean("mean", 0, axis, n), axis)
			c, stat = e.binary("centered", "sub", 0, mu), "var"
		}
		v := e.mean(stat, e.unary("square", "square", c), axis, n)
		r := e.back("rsqrt_b", e.unary("rsqrt", "rsqrt", e.withScalar("eps", "add", v, eps.Float)), axis)
		e.affine(e.binary("norm", "mul", c, r), len(in[0]), len(in), 1, 2)
		return e.done(), nil
	}
}

// oneAxis normalizes axis of a tensor of shape x (negative from the end).
func oneAxis(x []int, written int, key Attr) (int, *ExpandError) {
	axis := written
	if axis < 0 {
		axis += len(x)
	}
	if axis < 0 || axis >= len(x) {
		return 0, &ExpandError{Attr: key, Index: -1, Msg: "axis " + strconv.Itoa(written) + " is out of range for rank " + strconv.Itoa(len(x)),
			Hint: "an axis is among the input's axes, negative from the end"}
	}
	return axis, nil
}

// lastAxis checks a norm's axes: its input's last axis alone, and its
// weight and bias of that axis's extent.
func lastAxis(in [][]int, axes []int) (int, *ExpandError) {
	x := in[0]
	if len(x) == 0 {
		return 0, &ExpandError{Attr: AttrAxes, Index: -1, Msg: "a rank-0 tensor has no axis to normalize", Hint: "normalize a tensor of rank 1 or more"}
	}
	last := len(x) - 1
	if len(axes) != 1 || (axes[0] != last && axes[0] != -1) {
		return 0, &ExpandError{Attr: AttrAxes, Index: -1, Msg: "normalizes " + intText(axes) + ", but only the last axis is supported",
			Hint: "write axes: [-1]; to normalize other axes, permute them last, or write the statistics with sum, div and rsqrt"}
	}
	for k, p := range in[1:] {
		if !slices.Equal(p, x[last:]) {
			return 0, &ExpandError{Attr: "", Index: k + 1, Msg: "has shape " + intText(p) + ", want " + intText(x[last:]) + " (the normalized axis's extent)",
				Hint: "weight and bias are vectors over the normalized axis"}
		}
	}
	return last, nil
}
