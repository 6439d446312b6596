package difftest

import (
	"fmt"
	"slices"
	"strings"
)

// The ops that move or convert data (permute, reshape, cast, tril; slice
// and cat in gen_layers_slice.go), drawn when
// Generator.ShapeOps is set.

// shapeOp appends a permute, a reshape, a pair of casts, a tril, a slice
// or a cat (gen_layers_slice.go) reading cur.
func (l *layerGen) shapeOp(cur lt) lt {
	if len(cur.shape) == 0 {
		return l.castTwice(cur) // nothing to permute or split
	}
	switch l.r.IntN(5) {
	case 0:
		return l.permute(cur)
	case 1:
		return l.reshape(cur)
	case 2:
		return l.sliceOrCat(cur)
	case 3:
		if len(cur.shape) >= 2 {
			return l.tril(cur)
		}
	}
	return l.castTwice(cur)
}

// tril masks cur's last two dims with a diagonal from −2 to 2: below,
// on and above the main one, so that a block whose diagonal is off by
// its offsets masks other entries.
func (l *layerGen) tril(cur lt) lt {
	extra := fmt.Sprintf(", diagonal: %d", l.r.IntN(5)-2)
	return l.emit("tril", []operand{{t: &cur, mapAxis: identityMap, kAxis: -1}}, slices.Clone(cur.shape), 0, extra, false, true)
}

// permute reorders cur's dims, some written from the end.
func (l *layerGen) permute(cur lt) lt {
	rank := len(cur.shape)
	dims := l.r.Perm(rank)
	shape, written := make([]int, rank), make([]string, rank)
	for j, d := range dims {
		shape[j] = cur.shape[d]
		written[j] = fmt.Sprint(l.signed(d, rank))
	}
	extra := ", dims: [" + strings.Join(written, ", ") + "]"
	return l.emit("permute", []operand{{t: &cur, mapAxis: func(j int) int { return dims[j] }, kAxis: -1}}, shape, 0, extra, false, true)
}

// reshape splits a dim of cur that has a divisor into two, or merges two
// adjacent dims, and now and then writes one extent as -1. Its output may
// ask for a shard its operand's cannot become (an inner piece): nvFuser's
// rules reject that, so the op is not sure.
func (l *layerGen) reshape(cur lt) lt {
	rank := len(cur.shape)
	var shape []int
	a := l.r.IntN(rank)
	f := divisor(cur.shape[a], l.r.IntN(2) == 0)
	switch {
	case rank >= 2 && rank < 4 && (f == 0 || l.r.IntN(2) == 0) && a+1 < rank:
		shape = append(append(append([]int{}, cur.shape[:a]...), cur.shape[a]*cur.shape[a+1]), cur.shape[a+2:]...)
	case f > 0 && rank < 4:
		shape = append(append(append([]int{}, cur.shape[:a]...), f, cur.shape[a]/f), cur.shape[a+1:]...)
	default:
		shape = append([]int{}, cur.shape...) // the same shape: a reshape that changes nothing
	}
	written := make([]string, len(shape))
	free := -1
	if l.r.IntN(3) == 0 && len(shape) > 0 {
		free = l.r.IntN(len(shape))
	}
	for j, e := range shape {
		written[j] = fmt.Sprint(e)
		if j == free {
			written[j] = "-1"
		}
	}
	extra := ", shape: [" + strings.Join(written, ", ") + "]"
	return l.emit("reshape", []operand{{t: &cur, mapAxis: func(int) int { return -1 }, kAxis: -1}}, shape, 0, extra, false, false)
}

// divisor returns a divisor of n other than 1 and n, the smallest or the
// largest, or 0 when n has none.
func divisor(n int, smallest bool) int {
	found := 0
	for f := 2; f < n; f++ {
		if n%f == 0 {
			found = f
			if smallest {
				break
			}
		}
	}
	return found
}

// castTwice casts cur to another dtype and back to the chain's, so that
// later ops read operands of one dtype.
func (l *layerGen) castTwice(cur lt) lt {
	chain := l.dtype
	l.dtype = dtypes[l.r.IntN(len(dtypes))] // what the first cast's output declares
	mid := l.emit("cast", []operand{{t: &cur, mapAxis: identityMap, kAxis: -1}}, cur.shape, 0, ", dtype: "+l.dtype, false, true)
	l.dtype = chain
	out := l.emit("cast", []operand{{t: &mid, mapAxis: identityMap, kAxis: -1}}, cur.shape, 0, ", dtype: "+chain, false, true)
	l.pool = slices.DeleteFunc(l.pool, func(t lt) bool { return t.name == mid.name }) // of another dtype
	return out
}
