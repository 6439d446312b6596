package reshard

import (
	"fmt"
	"slices"
	"strings"

	"github.com/nvcomm/nvcomm/internal/cost"
	"github.com/nvcomm/nvcomm/internal/ir"
	"github.com/nvcomm/nvcomm/internal/plan"
)

// The optimal policy (docs/lowering.md) searches, per op, the sharding states
// between the producer's and the consumer's: a state is a mesh, for each
// device type the digits it selects or that it still holds partial terms
// of a reduction, and the order of the buffer's stored digits. Each edge is
// one collective (or a local Slice) with the local steps around it; its
// cost is the time the cost model predicts for those steps and the bytes
// they move, so that a path's cost is what the plan it emits costs.
// Dijkstra finds the path that is best under the op's objective
// (objective.go).

// placement is where a state's data is: the mesh (the producer's or the
// consumer's), per device type (DIDx, DIDy, DIDz) the index of the digits
// it selects among the searcher's options (0: none), and the types along
// which devices still hold partial terms of a reduction (bit i: type i).
type placement struct {
	onDst   bool
	partial uint8
	pick    [3]int
}

// searchState is a node of the search: a placement and the order in which
// the buffer stores its digits, one rune per digit indexing searcher.order.
// The order decides which Permutes the next steps need.
type searchState struct {
	placement
	order string
}

// searcher holds one op's search space. It keeps no op's lowering: what it
// depends on is the search key (memo.go), so the ops that find the key
// again emit its path with their own views and names (emission).
type searcher struct {
	// src and dst are the views the search ran on, whose names are those
	// of the first op with its key.
	src, dst *view
	obj      costOrder
	topology *cost.Topology
	// readLater is whether a later op reads the consumer, and fromBuffer
	// whether the producer is an intermediate buffer: both decide edges.
	readLater, fromBuffer bool
	options               [3][][]ir.Digit // per type: nil (replicated), then candidate digit groups
	order                 []ir.Digit      // every digit of the result, in the consumer's layout order
	index                 map[ir.Digit]int
	// partials are the digits of the reduced axis that each partial type
	// selects in the producer: the views of partial states keep them.
	partials [3][]ir.Digit
	elem     int64
	bySet    map[string][]placement // valid placements without partial terms by mesh and digits
	start    searchState
	goal     searchState
	// overflowed notes an edge or path left out because its cost in bytes
	// does not fit in int64.
	overflowed bool
	links      map[linkKey]string       // linkAlong's results
	swaps      map[[2]placement]*swap   // relabel's results
	keys       map[placement]string     // setKey's results
	canon      map[placement][]ir.Digit // canonical's results
	// noSwaps leaves device permutations out (the search's first pass);
	// limit, once that pass found a path, is its cost: a permutation that
	// alone costs more cannot be on a better path (optimal_swap.go).
	noSwaps bool
	limit   *pathCost
	// priced keeps each state's edges but permutations from the first
	// pass for the second; edgesGuess is the room a state's are given at
	// first (one per option of each type, and steps over several types).
	priced     map[searchState][]edge
	edgesGuess int
	decoded    map[string][]ir.Digit // decode's results
}

// optimal lowers src (the producer, after any local reduction) to dst; the
// types of partial still hold partial terms of the op's reduction.
func (c lowering) optimal(src, dst *view, partial uint8) {
	found := c.searchFor(src, dst, partial)
	found.mu.Lock() // the search may be another goroutine's too (Searches)
	defer found.mu.Unlock()
	pl, path, ok := found.pl, found.path, found.ok
	if !ok && pl.overflowed {
		c.overflow("the bytes of every sequence of collectives from the producer's sharding to the consumer's")
		return
	}
	if !ok {
		c.fail("no sequence of collectives reaches the consumer's sharding from the producer's",
			"reshard within one mesh first, then move between meshes of the same shape")
		return
	}
	first := c.ledger.steps.len()
	c.emitPath(found, src, dst)
	if c.planner.debug.Searched != nil && !c.ledger.trial && len(path) > 0 {
		total := pathCost{}
		for _, e := range path {
			total, _ = pl.obj.Add(total, e.cost)
		}
		emitted := make([]plan.Step, 0, c.ledger.steps.len()-first)
		for i := first; i < c.ledger.steps.len(); i++ {
			emitted = append(emitted, *c.ledger.steps.at(i))
		}
		c.planner.debug.Searched(total.ps, total.steps, emitted)
	}
}

