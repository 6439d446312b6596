package sim

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/nvcomm/nvcomm/internal/ops"
	"github.com/nvcomm/nvcomm/internal/plan"
)

// This file holds the arithmetic of the layer ops and the local steps that
// compute them, Matmul and Pointwise (docs/plan.md, "Step semantics").
// add, sub, mul and the products of a matmul are taken modulo [modulus],
// like sum and prod, so that a plan may split any sum into partial sums
// and still match the reference exactly; the others act on the
// representatives as they are.

// pointwiseFunc is the scalar function of an elementwise op or a Pointwise
// step; a unary one ignores b.
type pointwiseFunc func(a, b float64) float64

// pointwiseFuncOf returns the scalar function of a Pointwise function or
// an elementwise op, from its kernel in the op registry, or nil for a name
// that is neither. A ring kernel (add, sub, mul, square) is taken modulo
// [modulus], on integers, and a field kernel (div, reciprocal, the
// transcendental maps) computes modulo it; the others act on the values
// as they are.
func pointwiseFuncOf(name string) pointwiseFunc {
	f := ops.Func(name)
	if f == nil {
		return nil
	}
	k := f.Kernel
	switch {
	case k.Ring != nil:
		return integral(k.Ring)
	case k.Field != nil:
		return integral(k.Field)
	case k.Exp != nil:
		return expFunc(k.Exp)
	}
	return valued(k.Value)
}

// integral returns f on the simulation's values, the result taken modulo
// [modulus], or modulo q when an operand is of the second sort (sort.go),
// which the result is then too. An infinity (a Pad's fill) has no residue: f of one is NaN,
// which equals nothing, so that a padded element a plan computes on can
// never match the reference where it is checked (and is dropped, as every
// pad is, where it is not). Go's conversion of an infinity to int64 is
// unspecified, and on amd64 gives the same integer for both infinities.
func integral(f func(a, b, m int64) int64) pointwiseFunc {
	return func(a, b float64) float64 {
		if math.IsInf(a, 0) || math.IsInf(b, 0) || a != a || b != b {
			return math.NaN()
		}
		if isQ(a) || isQ(b) {
			return encodeQ(f(qRep(a), qRep(b), expModulus))
		}
		return residue(f(int64(a), int64(b), modulus))
	}
}

