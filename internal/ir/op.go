package ir

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/nvcomm/nvcomm/internal/diag"
	"github.com/nvcomm/nvcomm/internal/shard"
)

// OpKind is the operation an op performs.
type OpKind string

// The ops of format 1: a copy, the reductions over one axis, the elementwise
// ops (binary, then unary), the insertion of new axes, and the contractions
// (docs/fusion.md, "ops").
const (
	OpSet  OpKind = "set"
	OpSum  OpKind = "sum"
	OpProd OpKind = "prod"
	OpMax  OpKind = "max"
	OpMin  OpKind = "min"

	OpAdd     OpKind = "add"
	OpSub     OpKind = "sub"
	OpMul     OpKind = "mul"
	OpMaximum OpKind = "maximum"
	OpMinimum OpKind = "minimum"

	OpRelu OpKind = "relu"
	OpNeg  OpKind = "neg"
	OpAbs  OpKind = "abs"

	OpBroadcast OpKind = "broadcast"

	OpMatmul OpKind = "matmul"
	OpLinear OpKind = "linear"
)

// OpNames lists the op kinds in documentation order.
var OpNames = shard.OpNames

// opFamilies lists the ops by family, for the message of an unknown op:
// "set; reductions sum, prod, max, min; elementwise add, ...".
func opFamilies() string {
	return "set; reductions " + strings.Join(shard.ReduceOps, ", ") +
		"; elementwise " + strings.Join(slices.Concat(shard.BinaryOps, shard.UnaryOps), ", ") +
		"; broadcast; contractions " + strings.Join(shard.Contractions, ", ")
}

// unknownOpHint is the hint for an unknown op name: the op it misspells,
// when it is a likely typo of one, and otherwise where the ops are
// described. A name of another framework's op (gelu, div) is never taken
// for a typo of one of nvcomm's that reads alike (relu, min): that would
// propose an op of another meaning.
func unknownOpHint(name string) string {
	if !slices.Contains(otherOps, strings.ToLower(name)) {
		if op := diag.Typo(name, OpNames); op != "" {
			return fmt.Sprintf("did you mean %q?", op)
		}
	}
	return "docs/fusion.md (\"ops\") describes what each op does"
}

// otherOps are names of ops of PyTorch (torch and torch.nn.functional) and
// nvFuser that nvcomm does not have, with common spellings of them.
var otherOps = []string{
	// elementwise
	"div", "divide", "true_divide", "floor_divide", "remainder", "mod", "fmod", "pow", "exp", "exp2", "expm1",
	"log", "log2", "log10", "log1p", "sqrt", "rsqrt", "reciprocal", "square", "sin", "cos", "tan", "tanh",
	"sinh", "cosh", "asin", "acos", "atan", "atan2", "erf", "erfc", "sigmoid", "gelu", "silu", "swish", "selu",
	"elu", "celu", "mish", "softplus", "hardtanh", "leaky_relu", "relu6", "prelu", "clamp", "clip", "floor",
	"ceil", "round", "trunc", "sign", "where", "lerp", "eq", "ne", "lt", "le", "gt", "ge", "not", "and", "or",
	"xor", "cast", "to",
	// reductions
	"mean", "var", "std", "argmax", "argmin", "amax", "amin", "logsumexp", "norm", "any", "all", "cumsum", "cumprod",
	// layers
	"softmax", "log_softmax", "layer_norm", "layernorm", "rms_norm", "rmsnorm", "batch_norm", "dropout",
	"embedding", "conv", "conv1d", "conv2d", "bmm", "mm", "einsum", "sdpa", "attention",
	// shapes and data movement
	"reshape", "view", "transpose", "permute", "squeeze", "unsqueeze", "expand", "cat", "concat", "stack",
	"split", "chunk", "slice", "pad", "gather", "scatter", "index_select", "flatten", "repeat",
}

// reductionNames are the ops a reduction (or a Partial placement) combines
// values with.
var reductionNames = shard.ReduceOps

// IsReduction reports whether k reduces one axis of its input (sum, prod,
// max, min). The contractions also sum over an axis but are not reductions
// in this sense: they have no Axis and two or three operands.
func (k OpKind) IsReduction() bool {
	return k == OpSum || k == OpProd || k == OpMax || k == OpMin
}

// IsElementwise reports whether k applies a function to elements at equal
// indices of its operands: the binary add, sub, mul, maximum, minimum and
// the unary relu, neg, abs.
func (k OpKind) IsElementwise() bool { return k.isBinary() || k.isUnary() }

// IsContraction reports whether k multiplies two operands and sums over
// their shared axis k: matmul and linear.
func (k OpKind) IsContraction() bool { return k == OpMatmul || k == OpLinear }

func (k OpKind) isBinary() bool {
	return k == OpAdd || k == OpSub || k == OpMul || k == OpMaximum || k == OpMinimum
}

func (k OpKind) isUnary() bool { return k == OpRelu || k == OpNeg || k == OpAbs }

// arity returns the fewest and the most operands k takes.
func (k OpKind) arity() (lo, hi int) {
	switch {
	case k.isBinary(), k == OpMatmul:
		return 2, 2
	case k == OpLinear:
		return 2, 3
	}
	return 1, 1
}

// operandNames names k's operands as the docs do, for messages.
func (k OpKind) operandNames() string {
	switch {
	case k.isBinary(), k == OpMatmul:
		return "[a, b]"
	case k == OpLinear:
		return "[x, w] or [x, w, bias]"
	}
	return "one tensor"
}

