package lower

import (
	"container/heap"
	"fmt"
	"slices"

	"github.com/nvcomm/nvcomm/internal/checked"
	"github.com/nvcomm/nvcomm/internal/cost"
	"github.com/nvcomm/nvcomm/internal/ir"
	"github.com/nvcomm/nvcomm/internal/plan"
)

// The optimal policy (docs/lowering.md) searches, per op, the sharding states
// between the producer's and the consumer's: a state is a mesh and, for each
// device type, the digits it selects. Each edge is one collective (or a local
// Slice) that changes one thing; Dijkstra finds the path that minimizes the
// bytes received by the busiest device, then the total bytes, then the
// number of steps.

// searchState is a node of the search.
type searchState struct {
	onDst bool   // on the consumer's mesh (else the producer's)
	pick  [3]int // per device type (DIDx, DIDy, DIDz): index into options
}

// cost orders paths: bytes received by the busiest device, then bytes that
// cross from one mesh to the other (each element should cross once and the
// rest happen inside the destination mesh), then the time the cost model
// predicts (byte ties are broken by time), then total bytes, then steps.
type pathCost struct {
	busiest, cross, total int64
	seconds               float64
	steps                 int
}

func (a pathCost) less(b pathCost) bool {
	switch {
	case a.busiest != b.busiest:
		return a.busiest < b.busiest
	case a.cross != b.cross:
		return a.cross < b.cross
	case a.seconds != b.seconds:
		return a.seconds < b.seconds
	case a.total != b.total:
		return a.total < b.total
	}
	return a.steps < b.steps
}

// plus adds two costs, and false when a byte count overflows: the path
// then costs more than nvcomm can count.
func (a pathCost) plus(b pathCost) (pathCost, bool) {
	busiest, ok1 := checked.Add(a.busiest, b.busiest)
	cross, ok2 := checked.Add(a.cross, b.cross)
	total, ok3 := checked.Add(a.total, b.total)
	return pathCost{busiest, cross, total, a.seconds + b.seconds, a.steps + b.steps}, ok1 && ok2 && ok3
}

// local is the cost of a step inside one mesh; crossing that of a step from
// one mesh to the other.
func local(busiest, total int64, steps int) pathCost {
	return pathCost{busiest: busiest, total: total, steps: steps}
}

func crossing(busiest, total int64, steps int) pathCost {
	return pathCost{busiest: busiest, cross: total, total: total, steps: steps}
}

// timed adds the predicted time of repeat collectives of type typ over n
// devices with message size msg bytes (nccl-tests' S), or of a local step
// over msg bytes when typ is Slice.
func (pl *planner) timed(c pathCost, typ string, msg int64, n, repeat int) pathCost {
	t := pl.c.topology
	if typ == plan.Slice {
		c.seconds = t.Memory.Seconds(2 * float64(msg)) // read and write; 2·msg may not fit in int64
		return c
	}
	c.seconds = float64(repeat) * t.Collective(cost.LinkNVLink, typ, msg, n)
	return c
}

// edgeKind names the step an edge emits.
type edgeKind int

const (
	edgeSlice edgeKind = iota
	edgeAllgather
	edgeAllToAll
	edgeSendRecv
	edgeBroadcast
	edgeScatter
	edgeGather
	edgeSwap
)

// edge is one transition of the search.
type edge struct {
	kind edgeKind
	typ  ir.ParallelType
	to   searchState
	cost pathCost
}

// planner holds one op's search space.
type planner struct {
	c        *opCtx
	src, dst *view
	options  [3][][]ir.Digit // per type: nil (replicated), then candidate digit groups
	order    []ir.Digit      // every stored-or-device digit, in the consumer's layout order
	elem     int64
	bySet    map[string][]searchState // valid states by mesh and selected digits
	// overflowed notes an edge or path left out because its cost in bytes
	// does not fit in int64.
	overflowed bool
}

// optimal lowers src (the producer, after any local reduction and partial
// resolution) to dst.
func (c *opCtx) optimal(src, dst *view) {
	pl := newPlanner(c, src, dst)
	path, ok := pl.search()
	if !ok && pl.overflowed {
		c.overflow("the bytes of every sequence of collectives from the producer's sharding to the consumer's")
		return
	}
	if !ok {
		c.fail("no sequence of collectives reaches the consumer's sharding from the producer's",
			"reshard within one mesh first, then move between meshes of the same shape")
		return
	}
	pl.emit(path)
}

