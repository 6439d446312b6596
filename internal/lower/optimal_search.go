package lower

import (
	"container/heap"
	"slices"

	"github.com/nvcomm/nvcomm/internal/ir"
	"github.com/nvcomm/nvcomm/internal/plan"
)

// The optimal policy's search (Dijkstra over sharding states, optimal.go)
// and the emission of the path it finds.

// search runs Dijkstra from the producer's state to the consumer's.
func (pl *planner) search() ([]edge, bool) {
	start, goal := pl.stateOf(pl.src, false), pl.stateOf(pl.dst, !pl.src.mesh.Equal(pl.dst.mesh))
	best := map[searchState]pathCost{start: {}}
	prev := map[searchState]edge{}
	from := map[searchState]searchState{}
	q := &stateQueue{{start, pathCost{}}}
	for q.Len() > 0 {
		it := heap.Pop(q).(queued)
		if c, ok := best[it.s]; ok && c.less(it.c) {
			continue
		}
		if it.s == goal {
			return pl.path(start, goal, prev, from), true
		}
		for _, e := range pl.edges(it.s) {
			nc, fits := it.c.plus(e.cost)
			if !pl.fits(fits) {
				continue
			}
			if c, ok := best[e.to]; ok && !nc.less(c) {
				continue
			}
			best[e.to], prev[e.to], from[e.to] = nc, e, it.s
			heap.Push(q, queued{e.to, nc})
		}
	}
	return nil, false
}

func (pl *planner) path(start, goal searchState, prev map[searchState]edge, from map[searchState]searchState) []edge {
	var path []edge
	for s := goal; s != start; s = from[s] {
		path = append(path, prev[s])
	}
	slices.Reverse(path)
	return path
}

// emit turns the path into steps, the last one writing the consumer.
func (pl *planner) emit(path []edge) {
	c, cur := pl.c, pl.src
	if len(path) == 0 {
		c.local(cur, pl.dst)
		return
	}
	prevState := pl.stateOf(pl.src, false)
	for k, e := range path {
		next := pl.dst
		if k < len(path)-1 {
			next = pl.view(e.to)
		}
		switch e.kind {
		case edgeSlice:
			c.slice(cur, next, e.typ)
		case edgeAllgather:
			c.allgather(cur, next, e.typ)
		case edgeAllToAll:
			c.allToAll(cur, next, e.typ)
		case edgeSendRecv:
			c.sendRecv(cur, next)
		case edgeBroadcast:
			c.broadcast(cur, next)
		case edgeScatter:
			c.scatterCrossMesh(cur, next, e.typ)
		case edgeGather:
			c.gather(cur, next, e.typ)
		case edgeSwap:
			moves, _ := pl.relabeling(prevState, e.to)
			c.swap(cur, next, moves)
		}
		cur, prevState = next, e.to
	}
}

// slice: cur is replicated along t, next sharded; each device keeps its
// part locally, no communication. The input is arranged with next's digits
// for t outermost, then every team member keeps chunk rank of T.
func (c *opCtx) slice(src, dst *view, t ir.ParallelType) {
	d := dst.did[t]
	rest := without(src.stored, d)
	in := c.arrange(src, concat(d, rest), "in", src.mesh.Devices)
	out, after := c.finish(rest, dst, "sliced")
	teams := src.mesh.Teams(t)
	c.emitLocalTeams(plan.Step{Type: plan.Slice, Input: in.name, Output: out, Axis: ptr(dst.axisOf(t))},
		teams, in.size(), dst.size())
	after()
}

// queued is a search state with its path cost, for the priority queue.
type queued struct {
	s searchState
	c pathCost
}

// stateQueue is a min-heap of queued states by cost.
type stateQueue []queued

func (q stateQueue) Len() int           { return len(q) }
func (q stateQueue) Less(i, j int) bool { return q[i].c.less(q[j].c) }
func (q stateQueue) Swap(i, j int)      { q[i], q[j] = q[j], q[i] }
func (q *stateQueue) Push(x any)        { *q = append(*q, x.(queued)) }
func (q *stateQueue) Pop() any {
	old := *q
	it := old[len(old)-1]
	*q = old[:len(old)-1]
	return it
}
