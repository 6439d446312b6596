package sim

import (
	"fmt"
	"slices"

	"github.com/nvcomm/nvcomm/internal/plan"
)

// concatStep checks a Concat (docs/plan.md): dims [outer, N, inner], one
// window [m, start, len] per input within its m entries, the lens summing
// to N, count.input the first input's outer·m·inner and count.output the
// product of dims; each device's output is, for each of the outer rows in
// turn, the windows of its inputs in order.
func concatStep(s *plan.Step) (computeStep, error) {
	names := s.Operands()
	if len(s.Dims) != 3 || !nonNegative(s.Dims) {
		return computeStep{}, stepError(s, "dims %v must be [outer, N, inner], three non-negative extents", s.Dims)
	}
	if len(s.Windows) != len(names) {
		return computeStep{}, stepError(s, "windows has %d entries for %d inputs", len(s.Windows), len(names))
	}
	outer, inner := s.Dims[0], s.Dims[2]
	sizes, total := make([]inputSize, len(names)), 0
	for k, w := range s.Windows {
		if len(w) != 3 || w[0] < 1 || w[1] < 0 || w[2] < 1 || w[1]+w[2] > w[0] {
			return computeStep{}, stepError(s, "windows[%d] %v must be [m, start, len] with 0 <= start < start+len <= m", k, w)
		}
		n := satProduct([]int{outer, w[0], inner})
		if k == 0 && n != int64(s.Count.Input) {
			return computeStep{}, stepError(s, "count.input is %d, dims %v and windows[0] give outer·m·inner = %d", s.Count.Input, s.Dims, n)
		}
		sizes[k] = inputSize{int(n), fmt.Sprintf("want %d (outer·m·inner of dims %v and windows[%d])", n, s.Dims, k)}
		total += w[2]
	}
	if total != s.Dims[1] {
		return computeStep{}, stepError(s, "the windows' lens sum to %d, but dims[1] is %d", total, s.Dims[1])
	}
	if got := satProduct(s.Dims); got != int64(s.Count.Output) {
		return computeStep{}, stepError(s, "count.output is %d, dims %v give %d", s.Count.Output, s.Dims, got)
	}
	windows := slices.Clone(s.Windows)
	return computeStep{sizes, func(_ int, ins [][]float64) []float64 {
		out := make([]float64, 0, s.Count.Output)
		for o := range outer {
			for k, w := range windows {
				at := (o*w[0] + w[1]) * inner
				out = append(out, ins[k][at:at+w[2]*inner]...)
			}
		}
		return out
	}}, nil
}

// sliceReference is slice's output, element by element from the
// definition: out[..., i, ...] = in[..., start+i, ...] along axis (apart
// from the Concat step's kernel).
func sliceReference(in operand, axis, start int, out []int) []float64 {
	st := strides(in.shape)
	vals := make([]float64, 0, product(out))
	forEachIndex(out, func(idx []int) {
		at := 0
		for d, i := range idx {
			if d == axis {
				i += start
			}
			at += i * st[d]
		}
		vals = append(vals, in.vals[at])
	})
	return vals
}

// catReference is cat's output, element by element from the definition:
// out[..., i, ...] is operand k's [..., i - o_k, ...] along axis, o_k the
// sum of the extents along axis of the operands before k.
func catReference(ins []operand, axis int, out []int) []float64 {
	vals := make([]float64, 0, product(out))
	forEachIndex(out, func(idx []int) {
		i, k := idx[axis], 0
		for i >= ins[k].shape[axis] {
			i -= ins[k].shape[axis]
			k++
		}
		st, at := strides(ins[k].shape), 0
		for d, j := range idx {
			if d == axis {
				j = i
			}
			at += j * st[d]
		}
		vals = append(vals, ins[k].vals[at])
	})
	return vals
}

// forEachIndex calls f with every index of an array of shape dims, in
// row-major order; f must not keep the slice.
func forEachIndex(dims []int, f func(idx []int)) {
	idx := make([]int, len(dims))
	for range product(dims) {
		f(idx)
		for k := len(idx) - 1; k >= 0; k-- {
			if idx[k]++; idx[k] < dims[k] {
				break
			}
			idx[k] = 0
		}
	}
}
