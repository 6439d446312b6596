package ops

import (
	"math"
	"slices"
	"strconv"
)

// A gradient rule writes an op's vector-Jacobian product as primitive
// ops, as a composite's Expand writes the composite: from the output's
// upstream gradient dy (and the op's operands and output, the saved
// activations, read as the forward computed them) to the contribution
// of each operand that needs a gradient. The IR builder runs the rules
// of a fusion's ops in reverse order when the fusion has a backward
// section (internal/ir/backward.go), and sums the contributions of a
// tensor read more than once. The formulas are torch's: each rule names
// its line of tools/autograd/derivatives.yaml (or the aten function it
// mirrors) in its comment; docs/training.md lists them.

// GradRule is an op's gradient rule. It returns the steps of the
// vector-Jacobian product — their refs: operand k of g.In is Ref(k), the
// op's output g.Y() and its upstream gradient g.DY(), step j's output
// StepOut(j) — and for each operand the Ref of its contribution, NoGrad
// where g.Need is false. A contribution may be a step's output, or dy
// itself (add, set).
type GradRule func(g *GradIn) ([]ExpandStep, []Ref, *ExpandError)

// NoGrad is the contribution of an operand that needs no gradient.
const NoGrad Ref = math.MinInt32

// GradIn is the forward op a gradient rule differentiates.
type GradIn struct {
	// In are the tensor operands' shapes (a binary op's number is Scalar)
	// and DTypes their dtypes.
	In     [][]int
	DTypes []string
	// Out is the output's shape.
	Out []int
	// Attrs are the op's attributes, positions counted from the start
	// (a composite's axis as its Expand normalizes it).
	Attrs Attrs
	// Scalar is a binary op's number operand, nil for none.
	Scalar *Scalar
	// Need says which operands need a gradient.
	Need []bool
	// Saved are, for a composite op, the names of its expansion's
	// intermediates (y/NAME), which the forward computed and a rule may
	// read: Ref len(In)+2+i is Saved[i].
	Saved []string
}

// SavedRef is the Ref of the composite's intermediate y/name.
func (g *GradIn) SavedRef(name string) Ref {
	for i, s := range g.Saved {
		if s == name {
			return Ref(len(g.In) + 2 + i)
		}
	}
	panic("ops: no intermediate " + name + " in the expansion") // a rule's bug, never an input's
}

// Y is the Ref of the op's output.
func (g *GradIn) Y() Ref { return Ref(len(g.In)) }

// DY is the Ref of the output's upstream gradient.
func (g *GradIn) DY() Ref { return Ref(len(g.In) + 1) }

// registerGrads gives the registry's ops their gradient rules: every op
// whose rule is cheap in the primitive ops. The others (scatter_add; the
// comparisons gt and eq, which torch does not differentiate) have none,
// and a backward through one is an error naming it.
func registerGrads(r *Registry) {
	rules := map[string]GradRule{
		"set": gradIdentity, "add": gradAdd, "sub": gradSub, "mul": gradMul, "div": gradDiv,
		"neg": unaryGrad(gradNeg), "square": unaryGrad(gradSquare), "sqrt": unaryGrad(gradSqrt),
		"rsqrt": unaryGrad(gradRsqrt), "exp": unaryGrad(gradExp), "log": unaryGrad(gradLog),
		"tanh": unaryGrad(gradTanh), "sigmoid": unaryGrad(gradSigmoid), "silu": unaryGrad(gradSilu),
		"reciprocal": unaryGrad(gradReciprocal),
		"sum":        gradSum, "prod": gradProd, "broadcast": gradBroadcast, "mean": gradMean, "softmax": gradSoftmax,
		"rms_norm": gradNorm(false), "layer_norm": gradNorm(true),
		"log_softmax": gradLogSoftmax, "sdpa": gradSDPA,
		"matmul": gradMatmul, "linear": gradLinear,
		"permute": gradPermute, "reshape": gradReshape, "cast": gradCast,
		"slice": gradSlice, "cat": gradCat,
		"relu": unaryGrad(gradRelu), "abs": unaryGrad(gradAbs), "maximum": gradSelect(true), "minimum": gradSelect(false),
		"max": gradExtreme, "min": gradExtreme, "gelu": unaryGrad(gradGelu), "erf": unaryGrad(gradErf), "gelu_tanh": unaryGrad(gradGeluTanh),
		"tril": gradTril, "embedding": gradEmbedding, "gather": gradGather, "cross_entropy": gradCrossEntropy,
	}
	for name, rule := range rules {
		if o := r.byName[name]; o != nil {
			o.Grad = rule
		}
	}
}