func newSearcher(c lowering, src, dst *view, partial uint8) *searcher {
	pl := &searcher{src: src, dst: dst, obj: c.planner.costOrder, topology: c.planner.topology,
		readLater: c.readLater(), fromBuffer: strings.Contains(src.name, "/"), elem: int64(src.dtype.Size()),
		links: map[linkKey]string{}, swaps: map[[2]placement]*swap{}, keys: map[placement]string{},
		canon: map[placement][]ir.Digit{}, priced: map[searchState][]edge{},
		decoded: map[string][]ir.Digit{}}
	all := slices.Clone(dst.stored)
	for i, t := range ir.DeviceTypes {
		pl.options[i] = [][]ir.Digit{nil}
		if partial&(1<<i) != 0 {
			pl.partials[i] = src.did[t]
		} else if d := src.did[t]; len(d) > 0 {
			pl.options[i] = append(pl.options[i], d)
		}
		if d := dst.did[t]; len(d) > 0 && !containsDigits(pl.options[i], d) {
			pl.options[i] = append(pl.options[i], d)
		}
		for _, o := range pl.options[i] {
			all = append(all, o...)
		}
	}
	pl.order = canonicalOrder(all, dst, c.fact)
	pl.index = make(map[ir.Digit]int, len(pl.order))
	for k, d := range pl.order {
		pl.index[d] = k
	}
	pl.addGroups()
	pl.indexStates()
	pl.edgesGuess = len(pl.options[0]) + len(pl.options[1]) + len(pl.options[2]) + 8
	pl.start = searchState{pl.placementOf(src, false, partial), pl.encode(src.stored)}
	pl.goal = searchState{pl.placementOf(dst, !src.mesh.Equal(dst.mesh), 0), pl.encode(dst.stored)}
	return pl
}

// forget drops what only the search reads, the states' edges and groups,
// and empties the caches of what the searcher computes (swaps, keys,
// orders), which an emission fills again with what it needs: a searcher
// kept in Searches for its path then holds little besides.
func (pl *searcher) forget() {
	pl.priced, pl.bySet = nil, nil
	pl.swaps, pl.keys = map[[2]placement]*swap{}, map[placement]string{}
	pl.canon, pl.decoded = map[placement][]ir.Digit{}, map[string][]ir.Digit{}
}

// maxSubsetDigits bounds the digits whose subsets become candidate groups,
// so the search stays small.
const maxSubsetDigits = 10

// addGroups adds, per device type, every set of digits (in canonical order)
// whose extents multiply to the type's mesh size: the intermediate
// shardings a device permutation may need.
func (pl *searcher) addGroups() {
	if len(pl.order) > maxSubsetDigits {
		return
	}
	for i, t := range ir.DeviceTypes {
		sizes := []int{pl.src.mesh.Size(t), pl.dst.mesh.Size(t)}
		for mask := 1; mask < 1<<len(pl.order); mask++ {
			var g []ir.Digit
			for k, d := range pl.order {
				if mask&(1<<k) != 0 {
					g = append(g, d)
				}
			}
			if e := extentOf(g); (e == sizes[0] || e == sizes[1]) && e > 1 && !containsDigits(pl.options[i], g) {
				pl.options[i] = append(pl.options[i], g)
			}
		}
	}
}

// indexStates groups the valid placements without partial terms of each
// mesh by the set of digits they select: a device permutation moves
// between placements of one group.
func (pl *searcher) indexStates() {
	pl.bySet = map[string][]placement{}
	for _, onDst := range []bool{false, true} {
		p := placement{onDst: onDst}
		for a := range pl.options[0] {
			for b := range pl.options[1] {
				for c := range pl.options[2] {
					p.pick = [3]int{a, b, c}
					if pl.valid(p) {
						k := pl.setKey(p)
						pl.bySet[k] = append(pl.bySet[k], p)
					}
				}
			}
		}
	}
}

// setKey names the mesh and the set of digits a placement selects.
func (pl *searcher) setKey(p placement) string {
	if k, ok := pl.keys[p]; ok {
		return k
	}
	sel := pl.selected(p)
	slices.SortFunc(sel, func(a, b ir.Digit) int {
		if a.Axis != b.Axis {
			return a.Axis - b.Axis
		}
		return b.Stride - a.Stride
	})
	k := fmt.Sprint(p.onDst, sel)
	pl.keys[p] = k
	return k
}

// selected lists the digits a placement's device types select.
func (pl *searcher) selected(p placement) []ir.Digit {
	var sel []ir.Digit
	for i := range ir.DeviceTypes {
		sel = append(sel, pl.options[i][p.pick[i]]...)
	}
	return sel
}

func containsDigits(list [][]ir.Digit, d []ir.Digit) bool {
	return slices.ContainsFunc(list, func(x []ir.Digit) bool { return slices.Equal(x, d) })
}

