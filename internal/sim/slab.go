package sim

// slab hands out the small buffers of a simulation from large blocks:
// a plan of many small steps allocated millions of buffers of a few
// kilobytes one by one, and the allocator's work per buffer cost more
// than filling it. Nothing a simulation allocates is freed before it ends
// (memory.go), so a block lives as long as its buffers would; each buffer
// takes exactly its elements, never more than the size class the memory
// model prices it at.
type slab struct {
	free []float64 // what is left of the current block
}

// Sizes of the slab, in elements: a block is 256 KiB, and a buffer of
// more than 4 KiB is allocated on its own, so that a block wastes at most
// 1/64 of itself at its end.
const (
	slabBlock = 1 << 15
	slabMax   = 1 << 9
)

// make returns n zeroed elements, as the builtin does.
func (b *slab) make(n int) []float64 {
	if n > slabMax || n == 0 {
		return make([]float64, n)
	}
	if len(b.free) < n {
		b.free = make([]float64, slabBlock)
	}
	out := b.free[:n:n]
	b.free = b.free[n:]
	return out
}

// clone returns a copy of s, as cloneFloats; an empty s is returned as
// slices.Clone returns it (nil stays nil: no buffer).
func (b *slab) clone(s []float64) []float64 {
	if len(s) == 0 || len(s) > slabMax {
		return cloneFloats(s)
	}
	out := b.make(len(s))
	copy(out, s)
	return out
}

// concat returns the parts one after the other, as concatFloats; empty
// parts give what it gives.
func (b *slab) concat(parts ...[]float64) []float64 {
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	if n == 0 || n > slabMax {
		return concatFloats(parts...)
	}
	out := b.make(n)[:0]
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}