// gradBuilder builds a rule's steps and contributions.
type gradBuilder struct {
	expansion
	*GradIn
	grads []Ref
}

// newGrad is a builder of g's rule, every contribution NoGrad.
func newGrad(g *GradIn) *gradBuilder {
	b := &gradBuilder{GradIn: g, grads: make([]Ref, len(g.In))}
	for k := range b.grads {
		b.grads[k] = NoGrad
	}
	return b
}

// result returns the rule's steps and contributions.
func (b *gradBuilder) result() ([]ExpandStep, []Ref, *ExpandError) { return b.steps, b.grads, nil }

// give makes r, of the output's shape, operand k's contribution, summed
// over the axes along which the op broadcast k (extent 1 in k, more in
// the output): torch's sum_to (derivatives.yaml's handling of every
// broadcasting op).
func (b *gradBuilder) give(k int, name string, r Ref) {
	var axes []int
	for ax, e := range b.In[k] {
		if e == 1 && b.Out[ax] != 1 {
			axes = append(axes, ax)
		}
	}
	for i := len(axes) - 1; i >= 0; i-- {
		r = b.reduce(name+"_sum"+strconv.Itoa(axes[i]), "sum", r, axes[i])
	}
	if len(axes) > 0 {
		r = b.add(ExpandStep{Name: name + "_b", Op: "broadcast", In: []Ref{r}, Axes: axes, Shape: b.In[k]})
	}
	b.grads[k] = r
}

// slot is the operand index of a binary op's tensor in slot s (0 for a,
// 1 for b), false where that slot is the number.
func (b *gradBuilder) slot(s int) (int, bool) {
	switch {
	case b.Scalar == nil:
		return s, true
	case b.Scalar.Slot == s:
		return 0, false
	}
	return 0, true
}

// needs reports whether the tensor in slot s needs a gradient, and its
// operand index.
func (b *gradBuilder) needs(s int) (int, bool) {
	k, ok := b.slot(s)
	return k, ok && b.Need[k]
}

// times is dy times slot s's operand (a tensor or the number).
func (b *gradBuilder) times(name, op string, s int) Ref {
	if k, ok := b.slot(s); ok {
		return b.binary(name, op, b.DY(), Ref(k))
	}
	return b.withScalar(name, op, b.DY(), b.Scalar.Value)
}

// gradIdentity is set's rule: derivatives.yaml's "self: grad" of a copy.
func gradIdentity(g *GradIn) ([]ExpandStep, []Ref, *ExpandError) {
	b := newGrad(g)
	if g.Need[0] {
		b.grads[0] = g.DY()
	}
	return b.result()
}

// gradAdd is add's rule (derivatives.yaml add.Tensor: self: grad, other:
// grad, each summed to its shape).
func gradAdd(g *GradIn) ([]ExpandStep, []Ref, *ExpandError) {
	b := newGrad(g)
	for s, name := range []string{"da", "db"} {
		if k, ok := b.needs(s); ok {
			b.give(k, name, g.DY())
		}
	}
	return b.result()
}

// gradSub is sub's rule (sub.Tensor: self: grad, other: -grad).
func gradSub(g *GradIn) ([]ExpandStep, []Ref, *ExpandError) {
	b := newGrad(g)
	if k, ok := b.needs(0); ok {
		b.give(k, "da", g.DY())
	}
	if k, ok := b.needs(1); ok {
		b.give(k, "db", b.unary("db_neg", "neg", g.DY()))
	}
	return b.result()
}

// gradMul is mul's rule (mul.Tensor: self: grad * other, other: grad *
// self).
func gradMul(g *GradIn) ([]ExpandStep, []Ref, *ExpandError) {
	b := newGrad(g)
	for s, name := range []string{"da", "db"} {
		if k, ok := b.needs(s); ok {
			b.give(k, name, b.times(name+"_mul", "mul", 1-s))
		}
	}
	return b.result()
}