// canonicalOrder lists the distinct digits of ds in the consumer's layout
// order, each axis most significant first.
func canonicalOrder(ds []ir.Digit, dst *view, f *factoring) []ir.Digit {
	var axes []int
	for _, d := range dst.stored {
		if !slices.Contains(axes, d.Axis) {
			axes = append(axes, d.Axis)
		}
	}
	for _, d := range ds {
		if !slices.Contains(axes, d.Axis) {
			axes = append(axes, d.Axis)
		}
	}
	var out []ir.Digit
	for _, a := range axes {
		for _, d := range f.fine(a, 1, f.extents[a]) {
			if slices.Contains(ds, d) {
				out = append(out, d)
			}
		}
	}
	return out
}

// placementOf returns the placement a view is in.
func (pl *searcher) placementOf(v *view, onDst bool, partial uint8) placement {
	p := placement{onDst: onDst, partial: partial}
	for i, t := range ir.DeviceTypes {
		if partial&(1<<i) != 0 {
			continue
		}
		for k, o := range pl.options[i] {
			if slices.Equal(o, v.did[t]) {
				p.pick[i] = k
			}
		}
	}
	return p
}

// encode writes a digit order as a state's order; decode reads it back.
func (pl *searcher) encode(ds []ir.Digit) string {
	var b strings.Builder
	for _, d := range ds {
		b.WriteRune(rune(pl.index[d]))
	}
	return b.String()
}

// decode is shared by every edge out of a state: callers do not modify
// it.
func (pl *searcher) decode(s string) []ir.Digit {
	if ds, ok := pl.decoded[s]; ok {
		return ds
	}
	out := make([]ir.Digit, 0, len(s))
	for _, r := range s {
		out = append(out, pl.order[r])
	}
	pl.decoded[s] = slices.Clip(out)
	return out
}

func (pl *searcher) mesh(p placement) *ir.Mesh {
	if p.onDst {
		return pl.dst.mesh
	}
	return pl.src.mesh
}

// valid reports whether every type's digits fit its mesh axis, no digit is
// selected twice, and partial terms stay on the producer's mesh along
// types that select nothing.
func (pl *searcher) valid(p placement) bool {
	m := pl.mesh(p)
	if p.partial != 0 && p.onDst {
		return false
	}
	var room [16]ir.Digit
	used := room[:0] // on the stack unless a placement selects more
	for i, t := range ir.DeviceTypes {
		d := pl.options[i][p.pick[i]]
		if d == nil {
			continue
		}
		if extentOf(d) != m.Size(t) || m.Size(t) == 1 || p.partial&(1<<i) != 0 {
			return false
		}
		for _, x := range d {
			if slices.Contains(used, x) {
				return false
			}
			used = append(used, x)
		}
	}
	return true
}

func extentOf(ds []ir.Digit) int {
	n := 1
	for _, d := range ds {
		n *= d.Extent
	}
	return n
}

// view builds the intermediate view of a placement, its buffer in the
// canonical order (the step that writes it may choose another: flexible).
func (em emission) view(p placement) *view {
	pl := em.found
	v := &view{name: em.c.buffer("step"), mesh: pl.mesh(p), dtype: em.src.dtype, flexible: true}
	for i, t := range ir.DeviceTypes {
		if d := pl.options[i][p.pick[i]]; d != nil {
			v.did[t] = d
		}
		if p.partial&(1<<i) != 0 {
			v.did[t] = pl.partials[i]
		}
	}
	v.stored = pl.canonical(p)
	return v
}

// canonical is the order in which an intermediate buffer of p stores its
// digits unless the step writing it chooses another.
func (pl *searcher) canonical(p placement) []ir.Digit {
	p.partial = 0 // partial terms store the same digits
	if c, ok := pl.canon[p]; ok {
		return c
	}
	c := without(pl.order, pl.selected(p))
	pl.canon[p] = c
	return c
}

// target is the stored order a step into p writes toward: the consumer's
// for the goal, else the canonical one.
func (pl *searcher) target(p placement) []ir.Digit {
	if p == pl.goal.placement {
		return pl.dst.stored
	}
	return pl.canonical(p)
}

// size is the elements per device in placement p: one buffer of the op,
// so no overflow (sizes.go).
func (pl *searcher) size(p placement) int {
	n := 1
	for _, d := range pl.order {
		n *= d.Extent
	}
	for i := range ir.DeviceTypes {
		n /= extentOf(pl.options[i][p.pick[i]])
	}
	return n
}

func (pl *searcher) isReplicated(p placement) bool { return p.pick == [3]int{} }

// fits reports ok, noting in pl when a cost overflowed.
func (pl *searcher) fits(ok bool) bool {
	pl.overflowed = pl.overflowed || !ok
	return ok
}
