package sim

import (
	"fmt"
	"slices"
	"strings"

	"github.com/nvcomm/nvcomm/internal/ops"
	"github.com/nvcomm/nvcomm/internal/plan"
)

// This file gives the reference semantics of the plan's ops on unsharded
// tensors (docs/simulate.md, "What it does"): which operands each op takes,
// the logical domain of its output, and its values. It works from the
// op's name and its operands' shapes alone, never from the compiler's
// analyses, so that a PASS checks the lowering independently.

// checkArity checks that op names an op of the registry and has as many
// operands as it takes; it needs no shapes, so newWorld runs it.
func checkArity(op plan.Op) error {
	e := ops.InPlan(op.Op)
	if e == nil {
		return fmt.Errorf("op %d: unknown op %q (expected %s)", op.Index, op.Op, orList(ops.PlanNames()))
	}
	if err := checkScalar(op.Op, op.Scalar); err != nil {
		return fmt.Errorf("op %d (%s): %v", op.Index, op.Op, err)
	}
	if n := len(op.Operands()) + scalarCount(op.Scalar); !e.TakesOperands(n) {
		return fmt.Errorf("op %d (%s): takes %s, got %d", op.Index, op.Op, e.ArityText(), n)
	}
	return nil
}

// family is op's family in the registry, or -1 for an op it does not have.
func family(op plan.Op) ops.Family {
	if e := ops.Lookup(op.Op); e != nil {
		return e.Family
	}
	return -1
}

// operand is one input of an op on unsharded tensors: its name, its
// values row-major over its non-reduction axes, and their extents.
type operand struct {
	name  string
	v     vec       // the values
	vals  []float64 // stored, for the ops that read them in their own order
	shape []int
	info  *tensorInfo // the simulation's tensor, when it has one
}

// logicalDomain is an op's output logical domain: its shape, reduction
// axes included, and the positions of the reduction axes.
type logicalDomain struct {
	shape     []int
	reduction []int
}

// opDomain checks that op's operands fit together and returns the logical
// domain its output must have. declared is the output's declared shape,
// which gives the extents of a broadcast's new axes.
func opDomain(op plan.Op, ins []operand, declared []int) (logicalDomain, error) {
	if err := checkAxisFields(op); err != nil {
		return logicalDomain{}, err
	}
	in := ins[0].shape
	switch {
	case family(op) == ops.Copy || family(op) == ops.Unary || family(op) == ops.Binary && op.Scalar != nil:
		return logicalDomain{shape: in}, nil
	case family(op) == ops.Reduction:
		if op.Axis == nil || *op.Axis < 0 || *op.Axis >= len(in) {
			return logicalDomain{}, fmt.Errorf("op %d (%s): axis must be a position among the input's %d non-reduction axes", op.Index, op.Op, len(in))
		}
		return logicalDomain{shape: in, reduction: []int{*op.Axis}}, nil
	case op.Op == "broadcast":
		return broadcastDomain(op, in, declared)
	case op.Op == "matmul":
		return matmulDomain(op, ins)
	case op.Op == "linear":
		return linearDomain(op, ins)
	case op.Op == "embedding":
		return embeddingDomain(op, ins)
	case op.Op == "gather":
		return gatherDomain(op, ins)
	case op.Op == "scatter_add":
		return scatterDomain(op, ins)
	case family(op) == ops.Binary && len(ins) == 2:
		return elementwiseDomain(op, ins)
	case family(op) == ops.View:
		shapes := make([][]int, len(ins))
		for k, x := range ins {
			shapes[k] = x.shape
		}
		axis := -1
		if op.Axis != nil {
			axis = *op.Axis
		}
		shape, _, err := ops.Lookup(op.Op).Shape(shapes, ops.Attrs{Axis: axis, Values: op.Attrs})
		if err != nil {
			return logicalDomain{}, fmt.Errorf("op %d (%s): %s", op.Index, op.Op, err.Msg)
		}
		return logicalDomain{shape: shape}, nil
	}
	return logicalDomain{}, checkArity(op) // newWorld has rejected such an op already
}

