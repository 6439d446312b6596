package sim

import (
	"encoding/binary"
	"sort"
	"sync"
)

// This file holds the values of the simulation's buffers and references
// (docs/simulate.md, "Memory"). No value changes once it is written, so
// values are shared wherever they are the same ones: a fusion input's
// values are generated where they are read (a stream) rather than stored,
// a device's shard of an input is the pieces of the stream it holds, and a
// collective that only moves data gives its members the pieces of its
// inputs (a rope) rather than copies of them. Only a step that computes
// values, or a buffer made of pieces too short to be worth listing,
// stores them.

// ropeMin is the shortest piece a step lists in a rope rather than
// copying it: a piece costs 64 bytes, so a rope of pieces this long costs
// at most 1/128 of the values it lists. Tests lower it to put every
// buffer they build in pieces.
var ropeMin = 1024

// stream is the values of a fusion input, never stored unless an op reads
// them in an order of its own: value i is inputValue(key, i, data), so a
// piece of it is generated on the fly wherever it is read.
type stream struct {
	key  uint64
	data DataSet
	// bound, when above 0, makes the stream's values indices below it:
	// the fusion input a lookup reads as indices ([IndexBounds]).
	bound int
}

// value is the stream's value at position i.
func (g *stream) value(i int) float64 { return inputValue(g.key, i, g.data, g.bound) }

// fill sets dst[i] to the stream's value at position off + i·stride,
// valueOf's, stepping the state by one multiple of γ a value.
func (g *stream) fill(dst []float64, off, stride int) {
	state := g.key + splitMixGamma*uint64(off+1)
	step := splitMixGamma * uint64(stride)
	if g.bound > 0 {
		for i := range dst {
			dst[i] = indexOf(mix64(state)>>32, g.bound)
			state += step
		}
		return
	}
	if g.data != Wide {
		table := &dataTables[g.data]
		for i := range dst {
			dst[i] = table[(mix64(state)>>32)&3]
			state += step
		}
		return
	}
	for i := range dst {
		h := mix64(state) >> 32
		dst[i] = float64(int64(h-div1025(h)*1025) - 512) // valueOf's
		state += step
	}
}

// lazy is values computed when they are first read: the reference of a
// reduction, whose values need not be read at all when every device's
// buffer is those very values (a reduction step that reads the same
// values shares them: combinationKey), so that the check finds them equal
// without reading them.
type lazy struct {
	once    sync.Once
	compute func() []float64
	vals    []float64
}

// values computes the values once, on the first call, and returns them.
func (l *lazy) values() []float64 {
	l.once.Do(func() { l.vals, l.compute = l.compute(), nil })
	return l.vals
}

// lazyVec is the vec of the n values l computes.
func lazyVec(l *lazy, n int) vec {
	return vec{rope: &rope{pieces: []piece{{lazy: l, run: run{off: 0, stride: 1, n: n}}}, n: n}}
}

// piece is n consecutive values of a rope, from position pos of it: the
// elements off, off+stride, … (its run) of stored values, vals, of values
// computed when first read, lazy, or, when both are nil, of the stream
// gen. A piece keeps the whole array it lists elements of, so that two
// pieces of the same array are known to be.
type piece struct {
	pos  int
	vals []float64
	lazy *lazy
	gen  *stream
	run
}

// array returns the stored values p lists elements of, computing a lazy
// piece's; nil for a stream's.
func (p piece) array() []float64 {
	if p.lazy != nil {
		return p.lazy.values()
	}
	return p.vals
}

// rope is values made of pieces of other values, in order; the pieces'
// positions are the sums of the lengths before them.
type rope struct {
	pieces []piece
	n      int
}

// vec is a sequence of values that never changes once made: stored in
// vals, or, when rope is set, listed by it. A buffer, a reference and a
// step's operand are vecs; the zero vec is no buffer at all.
type vec struct {
	vals []float64
	rope *rope
}

// stored is the vec of values v; nil v is made empty, so that the vec is a
// buffer.
func stored(v []float64) vec {
	if v == nil {
		v = []float64{}
	}
	return vec{vals: v}
}

// generated is the vec of the first n values of g.
func generated(g *stream, n int) vec {
	if n == 0 {
		return stored(nil)
	}
	return vec{rope: &rope{pieces: []piece{{gen: g, run: run{off: 0, stride: 1, n: n}}}, n: n}}
}

