package export

import (
	"fmt"
	"slices"
	"strings"
)

// The geometry of the strided copies the exporter fuses local steps into
// (docs/export.md, "Fusion"). Every such copy moves data between two
// buffers: X, viewed as the row-major shape dx and permuted by px, whose
// flat order A is what the plan's steps see; and Y, the compact buffer of a
// window of A viewed as the row-major shape w (an Unpad's box, a Pad's real
// box, the chunk a Slice keeps). A copy is a few pieces, each one
// `y_view.copy_(x_view)` (or the reverse) between views of the two buffers.

// refinement is the common refinement of two row-major shapes of one flat
// buffer: the finest shape f (no extent of 1) of which both are merges, and
// for each dim of each shape the positions in f of its digits.
type refinement struct {
	f      []int
	ga, gb [][]int
}

// refine returns the common refinement of shapes a and b, which must hold
// the same number of elements. ok is false when there is none: a boundary
// of one falls inside a digit of the other that it does not divide (a
// [2, 3] and a [3, 2] view of six elements), or an extent is not positive.
func refine(a, b []int) (refinement, bool) {
	sa, oka := strides(a)
	sb, okb := strides(b)
	if !oka || !okb || sa[0] != sb[0] {
		return refinement{}, false
	}
	bounds := slices.Compact(slices.Sorted(slices.Values(append(slices.Clone(sa), sb...))))
	for i := 1; i < len(bounds); i++ {
		if bounds[i]%bounds[i-1] != 0 {
			return refinement{}, false
		}
	}
	// Digit k, outermost first, spans strides bounds[n-2-k] (its unit) to
	// bounds[n-1-k].
	n := len(bounds)
	r := refinement{f: make([]int, n-1)}
	for k := range r.f {
		r.f[k] = bounds[n-1-k] / bounds[n-2-k]
	}
	digit := func(stride int) int { return n - 1 - slices.Index(bounds, stride) }
	group := func(s []int) [][]int {
		g := make([][]int, len(s)-1)
		for d := range g {
			for k := digit(s[d]); k < digit(s[d+1]); k++ {
				g[d] = append(g[d], k)
			}
		}
		return g
	}
	r.ga, r.gb = group(sa), group(sb)
	return r, true
}

// strides returns the element count of the shape and of each of its
// suffixes: s[d] is the count of dims d.. (s[len] = 1); ok is false for a
// non-positive extent.
func strides(shape []int) ([]int, bool) {
	s := make([]int, len(shape)+1)
	s[len(shape)] = 1
	for d := len(shape) - 1; d >= 0; d-- {
		if shape[d] < 1 {
			return nil, false
		}
		s[d] = s[d+1] * shape[d]
	}
	return s, true
}

// sel is the selection of one digit in a piece: the range [lo, hi), or
// the single value lo indexed away (fixed).
type sel struct {
	lo, hi int
	fixed  bool
}

// spans splits the flat range [lo, hi) of a group of digits with extents
// radix (row-major) into pieces that are boxes: leading digits fixed, one
// digit a range, the trailing ones whole. An empty range has no pieces.
func spans(lo, hi int, radix []int) [][]sel {
	if lo >= hi {
		return nil
	}
	if len(radix) == 0 {
		return [][]sel{{}}
	}
	rest := 1
	for _, e := range radix[1:] {
		rest *= e
	}
	whole := func(a, b int) [][]sel {
		p := []sel{{lo: a, hi: b}}
		for _, e := range radix[1:] {
			p = append(p, sel{lo: 0, hi: e})
		}
		return [][]sel{p}
	}
	if lo%rest == 0 && hi%rest == 0 {
		return whole(lo/rest, hi/rest)
	}
	q0, q1 := lo/rest, (hi-1)/rest
	fix := func(q, a, b int) [][]sel {
		var out [][]sel
		for _, p := range spans(a, b, radix[1:]) {
			out = append(out, append([]sel{{lo: q, hi: q + 1, fixed: true}}, p...))
		}
		return out
	}
	if q0 == q1 {
		return fix(q0, lo-q0*rest, hi-q0*rest)
	}
	out := fix(q0, lo-q0*rest, rest)
	if q0+1 < q1 {
		out = append(out, whole(q0+1, q1)...)
	}
	return append(out, fix(q1, 0, hi-q1*rest)...)
}

