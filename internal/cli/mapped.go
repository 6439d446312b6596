package cli

import (
	"context"
	"os"
	"sync"
)

// mapMin is the size from which an input file is mapped rather than
// read: a mapped file's pages come from the page cache as they are, where
// reading copies them into fresh memory that the kernel must first zero
// (for a 100 MB plan, a tenth of validating it on an idle machine and
// more on a virtual one, where fresh memory is slow to fault in).
const mapMin = 1 << 20

// mappedInputs holds the input files one Run has mapped, unmapped when it
// returns: nothing that Run's command makes keeps a slice of its input
// (the decoders copy every string they keep).
type mappedInputs struct {
	mu      sync.Mutex
	unmap   []func()
	mapped  [][]byte // the inputs mapped, for dropInputPages
	blocked bool     // set once released: a late reader reads instead
}

type mappedKey struct{}

// withMappedInputs gives ctx a list of mapped inputs and returns the
// function that unmaps them.
func withMappedInputs(ctx context.Context) (context.Context, func()) {
	m := &mappedInputs{}
	return context.WithValue(ctx, mappedKey{}, m), m.release
}

// release unmaps every input mapped so far.
func (m *mappedInputs) release() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, unmap := range m.unmap {
		unmap()
	}
	m.unmap, m.mapped, m.blocked = nil, nil, true
}

// mapInput maps the regular file f of size bytes for the rest of ctx's
// Run, or returns false where it cannot (no list in ctx, a small file, a
// system without mmap, or a failed map), for the caller to read f.
func mapInput(ctx context.Context, f *os.File, size int64) ([]byte, bool) {
	m, _ := ctx.Value(mappedKey{}).(*mappedInputs)
	if m == nil || size < mapMin || int64(int(size)) != size {
		return nil, false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.blocked {
		return nil, false
	}
	b, unmap, err := mapFile(f, int(size))
	if err != nil {
		return nil, false
	}
	m.unmap = append(m.unmap, unmap)
	m.mapped = append(m.mapped, b)
	return b, true
}

// dropInputPages gives the pages of b, an input of ctx's Run or the part
// of one from its start (a whole number of pages), back to the system once
// it has been read, when b is mapped: a mapped file's pages
// count in the process's resident memory until they are unmapped, and
// `lower` reads its fusion once, then builds and lowers it (its peak
// memory, docs/performance.md). The mapping stays: a page read again is
// read from the file again. An input that was read, not mapped, is left
// to the collector.
func dropInputPages(ctx context.Context, b []byte) {
	m, _ := ctx.Value(mappedKey{}).(*mappedInputs)
	if m == nil || len(b) == 0 {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, mb := range m.mapped {
		if &mb[0] == &b[0] && len(b) <= len(mb) {
			dropPages(b) // a prefix of mb, its pages whole: the caller's part read
			return
		}
	}
}