// checkAxisFields checks that only a reduction (and, as plans always
// allowed, a set) carries an axis and only a broadcast carries axes: on
// another op they would mean nothing, and the simulator would silently
// ignore what the plan says.
func checkAxisFields(op plan.Op) error {
	e := ops.Lookup(op.Op)
	if op.Axis != nil && family(op) != ops.Copy && (e == nil || !e.Takes(ops.AttrAxis)) {
		return fmt.Errorf("op %d (%s): takes no axis, got %d", op.Index, op.Op, *op.Axis)
	}
	if len(op.Axes) > 0 && (e == nil || !e.Takes(ops.AttrAxes)) {
		return fmt.Errorf("op %d (%s): takes no axes, got %v", op.Index, op.Op, op.Axes)
	}
	if e == nil {
		return nil
	}
	probs := e.CheckValues(op.Attrs)
	switch {
	case len(probs) == 0:
		return nil
	case probs[0].What == ops.Bad:
		return fmt.Errorf("op %d (%s): %s: %s", op.Index, op.Op, probs[0].Key, probs[0].Msg)
	}
	return fmt.Errorf("op %d (%s): takes %s, got %q", op.Index, op.Op, attrList(e), strings.TrimPrefix(string(op.Attrs.AppendArgs(nil)), ", "))
}

// attrList names the attributes e takes but axis and axes, "no other
// attribute" when it takes none.
func attrList(e *ops.Op) string {
	var keys []string
	for _, a := range e.Attrs {
		if ops.AttrOf(string(a)).Stored() {
			keys = append(keys, string(a))
		}
	}
	if len(keys) == 0 {
		return "no other attribute"
	}
	return strings.Join(keys, ", ")
}

// elementwiseDomain is a binary elementwise op's output: operands of equal
// rank whose extents agree or are 1 (torch's broadcasting), the larger
// extent on each axis.
func elementwiseDomain(op plan.Op, ins []operand) (logicalDomain, error) {
	a, b := ins[0], ins[1]
	if len(a.shape) != len(b.shape) {
		return logicalDomain{}, fmt.Errorf("op %d (%s): operands %q %v and %q %v differ in rank (elementwise operands have equal rank)",
			op.Index, op.Op, a.name, a.shape, b.name, b.shape)
	}
	shape := make([]int, len(a.shape))
	for k, x := range a.shape {
		y := b.shape[k]
		if x != y && x != 1 && y != 1 {
			return logicalDomain{}, fmt.Errorf("op %d (%s): operands %q %v and %q %v do not broadcast: axis %d has extents %d and %d, and neither is 1",
				op.Index, op.Op, a.name, a.shape, b.name, b.shape, k, x, y)
		}
		shape[k] = max(x, y)
	}
	return logicalDomain{shape: shape}, nil
}

// broadcastDomain is the input's axes with new ones at the output
// positions op.Axes, whose extents the output declares (no axes: a copy).
func broadcastDomain(op plan.Op, in, declared []int) (logicalDomain, error) {
	rank := len(in) + len(op.Axes)
	for k, a := range op.Axes {
		if a < 0 || a >= rank || (k > 0 && a <= op.Axes[k-1]) {
			return logicalDomain{}, fmt.Errorf("op %d (broadcast): axes %v must be increasing positions among the output's %d axes", op.Index, op.Axes, rank)
		}
	}
	shape := make([]int, 0, rank)
	for k, next := 0, 0; k < rank; k++ {
		switch {
		case !slices.Contains(op.Axes, k):
			shape = append(shape, in[next])
			next++
		case k < len(declared):
			shape = append(shape, declared[k])
		default:
			shape = append(shape, 1) // the output lacks the axis: the comparison reports it
		}
	}
	return logicalDomain{shape: shape}, nil
}