// gradDiv is div's rule (div.Tensor: self: grad / other, other: -grad *
// self / (other * other), written -grad * result / other).
func gradDiv(g *GradIn) ([]ExpandStep, []Ref, *ExpandError) {
	b := newGrad(g)
	if k, ok := b.needs(0); ok {
		b.give(k, "da", b.times("da_div", "div", 1))
	}
	if k, ok := b.needs(1); ok {
		t := b.binary("db_mul", "mul", g.DY(), g.Y())
		t = b.binary("db_div", "div", t, Ref(k))
		b.give(k, "db", b.unary("db_neg", "neg", t))
	}
	return b.result()
}

// unaryGrad is the rule of an elementwise op of one operand whose
// derivative f writes: dx from dy, x and y.
func unaryGrad(f func(b *gradBuilder, dy, x, y Ref) Ref) GradRule {
	return func(g *GradIn) ([]ExpandStep, []Ref, *ExpandError) {
		b := newGrad(g)
		if g.Need[0] {
			b.grads[0] = f(b, g.DY(), 0, g.Y())
		}
		return b.result()
	}
}

// gradNeg: neg: -grad.
func gradNeg(b *gradBuilder, dy, _, _ Ref) Ref { return b.unary("dx", "neg", dy) }

// gradSquare: square is pow(self, 2): grad * 2 * self.
func gradSquare(b *gradBuilder, dy, x, _ Ref) Ref {
	return b.withScalar("dx", "mul", b.binary("dx_mul", "mul", dy, x), 2)
}

// gradSqrt: sqrt: grad / (2 * result).
func gradSqrt(b *gradBuilder, dy, _, y Ref) Ref {
	return b.withScalar("dx", "div", b.binary("dx_div", "div", dy, y), 2)
}

// gradRsqrt: rsqrt: -0.5 * grad * result.pow(3).
func gradRsqrt(b *gradBuilder, dy, _, y Ref) Ref {
	cube := b.binary("dx_cube", "mul", b.unary("dx_square", "square", y), y)
	return b.withScalar("dx", "div", b.binary("dx_mul", "mul", dy, cube), -2)
}

// gradExp: exp: grad * result.
func gradExp(b *gradBuilder, dy, _, y Ref) Ref { return b.binary("dx", "mul", dy, y) }

// gradLog: log: grad / self.
func gradLog(b *gradBuilder, dy, x, _ Ref) Ref { return b.binary("dx", "div", dy, x) }

// gradTanh: tanh: tanh_backward(grad, result) = grad * (1 - result²).
func gradTanh(b *gradBuilder, dy, _, y Ref) Ref {
	return b.binary("dx", "mul", dy, b.oneMinus("dx_1m", b.unary("dx_square", "square", y)))
}

// gradSigmoid: sigmoid: sigmoid_backward(grad, result) = grad * result *
// (1 - result).
func gradSigmoid(b *gradBuilder, dy, _, y Ref) Ref {
	return b.binary("dx", "mul", dy, b.binary("dx_ds", "mul", y, b.oneMinus("dx_1m", y)))
}

// gradSilu: silu: silu_backward(grad, self) = grad * σ(x) * (1 + x * (1
// − σ(x))).
func gradSilu(b *gradBuilder, dy, x, _ Ref) Ref {
	s := b.unary("dx_sigmoid", "sigmoid", x)
	t := b.withScalar("dx_1p", "add", b.binary("dx_x1m", "mul", x, b.oneMinus("dx_1m", s)), 1)
	return b.binary("dx", "mul", dy, b.binary("dx_ds", "mul", s, t))
}

// gradReciprocal: reciprocal: -grad * (result * result).
func gradReciprocal(b *gradBuilder, dy, _, y Ref) Ref {
	return b.unary("dx", "neg", b.binary("dx_mul", "mul", dy, b.unary("dx_square", "square", y)))
}

// oneMinus is 1 − x.
func (b *gradBuilder) oneMinus(name string, x Ref) Ref {
	return b.add(ExpandStep{Name: name, Op: "sub", In: []Ref{x}, Scalar: &Scalar{Slot: 0, Value: 1}})
}

// backTo broadcasts x, of shape to without axis, back along axis to
// shape to.
func (b *gradBuilder) backTo(name string, x Ref, axis int, to []int) Ref {
	return b.add(ExpandStep{Name: name, Op: "broadcast", In: []Ref{x}, Axes: []int{axis}, Shape: to})
}