// geometry is one strided copy: X viewed as dx and permuted by px is the
// flat A, and A viewed as w is refined, with X's dims, by r.
type geometry struct {
	dx, px, w []int
	r         refinement // of q = dx permuted by px (ga) and w (gb)
}

// newGeometry checks that dx permuted by px and w have a common
// refinement; ok is false when they have none.
func newGeometry(dx, px, w []int) (geometry, bool) {
	if !isPermutation(px, len(dx)) {
		return geometry{}, false
	}
	q := make([]int, len(px))
	for k, d := range px {
		q[k] = dx[d]
	}
	r, ok := refine(q, w)
	return geometry{dx: dx, px: px, w: w, r: r}, ok
}

// boxPieces splits the window [lo, hi) of w (per dim) into pieces, each a
// selection of every digit of the refinement.
func (g geometry) boxPieces(lo, hi []int) [][]sel {
	pieces := [][]sel{make([]sel, len(g.r.f))}
	for d := range g.w {
		radix := make([]int, len(g.r.gb[d]))
		for i, k := range g.r.gb[d] {
			radix[i] = g.r.f[k]
		}
		var next [][]sel
		for _, p := range pieces {
			for _, s := range spans(lo[d], hi[d], radix) {
				q := slices.Clone(p)
				for i, k := range g.r.gb[d] {
					q[k] = s[i]
				}
				next = append(next, q)
			}
		}
		pieces = next
	}
	return pieces
}

// holes splits the complement of the box [0, box) in w into boxes [lo, hi):
// for each dim d where the box is short, dims before d inside the box, d
// past it, the dims after whole.
func holes(w, box []int) (lo, hi [][]int) {
	for d := range w {
		if box[d] >= w[d] {
			continue
		}
		l, h := make([]int, len(w)), slices.Clone(w)
		copy(h[:d], box[:d])
		l[d] = box[d]
		lo, hi = append(lo, l), append(hi, h)
	}
	return lo, hi
}

// padLines writes the box [0, box) of w from Y (named y) into X (named x)
// and fills the rest of X with fill: a Pad, or a Pad and the Permute after
// it. Each piece is one copy_ between strided views, each hole one fill_.
func (g geometry) padLines(x, y string, box []int, fill string) []string {
	zero := make([]int, len(box))
	var out []string
	for _, p := range g.boxPieces(zero, box) {
		out = append(out, g.xView(x, p, nil)+".copy_("+g.yView(y, p, zero, box)+")")
	}
	los, his := holes(g.w, box)
	for i := range los {
		for _, p := range g.boxPieces(los[i], his[i]) {
			out = append(out, g.xView(x, p, nil)+".fill_("+fill+")")
		}
	}
	return out
}

// unpadLines writes the box [0, box) of w from X (named x) into Y (named
// y): an Unpad, or a Permute and the Unpad after it.
func (g geometry) unpadLines(x, y string, box []int) []string {
	zero := make([]int, len(box))
	var out []string
	for _, p := range g.boxPieces(zero, box) {
		out = append(out, g.yView(y, p, zero, box)+".copy_("+g.xView(x, p, nil)+")")
	}
	return out
}

// sliceLine writes into Y (named y, m elements) row r of A viewed as
// [T, m], w: a Permute and the Slice after it, r a variable that holds
// the rank's position in its team. The row is one box of the refinement:
// the digits of T fixed to r's, the digits of m whole.
func (g geometry) sliceLine(x, y string, m int) string {
	piece := make([]sel, len(g.r.f))
	fixed := map[int]string{}
	radix := make([]int, len(g.r.gb[0]))
	for i, k := range g.r.gb[0] {
		radix[i] = g.r.f[k]
		piece[k] = sel{lo: 0, hi: 1, fixed: true}
	}
	for i, k := range g.r.gb[0] {
		fixed[k] = digitOf("r", radix, i)
	}
	for _, k := range g.r.gb[1] {
		piece[k] = sel{lo: 0, hi: g.r.f[k]}
	}
	return g.yView(y, piece, []int{0, 0}, []int{1, m}) + ".copy_(" + g.xView(x, piece, fixed) + ")"
}