// orList lists names for a message: "a, b or c".
func orList(names []string) string {
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// mapBroadcast applies f elementwise over a row-major array of shape dims.
// Input k is a row-major array of shape inDims[k], of dims' rank, whose
// extent-1 dimensions repeat along dims (torch's broadcasting). The caller
// has checked every shape; the output is the only allocation.
func mapBroadcast(f pointwiseFunc, ins [][]float64, inDims [][]int, dims []int) []float64 {
	if broadcastsNothing(inDims, dims) {
		return mapFlat(f, ins, product(dims))
	}
	st := make([][]int, len(ins))
	for k, d := range inDims {
		st[k] = broadcastStrides(d)
	}
	out := make([]float64, 0, product(dims))
	for idx := range odometer(dims) {
		a := ins[0][dot(idx, st[0])]
		var b float64
		if len(ins) > 1 {
			b = ins[1][dot(idx, st[1])]
		}
		out = append(out, f(a, b))
	}
	return out
}

// broadcastsNothing reports whether every input shape is dims.
func broadcastsNothing(inDims [][]int, dims []int) bool {
	for _, d := range inDims {
		if !slices.Equal(d, dims) {
			return false
		}
	}
	return true
}

// mapFlat is mapBroadcast of inputs of the output's own shape, which
// broadcast nothing: element i of the output is f of element i of each.
func mapFlat(f pointwiseFunc, ins [][]float64, n int) []float64 {
	out := make([]float64, n)
	a := ins[0][:n]
	if len(ins) == 1 {
		for i, x := range a {
			out[i] = f(x, 0)
		}
		return out
	}
	b := ins[1][:n]
	for i, x := range a {
		out[i] = f(x, b[i])
	}
	return out
}

// broadcastStrides returns the row-major strides of dims with 0 for every
// extent-1 dimension: indexing with any value there reads the one entry.
func broadcastStrides(dims []int) []int {
	st := strides(dims)
	for k, e := range dims {
		if e == 1 {
			st[k] = 0
		}
	}
	return st
}

// dot returns Σ idx[k]·st[k]: the offset of a multi-index.
func dot(idx, st []int) int {
	off := 0
	for k, i := range idx {
		off += i * st[k]
	}
	return off
}

// matmulKernel multiplies, for each of bt batches, A [m, k] by B [k, n]
// (the same B for every batch when sharedB), row-major, modulo
// [modulus]. It accumulates row by row in the output (A's element times
// B's row), which reads B contiguously, and keeps every partial sum within
// ±modulus so that it stays exact in a float64 without a scratch buffer.
func matmulKernel(a, b []float64, bt, m, k, n int, sharedB bool) []float64 {
	if anyQ(a) || anyQ(b) {
		return matmulKernelSorted(a, b, bt, m, k, n, sharedB, false)
	}
	out := make([]float64, bt*m*n)
	for t := range bt {
		bt0 := batchOffset(t, k*n, sharedB)
		for i := range m {
			row := out[(t*m+i)*n : (t*m+i+1)*n]
			for l := range k {
				x := int64(a[(t*m+i)*k+l])
				if x == 0 {
					continue
				}
				brow := b[bt0+l*n : bt0+(l+1)*n]
				for j, y := range brow {
					row[j] = float64((int64(row[j]) + x*int64(y)) % modulus)
				}
			}
			for j, v := range row {
				row[j] = residue(int64(v))
			}
		}
	}
	return out
}

// batchOffset is where batch t's B matrix of size elements starts: 0 for
// every batch when they share one.
func batchOffset(t, size int, shared bool) int {
	if shared {
		return 0
	}
	return t * size
}

// matmulKernelBT is matmulKernel for a B stored transposed (transpose_b):
// row-major [n, k] matrices, read in place. Each output element is the
// dot product of a row of A and a row of B, both contiguous, its partial
// sums kept within ±modulus; a transposed copy of B would be memory the
// model does not price, as large as B on every device.
func matmulKernelBT(a, b []float64, bt, m, k, n int, sharedB bool) []float64 {
	if anyQ(a) || anyQ(b) {
		return matmulKernelSorted(a, b, bt, m, k, n, sharedB, true)
	}
	out := make([]float64, bt*m*n)
	for t := range bt {
		bt0 := batchOffset(t, k*n, sharedB)
		for i := range m {
			arow := a[(t*m+i)*k : (t*m+i+1)*k]
			for j := range n {
				brow := b[bt0+j*k : bt0+(j+1)*k]
				var acc int64
				for l, x := range arow {
					acc = (acc + int64(x)*int64(brow[l])) % modulus
				}
				out[(t*m+i)*n+j] = residue(acc)
			}
		}
	}
	return out
}

// matmulKernelSorted is matmulKernel (matmulKernelBT when transposed) of
// operands of which some value is of the second sort: each output element
// Σ_l a·b by prodMod and sumMod in l's order, so that it is of the second
// sort exactly when one of its terms is, as the reference's.
func matmulKernelSorted(a, b []float64, bt, m, k, n int, sharedB, transposed bool) []float64 {
	out := make([]float64, bt*m*n)
	for t := range bt {
		bt0 := batchOffset(t, k*n, sharedB)
		// Column j of B starts at bt0 + j and steps by n, or, stored
		// transposed, at bt0 + j·k and steps by 1.
		col, step := func(j int) int { return bt0 + j }, n
		if transposed {
			col, step = func(j int) int { return bt0 + j*k }, 1
		}
		colQ := make([]bool, n)
		for j := range n {
			colQ[j] = allQ(b, col(j), step, k)
		}
		for i := range m {
			ai := (t*m + i) * k
			rowQ := allQ(a, ai, 1, k)
			for j := range n {
				out[(t*m+i)*n+j] = dotSorted(a, ai, 1, b, col(j), step, k, rowQ || colQ[j])
			}
		}
	}
	return out
}

// inputSize is how many elements an input buffer of a local step must hold,
// and, for messages, where that number comes from: from, or when it is
// empty, count.input.
type inputSize struct {
	n    int
	from string
}

// counted is the size count.input gives. Its message is written only when
// needed (describe): formatting it for every step of a long plan was a
// tenth of what running a Permute cost.
func counted(s *plan.Step) inputSize {
	return inputSize{n: s.Count.Input}
}

// describe says where the size comes from, for messages.
func (z inputSize) describe() string {
	if z.from == "" {
		return fmt.Sprintf("count.input is %d", z.n)
	}
	return z.from
}

// computeStep is a checked local step: the size of each input buffer, in
// the order of the step's operands, and the transform of one device's
// inputs into its output.
type computeStep struct {
	sizes []inputSize
	// f computes the output of the k-th of the step's devices.
	f func(k int, ins [][]float64) []float64
}

// matmulStep checks a Matmul: inputs [A, B], dims [Bt, M, K, N], A of
// Bt·M·K elements (count.input), B of Bt·K·N or, with broadcast_b, K·N,
// and an output of Bt·M·N (count.output).
func matmulStep(s *plan.Step) (computeStep, error) {
	if n := len(s.Operands()); n != 2 {
		return computeStep{}, stepError(s, "a Matmul reads 2 buffers (inputs [A, B]), got %d", n)
	}
	if len(s.Dims) != 4 || !nonNegative(s.Dims) {
		return computeStep{}, stepError(s, "dims %v must be [Bt, M, K, N], four non-negative extents", s.Dims)
	}
	bt, m, k, n := s.Dims[0], s.Dims[1], s.Dims[2], s.Dims[3]
	if got := satProduct([]int{bt, m, k}); got != int64(s.Count.Input) {
		return computeStep{}, stepError(s, "count.input is %d, dims %v give Bt·M·K = %d", s.Count.Input, s.Dims, got)
	}
	if got := satProduct([]int{bt, m, n}); got != int64(s.Count.Output) {
		return computeStep{}, stepError(s, "count.output is %d, dims %v give Bt·M·N = %d", s.Count.Output, s.Dims, got)
	}
	bDims, what := []int{bt, k, n}, "Bt·K·N"
	if s.BroadcastB {
		bDims, what = []int{k, n}, "K·N, broadcast_b"
	}
	nb := satProduct(bDims)
	if nb > math.MaxInt {
		return computeStep{}, stepError(s, "dims %v give B more elements than a buffer holds", s.Dims)
	}
	sizes := []inputSize{counted(s), {int(nb), fmt.Sprintf("want %d (%s of dims %v)", nb, what, s.Dims)}}
	sharedB, kernel := s.BroadcastB, matmulKernel
	if s.TransposeB {
		kernel = matmulKernelBT
	}
	return computeStep{sizes, func(_ int, ins [][]float64) []float64 {
		return kernel(ins[0], ins[1], bt, m, k, n, sharedB)
	}}, nil
}

// pointwiseStep checks a Pointwise: a known func with its number of
// inputs, one input_dims per input, of dims' rank, each extent dims' or 1;
// count.input the elements of the first input, count.output of dims.
func pointwiseStep(s *plan.Step) (computeStep, error) {
	if s.Func == nil {
		return computeStep{}, stepError(s, "a Pointwise needs a func (%s)", orList(ops.PointwiseFuncs()))
	}
	fn := ops.Func(*s.Func)
	if fn == nil {
		return computeStep{}, stepError(s, "func %q is not %s", *s.Func, orList(ops.PointwiseFuncs()))
	}
	if err := checkScalar(*s.Func, s.Scalar); err != nil {
		return computeStep{}, stepError(s, "%v", err)
	}
	arity, _ := fn.Arity()
	arity -= scalarCount(s.Scalar)
	names := s.Operands()
	if len(names) != arity {
		return computeStep{}, stepError(s, "func %s reads %d buffers, got %d", *s.Func, arity, len(names))
	}
	if len(s.InputDims) != arity {
		return computeStep{}, stepError(s, "input_dims has %d entries for %d inputs", len(s.InputDims), arity)
	}
	if !nonNegative(s.Dims) {
		return computeStep{}, stepError(s, "dims %v must be non-negative", s.Dims)
	}
	if got := satProduct(s.Dims); got != int64(s.Count.Output) {
		return computeStep{}, stepError(s, "count.output is %d, dims %v hold %d", s.Count.Output, s.Dims, got)
	}
	sizes := make([]inputSize, arity)
	for k, d := range s.InputDims {
		if err := broadcastsTo(s, k, d); err != nil {
			return computeStep{}, err
		}
		n := satProduct(d)
		if n > math.MaxInt {
			return computeStep{}, stepError(s, "input_dims[%d] %v hold more elements than a buffer holds", k, d)
		}
		sizes[k] = inputSize{int(n), fmt.Sprintf("want %d (input_dims[%d] %v)", n, k, d)}
	}
	if sizes[0].n != s.Count.Input {
		return computeStep{}, stepError(s, "count.input is %d, input_dims[0] %v hold %d", s.Count.Input, s.InputDims[0], sizes[0].n)
	}
	sizes[0] = counted(s)
	f, dims, inDims := withScalar(pointwiseFuncOf(*s.Func), s.Scalar), s.Dims, s.InputDims
	return computeStep{sizes, func(_ int, ins [][]float64) []float64 {
		return mapBroadcast(f, ins, inDims, dims)
	}}, nil
}

// broadcastsTo checks that input k's dims d have the rank of the step's
// dims and each extent equal to dims' or 1.
func broadcastsTo(s *plan.Step, k int, d []int) error {
	if len(d) != len(s.Dims) {
		return stepError(s, "input_dims[%d] %v has %d dims, dims %v has %d", k, d, len(d), s.Dims, len(s.Dims))
	}
	for j, e := range d {
		if e != s.Dims[j] && e != 1 {
			return stepError(s, "input_dims[%d] %v does not broadcast to dims %v: dim %d is %d, neither %d nor 1", k, d, s.Dims, j, e, s.Dims[j])
		}
	}
	return nil
}

// nonNegative reports whether every extent is at least 0.
func nonNegative(dims []int) bool {
	for _, d := range dims {
		if d < 0 {
			return false
		}
	}
	return true
}
