package sim

import (
	"fmt"

	"github.com/nvcomm/nvcomm/internal/ops"
	"github.com/nvcomm/nvcomm/internal/plan"
)

// This file gives scatter_add its exact semantics: an index is data, an
// integer, and the values of its row are added, modulo [modulus], into
// the output's row at it — nothing for an index outside the rows, as a
// device that does not own a row adds nothing there in a ScatterAdd
// step. Summed over the devices that split the indices, every row gets
// the values of its indices exactly once, so the plan's sum is the
// reference's row exactly.

// scatterDomain is index [..., n] and src [..., n, e] with rows: [...,
// rows, e, n], n a trailing reduction axis.
func scatterDomain(op plan.Op, ins []operand) (logicalDomain, error) {
	index, src := ins[0], ins[1]
	shape, ok := ops.ScatterShape(index.shape, src.shape, op.Attrs.Int(ops.AttrRows))
	if !ok || op.Attrs.Int(ops.AttrRows) < 1 {
		return logicalDomain{}, fmt.Errorf("op %d (scatter_add): index %q %v and src %q %v are not [..., n] and [..., n, e] with rows > 0",
			op.Index, index.name, index.shape, src.name, src.shape)
	}
	return logicalDomain{shape: append(shape, index.shape[len(index.shape)-1]), reduction: []int{len(shape)}}, nil
}

// scatterReference is scatter_add on unsharded values, from the
// definition: out[b, v, j] = Σ over i with index[b, i] = v of src[b, i,
// j], b running over the leading dims. It is written apart from the
// ScatterAdd step's kernel so that the two do not share a mistake.
func scatterReference(index, src operand, rows int) []float64 {
	r := len(src.shape)
	n, e := src.shape[r-2], src.shape[r-1]
	out := make([]float64, product(src.shape[:r-2])*rows*e)
	for k, id := range index.vals {
		if id < 0 || id >= float64(rows) {
			continue
		}
		b, at := k/n, int(id)
		for j := range e {
			o := (b*rows+at)*e + j
			out[o] = sumMod(out[o], src.vals[k*e+j])
		}
	}
	return out
}

// scatterStep checks a ScatterAdd: inputs [indices, values], dims [Bt, N,
// V, E], Bt·N indices (count.input), values of Bt·N·E elements, an output
// of Bt·V·E (count.output), and one offset per device: device k's block
// holds rows offsets[k] to offsets[k] + V - 1.
func scatterStep(s *plan.Step) (computeStep, error) {
	return indexedStep(s, indexed{step: "ScatterAdd", second: "values", gathers: false, kernel: scatterKernel})
}

// scatterKernel is a device's ScatterAdd: out[b, ids[b, i] − off, j] +=
// values[b, i, j] where that row is the device's; the other indices add
// nothing.
func scatterKernel(ids, values []float64, bt, n, v, e, off int) []float64 {
	out := make([]float64, bt*v*e)
	for b := range bt {
		for i := range n {
			r := ids[b*n+i] - float64(off)
			if r < 0 || r >= float64(v) {
				continue // not this device's row
			}
			row := out[(b*v+int(r))*e : (b*v+int(r)+1)*e]
			src := values[(b*n+i)*e:]
			for j := range row {
				row[j] = sumMod(row[j], src[j])
			}
		}
	}
	return out
}
