package ops

import "slices"

// A sharding rule in factors, as Shardy's OpShardingRule
// (openxla/shardy, op_sharding_rule_registry.cc): every dimension of an
// op's operands and result is the product of named factors, outermost
// first. A factor is one index space of the computation: sharding it
// shards every dimension it appears in the same way, so a sharding of the
// result says at once which operand dimensions must be sharded alike. A
// factor absent from the result is a reduction factor: an operand sharded
// along it holds partial results, which must be combined. A dimension of
// extent 1 that broadcasts against a larger one has no factor: it never
// shards and never moves data. A factor that must not be sharded (an
// axis a softmax normalizes, say) is marked NeedReplication.
//
// Dimensions here are non-reduction axes: the ir's reduction axes (a
// reduction's reduced axis in its output, a contraction's k) are the
// reduction factors themselves.

// FactorKind says how a factor may be sharded.
type FactorKind int

// The kinds of factors.
const (
	// PassThrough factors appear in the result: sharding one shards the
	// result alike.
	PassThrough FactorKind = iota
	// ReductionFactor factors are summed (or otherwise reduced) over: they
	// appear in operands only, and sharding one makes partial results.
	ReductionFactor
	// NeedReplication factors must not be sharded.
	NeedReplication
)

// Factor is one index space of an op's computation.
type Factor struct {
	Size int
	Kind FactorKind
}

// Dim is one tensor dimension as the product of factors (indices into
// Rule.Factors), outermost first. An empty Dim is an extent-1 dimension
// that broadcasts: it has no factor.
type Dim []int

// Rule is an op's sharding rule.
type Rule struct {
	Factors  []Factor
	Operands [][]Dim
	Result   []Dim
}

// OperandDim returns the dimension of operand i that is exactly the factor
// of result dimension j — the axis of the operand whose index equals j's
// in every element the op computes — or -1 when there is none (a new axis
// of a broadcast, an operand that broadcasts along it, a contraction's
// other operand) or i or j is out of range.
func (r *Rule) OperandDim(i, j int) int {
	if i < 0 || i >= len(r.Operands) || j < 0 || j >= len(r.Result) || len(r.Result[j]) != 1 {
		return -1
	}
	f := r.Result[j][0]
	for d, dim := range r.Operands[i] {
		if len(dim) == 1 && dim[0] == f {
			return d
		}
	}
	return -1
}

// OperandSplit returns the dimension of operand i that a block split of
// result dimension j into parts cuts alike, or -1 when there is none: the
// dimension whose outermost factor is j's. A dimension of one factor is
// cut as j is, evenly or not. A compound dimension (a reshape's [h·d]) is
// cut alike only when the shared factor is its outermost and parts
// divides that factor's size, as nvFuser propagates a device split
// through a reshape (to the outermost logical axis) and DTensor keeps a
// flattened dimension sharded (only its leftmost input dimension, of a
// divisible size); a split of an inner factor has no block counterpart
// and needs a resharding. j's own outermost factor is what a block split
// of it cuts.
func (r *Rule) OperandSplit(i, j, parts int) int {
	if i < 0 || i >= len(r.Operands) || j < 0 || j >= len(r.Result) || len(r.Result[j]) == 0 {
		return -1
	}
	return r.splitAlike(r.Result[j], r.Operands[i], parts)
}

// ResultSplit is OperandSplit backwards: the result dimension that a
// block split of operand i's dimension d into parts cuts alike, or -1.
func (r *Rule) ResultSplit(i, d, parts int) int {
	if i < 0 || i >= len(r.Operands) || d < 0 || d >= len(r.Operands[i]) || len(r.Operands[i][d]) == 0 {
		return -1
	}
	return r.splitAlike(r.Operands[i][d], r.Result, parts)
}

// splitAlike returns the dimension of dims whose outermost factor is
// from's, when a block split of from into parts cuts it alike.
func (r *Rule) splitAlike(from Dim, dims []Dim, parts int) int {
	f := from[0]
	for k, dim := range dims {
		if len(dim) == 0 || dim[0] != f {
			continue
		}
		if (len(dim) > 1 || len(from) > 1) && (parts < 1 || r.Factors[f].Size%parts != 0) {
			return -1 // a compound dimension splits alike only on whole parts of its outer factor
		}
		return k
	}
	return -1
}

// ResultWithin returns where result dimension j's index lies in operand
// i: the dimension of operand i whose factors include all of j's, in
// order and adjacent, and the stride of j's index within it — the product
// of the sizes of the factors after j's there, 1 when they are its
// innermost. For a reshape [s, h·d] -> [s, h, d], h lies in the operand's
// second dimension at stride d and d at stride 1; for the ops of today it
// is (OperandDim(i, j), 1). It returns -1 and 0 when no dimension holds
// them all (an operand that broadcasts along j, a contraction's other
// operand, a merge's result dimension, which spans several) or i or j is
// out of range.
func (r *Rule) ResultWithin(i, j int) (dim, stride int) {
	if i < 0 || i >= len(r.Operands) || j < 0 || j >= len(r.Result) || len(r.Result[j]) == 0 {
		return -1, 0
	}
	want := r.Result[j]
	for d, dim := range r.Operands[i] {
		if k := runIndex(dim, want); k >= 0 {
			stride := 1
			for _, f := range dim[k+len(want):] {
				stride *= r.Factors[f].Size
			}
			return d, stride
		}
	}
	return -1, 0
}

