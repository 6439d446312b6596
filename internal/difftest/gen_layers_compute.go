package difftest

import (
	"fmt"
	"slices"
	"strings"

	"github.com/nvcomm/nvcomm/internal/ops"
)

// The layer ops proper: elementwise, broadcast, matmul and linear
// (gen_layers.go).

// unary applies one of the registry's unary ops (relu, neg, abs) to cur.
func (l *layerGen) unary(cur lt) lt {
	names := ops.FamilyNames(ops.Unary)
	kind := names[l.r.IntN(len(names))]
	return l.emit(kind, []operand{{t: &cur, mapAxis: identityMap, kAxis: -1}}, cur.shape, 0, "", false, true)
}

// binary applies one of the registry's binary ops (add, sub, mul,
// maximum, minimum) to cur and a second
// operand of equal rank: cur itself, an earlier tensor whose extents
// broadcast with cur's, or a new input, with extent-1 axes on either side
// broadcast. Now and then the extents do not broadcast, on purpose.
func (l *layerGen) binary(cur lt) lt {
	names := ops.FamilyNames(ops.Binary)
	kind := names[l.r.IntN(len(names))]
	rank := len(cur.shape)
	if l.r.IntN(5) == 0 {
		// A number in place of the other operand, as torch's v + 1e-5.
		ops := []operand{{t: &cur, shape: cur.shape, mapAxis: identityMap, kAxis: -1}, {lit: scalars[l.r.IntN(len(scalars))]}}
		if l.r.IntN(2) == 0 {
			ops[0], ops[1] = ops[1], ops[0]
		}
		return l.emit(kind, ops, cur.shape, 0, "", false, true)
	}
	var other operand
	switch r := l.r.IntN(10); {
	case r == 0:
		other.t = &cur
	case r < 4:
		if t, ok := l.fromPool(func(s []int) bool { return broadcasts(s, cur.shape) }); ok {
			other.t = &t
		}
	}
	sure := true
	if other.t != nil {
		other.shape = other.t.shape
	} else {
		other.shape = make([]int, rank)
		for j, e := range cur.shape {
			switch {
			case e == 1 && l.r.IntN(3) == 0:
				other.shape[j] = l.extent(cur.mesh) // cur is broadcast along j
			case l.r.IntN(5) == 0:
				other.shape[j] = 1 // the new operand is
			default:
				other.shape[j] = e
			}
		}
		if l.r.IntN(50) == 0 {
			sure = false
			l.deliberate = append(l.deliberate, "operands that do not broadcast")
			if j := slices.IndexFunc(cur.shape, func(e int) bool { return e > 1 }); j >= 0 {
				other.shape[j] = cur.shape[j] + 1
			} else {
				other.shape = append(other.shape, 2)
			}
		}
	}
	shape := slices.Clone(cur.shape)
	for j := range shape {
		if j < len(other.shape) && other.shape[j] > shape[j] {
			shape[j] = other.shape[j]
		}
	}
	a := operand{t: &cur, shape: cur.shape}
	ops := []operand{a, other}
	if l.r.IntN(2) == 0 {
		ops[0], ops[1] = ops[1], ops[0]
	}
	for i := range ops {
		s := ops[i].shape
		ops[i].kAxis = -1
		ops[i].mapAxis = func(j int) int {
			if j < len(s) && (s[j] != 1 || shape[j] == 1) {
				return j
			}
			return -1 // broadcast along j: the operand is not split
		}
	}
	return l.emit(kind, ops, shape, 0, "", false, sure)
}

// scalars are the numbers a binary op may take as an operand, as a file
// writes them: integers, powers of two, an epsilon.
var scalars = []string{"2", "-1", "0.5", "3.0", "1.0e-5", "0.25", "-0.125", "1.0e-6"}

