package reshard

import (
	"encoding/binary"
	"strings"
	"sync"

	"github.com/nvcomm/nvcomm/internal/cost"
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
	// mu is held while the search is emitted: a search kept in Searches
	// may be emitted by lowerings on several goroutines, and emission
	// fills the searcher's caches and the template.
	mu sync.Mutex
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
// types, running it unless an equal one ran before in this lowering, or
// in another lowering that shares the planner's Searches.
func (c lowering) searchFor(src, dst *view, partial uint8) *search {
	m := &c.ledger.memo
	if m.searches == nil {
		m.searches, m.meshes = map[string]*search{}, map[*ir.Mesh]uint64{}
	}
	key := c.searchKey(m.key[:0], src, dst, partial, c.meshID)
	m.key = key
	if s, ok := m.searches[string(key)]; ok {
		return s // emitted with the op's own views (emission)
	}
	shared := c.planner.searches
	var sharedKey string
	if shared != nil {
		sharedKey = shared.key(c, src, dst, partial)
		if s := shared.get(sharedKey); s != nil {
			m.searches[string(key)] = s
			return s
		}
	}
	pl := newSearcher(c, src, dst, partial)
	path, ok := pl.search()
	s := &search{pl: pl, path: path, ok: ok}
	if shared != nil {
		s = shared.put(sharedKey, s)
	}
	m.searches[string(key)] = s
	return s
}

// Searches keeps the optimal policy's searches across lowerings, for a
// caller that lowers many small fusions of one model: internal/auto
// prices thousands of single-op fusions whose sets repeat (a set between
// two shardings of one shape, before an op or after it, in several
// fusions). The planners given it (Planner.Share) look a search up in it
// when their lowering has not run it, and keep there what they run: a
// search depends only on its key (see above), so its path and emission
// are what a fresh search gives. Its keys are the memo's with the meshes
// numbered by the store — the fusions' tensors share their *ir.Mesh, and a
// mesh not shared is only a search not found — and the planner's policy,
// objective, topology and replays added. Safe for concurrent use.
type Searches struct {
	mu       sync.Mutex
	searches map[string]*search
	meshes   map[*ir.Mesh]uint64
	topology map[*cost.Topology]uint64
	scratch  []byte // key's, under mu
}

// NewSearches returns an empty store of searches.
func NewSearches() *Searches {
	return &Searches{searches: map[string]*search{}, meshes: map[*ir.Mesh]uint64{}, topology: map[*cost.Topology]uint64{}}
}

// Share makes the planner's lowerings find and keep their searches in s
// as well as in their ledger (nil: in their ledger only). Call it before
// the planner lowers.
func (p *Planner) Share(s *Searches) { p.searches = s }

// key is the key of the search from src to dst in s: the planner's facts,
// then the memo's key with s's numbering of the meshes.
func (s *Searches) key(c lowering, src, dst *view, partial uint8) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := append(s.scratch[:0], c.planner.policy...)
	b = append(b, 0)
	b = append(b, c.planner.objective...)
	b = binary.AppendUvarint(append(b, 0), number(s.topology, c.planner.topology))
	if c.planner.debug.NoReplay {
		b = append(b, 1)
	}
	b = c.searchKey(append(b, 0), src, dst, partial, func(m *ir.Mesh) uint64 { return number(s.meshes, m) })
	s.scratch = b
	return string(b)
}

// get returns the search kept under key, nil when none is.
func (s *Searches) get(key string) *search {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.searches[key]
}

// put keeps found under key and returns it, or the search kept there
// already (another lowering ran it meanwhile), which callers then emit so
// that every lowering emits one search's template. What only the search
// reads is dropped (searcher.forget): a kept search holds its path.
func (s *Searches) put(key string, found *search) *search {
	s.mu.Lock()
	defer s.mu.Unlock()
	if kept, ok := s.searches[key]; ok {
		return kept
	}
	found.pl.forget()
	s.searches[key] = found
	return found
}

// number returns the number of k in ids, numbering it next when new.
func number[K comparable](ids map[K]uint64, k K) uint64 {
	id, ok := ids[k]
	if !ok {
		id = uint64(len(ids))
		ids[k] = id
	}
	return id
}

// searchKey appends to b every fact the search reads (see above), each
// mesh written as meshID numbers it.
func (c lowering) searchKey(b []byte, src, dst *view, partial uint8, meshID func(*ir.Mesh) uint64) []byte {
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
		u(int(meshID(v.mesh)))
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
func (c lowering) meshID(m *ir.Mesh) uint64 { return number(c.ledger.memo.meshes, m) }