// len is the number of values.
func (v vec) len() int {
	if v.rope != nil {
		return v.rope.n
	}
	return len(v.vals)
}

// present reports whether v is a buffer (possibly empty) rather than none.
func (v vec) present() bool { return v.vals != nil || v.rope != nil }

// same reports whether v and o are the very same values, one shared from
// the other: a comparison of one with the reference holds for the other.
func (v vec) same(o vec) bool {
	if v.rope != nil || o.rope != nil {
		return v.rope == o.rope
	}
	return len(v.vals) == len(o.vals) && len(v.vals) > 0 && &v.vals[0] == &o.vals[0]
}

// slice is the values [lo, hi) of v, sharing them: a stored vec's values
// themselves, a rope's pieces cut to the range.
func (v vec) slice(lo, hi int) vec {
	if v.rope == nil {
		return vec{vals: v.vals[lo:hi:hi]}
	}
	if lo == 0 && hi == v.rope.n {
		return v
	}
	var b ropeBuilder
	b.add(v, lo, hi)
	return b.vec()
}

// flat returns v's values as one slice, not to be written: a stored
// vec's own, the whole array a rope of one piece lists, or a rope's copied
// into a new one.
func (v vec) flat() []float64 {
	if v.rope == nil {
		return v.vals
	}
	if p := v.rope.pieces[0]; len(v.rope.pieces) == 1 && p.gen == nil && p.off == 0 && p.stride == 1 {
		if arr := p.array(); len(arr) == p.n {
			return arr
		}
	}
	out := make([]float64, v.rope.n)
	v.read(0, out)
	return out
}

// value is v's value at position i.
func (v vec) value(i int) float64 {
	if v.rope == nil {
		return v.vals[i]
	}
	var x float64
	v.each(i, i+1, func(p piece) bool {
		x = p.value(0)
		return false
	})
	return x
}

// read sets dst to v's values from position lo, on every CPU when dst is
// long.
func (v vec) read(lo int, dst []float64) {
	if len(dst) < 2*minPiece {
		v.readOne(lo, dst) // no goroutines, nor the closure they take
		return
	}
	if v.rope == nil {
		copyFloats(dst, v.vals[lo:lo+len(dst)])
		return
	}
	inParallel(len(dst), func(from, to int) { v.readOne(lo+from, dst[from:to]) })
}

// readOne is read on one CPU.
func (v vec) readOne(lo int, dst []float64) {
	if v.rope == nil {
		copy(dst, v.vals[lo:lo+len(dst)])
		return
	}
	v.each(lo, lo+len(dst), func(p piece) bool {
		p.fill(dst[p.pos-lo : p.pos-lo+p.n])
		return true
	})
}

// each calls yield with the pieces of v that hold positions [lo, hi), cut
// to the range and in order, until it returns false; a stored vec is one
// piece.
func (v vec) each(lo, hi int, yield func(piece) bool) {
	if lo >= hi {
		return
	}
	if v.rope == nil {
		yield(piece{pos: lo, vals: v.vals, run: run{off: lo, stride: 1, n: hi - lo}})
		return
	}
	ps := v.rope.pieces
	k := sort.Search(len(ps), func(k int) bool { return ps[k].pos+ps[k].n > lo })
	for ; k < len(ps) && ps[k].pos < hi; k++ {
		if !yield(ps[k].cut(lo, hi)) {
			return
		}
	}
}

// cut is the part of p within positions [lo, hi), which it overlaps.
func (p piece) cut(lo, hi int) piece {
	from, to := max(lo, p.pos), min(hi, p.pos+p.n)
	p.off += (from - p.pos) * p.stride
	p.pos, p.n = from, to-from
	return p
}

// value is p's value i.
func (p piece) value(i int) float64 {
	if arr := p.array(); arr != nil {
		return arr[p.at(i)]
	}
	return p.gen.value(p.at(i))
}

// fill sets dst, as long as p, to p's values.
func (p piece) fill(dst []float64) {
	arr := p.array()
	switch {
	case arr == nil:
		p.gen.fill(dst, p.off, p.stride)
	case p.stride == 1:
		copy(dst, arr[p.off:p.off+p.n])
	default:
		for i := range dst {
			dst[i] = arr[p.at(i)]
		}
	}
}