// gradSum is sum's rule (sum.dim_IntList: sum_backward, grad expanded
// back along the summed dim).
func gradSum(g *GradIn) ([]ExpandStep, []Ref, *ExpandError) {
	b := newGrad(g)
	if g.Need[0] {
		b.grads[0] = b.backTo("dx", g.DY(), g.Attrs.Axis, g.In[0])
	}
	return b.result()
}

// gradMean is mean's rule (mean.dim: mean_backward, grad expanded back
// and divided by the dim's extent).
func gradMean(g *GradIn) ([]ExpandStep, []Ref, *ExpandError) {
	b := newGrad(g)
	if g.Need[0] {
		ax := g.Attrs.Axis
		d := b.withScalar("dx_div", "div", g.DY(), float64(g.In[0][ax]))
		b.grads[0] = b.backTo("dx", d, ax, g.In[0])
	}
	return b.result()
}

// gradBroadcast is broadcast's rule (expand: at::sum_to(grad, self's
// size)): the sum over the new axes, the last first.
func gradBroadcast(g *GradIn) ([]ExpandStep, []Ref, *ExpandError) {
	b := newGrad(g)
	if g.Need[0] {
		r := g.DY()
		for i := len(g.Attrs.Axes) - 1; i >= 0; i-- {
			r = b.reduce("dx_sum"+strconv.Itoa(g.Attrs.Axes[i]), "sum", r, g.Attrs.Axes[i])
		}
		b.grads[0] = r
	}
	return b.result()
}

// gradSoftmax is softmax's rule (_softmax: _softmax_backward_data(grad,
// result, dim) = result * (grad − Σ grad * result along dim)).
func gradSoftmax(g *GradIn) ([]ExpandStep, []Ref, *ExpandError) {
	b := newGrad(g)
	if g.Need[0] {
		ax := g.Attrs.Axis
		delta := b.reduce("dx_sum", "sum", b.binary("dx_dyy", "mul", g.DY(), g.Y()), ax)
		b.grads[0] = b.softmaxBack("dx", g.Y(), g.DY(), delta, ax)
	}
	return b.result()
}

// softmaxBack is the gradient of the scores of probabilities p =
// softmax(scores) along axis, from the probabilities' gradient dp and
// delta = Σ_axis dp·p (one value per row, the axis reduced): p · (dp −
// delta). It is the one piece that softmax, sdpa (whose delta is flash
// attention's rowsum(dO·O)) and a masked softmax share: masked scores
// have p = 0, and so gradient 0, whatever the mask.
func (b *gradBuilder) softmaxBack(name string, p, dp, delta Ref, axis int) Ref {
	sub := b.binary(name+"_sub", "sub", dp, b.back(name+"_sum_b", delta, axis))
	return b.binary(name, "mul", p, sub)
}

// gradPermute is permute's rule (permute: grad permuted by the inverse
// of dims).
func gradPermute(g *GradIn) ([]ExpandStep, []Ref, *ExpandError) {
	b := newGrad(g)
	if g.Need[0] {
		dims := g.Attrs.Values.Ints(AttrDims)
		inv := make([]int, len(dims))
		for j, d := range dims {
			inv[(d+len(dims))%max(len(dims), 1)] = j
		}
		b.grads[0] = b.permute("dx", g.DY(), inv)
	}
	return b.result()
}

// gradReshape is reshape's rule (reshape/view: grad reshaped to self's
// size).
func gradReshape(g *GradIn) ([]ExpandStep, []Ref, *ExpandError) {
	b := newGrad(g)
	if g.Need[0] {
		b.grads[0] = b.reshape("dx", g.DY(), g.In[0])
	}
	return b.result()
}

// gradCast is cast's rule (_to_copy: grad converted back to self's
// dtype).
func gradCast(g *GradIn) ([]ExpandStep, []Ref, *ExpandError) {
	b := newGrad(g)
	if g.Need[0] {
		b.grads[0] = b.add(ExpandStep{Name: "dx", Op: "cast", In: []Ref{g.DY()}, Values: Values{{Key: AttrDType, Str: g.DTypes[0]}}})
	}
	return b.result()
}

// permute is x with its dims in order dims.
func (b *gradBuilder) permute(name string, x Ref, dims []int) Ref {
	return b.add(ExpandStep{Name: name, Op: "permute", In: []Ref{x}, Values: Values{{Key: AttrDims, Ints: dims}}})
}