// composite applies one of the composite ops (softmax, mean, rms_norm,
// layer_norm, log_softmax, cross_entropy, sdpa) to cur: over an axis
// drawn from cur's for softmax, log_softmax and mean, over its last for
// the norms, which now and then take a weight and a bias, new inputs of
// that axis's extent; cross_entropy as gen_layers_loss.go draws it; sdpa
// takes cur as its queries (gen_layers_sdpa.go), a softmax in its place
// for a cur of rank 1.
// The routing ops of a mixture of experts take cur of rank 3 as
// [groups, tokens, experts]: moe_topk of it, and for moe_dispatch the
// dispatch of that selection (a softmax in their place for another rank).
func (l *layerGen) composite(cur lt) lt {
	rank := len(cur.shape)
	names := ops.FamilyNames(ops.Composite)
	kind := names[l.r.IntN(len(names))]
	switch {
	case kind == "sdpa" && rank >= 2:
		return l.sdpa(cur)
	case (kind == "moe_topk" || kind == "moe_dispatch") && rank == 3:
		return l.routing(cur, kind == "moe_dispatch")
	case kind == "sdpa", kind == "moe_topk", kind == "moe_dispatch":
		kind = "softmax"
	}
	x := operand{t: &cur, shape: cur.shape, mapAxis: identityMap, kAxis: -1}
	switch kind {
	case "cross_entropy":
		return l.crossEntropy(cur)
	case "softmax", "mean", "log_softmax":
		ax := l.r.IntN(rank)
		shape := cur.shape
		if kind == "mean" {
			shape = slices.Delete(slices.Clone(cur.shape), ax, ax+1)
		}
		return l.emit(kind, []operand{x}, shape, 0, fmt.Sprintf(", axis: %d", l.signed(ax, rank)), false, true)
	}
	affine := []operand{x}
	last := cur.shape[rank-1:]
	for range l.r.IntN(map[string]int{"rms_norm": 2, "layer_norm": 3}[kind]) {
		affine = append(affine, operand{shape: last, kAxis: -1, mapAxis: func(j int) int {
			if j == rank-1 {
				return 0
			}
			return -1
		}})
	}
	eps := []string{"1.0e-5", "1.0e-6", "0.5", "0"}[l.r.IntN(4)]
	return l.emit(kind, affine, cur.shape, 0, fmt.Sprintf(", axes: [%d], eps: %s", l.signed(rank-1, rank), eps), false, true)
}

// broadcasts reports whether shapes a and b have equal ranks and, at each
// axis, equal extents or an extent of 1 in one of them.
func broadcasts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for j := range a {
		if a[j] != b[j] && a[j] != 1 && b[j] != 1 {
			return false
		}
	}
	return true
}

// fromPool picks an earlier tensor, not Partial, whose shape fits.
func (l *layerGen) fromPool(fits func([]int) bool) (lt, bool) {
	var ok []lt
	for _, t := range l.pool {
		if t.terms == 0 && fits(t.shape) {
			ok = append(ok, t)
		}
	}
	if len(ok) == 0 {
		return lt{}, false
	}
	return ok[l.r.IntN(len(ok))], true
}

// broadcast inserts one or two new axes into cur, at positions written
// from the start or the end; the output declares its full shape.
func (l *layerGen) broadcast(cur lt) lt {
	rank := len(cur.shape) + 1 + l.r.IntN(min(2, 4-len(cur.shape)))
	axes := l.r.Perm(rank)[:rank-len(cur.shape)]
	slices.Sort(axes)
	shape := make([]int, 0, rank)
	written := make([]string, len(axes))
	for i, a := range axes {
		written[i] = fmt.Sprint(a)
		if l.r.IntN(4) == 0 {
			written[i] = fmt.Sprint(a - rank)
		}
	}
	next := 0
	for j := range rank {
		if slices.Contains(axes, j) {
			shape = append(shape, l.extent(cur.mesh))
			continue
		}
		shape = append(shape, cur.shape[next])
		next++
	}
	mapAxis := func(j int) int {
		if slices.Contains(axes, j) {
			return -1
		}
		n, _ := slices.BinarySearch(axes, j)
		return j - n
	}
	extra := ", axes: [" + strings.Join(written, ", ") + "]"
	return l.emit("broadcast", []operand{{t: &cur, mapAxis: mapAxis, kAxis: -1}}, shape, 0, extra, true, true)
}

// matmul multiplies cur, as a [..., m, k] or as b [..., k, n], with a new
// operand (or an earlier tensor that fits): b 2-D and shared by every
// batch, or with a's batch axes. Now and then the contracted extents
// differ, on purpose.
func (l *layerGen) matmul(cur lt) lt {
	r := len(cur.shape)
	var a, b operand
	var shape []int
	var k int
	if l.r.IntN(3) != 0 {
		// cur is a: [...batch, m, k].
		k = cur.shape[r-1]
		n := l.extent(cur.mesh)
		bs := []int{k, n}
		if r > 2 && l.r.IntN(2) == 0 {
			bs = append(slices.Clone(cur.shape[:r-2]), k, n)
		}
		a = operand{t: &cur, shape: cur.shape}
		b = operand{shape: bs}
		if t, ok := l.fromPool(func(s []int) bool {
			return len(s) == 2 && s[0] == k || len(s) == r && r > 2 && s[r-2] == k && slices.Equal(s[:r-2], cur.shape[:r-2])
		}); ok && l.r.IntN(4) == 0 {
			b = operand{t: &t, shape: t.shape}
		}
		shape = append(slices.Clone(cur.shape[:r-1]), b.shape[len(b.shape)-1])
	} else {
		// cur is b: [k, n] or [...batch, k, n].
		k = cur.shape[r-2]
		m := l.extent(cur.mesh)
		as := append(slices.Clone(cur.shape[:r-2]), m, k)
		if r == 2 && l.r.IntN(3) == 0 {
			as = []int{l.extent(cur.mesh), m, k} // batches sharing b
		}
		a = operand{shape: as}
		b = operand{t: &cur, shape: cur.shape}
		shape = append(slices.Clone(as[:len(as)-1]), cur.shape[r-1])
	}
	sure := true
	if l.r.IntN(50) == 0 && (a.t == nil || b.t == nil) {
		sure = false
		l.deliberate = append(l.deliberate, "matmul extents k that differ")
		if a.t == nil {
			a.shape = slices.Clone(a.shape)
			a.shape[len(a.shape)-1]++
		} else {
			b.shape = slices.Clone(b.shape)
			b.shape[len(b.shape)-2]++
		}
	}
	R, ra, rb := len(shape), len(a.shape), len(b.shape)
	a.mapAxis = func(j int) int {
		if j < R-1 {
			return j // batch and m
		}
		return -1
	}
	a.kAxis = ra - 1
	b.mapAxis = func(j int) int {
		switch {
		case j == R-1:
			return rb - 1 // n
		case j < R-2 && rb == R:
			return j // batch, when b has its own
		}
		return -1
	}
	b.kAxis = rb - 2
	return l.emit("matmul", []operand{a, b}, shape, k, "", false, sure)
}

