package reshard

import (
	"slices"

	"github.com/nvcomm/nvcomm/internal/ir"
)

// Bounds of uneven shards count real elements (docs/lowering.md, "Lower
// bounds"): the collectives nvcomm emits move padded buffers, but an
// AllToAllV's chunks need not be equal, so a plan may move a device's
// real elements and no hole. A device of a padded tensor must receive the
// real elements of its block that it does not hold, and a reduction's
// terms are those of the devices that hold a real element of the reduced
// axis. Counting holes would make the bound exceed plans the vocabulary
// can write: [5, 16] Shard(0) → Replicate() on 4 devices pads device 3's
// nothing to 2 rows, but it lacks 5 rows, not 6.

// realBlocks counts the real elements of blocks in the views of one op's
// factoring, some of whose axes are padded. A nil *realBlocks stands for
// an op that pads nothing, whose blocks are all real: its methods then
// count the views as they are.
type realBlocks struct {
	real   []int        // per factoring axis, the true extent
	digits [][]ir.Digit // per factoring axis, all its digits, most significant first
}

// realBlocksOf returns the real blocks of c's factoring, whose axes hold
// the producer's value axes, or nil when no axis is padded.
func (c lowering) realBlocksOf(producer *ir.Tensor) *realBlocks {
	m := c.fact.maps.producer
	if m.at != nil {
		return nil // parts of axes are never padded (factor)
	}
	return newRealBlocks(c.fact, producer.Shape(), m.to)
}

// newRealBlocks returns the real blocks of factoring f, where value axis j
// of extent shape[j] is axis to[j], or nil when no axis is padded.
func newRealBlocks(f *factoring, shape, to []int) *realBlocks {
	var real []int
	for j, n := range shape {
		if a := to[j]; n < f.extents[a] {
			if real == nil {
				real = slices.Clone(f.extents)
			}
			real[a] = n
		}
	}
	if real == nil {
		return nil
	}
	b := &realBlocks{real: real, digits: make([][]ir.Digit, len(real))}
	for a, n := range f.extents {
		b.digits[a] = f.fine(a, 1, n)
	}
	return b
}

// size is the number of real elements of v's block on device d, which
// must be in v's mesh.
func (b *realBlocks) size(v *view, d int) int64 {
	if b == nil {
		return int64(v.size())
	}
	vals, _ := v.deviceDigits(nil, d)
	return b.count(v, vals)
}

// total is the number of real elements of the tensor v views.
func (b *realBlocks) total(v *view) int64 {
	if b == nil {
		return int64(v.size()) * int64(extentOf(allDid(v)))
	}
	return b.count(v, nil)
}

// need is need(in, out, d) over real elements: the real elements of d's
// block of out that its block of in lacks. As need does, it reads in's
// digits only where out has them.
func (b *realBlocks) need(in, out *view, d int) int64 {
	if b == nil {
		return need(in, out, d)
	}
	outVals, ok := out.deviceDigits(nil, d)
	if !ok {
		return 0
	}
	mine := b.count(out, outVals)
	inVals, ok := in.deviceDigits(nil, d)
	if !ok {
		return mine
	}
	both := outVals
	for _, x := range inVals {
		v, fixed := valueOf(outVals, x.digit)
		switch {
		case fixed && v != x.value:
			return mine // the blocks are disjoint
		case !fixed && slices.Contains(out.stored, x.digit):
			both = append(both, x)
		}
	}
	return mine - b.count(out, both)
}

// count is the number of real elements of a block of v whose device
// digits take the values vals fixes: a product over v's axes. A digit of
// an axis that v lacks (an intermediate's, combined by a LocalReduce)
// counts as 0, the least index its elements stand for: an element is real
// when one of its indices is.
func (b *realBlocks) count(v *view, vals []digitValue) int64 {
	var axes []int
	present := func(g ir.Digit) bool { return slices.Contains(v.stored, g) || slices.Contains(allDid(v), g) }
	for _, ds := range [][]ir.Digit{v.stored, allDid(v)} {
		for _, g := range ds {
			if !slices.Contains(axes, g.Axis) {
				axes = append(axes, g.Axis)
			}
		}
	}
	n := int64(1)
	for _, a := range axes {
		fixed := vals
		for _, g := range b.digits[a] {
			if !present(g) {
				fixed = append(fixed, digitValue{g, 0})
			}
		}
		// A block is a part of one buffer: no overflow (sizes.go).
		n *= countBelow(b.digits[a], fixed, b.real[a])
	}
	return n
}

// countBelow counts the indices below n, of an axis whose digits are ds
// (most significant first, tiling it), whose digits fixed in vals take
// their values: a digit-by-digit count, as of the numbers below n in
// mixed radix, with the fixed digits' choices left out.
func countBelow(ds []ir.Digit, vals []digitValue, n int) int64 {
	free := make([]int64, len(ds)+1) // free[i]: the choices of ds[i:]
	free[len(ds)] = 1
	for i := len(ds) - 1; i >= 0; i-- {
		free[i] = free[i+1]
		if _, fixed := valueOf(vals, ds[i]); !fixed {
			free[i] *= int64(ds[i].Extent)
		}
	}
	if len(ds) == 0 || n >= ds[0].Span() {
		return free[0]
	}
	count := int64(0)
	for i, g := range ds {
		limit := (n / g.Stride) % g.Extent // n's digit
		v, fixed := valueOf(vals, g)
		if !fixed {
			count += int64(limit) * free[i+1]
			continue
		}
		if v < limit {
			count += free[i+1]
		}
		if v != limit {
			return count
		}
	}
	return count
}

// terms is the number of groups of devices that hold a real element of a
// reduction's axis, whose digits split among devices are split.
func (b *realBlocks) terms(split []ir.Digit) int {
	if b == nil || len(split) == 0 {
		return extentOf(split)
	}
	n := 0
	for k := range extentOf(split) {
		first := 0 // the group's first index
		for i, x := range digitsOf(k, split) {
			first += x * split[i].Stride
		}
		if first < b.real[split[0].Axis] {
			n++
		}
	}
	return n
}

// realLocalSize is the number of real elements tensor t holds on device d
// of its mesh: its local size, less the holes of an uneven shard.
func realLocalSize(t *ir.Tensor, d int) int64 {
	if !t.IsUneven() {
		return int64(t.LocalSize())
	}
	to := make([]int, len(t.Shape()))
	for j := range to {
		to[j] = j
	}
	m := valueAxes{to: to}
	f, ok := newFactoring(t.PaddedShape(), []*ir.Tensor{t}, []valueAxes{m})
	if !ok {
		return 0 // a tensor factors alone; 0 would still be a bound
	}
	return newRealBlocks(f, t.Shape(), to).size(f.tensorView(t, m), d)
}
