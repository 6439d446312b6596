package reshard

import (
	"math/bits"
	"slices"

	"github.com/nvcomm/nvcomm/internal/cost"
	"github.com/nvcomm/nvcomm/internal/ir"
	"github.com/nvcomm/nvcomm/internal/plan"
)

// The edges of the optimal policy's search inside one mesh: steps that
// change the digits some device types select (optimal.go). A step may span
// several device types at once — one Allgather, AllToAll or Slice over
// their teams instead of one per type: the same bytes in fewer steps.

// edgeKind names the step an edge emits.
type edgeKind int

const (
	edgeSlice edgeKind = iota
	edgeAllgather
	edgeAllToAll
	edgeSwap
	edgeSendRecv
	edgeBroadcast
	edgeRelabel
	edgeScatter
	edgeGather
	edgeAllreduce
	edgeReduceScatter
	edgeReduce
	edgeAllToAllV
	edgeSwapExchange
	edgeCrossExchange
)

// edge is one transition of the search: its step, the device types along
// which the step's teams run (bit i: DeviceTypes[i]), the state it leads
// to and what it costs.
type edge struct {
	kind edgeKind
	mask uint8
	to   searchState
	cost pathCost
}

// edges lists the transitions out of s: those the first pass of the
// search priced again (kept), and device permutations in the second.
func (pl *searcher) edges(s searchState) []edge {
	out, ok := pl.priced[s]
	if !ok {
		out = pl.singleTypeEdges(s, make([]edge, 0, pl.edgesGuess))
		out = pl.multiTypeEdges(s, out)
		if s.partial != 0 {
			out = pl.partialEdges(s, out)
		} else if !s.onDst && !pl.src.mesh.Equal(pl.dst.mesh) {
			out = pl.crossEdges(s, out)
		}
		pl.priced[s] = out
	}
	if pl.noSwaps || s.partial != 0 {
		return out
	}
	// A slice of its own, with room for the permutations (two edges
	// each), not to write over the priced edges' spare room.
	swaps := len(pl.bySet[pl.setKey(s.placement)]) - 1 // but s's own
	if swaps <= 0 || pl.isReplicated(s.placement) {
		return out
	}
	return pl.swapEdges(s, append(make([]edge, 0, len(out)+2*swaps), out...))
}

// singleTypeEdges lists the changes of one device type's digits: a Slice
// (replicated → sharded), an Allgather (sharded → replicated), an
// AllToAll (sharded → sharded on other digits), an AllToAllV (sharded →
// sharded on digits that share some, exchange.go).
func (pl *searcher) singleTypeEdges(s searchState, out []edge) []edge {
	for i := range ir.DeviceTypes {
		if s.partial&(1<<i) != 0 {
			continue
		}
		for k := range pl.options[i] {
			if k == s.pick[i] {
				continue
			}
			to := s.placement
			to.pick[i] = k
			if !pl.valid(to) {
				continue
			}
			if kind, ok := changeKind(pl.options[i][s.pick[i]], pl.options[i][k]); ok {
				out = pl.appendChange(out, s, to, 1<<i, kind)
			} else {
				out = pl.appendExchange(out, s, to, 1<<i)
			}
		}
	}
	return out
}

// changeKind is the step that changes cur digits into next ones.
func changeKind(cur, next []ir.Digit) (edgeKind, bool) {
	switch {
	case cur == nil:
		return edgeSlice, true
	case next == nil:
		return edgeAllgather, true
	case disjoint(cur, next):
		return edgeAllToAll, true
	}
	return 0, false
}

// multiTypeEdges lists steps over several device types at once: an
// Allgather of all their digits, and a Slice, an AllToAll or an AllToAllV
// to the consumer's digits along all of them.
func (pl *searcher) multiTypeEdges(s searchState, out []edge) []edge {
	m := pl.mesh(s.placement)
	for mask := uint8(3); mask < 8; mask++ {
		if bits.OnesCount8(mask) < 2 || mask&s.partial != 0 || !spans(m, mask) {
			continue
		}
		var cur, next []ir.Digit
		gathered, toward := s.placement, s.placement
		sharded, replicated, targeted := true, true, true
		for i := range ir.DeviceTypes {
			if mask&(1<<i) == 0 {
				continue
			}
			c, g := pl.options[i][s.pick[i]], pl.goal.pick[i]
			sharded, replicated = sharded && c != nil, replicated && c == nil
			targeted = targeted && g != 0 && g != s.pick[i]
			cur, next = append(cur, c...), append(next, pl.options[i][g]...)
			gathered.pick[i], toward.pick[i] = 0, g
		}
		if sharded {
			out = pl.appendChange(out, s, gathered, mask, edgeAllgather)
		}
		if !targeted || !pl.valid(toward) {
			continue
		}
		switch {
		case replicated:
			out = pl.appendChange(out, s, toward, mask, edgeSlice)
		case sharded && disjoint(cur, next):
			out = pl.appendChange(out, s, toward, mask, edgeAllToAll)
		case sharded:
			out = pl.appendExchange(out, s, toward, mask)
		}
	}
	return out
}

