package difftest

import (
	"fmt"
	"slices"
)

// The ops that move data along one axis (slice, cat), drawn with the
// other shape ops when Generator.ShapeOps is set. Their axis may be one
// the operands or the output split: the optimal policy then reshards
// (a set before, or after), nvFuser's rules reject some of them.

// sliceOf keeps a random window of a random axis of cur (of extent 2 or
// more, when it has one), its bounds now and then written from the end.
func (l *layerGen) sliceOf(cur lt) lt {
	a := l.alongAxis(cur)
	n := cur.shape[a]
	start := l.r.IntN(n)
	end := start + 1 + l.r.IntN(n-start)
	shape := slices.Clone(cur.shape)
	shape[a] = end - start
	startText, endText := start, end
	if l.r.IntN(4) == 0 {
		startText -= n
	}
	if l.r.IntN(4) == 0 && end < n {
		endText -= n
	}
	extra := fmt.Sprintf(", axis: %d, start: %d, end: %d", l.signed(a, len(cur.shape)), startText, endText)
	return l.emit("slice", []operand{{t: &cur, mapAxis: identityMap, kAxis: -1}}, shape, 0, extra, false, true)
}

// catOf joins cur with one or two operands along a random axis: cur
// itself, or new inputs of cur's shape but along the axis, sharded as the
// output requires off it.
func (l *layerGen) catOf(cur lt) lt {
	a := l.alongAxis(cur)
	ops := []operand{{t: &cur, mapAxis: identityMap, kAxis: -1}}
	shape := slices.Clone(cur.shape)
	for range 1 + l.r.IntN(2) {
		if l.r.IntN(3) == 0 {
			ops = append(ops, operand{t: &cur, mapAxis: identityMap, kAxis: -1})
			shape[a] += cur.shape[a]
			continue
		}
		in := slices.Clone(cur.shape)
		in[a] = 1 + l.r.IntN(4)
		// Sharded as the output off the axis only: along it, the output's
		// split need not divide the input's extent.
		off := func(j int) int {
			if j == a {
				return -1
			}
			return j
		}
		ops = append(ops, operand{shape: in, mapAxis: off, kAxis: -1})
		shape[a] += in[a]
	}
	if l.r.IntN(2) == 0 { // cur not first, now and then
		k := 1 + l.r.IntN(len(ops)-1)
		ops[0], ops[k] = ops[k], ops[0]
	}
	extra := fmt.Sprintf(", axis: %d", l.signed(a, len(cur.shape)))
	return l.emit("cat", ops, shape, 0, extra, false, true)
}

// alongAxis draws the axis a slice or a cat works along: one of extent 2
// or more, when cur has one.
func (l *layerGen) alongAxis(cur lt) int {
	var long []int
	for a, e := range cur.shape {
		if e > 1 {
			long = append(long, a)
		}
	}
	if len(long) == 0 {
		return l.r.IntN(len(cur.shape))
	}
	return long[l.r.IntN(len(long))]
}

// sliceOrCat appends a slice or a cat reading cur.
func (l *layerGen) sliceOrCat(cur lt) lt {
	if l.r.IntN(2) == 0 {
		return l.sliceOf(cur)
	}
	return l.catOf(cur)
}