// linear computes x @ wᵀ (+ bias) with cur as x [..., k], as w [n, k]
// (rank 2) or as the bias [n] (rank 1), the other operands new or earlier
// tensors that fit. Now and then w's k or the bias's n is off, on purpose.
func (l *layerGen) linear(cur lt) lt {
	r := len(cur.shape)
	var x, w operand
	var bias *operand
	var k, n int
	role := l.r.IntN(10)
	switch {
	case role < 2 && r == 2:
		// cur is w.
		n, k = cur.shape[0], cur.shape[1]
		xs := make([]int, 1+l.r.IntN(3))
		for i := range xs {
			xs[i] = l.extent(cur.mesh)
		}
		xs[len(xs)-1] = k
		x, w = operand{shape: xs}, operand{t: &cur, shape: cur.shape}
	case role < 3 && r == 1:
		// cur is the bias.
		n, k = cur.shape[0], l.extent(cur.mesh)
		xs := []int{l.extent(cur.mesh), k}
		x, w = operand{shape: xs}, operand{shape: []int{n, k}}
		bias = &operand{t: &cur, shape: cur.shape}
	default:
		k, n = cur.shape[r-1], l.extent(cur.mesh)
		x, w = operand{t: &cur, shape: cur.shape}, operand{shape: []int{n, k}}
		if t, ok := l.fromPool(func(s []int) bool { return len(s) == 2 && s[1] == k }); ok && l.r.IntN(4) == 0 {
			w, n = operand{t: &t, shape: t.shape}, t.shape[0]
		}
	}
	if bias == nil && l.r.IntN(5) < 2 {
		bias = &operand{shape: []int{n}}
		if t, ok := l.fromPool(func(s []int) bool { return len(s) == 1 && s[0] == n }); ok && l.r.IntN(4) == 0 {
			bias = &operand{t: &t, shape: t.shape}
		}
	}
	sure := true
	if l.r.IntN(50) == 0 {
		switch {
		case w.t == nil:
			sure = false
			l.deliberate = append(l.deliberate, "linear extents k that differ")
			w.shape = []int{n, k + 1}
		case bias != nil && bias.t == nil:
			sure = false
			l.deliberate = append(l.deliberate, "a linear bias that is not [n]")
			bias.shape = []int{n + 1}
		}
	}
	shape := append(slices.Clone(x.shape[:len(x.shape)-1]), n)
	R := len(shape)
	x.mapAxis = func(j int) int {
		if j < R-1 {
			return j
		}
		return -1
	}
	x.kAxis = len(x.shape) - 1
	nAxis := func(j int) int {
		if j == R-1 {
			return 0
		}
		return -1
	}
	w.mapAxis, w.kAxis = nAxis, 1
	ops := []operand{x, w}
	if bias != nil {
		bias.mapAxis, bias.kAxis = nAxis, -1
		ops = append(ops, *bias)
	}
	return l.emit("linear", ops, shape, k, "", false, sure)
}

// routing is moe_topk of cur [groups, tokens, experts] (top_k from 1 to
// the experts), and with dispatch the moe_dispatch of its selection (a
// capacity from 1 to the tokens, which may drop some).
func (l *layerGen) routing(cur lt, dispatch bool) lt {
	x := operand{t: &cur, shape: cur.shape, mapAxis: identityMap, kAxis: -1}
	k := 1 + l.r.IntN(cur.shape[2])
	sel := l.emit("moe_topk", []operand{x}, cur.shape, 0, fmt.Sprintf(", top_k: %d", k), false, true)
	if !dispatch {
		return sel
	}
	c := 1 + l.r.IntN(cur.shape[1])
	s := operand{t: &sel, shape: sel.shape, kAxis: -1, mapAxis: func(j int) int {
		if j < 3 {
			return j
		}
		return -1 // the capacity's slots: a new axis
	}}
	return l.emit("moe_dispatch", []operand{s}, append(slices.Clone(sel.shape), c), 0, fmt.Sprintf(", capacity: %d", c), false, true)
}