// appendChange prices a Slice, Allgather or AllToAll along the types of
// mask from s to placement to and appends its edge (collectives.go emits
// it).
func (pl *searcher) appendChange(out []edge, s searchState, to placement, mask uint8, kind edgeKind) []edge {
	m := pl.mesh(s.placement)
	n := teamSize(m, mask)
	cur := pl.decode(s.order)
	size, next := pl.size(s.placement), pl.size(to)
	bytes, devices := int64(size)*pl.elem, int64(len(m.Devices))
	dp, dn := pl.rankPicks(s.placement, m, mask), pl.rankPicks(to, m, mask)
	e := pl.newCost()
	var in, got []ir.Digit
	switch kind {
	case edgeSlice:
		if _, _, ok := stridedSlice(cur, dn); ok {
			in, got = cur, without(cur, dn)
			e.local(cost.StridedSlice, size, next)
			break
		}
		in, got = sliceOrders(cur, dn)
		e.permute(cur, in, size)
		e.local(plan.Slice, size, next)
	case edgeAllgather:
		in, got = gatherOrders(dp, pl.target(to))
		e.permute(cur, in, size)
		e.collective(pl.linkAlong(m, mask), plan.Allgather, plan.Count{Input: size, Output: next}, n)
		recv := e.times(int64(n-1), bytes)
		e.bytes(recv, e.times(recv, devices))
	case edgeAllToAll:
		in, got = allToAllOrders(dp, dn, pl.target(to))
		e.permute(cur, in, size)
		e.collective(pl.linkAlong(m, mask), plan.AllToAll, plan.Count{Input: size, Output: size}, n)
		recv := e.share(int64(n-1), bytes, int64(n))
		e.bytes(recv, e.times(recv, devices))
	}
	return pl.appendEdge(out, kind, mask, to, got, e)
}

// appendEdge completes an edge whose steps leave a buffer stored as got:
// into the consumer, a Permute where its order differs.
func (pl *searcher) appendEdge(out []edge, kind edgeKind, mask uint8, to placement, got []ir.Digit, e *edgeCost) []edge {
	next := searchState{placement: to}
	if to == pl.goal.placement {
		e.permute(got, pl.dst.stored, pl.size(to))
		next.order = pl.goal.order
	} else {
		next.order = pl.encode(got)
	}
	c, ok := e.result()
	if !ok {
		return out
	}
	return append(out, edge{kind: kind, mask: mask, to: next, cost: c})
}

// rankPicks are the digits p's types of mask select on m, in team-rank
// order (rankDigits of the placement's view).
func (pl *searcher) rankPicks(p placement, m *ir.Mesh, mask uint8) []ir.Digit {
	var out []ir.Digit
	for _, t := range typesOf(m, mask) {
		i := typeIndex(t)
		out = append(out, pl.options[i][p.pick[i]]...)
	}
	return out
}

// typeIndex is t's position in ir.DeviceTypes (its bit in a mask).
func typeIndex(t ir.ParallelType) int { return slices.Index(ir.DeviceTypes, t) }

// The buffer orders of the steps, shared by their emission (collectives.go)
// and their pricing: in is the order a step reads (a Permute arranges it
// when the buffer is stored otherwise), got the order it writes.

// sliceOrders: a step that keeps or sends chunk d of a buffer stored as cur
// stridedSlice reports whether digits d lie in cur together, in order,
// below at least one other digit, and the extents of the digits before
// (outer) and after (inner) them: a Slice with dims [outer, T, inner]
// then keeps each rank's chunks without a Permute (docs/plan.md). With d
// outermost, the plain Slice does (sliceOrders).
func stridedSlice(cur, d []ir.Digit) (outer, inner int, ok bool) {
	if len(d) == 0 {
		return 0, 0, false
	}
	i := slices.Index(cur, d[0])
	if i < 1 || i+len(d) > len(cur) || !slices.Equal(cur[i:i+len(d)], d) {
		return 0, 0, false
	}
	outer, inner = 1, 1
	for _, x := range cur[:i] {
		outer *= x.Extent
	}
	for _, x := range cur[i+len(d):] {
		inner *= x.Extent
	}
	return outer, inner, true
}

// (Slice, Scatter) reads it with d outermost and writes the rest.
func sliceOrders(cur, d []ir.Digit) (in, got []ir.Digit) {
	rest := without(cur, d)
	return concat(d, rest), rest
}

// gatherOrders: a step that gathers digits d (Allgather, Gather) into a
// buffer stored toward want concatenates buffers stored as want without d.
func gatherOrders(d, want []ir.Digit) (in, got []ir.Digit) {
	in = without(want, d)
	return in, concat(d, in)
}

// allToAllOrders: an AllToAll trading device digits dp for stored ones dc
// reads chunks of dc and writes chunks of dp.
func allToAllOrders(dp, dc, want []ir.Digit) (in, got []ir.Digit) {
	rest := without(want, dp)
	return concat(dc, rest), concat(dp, rest)
}

// reduceScatterOrders: a ReduceScatter onto digits dn reads chunks of dn
// and writes the order wanted.
func reduceScatterOrders(dn, want []ir.Digit) (in, got []ir.Digit) {
	return concat(dn, want), want
}

func disjoint(a, b []ir.Digit) bool {
	for _, x := range a {
		if slices.Contains(b, x) {
			return false
		}
	}
	return true
}