func newPlanner(c *opCtx, src, dst *view) *planner {
	pl := &planner{c: c, src: src, dst: dst, elem: int64(src.dtype.Size())}
	for i, t := range ir.DeviceTypes {
		pl.options[i] = [][]ir.Digit{nil}
		for _, v := range []*view{src, dst} {
			if d := v.did[t]; len(d) > 0 && !containsDigits(pl.options[i], d) {
				pl.options[i] = append(pl.options[i], d)
			}
		}
	}
	all := concat(dst.stored)
	for _, t := range ir.DeviceTypes {
		all = concat(all, src.did[t], dst.did[t])
	}
	pl.order = canonicalOrder(all, dst, c.fact)
	pl.addGroups()
	pl.indexStates()
	return pl
}

// maxSubsetDigits bounds the digits whose subsets become candidate groups,
// so the search stays small.
const maxSubsetDigits = 10

// addGroups adds, per device type, every set of digits (in canonical order)
// whose extents multiply to the type's mesh size: the intermediate
// shardings a device permutation may need.
func (pl *planner) addGroups() {
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

// indexStates groups the valid states of each mesh by the set of digits
// they select: a device permutation moves between states of one group.
func (pl *planner) indexStates() {
	pl.bySet = map[string][]searchState{}
	for _, onDst := range []bool{false, true} {
		var s searchState
		s.onDst = onDst
		for a := range pl.options[0] {
			for b := range pl.options[1] {
				for c := range pl.options[2] {
					s.pick = [3]int{a, b, c}
					if pl.valid(s) {
						k := pl.setKey(s)
						pl.bySet[k] = append(pl.bySet[k], s)
					}
				}
			}
		}
	}
}

// setKey names the mesh and the set of digits a state selects.
func (pl *planner) setKey(s searchState) string {
	var sel []ir.Digit
	for i := range ir.DeviceTypes {
		sel = append(sel, pl.options[i][s.pick[i]]...)
	}
	slices.SortFunc(sel, func(a, b ir.Digit) int {
		if a.Axis != b.Axis {
			return a.Axis - b.Axis
		}
		return b.Stride - a.Stride
	})
	return fmt.Sprint(s.onDst, sel)
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

// stateOf returns the search state a view is in.
func (pl *planner) stateOf(v *view, onDst bool) searchState {
	s := searchState{onDst: onDst}
	for i, t := range ir.DeviceTypes {
		for k, o := range pl.options[i] {
			if slices.Equal(o, v.did[t]) {
				s.pick[i] = k
			}
		}
	}
	return s
}

func (pl *planner) mesh(s searchState) *ir.Mesh {
	if s.onDst {
		return pl.dst.mesh
	}
	return pl.src.mesh
}

// valid reports whether every type's digits fit its mesh axis and no digit
// is selected twice.
func (pl *planner) valid(s searchState) bool {
	m := pl.mesh(s)
	var used []ir.Digit
	for i, t := range ir.DeviceTypes {
		d := pl.options[i][s.pick[i]]
		if d == nil {
			continue
		}
		if extentOf(d) != m.Size(t) || m.Size(t) == 1 {
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

// view builds the (flexible) intermediate view of a state.
func (pl *planner) view(s searchState) *view {
	v := &view{name: pl.c.buffer("step"), mesh: pl.mesh(s), dtype: pl.src.dtype, did: map[ir.ParallelType][]ir.Digit{}, flexible: true}
	var sel []ir.Digit
	for i, t := range ir.DeviceTypes {
		if d := pl.options[i][s.pick[i]]; d != nil {
			v.did[t] = d
			sel = append(sel, d...)
		}
	}
	v.stored = without(pl.order, sel)
	return v
}

// size is the bytes per device in state s: one buffer of the op, so no
// overflow (sizes.go).
func (pl *planner) size(s searchState) int64 {
	n := int64(1)
	for _, d := range pl.order {
		n *= int64(d.Extent)
	}
	for i := range ir.DeviceTypes {
		n /= int64(extentOf(pl.options[i][s.pick[i]]))
	}
	return n * pl.elem
}

func (pl *planner) isReplicated(s searchState) bool { return s.pick == [3]int{} }

// fits reports ok, noting in pl when a cost overflowed.
func (pl *planner) fits(ok bool) bool {
	pl.overflowed = pl.overflowed || !ok
	return ok
}

// product multiplies byte counts of an edge's cost; ok is false when the
// product overflows, and the edge is then left out.
func product(xs ...int64) (int64, bool) { return checked.Product(xs...) }

// edges lists the transitions out of s.
func (pl *planner) edges(s searchState) []edge {
	var out []edge
	m := pl.mesh(s)
	size := pl.size(s)
	devices := int64(len(m.Devices))
	for i, t := range ir.DeviceTypes {
		for k := range pl.options[i] {
			if k == s.pick[i] {
				continue
			}
			to := s
			to.pick[i] = k
			if !pl.valid(to) {
				continue
			}
			n := int64(m.Size(t))
			cur, next := pl.options[i][s.pick[i]], pl.options[i][k]
			switch {
			case cur == nil:
				out = append(out, edge{kind: edgeSlice, typ: t, to: to, cost: pl.timed(local(0, 0, 1), plan.Slice, size, 1, 1)})
			case next == nil:
				// n·size is the gathered buffer, (n−1)·size less.
				recv := (n - 1) * size
				total, ok := product(recv, devices)
				if pl.fits(ok) {
					c := pl.timed(local(recv, total, 1), plan.Allgather, n*size, int(n), 1)
					out = append(out, edge{kind: edgeAllgather, typ: t, to: to, cost: c})
				}
			case disjoint(cur, next):
				recv := (n - 1) * (size / n) // size is a multiple of n: the chunks
				total, ok := product(recv, devices)
				if pl.fits(ok) {
					c := pl.timed(local(recv, total, 1), plan.AllToAll, size, int(n), 1)
					out = append(out, edge{kind: edgeAllToAll, typ: t, to: to, cost: c})
				}
			}
		}
	}
	out = append(out, pl.swapEdges(s, size)...)
	if !s.onDst && !pl.src.mesh.Equal(pl.dst.mesh) {
		out = append(out, pl.crossEdges(s, size)...)
	}
	return out
}

// swapEdges lists the device permutations: states on the same mesh that
// select the same digits, assigned to other device types. Each device sends
// its whole buffer to the device that must hold it (SendRecv pairs): the
// direct exchange for transposed shardings such as [S(0), S(1)] →
// [S(1), S(0)], and, followed by a collective, for nested ones.
func (pl *planner) swapEdges(s searchState, size int64) []edge {
	var out []edge
	if pl.isReplicated(s) {
		return nil
	}
	for _, to := range pl.bySet[pl.setKey(s)] {
		if to == s {
			continue
		}
		moves, ok := pl.permutation(s, to)
		if !ok {
			continue
		}
		moved := int64(0)
		for from, dest := range moves {
			if from != dest {
				moved++
			}
		}
		total, ok := product(size, moved)
		if !pl.fits(ok) {
			continue
		}
		c := pl.timed(local(size, total, int(moved)), plan.SendRecv, size, 2, int(moved))
		out = append(out, edge{kind: edgeSwap, to: to, cost: c})
	}
	return out
}

// permutation maps each device of the mesh to the device that holds its
// buffer in state to: the same digit values, and the same coordinates along
// the replicated axes (matched in order, which must have equal sizes).
func (pl *planner) permutation(from, to searchState) (map[int]int, bool) {
	m := pl.mesh(from)
	freeFrom, freeTo := pl.freeTypes(from), pl.freeTypes(to)
	if len(freeFrom) != len(freeTo) {
		return nil, false
	}
	for k := range freeFrom {
		if m.Size(freeFrom[k]) != m.Size(freeTo[k]) {
			return nil, false
		}
	}
	moves := map[int]int{}
	for idx, d := range m.Devices {
		coords := m.Coords(idx)
		vals := map[ir.Digit]int{}
		for i, t := range ir.DeviceTypes {
			ds := pl.options[i][from.pick[i]]
			c := 0
			if a := m.Axis(t); a >= 0 {
				c = coords[a]
			}
			for k := len(ds) - 1; k >= 0; k-- {
				vals[ds[k]] = c % ds[k].Extent
				c /= ds[k].Extent
			}
		}
		target := slices.Clone(coords)
		for i, t := range ir.DeviceTypes {
			ds := pl.options[i][to.pick[i]]
			if len(ds) == 0 {
				continue
			}
			c := 0
			for _, g := range ds {
				c = c*g.Extent + vals[g]
			}
			target[m.Axis(t)] = c
		}
		for k := range freeTo {
			target[m.Axis(freeTo[k])] = coords[m.Axis(freeFrom[k])]
		}
		moves[d] = m.Devices[linearIndex(m.Shape, target)]
	}
	return moves, true
}

// freeTypes lists the types a state leaves replicated on a mesh axis of
// size > 1.
func (pl *planner) freeTypes(s searchState) []ir.ParallelType {
	m := pl.mesh(s)
	var out []ir.ParallelType
	for i, t := range ir.DeviceTypes {
		if m.Size(t) > 1 && pl.options[i][s.pick[i]] == nil {
			out = append(out, t)
		}
	}
	return out
}

// swap emits the SendRecv pairs of a permutation edge (a Copy where a
// device keeps its buffer).
func (c *opCtx) swap(src, dst *view, moves map[int]int) {
	out, after := c.finish(src.stored, dst, "swapped")
	for _, from := range src.mesh.Devices {
		to := moves[from]
		if from == to {
			c.emitLocalOn(plan.Step{Type: plan.Copy, Input: src.name, Output: out}, []int{from}, src.size(), src.size())
			continue
		}
		c.emitCollective(plan.Step{Type: plan.SendRecv, Root: ptr(from), Input: src.name, Output: out, Axis: src.firstAxis()},
			[][]int{{from, to}}, src, dst, src.size(), src.size())
	}
	after()
}

// linearIndex is the row-major index of coords in a mesh of the given shape.
func linearIndex(shape, coords []int) int {
	i := 0
	for a, c := range coords {
		i = i*shape[a] + c
	}
	return i
}

func disjoint(a, b []ir.Digit) bool {
	for _, x := range a {
		if slices.Contains(b, x) {
			return false
		}
	}
	return true
}

// crossEdges lists the moves from the producer's mesh to the consumer's.
func (pl *planner) crossEdges(s searchState, size int64) []edge {
	var out []edge
	from, to := pl.src.mesh, pl.dst.mesh
	moved := s
	moved.onDst = true
	receivers := int64(len(to.Devices))
	total, ok := product(size, receivers)
	if !pl.fits(ok) {
		return nil // every move sends a buffer of size to each receiver
	}
	if slices.Equal(from.Shape, to.Shape) && pl.valid(moved) {
		c := pl.timed(crossing(size, total, len(to.Devices)), plan.SendRecv, size, 2, len(to.Devices))
		out = append(out, edge{kind: edgeSendRecv, typ: ir.Serial, to: moved, cost: c})
	}
	if pl.isReplicated(s) {
		c := pl.timed(crossing(size, total, 1), plan.Broadcast, size, len(to.Devices)+1, 1)
		out = append(out, edge{kind: edgeBroadcast, typ: ir.Serial, to: moved, cost: c})
		target := pl.stateOf(pl.dst, true)
		if to.Rank() == 1 && commonRoot(from, to) >= 0 && !pl.isReplicated(target) && onlyType(target, 0) {
			// The chunks tile the consumer: one buffer, no overflow.
			chunk := pl.size(target)
			c := pl.timed(crossing(chunk, chunk*(receivers-1), 1), plan.Scatter, chunk*receivers, len(to.Devices), 1)
			out = append(out, edge{kind: edgeScatter, typ: ir.DIDx, to: target, cost: c})
		}
	}
	if from.Rank() == 1 && onlyType(s, 0) && !pl.isReplicated(s) {
		target := moved
		target.pick = [3]int{}
		full := size * int64(from.Size(ir.DIDx)) // the replicated buffer
		if fullTotal, ok := product(full, receivers); pl.fits(ok) {
			c := pl.timed(crossing(full, fullTotal, len(to.Devices)), plan.Gather, full, len(from.Devices)+1, len(to.Devices))
			out = append(out, edge{kind: edgeGather, typ: ir.DIDx, to: target, cost: c})
		}
	}
	return out
}

// onlyType reports whether s selects digits for no type but DeviceTypes[i].
func onlyType(s searchState, i int) bool {
	for k, p := range s.pick {
		if k != i && p != 0 {
			return false
		}
	}
	return true
}

// commonRoot returns the first device of from that is in to, or -1.
func commonRoot(from, to *ir.Mesh) int {
	for _, d := range from.Devices {
		if to.Contains(d) {
			return d
		}
	}
	return -1
}

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
			moves, _ := pl.permutation(prevState, e.to)
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
	teams := src.mesh.Slices(t)
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

// optimalReduction lowers a reduction under the optimal policy: a local
// reduction of the locally stored part of the reduced axis, then, for each
// device type that shards the reduced axis, a ReduceScatter (when the
// consumer is sharded along that type on the same mesh) or an Allreduce,
// then the search for the remaining sharding change.
func (c *opCtx) optimalReduction(pv, cv *view) {
	r := c.op.Axis
	var partial []ir.ParallelType
	for _, t := range ir.DeviceTypes {
		switch on := len(onAxis(pv.did[t], r)); {
		case on == 0:
		case on == len(pv.did[t]):
			partial = append(partial, t)
		default:
			// A merged device axis that spans the reduced axis and others:
			// its devices hold different elements of the other axes, so
			// gather it first and reduce the whole axis locally.
			next := &view{name: c.buffer("gathered"), mesh: pv.mesh, dtype: pv.dtype, did: maps(pv.did),
				stored: concat(pv.did[t], pv.stored), flexible: true}
			delete(next.did, t)
			c.allgather(pv, next, t)
			pv = next
		}
	}
	src := pv
	if local := onAxis(pv.stored, r); len(local) > 0 || len(partial) == 0 {
		src = c.localReduce(pv, local)
	}
	if len(partial) == 1 && toOneDevice(src, cv, partial[0]) {
		// One device wants the whole result: a Reduce to it moves less than
		// an Allreduce (every device receives) followed by a copy.
		next := &view{mesh: cv.mesh, dtype: src.dtype, did: map[ir.ParallelType][]ir.Digit{}, stored: src.stored, flexible: true}
		if sameSharding(next, cv) {
			next = cv
		} else {
			next.name = c.buffer("reduced")
		}
		c.reduceTo(src, next, partial[0])
		src, partial = next, nil
	}
	for _, t := range partial {
		next := &view{mesh: src.mesh, dtype: src.dtype, did: maps(src.did), flexible: true}
		scatter := src.mesh.Equal(cv.mesh) && cv.sharded(t) && disjoint(cv.did[t], otherDigits(src, t))
		if scatter {
			next.did[t] = cv.did[t]
		} else {
			delete(next.did, t)
		}
		next.stored = without(src.stored, next.did[t])
		if sameSharding(next, cv) {
			next = cv
		} else {
			next.name = c.buffer("reduced")
		}
		if scatter {
			c.reduceScatter(src, next, t)
		} else {
			c.allreduce(src, next, t)
		}
		src = next
	}
	c.resolved = src
	if src != cv {
		c.optimal(src, cv)
	}
}

// toOneDevice reports whether a reduction partial along t alone goes to a
// consumer on one device: src selects no digits with other device types,
// so every team along t holds all the partial results, and cv is that
// single device.
func toOneDevice(src, cv *view, t ir.ParallelType) bool {
	return len(cv.mesh.Devices) == 1 && len(otherDigits(src, t)) == 0
}

// reduceTo reduces src, partial along t, onto dst's single device with one
// Reduce: over the team along t that holds the root, or, for a root
// outside src's mesh, over the first team with the root added (it
// contributes the identity).
func (c *opCtx) reduceTo(src, dst *view, t ir.ParallelType) {
	root := dst.mesh.Devices[0]
	teams := src.mesh.Slices(t)
	team := teams[0]
	for _, tm := range teams {
		if slices.Contains(tm, root) {
			team = tm
		}
	}
	team = slices.Clone(team)
	if !slices.Contains(team, root) {
		team = append(team, root)
	}
	out, after := c.finish(src.stored, dst, "reduced")
	c.emitCollective(plan.Step{Type: plan.Reduce, Root: ptr(root), ReduceOp: c.reduceOp(), Input: src.name, Output: out, Axis: ptr(c.op.Axis)},
		[][]int{team}, src, dst, src.size(), src.size())
	after()
}

// maps copies a digit map.
func maps(m map[ir.ParallelType][]ir.Digit) map[ir.ParallelType][]ir.Digit {
	out := make(map[ir.ParallelType][]ir.Digit, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// otherDigits lists the digits v's types other than t select.
func otherDigits(v *view, t ir.ParallelType) []ir.Digit {
	var out []ir.Digit
	for _, u := range ir.DeviceTypes {
		if u != t {
			out = append(out, v.did[u]...)
		}
	}
	return out
}

// sameSharding reports whether two views place data alike on one mesh.
func sameSharding(a, b *view) bool {
	return a.mesh.Equal(b.mesh) && len(changedTypes(a, b)) == 0
}