// Op is one operation: Out = Kind(Inputs...), over Axis for reductions and
// inserting Axes for broadcast.
type Op struct {
	Index  int // position in the fusion's (topologically sorted) op list
	Kind   OpKind
	Inputs []*Tensor // operands in order; set, reductions, unary ops and broadcast have one
	Out    *Tensor
	Axis   int // reduced axis among In()'s non-reduction logical axes; -1 for other ops
	// Axes are broadcast's new axes: positions among Out's non-reduction
	// logical axes, increasing. Nil for other ops.
	Axes []int
	Pos  diag.Pos
	// AxisPos is where Axis (or Axes) was written.
	AxisPos diag.Pos
}

// In returns the op's first (for set, reductions, unary ops and broadcast,
// only) operand.
func (o *Op) In() *Tensor { return o.Inputs[0] }

// Expr renders the op as a call: "b = set(a)", "b = sum(a, axis=0)",
// "c = add(a, b)", "y = linear(x, w, bias)", "w = broadcast(v, axes=[0])".
func (o *Op) Expr() string {
	// Built by concatenation: the lowering names every op of a fusion,
	// and fmt's formatting was a tenth of that.
	var b strings.Builder
	b.Grow(len(o.Out.Name) + len(o.Kind) + 16*len(o.Inputs) + 8)
	b.WriteString(o.Out.Name)
	b.WriteString(" = ")
	b.WriteString(string(o.Kind))
	b.WriteByte('(')
	for i, t := range o.Inputs {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(t.Name)
	}
	switch {
	case o.Kind.IsReduction():
		b.WriteString(", axis=")
		b.WriteString(strconv.Itoa(o.Axis))
	case o.Kind == OpBroadcast:
		b.WriteString(", axes=")
		b.WriteString(fmtShape(o.Axes))
	}
	b.WriteByte(')')
	return b.String()
}

// InputAxis maps a dimension of the output to a dimension of input i: for
// outAxis, a position among Out's non-reduction logical axes, it returns
// the position among Inputs[i]'s non-reduction logical axes whose index
// equals outAxis's in every element the op computes, or -1 when there is
// none. The lowering uses it to find which input axes a sharding of the
// output cuts.
//
//   - set: the same axis.
//   - reductions: the input's axes without Axis, in order (output axis j is
//     input axis j before Axis and j+1 from it on).
//   - elementwise: the same axis, or -1 where input i has extent 1 and the
//     output more: the operand is broadcast along it, every output index
//     reads its one element.
//   - broadcast: -1 for the new axes (Axes); the others are the input's
//     axes in order.
//   - matmul, output [...batch, m, n]: a maps batch and m to themselves and
//     n to -1; b maps n to its last axis, m to -1, and batch to itself when
//     it has a's rank (-1 when b is 2-D and shared by every batch).
//   - linear, output [..., n]: x maps ... to itself and n to -1; w and bias
//     map n to their axis 0 and the rest to -1.
//
// The contracted axis k is not an output dimension (it is Out's trailing
// reduction axis); [Op.ContractedAxis] gives it. Out-of-range arguments
// give -1.
func (o *Op) InputAxis(i, outAxis int) int {
	if i < 0 || i >= len(o.Inputs) || outAxis < 0 || outAxis >= len(o.Out.Shape()) {
		return -1
	}
	in := o.Inputs[i].Shape()
	a := -1
	switch {
	case o.Kind == OpSet:
		a = outAxis
	case o.Kind.IsReduction():
		a = outAxis
		if outAxis >= o.Axis {
			a++
		}
	case o.Kind.IsElementwise():
		if outAxis < len(in) && (in[outAxis] != 1 || o.Out.Shape()[outAxis] == 1) {
			a = outAxis
		}
	case o.Kind == OpBroadcast:
		if !slices.Contains(o.Axes, outAxis) {
			a = outAxis - countBelow(o.Axes, outAxis)
		}
	case o.Kind == OpMatmul:
		a = matmulAxis(i, outAxis, len(o.Out.Shape()), len(in))
	case o.Kind == OpLinear:
		a = linearAxis(i, outAxis, len(o.Out.Shape()))
	}
	if a >= len(in) {
		return -1
	}
	return a
}

// matmulAxis is InputAxis for matmul, whose output has outRank dimensions
// [...batch, m, n] and whose operand i has rank inRank.
func matmulAxis(i, outAxis, outRank, inRank int) int {
	n, m := outRank-1, outRank-2
	switch {
	case i == 0 && outAxis != n:
		return outAxis // batch and m
	case i == 1 && outAxis == n:
		return inRank - 1
	case i == 1 && outAxis < m && inRank == outRank:
		return outAxis // batch, when b has batch axes of its own
	}
	return -1
}

// linearAxis is InputAxis for linear, whose output has outRank dimensions
// [..., n].
func linearAxis(i, outAxis, outRank int) int {
	n := outRank - 1
	switch {
	case i == 0 && outAxis != n:
		return outAxis
	case i > 0 && outAxis == n:
		return 0 // w's and bias's n
	}
	return -1
}

// countBelow counts the entries of sorted less than x.
func countBelow(sorted []int, x int) int {
	n, _ := slices.BinarySearch(sorted, x)
	return n
}

// ContractedAxis returns, for a contraction, the position among input i's
// non-reduction logical axes of the axis k that the op sums over: a's last
// and b's second-to-last for matmul, x's last and w's axis 1 for linear.
// It is -1 for linear's bias, which is added after the sum, for ops that
// are not contractions and for an out-of-range i.
func (o *Op) ContractedAxis(i int) int {
	if i < 0 || i >= len(o.Inputs) {
		return -1
	}
	rank := len(o.Inputs[i].Shape())
	switch {
	case o.Kind == OpMatmul && i == 0, o.Kind == OpLinear && i == 0:
		return rank - 1
	case o.Kind == OpMatmul && i == 1:
		return rank - 2
	case o.Kind == OpLinear && i == 1:
		return 1
	}
	return -1
}
