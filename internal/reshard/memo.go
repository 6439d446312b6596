package reshard

import (
	"encoding/binary"
	"strings"

	"github.com/nvcomm/nvcomm/internal/ir"
)

// The optimal policy's search depends only on what a pair of views and the
// op's factoring say — the digits each device type selects, the buffer
// orders, the meshes, the element type, the partial types, whether later
// ops read the output and whether the producer is an intermediate buffer
// — and the true extents of padded axes, which the steps' bounds count
// — not on the tensors' names. The ops of a layer or a chain repeat a few
// such pairs, so a lowering keeps each search it ran (its searcher, with
// the states and prices it built, and the path it found) under a key of
// those facts, and an op whose key was seen emits the stored path with
// its own names. Emission, not search, names buffers: the steps and names
// are what a fresh search gives.

// search is a stored search: its searcher and the path it found, which
// the ops that find its key emit as they are (emission), and the record
// of the first emission.
type search struct {
	pl   *searcher
	path []edge
	ok   bool
	// template is the path's first emission that may be replayed
	// (replay.go), or nil; set once, by that emission.
	template *template
}

// memo holds a lowering's searches by key, numbers its meshes for the
// keys, and indexes the last op that reads each tensor on devices outside
// its mesh (readLater).
type memo struct {
	searches   map[string]*search
	meshes     map[*ir.Mesh]uint64
	lastReader map[*ir.Tensor]int
	// key is the buffer searchKey writes into, reused: the map is read
	// with it as is, and a key is copied only when a search is stored.
	key []byte
}

// searchFor returns the search from src to dst with the given partial
// types, running it unless an equal one ran before in this lowering.
func (c lowering) searchFor(src, dst *view, partial uint8) *search {
	if c.ledger.memo.searches == nil {
		c.ledger.memo = memo{searches: map[string]*search{}, meshes: map[*ir.Mesh]uint64{}}
	}
	key := c.searchKey(c.ledger.memo.key[:0], src, dst, partial)
	c.ledger.memo.key = key
	if s, ok := c.ledger.memo.searches[string(key)]; ok {
		return s // emitted with the op's own views (emission)
	}
	pl := newSearcher(c, src, dst, partial)
	path, ok := pl.search()
	s := &search{pl: pl, path: path, ok: ok}
	c.ledger.memo.searches[string(key)] = s
	return s
}

// searchKey appends to b every fact the search reads (see above).
func (c lowering) searchKey(b []byte, src, dst *view, partial uint8) []byte {
	u := func(x int) { b = binary.AppendUvarint(b, uint64(x)) }
	flag := func(v bool) {
		if v {
			u(1)
		} else {
			u(0)
		}
	}
	digits := func(ds []ir.Digit) {
		u(len(ds))
		for _, d := range ds {
			u(d.Axis)
			u(d.Stride)
			u(d.Extent)
		}
	}
	ints := func(xs []int) {
		u(len(xs))
		for _, x := range xs {
			u(x)
		}
	}
	for _, v := range []*view{src, dst} {
		u(int(c.meshID(v.mesh)))
		b = append(b, v.dtype...)
		u(0)
		for _, t := range ir.DeviceTypes {
			digits(v.did[t])
		}
		digits(v.stored)
		flag(v.flexible)
	}
	u(int(partial))
	flag(c.readLater())
	flag(strings.Contains(src.name, "/"))
	ints(c.fact.extents)
	for _, cuts := range c.fact.cuts {
		ints(cuts)
	}
	if c.real != nil { // the steps' bounds count real elements
		ints(c.real.real)
	}
	return b
}

// meshID numbers m within the lowering.
func (c lowering) meshID(m *ir.Mesh) uint64 {
	id, ok := c.ledger.memo.meshes[m]
	if !ok {
		id = uint64(len(c.ledger.memo.meshes))
		c.ledger.memo.meshes[m] = id
	}
	return id
}