// xView renders piece p on X (named x): X viewed with dx's dims split into
// the refinement's digits, indexed, and its remaining digits permuted into
// A's order. fixed overrides the value of fixed digits (by digit) with an
// expression, for a chunk that depends on the rank.
func (g geometry) xView(x string, p []sel, fixed map[int]string) string {
	pinv := make([]int, len(g.px))
	for k, d := range g.px {
		pinv[d] = k
	}
	var shape []int
	var idx []string
	var order []int // refinement digit of each remaining dim, in X's order
	for d := range g.dx {
		for _, k := range g.r.ga[pinv[d]] {
			shape = append(shape, g.r.f[k])
			idx = append(idx, index(p[k], g.r.f[k], fixed[k]))
			if !p[k].fixed {
				order = append(order, k)
			}
		}
	}
	if len(shape) == 0 { // a buffer of one element
		return x
	}
	v := x + ".view(" + ints(shape) + ")" + subscript(idx)
	if perm := argsort(order); !isIdentity(perm) {
		v += ".permute(" + ints(perm) + ")"
	}
	return v
}

// yView renders piece p on Y (named y), the compact buffer of the window
// [lo, hi) of w: each dim of w is sliced to the flat range the piece takes
// of it (a dim of one value is left out), and the result viewed as the
// piece's shape where that differs.
func (g geometry) yView(y string, p []sel, lo, hi []int) string {
	var shape, sliced, pieceShape []int
	var idx []string
	for d := range g.w {
		for _, k := range g.r.gb[d] {
			if !p[k].fixed {
				pieceShape = append(pieceShape, p[k].hi-p[k].lo)
			}
		}
		n := hi[d] - lo[d]
		if n == 1 {
			continue
		}
		a, b := g.flatRange(d, p)
		shape, sliced = append(shape, n), append(sliced, b-a)
		idx = append(idx, sliceText(a-lo[d], b-lo[d], n))
	}
	sub := subscript(idx)
	if len(pieceShape) == 0 { // a buffer of one element
		return y
	}
	if sub == "" { // the piece is all of Y: view it as the piece
		if len(pieceShape) == 1 {
			return y
		}
		return y + ".view(" + ints(pieceShape) + ")"
	}
	v := y + ".view(" + ints(shape) + ")" + sub
	if !slices.Equal(sliced, pieceShape) {
		v += ".view(" + ints(pieceShape) + ")"
	}
	return v
}

// flatRange is the range of w's dim d, flat over its digits, that piece p
// takes: a box in the digits is a contiguous range.
func (g geometry) flatRange(d int, p []sel) (lo, hi int) {
	unit, n := 1, 1
	for i := len(g.r.gb[d]) - 1; i >= 0; i-- {
		k := g.r.gb[d][i]
		lo += p[k].lo * unit
		n *= p[k].hi - p[k].lo
		unit *= g.r.f[k]
	}
	return lo, lo + n
}

// index renders the selection of one digit of extent n.
func index(s sel, n int, expr string) string {
	if s.fixed {
		if expr != "" {
			return expr
		}
		return fmt.Sprint(s.lo)
	}
	return sliceText(s.lo, s.hi, n)
}

// sliceText renders the slice [a, b) of a dim of extent n, shortest form.
func sliceText(a, b, n int) string {
	switch {
	case a == 0 && b == n:
		return ":"
	case a == 0:
		return fmt.Sprintf(":%d", b)
	case b == n:
		return fmt.Sprintf("%d:", a)
	}
	return fmt.Sprintf("%d:%d", a, b)
}

// subscript renders an index, trailing whole dims left out ("" for none).
func subscript(idx []string) string {
	for len(idx) > 0 && idx[len(idx)-1] == ":" {
		idx = idx[:len(idx)-1]
	}
	if len(idx) == 0 {
		return ""
	}
	return "[" + strings.Join(idx, ", ") + "]"
}

// argsort returns the permutation that sorts xs: position i of the result
// holds the index of the i-th smallest.
func argsort(xs []int) []int {
	perm := iota(len(xs))
	slices.SortStableFunc(perm, func(a, b int) int { return xs[a] - xs[b] })
	return perm
}

// isPermutation reports whether perm orders 0..n-1.
func isPermutation(perm []int, n int) bool {
	return len(perm) == n && slices.Equal(slices.Sorted(slices.Values(perm)), iota(n))
}

// iota is 0, 1, ..., n-1.
func iota(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

func isIdentity(perm []int) bool {
	for i, p := range perm {
		if i != p {
			return false
		}
	}
	return true
}

// ints renders integers as Python arguments: "2, 8, 6".
func ints(xs []int) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = fmt.Sprint(x)
	}
	return strings.Join(parts, ", ")
}
