package ir

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/nvcomm/nvcomm/internal/diag"
	"github.com/nvcomm/nvcomm/internal/ops"
)

// OpKind is the operation an op performs: the name of its entry in the op
// registry (package ops), which holds every fact about it.
type OpKind string

// The ops the compiler itself writes or singles out (docs/fusion.md,
// "ops"); the registry has them all.
const (
	OpSet        OpKind = "set"
	OpSum        OpKind = "sum"
	OpProd       OpKind = "prod"
	OpMax        OpKind = "max"
	OpMin        OpKind = "min"
	OpAdd        OpKind = "add"
	OpBroadcast  OpKind = "broadcast"
	OpMatmul     OpKind = "matmul"
	OpLinear     OpKind = "linear"
	OpEmbedding  OpKind = "embedding"
	OpGather     OpKind = "gather"
	OpScatterAdd OpKind = "scatter_add"
	OpPermute    OpKind = "permute"
	OpReshape    OpKind = "reshape"
	OpCast       OpKind = "cast"
	OpTril       OpKind = "tril"
)

// Entry returns k's entry in the op registry, or nil for a name it does
// not have.
func (k OpKind) Entry() *ops.Op { return ops.Lookup(string(k)) }

// family is k's family, or -1 for an op the registry does not have.
func (k OpKind) family() ops.Family {
	if e := k.Entry(); e != nil {
		return e.Family
	}
	return -1
}

// UnknownOp reports into errs that name, written at pos, is no op of the
// registry, with the ops it might have meant.
func UnknownOp(errs *diag.Collector, pos diag.Pos, what, name string) {
	errs.AddHint(pos, unknownOpHint(name), "%s: unknown op %q (ops are: %s)", what, name, opFamilies())
}

// opFamilies lists the ops by family, for the message of an unknown op:
// "set; reductions sum, prod, max, min; elementwise add, ...".
func opFamilies() string {
	return "set; reductions " + strings.Join(ops.FamilyNames(ops.Reduction), ", ") +
		"; elementwise " + strings.Join(slices.Concat(ops.FamilyNames(ops.Binary), ops.FamilyNames(ops.Unary)), ", ") +
		"; broadcast; contractions " + strings.Join(ops.FamilyNames(ops.Contraction), ", ") +
		"; data movement " + strings.Join(ops.FamilyNames(ops.View), ", ") +
		"; composite " + strings.Join(ops.FamilyNames(ops.Composite), ", ")
}

// unknownOpHint is the hint for an unknown op name: the op it names in
// other letters' case (GELU) or by torch's other name for it (divide),
// the op it misspells, when it is a likely typo of one, and otherwise
// where the ops are described. A name of another framework's op (selu,
// erfc) is never taken for a typo of one of nvcomm's that reads alike
// (relu, erf): that would propose an op of another meaning.
func unknownOpHint(name string) string {
	lower := strings.ToLower(name)
	if op := cmp.Or(opAliases[lower], lower); ops.Lookup(op) != nil {
		return fmt.Sprintf("did you mean %q?", op)
	}
	if !slices.Contains(otherOps, lower) {
		if op := diag.Typo(name, ops.Names()); op != "" {
			return fmt.Sprintf("did you mean %q?", op)
		}
	}
	return "docs/fusion.md (\"ops\") describes what each op does"
}

// opAliases are torch's other names of nvcomm's ops.
var opAliases = map[string]string{"divide": "div", "true_divide": "div", "swish": "silu", "multiply": "mul",
	"subtract": "sub", "negative": "neg", "absolute": "abs", "layernorm": "layer_norm", "rmsnorm": "rms_norm"}

// otherOps are names of ops of PyTorch (torch and torch.nn.functional) and
// nvFuser that nvcomm does not have, with common spellings of them.
var otherOps = []string{
	// elementwise
	"floor_divide", "remainder", "mod", "fmod", "pow", "exp2", "expm1",
	"log2", "log10", "log1p", "sin", "cos", "tan",
	"sinh", "cosh", "asin", "acos", "atan", "atan2", "erfc", "selu",
	"elu", "celu", "mish", "softplus", "hardtanh", "leaky_relu", "relu6", "prelu", "clamp", "clip", "floor",
	"ceil", "round", "trunc", "sign", "where", "lerp", "ne", "lt", "le", "ge", "not", "and", "or",
	"xor", "to",
	// reductions
	"var", "std", "argmax", "argmin", "amax", "amin", "logsumexp", "norm", "any", "all", "cumsum", "cumprod",
	// layers
	"batch_norm", "dropout",
	"conv", "conv1d", "conv2d", "bmm", "mm", "einsum", "attention",
	// shapes and data movement
	"view", "transpose", "squeeze", "unsqueeze", "expand", "concat", "stack",
	"split", "chunk", "pad", "scatter", "index_select", "flatten", "repeat",
}

