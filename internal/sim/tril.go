package sim

import "github.com/nvcomm/nvcomm/internal/plan"

// This file gives tril its exact semantics: data movement and zeros, so
// its reference is exact, and a PASS proves which entries each device
// keeps — the diagonal of its block, from the block's place in the
// tensor (the Tril step's offsets) — not only which values. The
// reference is written from the definition, index by index over the
// whole tensor, apart from the Tril step's kernel, which masks one block
// with its own diagonal, so that the two do not share a mistake.

// trilReference is torch.tril(x, diagonal) on unsharded values:
// out[..., i, j] = x[..., i, j] where j − i ≤ diagonal, else 0.
func trilReference(x operand, diagonal int) []float64 {
	r := len(x.shape)
	rows, cols := x.shape[r-2], x.shape[r-1]
	out := make([]float64, len(x.vals))
	for at, v := range x.vals {
		i, j := at/cols%rows, at%cols
		if j-i <= diagonal {
			out[at] = v
		}
	}
	return out
}

// trilStep checks a Tril: one input, dims [Bt, R, C] of non-negative
// extents holding count.input elements, count.output equal to it, and
// one diagonal per device (offsets).
func trilStep(s *plan.Step) (computeStep, error) {
	if len(s.Inputs) > 0 {
		return computeStep{}, stepError(s, "a Tril reads one buffer (input), got inputs %q", s.Inputs)
	}
	if len(s.Dims) != 3 {
		return computeStep{}, stepError(s, "dims %v must be [Bt, R, C], three extents", s.Dims)
	}
	if err := checkDims(s); err != nil {
		return computeStep{}, err
	}
	if s.Count.Output != s.Count.Input {
		return computeStep{}, stepError(s, "count.output %d must equal count.input %d", s.Count.Output, s.Count.Input)
	}
	if len(s.Offsets) != len(s.Devices) {
		return computeStep{}, stepError(s, "offsets has %d entries for %d devices (each device's diagonal)", len(s.Offsets), len(s.Devices))
	}
	rows, cols, diag := s.Dims[1], s.Dims[2], s.Offsets
	return computeStep{[]inputSize{counted(s)}, func(k int, ins [][]float64) []float64 {
		return trilKernel(ins[0], rows, cols, diag[k])
	}}, nil
}

// trilKernel masks a block viewed as [Bt, R, C] with diagonal d: each
// row i keeps its first i + d + 1 columns (none when that is below 1,
// all when it is C or more) and zeroes the rest.
func trilKernel(in []float64, rows, cols, d int) []float64 {
	out := make([]float64, len(in))
	for base := 0; base < len(in); base += rows * cols {
		for i := range rows {
			keep := min(max(i+d+1, 0), cols)
			row := base + i*cols
			copy(out[row:row+keep], in[row:row+keep])
		}
	}
	return out
}