// sameArray reports whether p and q list elements of the same array: the
// same stored values, lazy values or stream.
func (p piece) sameArray(q piece) bool {
	if p.lazy != nil || q.lazy != nil {
		return p.lazy == q.lazy
	}
	if p.vals == nil || q.vals == nil {
		return p.vals == nil && q.vals == nil && p.gen == q.gen
	}
	return len(p.vals) == len(q.vals) && &p.vals[0] == &q.vals[0]
}

// ropeBuilder puts a rope together from the pieces of other vecs, joining
// pieces that continue one another.
type ropeBuilder struct {
	pieces []piece
	n      int
}

// add appends the values [lo, hi) of v.
func (b *ropeBuilder) add(v vec, lo, hi int) {
	v.each(lo, hi, func(p piece) bool {
		b.addPiece(p)
		return true
	})
}

// addPiece appends p, joined to the last piece when it continues it.
func (b *ropeBuilder) addPiece(p piece) {
	if p.n == 0 {
		return
	}
	p.pos = b.n
	b.n += p.n
	if k := len(b.pieces) - 1; k >= 0 && b.pieces[k].sameArray(p) {
		last := &b.pieces[k]
		switch {
		case last.n == 1 && p.n == 1: // two elements make a run of any stride
			last.stride, last.n = p.off-last.off, 2
			return
		case (last.stride == p.stride || p.n == 1) && last.at(last.n) == p.off:
			last.n += p.n
			return
		}
	}
	b.pieces = append(b.pieces, p)
}

// vec is the rope built, or an empty stored vec for no values.
func (b *ropeBuilder) vec() vec {
	if b.n == 0 {
		return stored(nil)
	}
	return vec{rope: &rope{pieces: b.pieces, n: b.n}}
}

// span is the values [lo, hi) of a vec: one chunk a step moves.
type span struct {
	v      vec
	lo, hi int
}

// join returns the spans one after the other: as a rope of their pieces
// when asRope, else stored, in a buffer of the slab when short.
func join(spans []span, asRope bool, slab *slab) vec {
	if asRope {
		var b ropeBuilder
		for _, s := range spans {
			b.add(s.v, s.lo, s.hi)
		}
		return b.vec()
	}
	n := 0
	for _, s := range spans {
		n += s.hi - s.lo
	}
	out := slab.make(n)
	pos := 0
	for _, s := range spans {
		s.v.read(s.lo, out[pos:pos+s.hi-s.lo])
		pos += s.hi - s.lo
	}
	return stored(out)
}

// maxKeyPieces is the most pieces a combination's key lists: a key of
// more would cost more to build than most combinations it could save.
const maxKeyPieces = 1024

// combinationKey words the combination of parts with op by the very
// values it reads: op, then for each part its pieces of streams (the
// stream, the first position, the stride, the length; a piece of one
// value has no stride). Two combinations of the same key compute the same
// values, so the simulation keeps those of the reference's reductions
// (world.reference) and a reduction step whose key it finds shares them
// instead of computing them again. ok is false when a part holds values
// other than a stream's, whose identity the key does not word, or too many
// pieces.
func combinationKey(op string, parts []span) (string, bool) {
	b := append(make([]byte, 0, 64), op...)
	pieces := 0
	for _, p := range parts {
		if p.v.rope == nil && p.hi > p.lo {
			return "", false
		}
		b = binary.AppendUvarint(append(b, '|'), uint64(p.hi-p.lo))
		ok := true
		p.v.each(p.lo, p.hi, func(x piece) bool {
			if pieces++; x.gen == nil || x.vals != nil || x.lazy != nil || pieces > maxKeyPieces {
				ok = false
				return false
			}
			stride := x.stride
			if x.n == 1 {
				stride = 0
			}
			b = binary.AppendUvarint(b, x.gen.key)
			b = binary.AppendUvarint(b, uint64(x.gen.data))
			b = binary.AppendUvarint(b, uint64(x.gen.bound))
			b = binary.AppendVarint(b, int64(x.off))
			b = binary.AppendVarint(b, int64(stride))
			b = binary.AppendUvarint(b, uint64(x.n))
			return true
		})
		if !ok {
			return "", false
		}
	}
	return string(b), true
}