// matmulDomain is a[..., m, k] @ b[..., k, n] with b of rank 2 or a's with
// equal batch extents: [...batch, m, n, k], k a trailing reduction axis.
func matmulDomain(op plan.Op, ins []operand) (logicalDomain, error) {
	a, b := ins[0], ins[1]
	ra, rb := len(a.shape), len(b.shape)
	var why string
	switch {
	case ra < 2:
		why = fmt.Sprintf("the first has %d axes, want at least 2 ([..., m, k])", ra)
	case rb != 2 && rb != ra:
		why = fmt.Sprintf("the second has %d axes, want 2 or %d (the first's)", rb, ra)
	case rb == ra && !slices.Equal(a.shape[:ra-2], b.shape[:rb-2]):
		why = "their batch extents differ"
	case a.shape[ra-1] != b.shape[rb-2]:
		why = fmt.Sprintf("the first's last extent %d is not the second's second-to-last %d", a.shape[ra-1], b.shape[rb-2])
	default:
		shape := slices.Concat(a.shape[:ra-1], []int{b.shape[rb-1], a.shape[ra-1]})
		return logicalDomain{shape: shape, reduction: []int{ra}}, nil
	}
	return logicalDomain{}, fmt.Errorf("op %d (matmul): operands %q %v and %q %v do not multiply: %s", op.Index, a.name, a.shape, b.name, b.shape, why)
}

// linearDomain is x[..., k] @ w[n, k]ᵀ (+ bias[n]): [..., n, k], k a
// trailing reduction axis.
func linearDomain(op plan.Op, ins []operand) (logicalDomain, error) {
	x, w := ins[0], ins[1]
	rx := len(x.shape)
	var why string
	switch {
	case rx < 1:
		why = fmt.Sprintf("input %q has no axes, want at least 1 ([..., k])", x.name)
	case len(w.shape) != 2:
		why = fmt.Sprintf("weight %q %v has %d axes, want 2 ([n, k])", w.name, w.shape, len(w.shape))
	case x.shape[rx-1] != w.shape[1]:
		why = fmt.Sprintf("input %q %v and weight %q %v do not contract: %d is not %d", x.name, x.shape, w.name, w.shape, x.shape[rx-1], w.shape[1])
	case len(ins) == 3 && !slices.Equal(ins[2].shape, w.shape[:1]):
		why = fmt.Sprintf("bias %q has shape %v, want [%d] (the weight's n)", ins[2].name, ins[2].shape, w.shape[0])
	default:
		shape := slices.Concat(x.shape[:rx-1], []int{w.shape[0], x.shape[rx-1]})
		return logicalDomain{shape: shape, reduction: []int{rx}}, nil
	}
	return logicalDomain{}, fmt.Errorf("op %d (linear): %s", op.Index, why)
}

// evalOp computes op on its unsharded operands, whose domains opDomain has
// accepted; out is the output's non-reduction shape.
func evalOp(op plan.Op, ins []operand, out []int) []float64 {
	in := ins[0]
	switch {
	case family(op) == ops.Copy:
		// The same values: shared, since no reference value changes once
		// computed (devices get copies), which saves a copy of every set's
		// output.
		return in.vals
	case family(op) == ops.Reduction:
		return reduceAxis(op.Op, in.vals, in.shape, *op.Axis)
	case op.Op == "broadcast":
		// The input is the output with extent 1 on the new axes.
		dims := slices.Clone(out)
		for _, a := range op.Axes {
			dims[a] = 1
		}
		return mapBroadcast(pointwiseFuncOf(ops.CopyFunc), [][]float64{in.vals}, [][]int{dims}, out)
	case op.Op == "matmul":
		return matmulReference(ins[0], ins[1])
	case op.Op == "linear":
		return linearReference(ins)
	case op.Op == "embedding":
		return embeddingReference(ins[0], ins[1])
	case op.Op == "gather":
		return gatherReference(ins[0], ins[1])
	case op.Op == "scatter_add":
		return scatterReference(ins[0], ins[1], op.Attrs.Int(ops.AttrRows))
	case op.Op == "permute":
		return permuteReference(in, op.Attrs.Ints(ops.AttrDims), out)
	case op.Op == "slice":
		return sliceReference(in, *op.Axis, op.Attrs.Int(ops.AttrStart), out)
	case op.Op == "cat":
		return catReference(ins, *op.Axis, out)
	case op.Op == "tril":
		return trilReference(in, op.Attrs.Int(ops.AttrDiagonal))
	case family(op) == ops.View:
		// A reshape reads the elements row-major as they are: the same
		// values, shared as a set's are.
		return in.vals
	}
	vals, dims := make([][]float64, len(ins)), make([][]int, len(ins))
	for k, x := range ins {
		vals[k], dims[k] = x.vals, x.shape
	}
	return mapBroadcast(withScalar(pointwiseFuncOf(op.Op), op.Scalar), vals, dims, out)
}