// reshape is x in shape.
func (b *gradBuilder) reshape(name string, x Ref, shape []int) Ref {
	return b.add(ExpandStep{Name: name, Op: "reshape", In: []Ref{x}, Values: Values{{Key: AttrShape, Ints: shape}}})
}

// transpose swaps the last two dims of x, of rank rank.
func (b *gradBuilder) transpose(name string, x Ref, rank int) Ref {
	dims := make([]int, rank)
	for d := range dims {
		dims[d] = d
	}
	dims[rank-2], dims[rank-1] = rank-1, rank-2
	return b.permute(name, x, dims)
}

// gradMatmul is matmul's rule (matmul: matmul_backward: grad_a = grad @
// bᵀ, grad_b = aᵀ @ grad, a 2-D b's gradient summed over a's batch
// dims). The batch products are summed after the matmul rather than
// their dims merged first: a merge of dims split over two mesh axes
// would need a resharding.
func gradMatmul(g *GradIn) ([]ExpandStep, []Ref, *ExpandError) {
	b := newGrad(g)
	a, bs := g.In[0], g.In[1]
	if g.Need[0] {
		b.grads[0] = b.binary("da", "matmul", g.DY(), b.transpose("da_bt", 1, len(bs)))
	}
	if g.Need[1] {
		db := b.binary("db_mm", "matmul", b.transpose("db_at", 0, len(a)), g.DY())
		b.grads[1] = b.leading("db", db, len(a), len(bs))
	}
	return b.result()
}

// gradLinear is linear's rule (linear: linear_backward: grad_x = grad @
// w, grad_w = gradᵀ @ x and grad_bias = grad, summed over the leading
// dims; a vector x is one row).
func gradLinear(g *GradIn) ([]ExpandStep, []Ref, *ExpandError) {
	b := newGrad(g)
	x, dy, rank := Ref(0), g.DY(), len(g.In[0])
	if rank == 1 {
		x, dy, rank = b.reshape("x2", 0, []int{1, g.In[0][0]}), b.reshape("dy2", g.DY(), []int{1, g.Out[0]}), 2
	}
	if g.Need[0] {
		dx := b.binary("dx_mm", "matmul", dy, 1)
		if len(g.In[0]) == 1 {
			dx = b.reshape("dx", dx, g.In[0])
		}
		b.grads[0] = dx
	}
	if g.Need[1] {
		dw := b.binary("dw_mm", "matmul", b.transpose("dw_dyt", dy, rank), x)
		b.grads[1] = b.leading("dw", dw, rank, 2)
	}
	if len(g.Need) > 2 && g.Need[2] {
		b.grads[2] = b.leading("dbias", dy, rank, 1)
	}
	return b.result()
}

// gradNorm is the rule of rms_norm (centred false) and layer_norm over
// the last axis, in closed form as torch's native_layer_norm_backward
// and rms_norm's backward write it, from the forward's saved x̂ (y/norm)
// and r = rsqrt(var + eps) (y/rsqrt_b): dx̂ = dy · weight; dx = r · (dx̂
// − mean(dx̂) − x̂ · mean(dx̂ · x̂)), without the mean(dx̂) term for
// rms_norm; dweight = Σ dy · x̂ and dbias = Σ dy over the leading axes.
func gradNorm(centred bool) GradRule {
	return func(g *GradIn) ([]ExpandStep, []Ref, *ExpandError) {
		b := newGrad(g)
		rank := len(g.In[0])
		axis, n := rank-1, float64(g.In[0][rank-1])
		xh := g.Y()
		if len(g.In) > 1 {
			xh = g.SavedRef("norm")
		}
		if g.Need[0] {
			dxh := g.DY()
			if len(g.In) > 1 {
				w := Ref(1)
				if rank > 1 {
					w = g.SavedRef("weight")
				}
				dxh = b.binary("dxh", "mul", g.DY(), w)
			}
			mean := func(name string, x Ref) Ref {
				return b.back(name+"_b", b.withScalar(name, "div", b.reduce(name+"_sum", "sum", x, axis), n), axis)
			}
			d := b.binary("dx_sub", "sub", dxh, b.binary("dx_proj", "mul", xh, mean("dx_mean_dxh_xh", b.binary("dx_dxh_xh", "mul", dxh, xh))))
			if centred {
				d = b.binary("dx_center", "sub", d, mean("dx_mean_dxh", dxh))
			}
			b.grads[0] = b.binary("dx", "mul", g.SavedRef("rsqrt_b"), d)
		}
		if len(g.In) > 1 && g.Need[1] {
			b.grads[1] = b.leading("dweight", b.binary("dweight_mul", "mul", g.DY(), xh), rank, 1)
		}
		if len(g.In) > 2 && g.Need[2] {
			b.grads[2] = b.leading("dbias", g.DY(), rank, 1)
		}
		return b.result()
	}
}

