package sim

import (
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/nvcomm/nvcomm/internal/plan"
)

// modulus is the prime 2^31 − 1. Sums and products are computed modulo it
// on representatives in [−(modulus−1)/2, (modulus−1)/2]: exact in float64
// and independent of the order and grouping a plan combines values in,
// and equal to ordinary integer arithmetic while results stay in that
// range.
const modulus = 1<<31 - 1

// inputData returns n deterministic integer values for the tensor at index
// in the plan: from [-512, 512], or with small (the fusion has a prod) from
// {-2, -1, 1, 2}, so that products stay in the plain range longer.
func inputData(seed uint64, index, n int, small bool) []float64 {
	r := rand.New(rand.NewPCG(seed, uint64(index)))
	v := make([]float64, n)
	for i := range v {
		if small {
			v[i] = []float64{-2, -1, 1, 2}[r.IntN(4)]
		} else {
			v[i] = float64(r.IntN(1025) - 512)
		}
	}
	return v
}

// hasProd reports whether any op of p is a product.
func hasProd(p *plan.Plan) bool {
	return slices.ContainsFunc(p.Ops, func(o plan.Op) bool { return o.Op == "prod" })
}

// evalOp computes op on the unsharded input value of shape shape; the
// output's shape is shape without the reduced axis.
func evalOp(op plan.Op, in []float64, shape []int) ([]float64, error) {
	if op.Op == "set" {
		return slices.Clone(in), nil
	}
	if !slices.Contains(plan.ReduceOps, op.Op) {
		return nil, fmt.Errorf("op %d: unknown op %q (expected set, sum, prod, max or min)", op.Index, op.Op)
	}
	if op.Axis == nil || *op.Axis < 0 || *op.Axis >= len(shape) {
		return nil, fmt.Errorf("op %d (%s): axis must be a position among the input's %d non-reduction axes", op.Index, op.Op, len(shape))
	}
	return reduceAxis(op.Op, in, shape, *op.Axis), nil
}

// reduceAxis combines in, row-major of shape shape, along axis.
func reduceAxis(op string, in []float64, shape []int, axis int) []float64 {
	outer, n, inner := product(shape[:axis]), shape[axis], product(shape[axis+1:])
	out := make([]float64, outer*inner)
	for o := range outer {
		for i := range inner {
			acc := in[o*n*inner+i]
			for k := 1; k < n; k++ {
				acc = combine(op, acc, in[(o*n+k)*inner+i])
			}
			out[o*inner+i] = acc
		}
	}
	return out
}

// combine applies a reduce op to two values: sum and prod modulo
// [modulus], max and min as usual.
func combine(op string, a, b float64) float64 {
	switch op {
	case "sum":
		return residue(int64(a) + int64(b))
	case "prod":
		return residue(int64(a) * int64(b))
	case "max":
		return max(a, b)
	default:
		return min(a, b)
	}
}

// residue returns the representative of v modulo [modulus] closest to 0.
func residue(v int64) float64 {
	v %= modulus
	switch {
	case v > modulus/2:
		v -= modulus
	case v < -modulus/2:
		v += modulus
	}
	return float64(v)
}

// product multiplies extents; the empty product is 1.
func product(xs []int) int {
	n := 1
	for _, x := range xs {
		n *= x
	}
	return n
}
