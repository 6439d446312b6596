package sim

import (
	"slices"

	"github.com/nvcomm/nvcomm/internal/plan"
)

// localFunc transforms one device's input buffer.
type localFunc func(in []float64) []float64

// localStep checks a local step's geometry and returns the sizes of its
// inputs and its transform, which takes small outputs from slab.
func localStep(s *plan.Step, slab *slab) (computeStep, error) {
	switch s.Type {
	case plan.Matmul:
		return matmulStep(s)
	case plan.Pointwise:
		return pointwiseStep(s)
	case plan.Lookup:
		return lookupStep(s)
	case plan.ScatterAdd:
		return scatterStep(s)
	case plan.Concat:
		return concatStep(s)
	case plan.Tril:
		return trilStep(s)
	}
	f, err := oneInputStep(s, slab)
	if err != nil {
		return computeStep{}, err
	}
	return computeStep{[]inputSize{counted(s)}, func(_ int, ins [][]float64) []float64 { return f(ins[0]) }}, nil
}

// oneInputStep checks a local step that reads one buffer and returns its
// transform.
func oneInputStep(s *plan.Step, slab *slab) (localFunc, error) {
	switch s.Type {
	case plan.Permute:
		return permuteStep(s, slab)
	case plan.LocalReduce:
		return localReduceStep(s)
	}
	return nil, stepError(s, "unknown step type")
}

func permuteStep(s *plan.Step, slab *slab) (localFunc, error) {
	if err := checkDims(s); err != nil {
		return nil, err
	}
	if !isPermutation(s.Perm, len(s.Dims)) {
		return nil, stepError(s, "perm %v is not a permutation of the %d dims", s.Perm, len(s.Dims))
	}
	if s.Count.Output != s.Count.Input {
		return nil, stepError(s, "count.output %d must equal count.input %d", s.Count.Output, s.Count.Input)
	}
	return permuter(s.Dims, s.Perm, slab), nil
}

func localReduceStep(s *plan.Step) (localFunc, error) {
	if err := checkDims(s); err != nil {
		return nil, err
	}
	op, err := reduceOp(s)
	if err != nil {
		return nil, err
	}
	reduced := make([]bool, len(s.Dims))
	n := 1
	for _, k := range s.ReduceDims {
		if k < 0 || k >= len(s.Dims) || reduced[k] {
			return nil, stepError(s, "reduce_dims %v must be distinct positions in dims %v", s.ReduceDims, s.Dims)
		}
		reduced[k] = true
		n *= s.Dims[k]
	}
	if n == 0 || s.Count.Output != s.Count.Input/n {
		return nil, stepError(s, "count.output is %d, reducing dims %v of %v gives %d", s.Count.Output, s.ReduceDims, s.Dims, s.Count.Input/max(n, 1))
	}
	dims := s.Dims
	return func(in []float64) []float64 { return localReduce(op, in, dims, reduced, s.Count.Output) }, nil
}

// checkDims checks that dims views exactly count.input elements.
func checkDims(s *plan.Step) error {
	for _, d := range s.Dims {
		if d < 0 {
			return stepError(s, "dims %v must be non-negative", s.Dims)
		}
	}
	if n := satProduct(s.Dims); n != int64(s.Count.Input) {
		return stepError(s, "dims %v hold %d elements, count.input is %d", s.Dims, n, s.Count.Input)
	}
	return nil
}

// permuter returns the transform that views its input as row-major dims
// and returns the row-major array whose dimension k is input dimension
// perm[k], its strides computed once for every device of a step. The last
// output dimension is copied a row at a time: with copy() when it is the
// last input dimension too, else with its input stride. The rows of the
// second-to-last output dimension are walked by a plain loop, and only the
// dimensions before them by the odometer: rows are often a few elements
// long, and the odometer's step cost more than copying one.
func permuter(dims, perm []int, slab *slab) localFunc {
	stride := strides(dims)
	outDims := make([]int, len(perm))
	outStride := make([]int, len(perm))
	for k, p := range perm {
		outDims[k], outStride[k] = dims[p], stride[p]
	}
	if len(perm) == 0 {
		return slices.Clone[[]float64]
	}
	last := len(perm) - 1
	n, step := outDims[last], outStride[last]
	walked, rows, rowStep := outDims[:max(last-1, 0)], 1, 0
	if last > 0 {
		rows, rowStep = outDims[last-1], outStride[last-1]
	}
	return func(in []float64) []float64 {
		out := slab.make(len(in))[:0]
		for idx := range odometer(walked) {
			base := dot(idx, outStride)
			for r := range rows {
				out = appendRow(out, in, base+r*rowStep, n, step)
			}
		}
		return out
	}
}

// shortRow is the longest row appendRow copies element by element when it
// is contiguous: calling copy() for a row of two elements cost more than
// moving them.
const shortRow = 16

// appendRow appends the n elements of in from base, step apart.
func appendRow(out, in []float64, base, n, step int) []float64 {
	if step == 1 && n > shortRow {
		return append(out, in[base:base+n]...)
	}
	for j := range n {
		out = append(out, in[base+j*step])
	}
	return out
}

// localReduce views in as row-major dims and combines the reduced dims,
// keeping the others in order.
func localReduce(op string, in []float64, dims []int, reduced []bool, n int) []float64 {
	out := make([]float64, n)
	seen := make([]bool, n)
	i := 0
	for idx := range odometer(dims) {
		o := 0
		for k, v := range idx {
			if !reduced[k] {
				o = o*dims[k] + v
			}
		}
		if seen[o] {
			out[o] = combine(op, out[o], in[i])
		} else {
			out[o], seen[o] = in[i], true
		}
		i++
	}
	return out
}

// strides returns the row-major strides of dims.
func strides(dims []int) []int {
	s := make([]int, len(dims))
	acc := 1
	for k := len(dims) - 1; k >= 0; k-- {
		s[k] = acc
		acc *= dims[k]
	}
	return s
}