// permuteReference is in with its dims reordered: out[i_0, ..., i_r-1] =
// in[j] where j's index along dims[k] is i_k, element by element from
// the definition (apart from the Permute step's kernel).
func permuteReference(in operand, dims, out []int) []float64 {
	vals := make([]float64, 0, len(in.vals))
	stride := strides(in.shape)
	idx := make([]int, len(out))
	for range product(out) {
		at := 0
		for k, i := range idx {
			d := dims[k]
			if d < 0 {
				d += len(out)
			}
			at += i * stride[d]
		}
		vals = append(vals, in.vals[at])
		for k := len(idx) - 1; k >= 0; k-- { // the next index, row-major
			if idx[k]++; idx[k] < out[k] {
				break
			}
			idx[k] = 0
		}
	}
	return vals
}

// matmulReference is a @ b on unsharded values, element by element from
// the definition: out[t, i, j] = Σ_l a[t, i, l]·b[t, l, j] modulo
// [modulus], b's batch index dropped when b is 2-D. It is written apart
// from the Matmul step's kernel so that the two do not share a mistake.
func matmulReference(a, b operand) []float64 {
	sorted := anyQ(a.vals) || anyQ(b.vals)
	ra, rb := len(a.shape), len(b.shape)
	batch := product(a.shape[:ra-2])
	m, k, n := a.shape[ra-2], a.shape[ra-1], b.shape[rb-1]
	out := make([]float64, 0, batch*m*n)
	for t := range batch {
		bBase := 0
		if rb == ra {
			bBase = t * k * n
		}
		for i := range m {
			for j := range n {
				if sorted {
					ai, bj := (t*m+i)*k, bBase+j
					out = append(out, dotSorted(a.vals, ai, 1, b.vals, bj, n, k, allQ(a.vals, ai, 1, k) || allQ(b.vals, bj, n, k)))
					continue
				}
				var acc int64
				for l := range k {
					acc = (acc + int64(a.vals[(t*m+i)*k+l])*int64(b.vals[bBase+l*n+j])) % modulus
				}
				out = append(out, residue(acc))
			}
		}
	}
	return out
}

// linearReference is x @ wᵀ (+ bias) on unsharded values: out[r, j] =
// Σ_l x[r, l]·w[j, l] (+ bias[j]) modulo [modulus], r running over x's
// leading axes.
func linearReference(ins []operand) []float64 {
	x, w := ins[0], ins[1]
	n, k := w.shape[0], w.shape[1]
	rows := product(x.shape[:len(x.shape)-1])
	out := make([]float64, 0, rows*n)
	if anyQ(x.vals) || anyQ(w.vals) || len(ins) == 3 && anyQ(ins[2].vals) {
		return linearSorted(ins, rows, n, k, out)
	}
	for r := range rows {
		for j := range n {
			var acc int64
			for l := range k {
				acc = (acc + int64(x.vals[r*k+l])*int64(w.vals[j*k+l])) % modulus
			}
			if len(ins) == 3 {
				acc += int64(ins[2].vals[j])
			}
			out = append(out, residue(acc))
		}
	}
	return out
}

// linearSorted is linearReference of operands of which some value is of
// the second sort: each element by dotSorted, the bias added last, as the
// devices' Matmul and Pointwise add it.
func linearSorted(ins []operand, rows, n, k int, out []float64) []float64 {
	x, w := ins[0], ins[1]
	for r := range rows {
		rowQ := allQ(x.vals, r*k, 1, k)
		for j := range n {
			acc := dotSorted(x.vals, r*k, 1, w.vals, j*k, 1, k, rowQ || allQ(w.vals, j*k, 1, k))
			if len(ins) == 3 {
				acc = sumMod(acc, ins[2].vals[j])
			}
			out = append(out, acc)
		}
	}
	return out
}