// IsReduction reports whether k reduces one axis of its input (sum, prod,
// max, min). The contractions also sum over an axis but are not reductions
// in this sense: they have no Axis and two or three operands.
func (k OpKind) IsReduction() bool { return k.family() == ops.Reduction }

// IsElementwise reports whether k applies a function to elements at equal
// indices of its operands: the binary add, sub, mul, maximum, minimum and
// the unary relu, neg, abs.
func (k OpKind) IsElementwise() bool { return k.family().Elementwise() }

// IsContraction reports whether k multiplies two operands and sums over
// their shared axis k: matmul and linear.
func (k OpKind) IsContraction() bool { return k.family() == ops.Contraction }

func (k OpKind) isBinary() bool { return k.family() == ops.Binary }

// TakesAxis reports whether k takes an "axis" (a reduction's reduced
// axis, the axis slice and cat work along, the dim gather selects along):
// a plan writes it on the op.
func (k OpKind) TakesAxis() bool {
	e := k.Entry()
	return e != nil && e.Takes(ops.AttrAxis)
}

// arity returns the fewest and the most operands k takes.
func (k OpKind) arity() (lo, hi int) {
	if e := k.Entry(); e != nil {
		return e.Arity()
	}
	return 1, 1
}

// operandNames names k's operands as the docs do, for messages.
func (k OpKind) operandNames() string {
	if e := k.Entry(); e != nil {
		return e.OperandList()
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
	// Attrs are the op's other attributes (permute's dims, reshape's
	// shape, cast's dtype) in its registry entry's order; nil for an op
	// that takes none.
	Attrs ops.Values
	// Scalar is, for a binary elementwise op, the number it takes as one
	// of its operands (Inputs then holds the other); nil otherwise.
	Scalar *ops.Scalar
	// Of is, on an op that a composite op's expansion wrote, that op;
	// nil on the fusion's own ops and the lowering's.
	Of  *Composite
	Pos diag.Pos
	// Inserted is, on a set the lowering inserted, what it reshards for;
	// nil on the fusion's own ops.
	Inserted *Insertion

	// rule is Rule's, with the kind, axis and tensors it was computed
	// for: a copy of the op with other operands computes its own. Behind
	// a pointer, as most ops never ask for it: its key was 80 of the
	// struct's 216 bytes, and a fusion holds 100k ops.
	rule *ruleMemo
}

// ruleMemo is an op's rule and what it was computed for.
type ruleMemo struct {
	rule ops.Rule
	key  ruleKey
}

// Insertion says why the lowering inserted a set: to reshard operands of
// op For before it computes (Operands, the slots of For that read the
// set's output), or For's output after it (Output).
type Insertion struct {
	For      *Op
	Operands []int
	Output   bool
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
		if o.Scalar != nil && o.Scalar.Slot == i {
			b.WriteString(o.Scalar.Text())
			b.WriteString(", ")
		}
		b.WriteString(t.Name)
	}
	if o.Scalar != nil && o.Scalar.Slot >= len(o.Inputs) {
		b.WriteString(", ")
		b.WriteString(o.Scalar.Text())
	}
	if e := o.Kind.Entry(); e != nil {
		if e.Takes(ops.AttrAxis) {
			b.WriteString(", axis=")
			b.WriteString(strconv.Itoa(o.Axis))
		}
		if e.Takes(ops.AttrAxes) {
			b.WriteString(", axes=")
			b.WriteString(fmtShape(o.Axes))
		}
	}
	if len(o.Attrs) > 0 {
		b.Write(o.Attrs.AppendArgs(nil))
	}
	b.WriteByte(')')
	return b.String()
}

// Rule returns the op's sharding rule in factors (package ops), from its
// registry entry and its operands' and output's shapes (non-reduction
// axes); the zero Rule for a kind the registry does not have. It is
// computed on first use and kept, since the lowering asks for it per axis;
// an op whose kind, axis or tensors change gets a new one.
func (o *Op) Rule() *ops.Rule {
	key := o.ruleKey()
	if o.rule != nil && key == o.rule.key {
		return &o.rule.rule
	}
	m := &ruleMemo{key: key}
	if e := o.Kind.Entry(); e != nil && o.Out != nil {
		in := make([][]int, len(o.Inputs))
		for i, t := range o.Inputs {
			in[i] = t.Shape()
		}
		out := o.outShape()
		m.rule = sharedRules.rule(o.Kind, in, out, o.Axis, o.Axes, len(o.Attrs) == 0, func() ops.Rule {
			return e.Rule(in, out, ops.Attrs{Axis: o.Axis, Axes: o.Axes, Values: o.Attrs})
		})
	}
	if key.cacheable {
		o.rule = m
	}
	return &m.rule
}

