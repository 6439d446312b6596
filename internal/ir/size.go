package ir

import (
	"fmt"
	"math"

	"github.com/nvcomm/nvcomm/internal/checked"
	"github.com/nvcomm/nvcomm/internal/diag"
)

// Size bounds. Every extent is an int32 (the front end's integers), so one
// product of two extents, and a merged extent (at most 2^31, schedule.go),
// fits in int64. A whole tensor need not: Source.Build rejects any tensor
// whose elements times its dtype size do not fit in int64, counting the
// holes its uneven splits pad it with ([Tensor.PaddedShape]). Arithmetic inside one
// tensor's buffers (sizes, counts, bytes, offsets, [Tensor.LocalSize]) is
// then safe without checks; arithmetic across buffers (sums over steps, ops
// or devices, bytes times a team size) is not, and must use package
// checked. A mesh's device count is the number of ids the file lists, so
// products of mesh extents cannot overflow.

// Bytes returns the bytes of a tensor of the given shape and dtype, and
// false when they do not fit in int64.
func Bytes(shape []int, dtype DType) (int64, bool) {
	n, ok := checked.Product(shape...)
	if !ok {
		return 0, false
	}
	return checked.Mul(int64(n), int64(dtype.Size()))
}

// tooLargeHint is the remedy for a tensor whose bytes do not fit in int64.
const tooLargeHint = "nvcomm counts sizes in int64 bytes; use smaller extents"

// checkBytes reports, at pos, a shape whose elements of dtype do not fit in
// int64 bytes; note follows the shape in the message.
func (p *Source) checkBytes(shape []int, dtype DType, pos diag.Pos, what, note string) bool {
	if _, ok := Bytes(shape, dtype); ok {
		return true
	}
	p.errs.AddHint(pos, tooLargeHint, "%s: %s%s of %s elements takes more than %d bytes (expected a tensor whose bytes fit in int64)",
		what, fmtShape(shape), note, dtype, int64(math.MaxInt64))
	return false
}

// checkPadded reports a tensor whose buffers, padded where uneven splits
// leave holes, do not fit in int64 bytes, at the uneven split of a logical
// axis (or the tensor when there is none).
func (p *Source) checkPadded(t *Tensor) bool {
	padded := t.PaddedShape()
	if _, ok := Bytes(padded, t.DType); ok {
		return true
	}
	pos, what := t.Pos, fmt.Sprintf("tensor %q", t.Name)
	if tr := t.unevenRootSplit(); tr != nil {
		pos, what = tr.Pos, fmt.Sprintf("tensor %q uneven split", t.Name)
	}
	p.errs.AddHint(pos, "nvcomm counts sizes in int64 bytes; split the logical axis evenly, or use smaller extents",
		"%s: padded to %s of %s elements, the tensor takes more than %d bytes (expected a tensor whose bytes fit in int64)",
		what, fmtShape(padded), t.DType, int64(math.MaxInt64))
	return false
}

// unevenRootSplit returns the first split in file order that divides a
// logical axis unevenly (padding it), or nil.
func (t *Tensor) unevenRootSplit() *Transform {
	var first *Transform
	seen := map[*Transform]bool{}
	var visit func(id *IterDomain)
	visit = func(id *IterDomain) {
		tr := id.Def
		if tr == nil || seen[tr] {
			return
		}
		seen[tr] = true
		in := tr.In[0]
		uneven := tr.Kind == Split && in.Def == nil && tr.Out[0].Extent*tr.Out[1].Extent != in.Extent
		if uneven && (first == nil || before(tr.Pos, first.Pos)) {
			first = tr
		}
		for _, in := range tr.In {
			visit(in)
		}
	}
	for _, id := range t.Loop {
		visit(id)
	}
	return first
}

// before reports whether a comes before b in the file.
func before(a, b diag.Pos) bool {
	return a.Line < b.Line || a.Line == b.Line && a.Col < b.Col
}
