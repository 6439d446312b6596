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