// ruleTable holds the rules computed lately by what they are computed
// from, so that ops alike share their rule's lists: a rule is a function
// of the op's kind, its operands' and output's shapes and its attributes,
// and nothing changes a rule once built. The memoized rules of the
// layer ops of a file of 100k ops were a tenth of what was live while it
// was parsed and lowered (docs/performance.md). It is bounded (emptied
// when full), and safe for concurrent use.
type ruleTable struct {
	mu  sync.Mutex
	by  map[string]ops.Rule
	key []byte
}

// ruleTableMax is the most rules a ruleTable holds.
const ruleTableMax = 1024

// sharedRules is the rules shared by every op.
var sharedRules ruleTable

// rule is the rule of an op of kind whose operands and output have shapes
// in and out, its axis and axes those given: the one computed before when
// there is one, else compute's. Only an op without other attributes (plain
// says so) shares its rule.
func (rt *ruleTable) rule(kind OpKind, in [][]int, out []int, axis int, axes []int, plain bool, compute func() ops.Rule) ops.Rule {
	if !plain {
		return compute()
	}
	rt.mu.Lock()
	defer rt.mu.Unlock()
	k := AppendKeyString(rt.key[:0], string(kind))
	k = AppendKeyLen(k, false, len(in))
	for _, s := range in {
		k = AppendKeyInts(k, s)
	}
	k = AppendKeyInts(k, out)
	k = binary.AppendVarint(k, int64(axis))
	k = AppendKeyInts(k, axes)
	rt.key = k
	if r, ok := rt.by[string(k)]; ok {
		return r
	}
	r := compute()
	if rt.by == nil || len(rt.by) >= ruleTableMax {
		rt.by = map[string]ops.Rule{}
	}
	rt.by[string(k)] = r
	return r
}

// ruleKey is what an op's rule depends on, but for the tensors' shapes,
// which never change once analyzed (and Axes, which only broadcast has and
// nothing changes).
type ruleKey struct {
	kind      OpKind
	axis      int
	attrs     *ops.Value // the first of Attrs, which are never changed in place
	out       *Tensor
	in        [4]*Tensor
	n         int
	cacheable bool // at most len(in) operands
}

func (o *Op) ruleKey() ruleKey {
	k := ruleKey{kind: o.Kind, axis: o.Axis, out: o.Out, n: len(o.Inputs), cacheable: len(o.Inputs) <= 4}
	if len(o.Attrs) > 0 {
		k.attrs = &o.Attrs[0]
	}
	if k.cacheable {
		copy(k.in[:], o.Inputs)
	}
	return k
}

// InputAxis maps a dimension of the output to a dimension of input i: for
// outAxis, a position among Out's non-reduction logical axes, it returns
// the position among Inputs[i]'s non-reduction logical axes whose index
// equals outAxis's in every element the op computes, or -1 when there is
// none: the dimension of input i that is the factor of output dimension
// outAxis in the op's sharding rule ([Op.Rule]). The lowering uses it to
// find which input axes a sharding of the output cuts. For the ops of
// today:
//
//   - set and unary ops: the same axis.
//   - reductions: the input's axes without Axis, in order (output axis j is
//     input axis j before Axis and j+1 from it on).
//   - binary elementwise: the same axis, or -1 where input i has extent 1
//     and the output more: the operand is broadcast along it, every output
//     index reads its one element.
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
	return o.Rule().OperandDim(i, outAxis)
}

// ContractedAxis returns, for a contraction, the position among input i's
// non-reduction logical axes of the axis k that the op sums over — the
// reduction factor of its rule: a's last and b's second-to-last for
// matmul, x's last and w's axis 1 for linear. It is -1 for linear's bias,
// which is added after the sum, for ops that are not contractions and for
// an out-of-range i.
func (o *Op) ContractedAxis(i int) int {
	if !o.Kind.IsContraction() {
		return -1
	}
	return o.Rule().ReductionDim(i)
}

// countBelow counts the entries of sorted less than x.
func countBelow(sorted []int, x int) int {
	n, _ := slices.BinarySearch(sorted, x)
	return n
}
