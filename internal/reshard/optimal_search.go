package reshard

import (
	"container/heap"
	"slices"
)

// The optimal policy's search (Dijkstra over sharding states, optimal.go)
// and the emission of the path it finds.

// search finds the best path from the producer's state to the consumer's
// under the op's objective. A device permutation costs a step per device
// that moves, and a mesh may have thousands: a first pass without them
// finds a path whose cost bounds the permutations worth pricing in the
// second (swapEdges).
func (pl *searcher) search() ([]edge, bool) {
	pl.noSwaps = true
	if path, ok := pl.dijkstra(); ok {
		limit := pathCost{}
		for _, e := range path {
			limit, _ = pl.obj.Add(limit, e.cost)
		}
		pl.limit = &limit
	}
	pl.noSwaps = false
	return pl.dijkstra()
}

// dijkstra runs Dijkstra from the producer's state to the consumer's,
// ordering paths by the op's objective.
func (pl *searcher) dijkstra() ([]edge, bool) {
	start := pl.start
	best := map[searchState]*reached{start: {}}
	q := &stateQueue{obj: pl.obj, items: []queued{{start, pathCost{}}}}
	for q.Len() > 0 {
		it := heap.Pop(q).(queued)
		if pl.obj.Less(best[it.s].cost, it.c) {
			continue // reached more cheaply since it was queued
		}
		if it.s.placement == pl.goal.placement {
			return pl.path(start, it.s, best), true
		}
		for _, e := range pl.edges(it.s) {
			nc, fits := pl.obj.Add(it.c, e.cost)
			if !pl.fits(fits) {
				continue
			}
			if r, ok := best[e.to]; ok && !pl.obj.Less(nc, r.cost) {
				continue
			}
			best[e.to] = &reached{cost: nc, via: e, from: it.s}
			heap.Push(q, queued{e.to, nc})
		}
	}
	return nil, false
}

// reached is how the search reached a state: its cost, and the edge and
// state it came by.
type reached struct {
	cost pathCost
	via  edge
	from searchState
}

func (pl *searcher) path(start, goal searchState, best map[searchState]*reached) []edge {
	var path []edge
	for s := goal; s != start; s = best[s].from {
		path = append(path, best[s].via)
	}
	slices.Reverse(path)
	return path
}

// emission emits for one op the path a stored search found: the op's
// lowering and its own producer and consumer views, which may differ from
// the search's in their names. It only reads the search.
type emission struct {
	c        lowering
	src, dst *view
	found    *searcher
}

// emit turns the path into steps, the last one writing the consumer.
func (em emission) emit(path []edge) {
	c, cur, pl := em.c, em.src, em.found
	if len(path) == 0 {
		c.local(cur, em.dst)
		return
	}
	at := pl.start.placement
	for k, e := range path {
		if e.kind == edgeRelabel {
			cur, at = em.relabelTo(cur, k == len(path)-1), e.to.placement
			continue
		}
		next := em.dst
		if k < len(path)-1 {
			next = em.view(e.to.placement)
		}
		switch e.kind {
		case edgeSlice:
			c.sliceAlong(cur, next, e.mask)
		case edgeAllgather:
			c.allgatherAlong(cur, next, e.mask)
		case edgeAllToAll:
			c.allToAllAlong(cur, next, e.mask)
		case edgeAllToAllV:
			c.allToAllVAlong(cur, next, e.mask)
		case edgeSwap:
			c.swap(cur, next, pl.relabel(at, e.to.placement))
		case edgeSwapExchange:
			c.swapExchange(cur, next, pl.relabel(at, e.to.placement))
		case edgeCrossExchange:
			c.crossExchange(cur, next)
		case edgeSendRecv:
			c.sendRecvPairs(cur, next)
		case edgeBroadcast:
			c.broadcastTo(cur, next, e.mask == 1)
		case edgeScatter:
			c.scatterTo(cur, next)
		case edgeGather:
			c.gatherTo(cur, next, pl.options[0][at.pick[0]], pl.options[0][e.to.pick[0]])
		case edgeAllreduce:
			c.allreduceAlong(cur, next, e.mask)
		case edgeReduceScatter:
			c.reduceScatterAlong(cur, next, e.mask)
		case edgeReduce:
			c.reduceTo(cur, next, e.mask)
		}
		cur, at = next, e.to.placement
	}
}

// relabelTo makes a replicated buffer that every consumer device holds
// the consumer's (relabelEdge): the same buffer on the consumer's mesh,
// and when last, a copy of it into the consumer.
func (em emission) relabelTo(cur *view, last bool) *view {
	moved := &view{name: cur.name, mesh: em.dst.mesh, dtype: cur.dtype, did: cur.did, stored: cur.stored}
	switch {
	case !last:
		return moved
	case em.found.readLater:
		em.c.copyTo(moved, em.dst)
	default:
		em.c.local(moved, em.dst)
	}
	return em.dst
}

// queued is a search state with its path cost, for the priority queue.
type queued struct {
	s searchState
	c pathCost
}

// stateQueue is a min-heap of queued states by cost under an objective.
type stateQueue struct {
	obj   costOrder
	items []queued
}

func (q *stateQueue) Len() int           { return len(q.items) }
func (q *stateQueue) Less(i, j int) bool { return q.obj.Less(q.items[i].c, q.items[j].c) }
func (q *stateQueue) Swap(i, j int)      { q.items[i], q.items[j] = q.items[j], q.items[i] }
func (q *stateQueue) Push(x any)         { q.items = append(q.items, x.(queued)) }
func (q *stateQueue) Pop() any {
	it := q.items[len(q.items)-1]
	q.items = q.items[:len(q.items)-1]
	return it
}
