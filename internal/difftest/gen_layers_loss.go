package difftest

import "slices"

// crossEntropy applies cross_entropy to cur [..., v], a float chain's,
// with new integer labels of cur's shape without its last axis: reduction
// mean (written, or left to its default) gives a scalar, which ends the
// chain, and none the per-token losses. A chain of an integer dtype, or
// of rank 1 (whose labels would be a rank-0 input, which the generator
// does not write), gets a unary op instead. Now and then the labels keep gather's extent-1
// axis, which cross_entropy does not take, on purpose.
func (l *layerGen) crossEntropy(cur lt) lt {
	r := len(cur.shape)
	if isIntDType(l.dtype) || r < 2 {
		return l.unary(cur)
	}
	tokens := slices.Clone(cur.shape[:r-1])
	labels := operand{shape: tokens, dtype: []string{"int32", "int64"}[l.r.IntN(2)], kAxis: -1, mapAxis: identityMap}
	sure := true
	if l.r.IntN(50) == 0 {
		sure = false
		l.deliberate = append(l.deliberate, "cross_entropy labels with gather's extent-1 axis")
		labels.shape = append(slices.Clone(tokens), 1)
	}
	x := operand{t: &cur, shape: cur.shape, kAxis: -1, mapAxis: func(j int) int {
		if j < r-1 {
			return j
		}
		return -1
	}}
	reduction, shape := []string{"", ", reduction: mean", ", reduction: none"}[l.r.IntN(3)], []int{}
	if reduction == ", reduction: none" {
		shape = tokens
	}
	return l.emit("cross_entropy", []operand{x, labels}, shape, 0, reduction, false, sure)
}