// runIndex returns where run starts in dim, its factors adjacent and in
// order, or -1.
func runIndex(dim, run Dim) int {
	for k := 0; k+len(run) <= len(dim); k++ {
		if slices.Equal(dim[k:k+len(run)], run) {
			return k
		}
	}
	return -1
}

// ReductionDim returns the dimension of operand i that is a reduction
// factor (a contraction's k, a reduction's axis), or -1 when it has none.
func (r *Rule) ReductionDim(i int) int {
	if i < 0 || i >= len(r.Operands) {
		return -1
	}
	for d, dim := range r.Operands[i] {
		if len(dim) == 1 && r.Factors[dim[0]].Kind == ReductionFactor {
			return d
		}
	}
	return -1
}

// ruleBuilder builds a Rule factor by factor.
type ruleBuilder struct{ r Rule }

// factor adds a factor and returns its dimension.
func (b *ruleBuilder) factor(size int, kind FactorKind) Dim {
	b.r.Factors = append(b.r.Factors, Factor{Size: size, Kind: kind})
	return Dim{len(b.r.Factors) - 1}
}

// resultFactors gives every result dimension a pass-through factor of its
// extent.
func (b *ruleBuilder) resultFactors(out []int) {
	b.r.Result = make([]Dim, len(out))
	for j, e := range out {
		b.r.Result[j] = b.factor(e, PassThrough)
	}
}

// pointwiseRule is the rule of set, the elementwise ops and their
// broadcasting: operand dimension j is result dimension j, but for an
// extent-1 dimension against a larger one, which has no factor.
func pointwiseRule(in [][]int, out []int, _ Attrs) Rule {
	var b ruleBuilder
	b.resultFactors(out)
	for _, shape := range in {
		dims := make([]Dim, len(shape))
		for j, e := range shape {
			if j < len(out) && (e != 1 || out[j] == 1) {
				dims[j] = b.r.Result[j]
			}
		}
		b.r.Operands = append(b.r.Operands, dims)
	}
	return b.r
}

// reductionRule is the rule of a reduction over a.Axis: the input's other
// dimensions are the result's, in order; the reduced one is a reduction
// factor.
func reductionRule(in [][]int, out []int, a Attrs) Rule {
	var b ruleBuilder
	b.resultFactors(out)
	if len(in) == 0 {
		return b.r
	}
	dims := make([]Dim, len(in[0]))
	for d, e := range in[0] {
		switch j := d; {
		case d == a.Axis:
			dims[d] = b.factor(e, ReductionFactor)
		case d > a.Axis && a.Axis >= 0:
			j--
			fallthrough
		default:
			if j < len(out) {
				dims[d] = b.r.Result[j]
			}
		}
	}
	b.r.Operands = [][]Dim{dims}
	return b.r
}

// broadcastRule is broadcast's rule: the result's dimensions but the new
// ones (a.Axes) are the input's, in order.
func broadcastRule(in [][]int, out []int, a Attrs) Rule {
	var b ruleBuilder
	b.resultFactors(out)
	if len(in) == 0 {
		return b.r
	}
	dims := make([]Dim, len(in[0]))
	d := 0
	for j := range out {
		if containsInt(a.Axes, j) {
			continue
		}
		if d < len(dims) {
			dims[d] = b.r.Result[j]
		}
		d++
	}
	b.r.Operands = [][]Dim{dims}
	return b.r
}

// matmulRule is matmul's: a [...batch, m, k] @ b [k, n] or [...batch, k,
// n] = [...batch, m, n], k a reduction factor.
func matmulRule(in [][]int, out []int, _ Attrs) Rule {
	var b ruleBuilder
	b.resultFactors(out)
	if len(in) != 2 || len(in[0]) < 2 || len(in[1]) < 2 || len(out) < 2 {
		return b.r
	}
	k := b.factor(in[0][len(in[0])-1], ReductionFactor)
	as, bs := make([]Dim, len(in[0])), make([]Dim, len(in[1]))
	m, n := len(out)-2, len(out)-1
	copy(as, b.r.Result[:m+1]) // batch and m
	as[len(as)-1] = k
	if len(bs) == len(out) {
		copy(bs, b.r.Result[:m]) // b's own batch axes
	}
	bs[len(bs)-2], bs[len(bs)-1] = k, b.r.Result[n]
	b.r.Operands = [][]Dim{as, bs}
	return b.r
}

// linearRule is linear's: x [..., k], w [n, k] and bias [n] give
// [..., n], k a reduction factor.
func linearRule(in [][]int, out []int, _ Attrs) Rule {
	var b ruleBuilder
	b.resultFactors(out)
	if len(in) < 2 || len(in[0]) < 1 || len(in[1]) != 2 || len(out) < 1 {
		return b.r
	}
	n := b.r.Result[len(out)-1]
	k := b.factor(in[0][len(in[0])-1], ReductionFactor)
	xs := make([]Dim, len(in[0]))
	copy(xs, b.r.Result[:len(out)-1])
	xs[len(xs)-1] = k
	b.r.Operands = [][]Dim{xs, {n, k}}
	if len(in) == 3 {
		b.r.Operands = append(b.r.Operands, []Dim{n})
	}
	return b.r
}

func containsInt(xs []int, x int) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}