// leading sums x, of rank rank, over every axis but its last keep.
func (b *gradBuilder) leading(name string, x Ref, rank, keep int) Ref {
	for ax := rank - keep - 1; ax >= 0; ax-- {
		x = b.reduce(name+"_sum"+strconv.Itoa(ax), "sum", x, ax)
	}
	return x
}

// gradTril is tril's rule (tril: grad.tril(diagonal)): the mask is
// linear, and its own adjoint.
func gradTril(g *GradIn) ([]ExpandStep, []Ref, *ExpandError) {
	b := newGrad(g)
	if g.Need[0] {
		b.grads[0] = b.trilDiag("dx", g.DY(), g.Attrs.Values.Int(AttrDiagonal))
	}
	return b.result()
}

// gradProd is prod's rule (prod.dim_int: prod_backward): dx_i = dy ·
// Π_{j≠i} x_j along the axis, exact where x holds zeros, as torch's
// prod_safe_zeros_backward is, and never a division by x (which
// prod_backward takes only when x has no zero, and which a zero makes
// 0/0). The products of the others are read off a matrix M of the
// operand repeated along a new axis, row i being x with x_i replaced by
// 1: M = X·(1 − I) + I, with the identity I = tril(ones, 0) − tril(ones,
// −1), and Π_{j≠i} x_j is M's product along its rows. That takes n²
// values per row of n, where torch's exclusive cumulative products take
// 2n; nvcomm has no cumulative product.
func gradProd(g *GradIn) ([]ExpandStep, []Ref, *ExpandError) {
	b := newGrad(g)
	if !g.Need[0] {
		return b.result()
	}
	ax, last := g.Attrs.Axis, len(g.In[0])-1
	x, dims := Ref(0), moveLast(len(g.In[0]), ax)
	if ax != last {
		x = b.permute("dx_x_last", x, dims)
	}
	rows := make([]int, 0, last+2)
	for _, d := range dims {
		rows = append(rows, g.In[0][d])
	}
	rows = slices.Insert(rows, last, g.In[0][ax]) // [..., n (i), n (j)]
	xs := b.backTo("dx_rows", x, last, rows)
	ones := b.withScalar("dx_ones", "add", b.withScalar("dx_zeros", "mul", xs, 0), 1)
	eye := b.binary("dx_eye", "sub", b.trilDiag("dx_tril0", ones, 0), b.trilDiag("dx_tril1", ones, -1))
	m := b.binary("dx_m", "add", b.binary("dx_off", "mul", xs, b.oneMinus("dx_1meye", eye)), eye)
	others := b.reduce("dx_others", "prod", m, last+1)
	if ax != last {
		others = b.permute("dx_others_back", others, inversePerm(dims))
	}
	b.grads[0] = b.binary("dx", "mul", b.backTo("dx_dy_b", g.DY(), ax, g.In[0]), others)
	return b.result()
}

// trilDiag is x with the entries above diagonal d of its last two dims zeroed.
func (b *gradBuilder) trilDiag(name string, x Ref, d int) Ref {
	return b.add(ExpandStep{Name: name, Op: "tril", In: []Ref{x}, Values: Values{{Key: AttrDiagonal, Int: d}}})
}

// moveLast is the order of rank dims with dim ax moved last.
func moveLast(rank, ax int) []int {
	dims := make([]int, 0, rank)
	for d := range rank {
		if d != ax {
			dims = append(dims, d)
		}
	}
	return append(dims, ax)
}

// inversePerm is the permutation that undoes dims.
func inversePerm(dims []int) []int {
	inv := make([]int, len(dims))
	for j, d := range dims {
		inv[d] = j
	}
	return inv
}
