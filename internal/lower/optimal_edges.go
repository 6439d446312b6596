package lower

import (
	"slices"

	"github.com/nvcomm/nvcomm/internal/checked"
	"github.com/nvcomm/nvcomm/internal/cost"
	"github.com/nvcomm/nvcomm/internal/ir"
	"github.com/nvcomm/nvcomm/internal/plan"
	"github.com/nvcomm/nvcomm/internal/shard"
)

// The edges of the optimal policy's search: the steps that change one
// thing about a sharding state (optimal.go).

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
				out = append(out, edge{kind: edgeSlice, typ: t, to: to, cost: pl.timed(local(0, 0, 1), cost.LinkMemory, plan.Slice, size, 1, 1)})
			case next == nil:
				// n·size is the gathered buffer, (n−1)·size less.
				recv := (n - 1) * size
				total, ok := product(recv, devices)
				if pl.fits(ok) {
					c := pl.timed(local(recv, total, 1), pl.linkAlong(m, t), plan.Allgather, n*size, int(n), 1)
					out = append(out, edge{kind: edgeAllgather, typ: t, to: to, cost: c})
				}
			case disjoint(cur, next):
				recv := (n - 1) * (size / n) // size is a multiple of n: the chunks
				total, ok := product(recv, devices)
				if pl.fits(ok) {
					c := pl.timed(local(recv, total, 1), pl.linkAlong(m, t), plan.AllToAll, size, int(n), 1)
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
		moves, ok := pl.relabeling(s, to)
		if !ok {
			continue
		}
		moved := int64(0)
		link := cost.LinkNVLink
		for from, dest := range moves {
			if from != dest {
				moved++
				link = pl.worse(link, []int{from, dest})
			}
		}
		total, ok := product(size, moved)
		if !pl.fits(ok) {
			continue
		}
		c := pl.timed(local(size, total, int(moved)), link, plan.SendRecv, size, 2, int(moved))
		out = append(out, edge{kind: edgeSwap, to: to, cost: c})
	}
	return out
}

// relabeling maps each device of the mesh to the device that holds its
// buffer in state to: the same digit values, and the same coordinates along
// the replicated axes (matched in order, which must have equal sizes).
func (pl *planner) relabeling(from, to searchState) (map[int]int, bool) {
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
		moves[d] = m.Devices[shard.Index(target, m.Shape)]
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
	link := pl.c.topology.LinkOf(slices.Concat(from.Devices, to.Devices))
	if slices.Equal(from.Shape, to.Shape) && pl.valid(moved) {
		pairs := cost.LinkNVLink
		for i, d := range from.Devices {
			pairs = pl.worse(pairs, []int{d, to.Devices[i]})
		}
		c := pl.timed(crossing(size, total, len(to.Devices)), pairs, plan.SendRecv, size, 2, len(to.Devices))
		out = append(out, edge{kind: edgeSendRecv, typ: ir.Serial, to: moved, cost: c})
	}
	if pl.isReplicated(s) {
		c := pl.timed(crossing(size, total, 1), link, plan.Broadcast, size, len(to.Devices)+1, 1)
		out = append(out, edge{kind: edgeBroadcast, typ: ir.Serial, to: moved, cost: c})
		target := pl.stateOf(pl.dst, true)
		if to.Rank() == 1 && commonRoot(from, to) >= 0 && !pl.isReplicated(target) && onlyType(target, 0) {
			// The chunks tile the consumer: one buffer, no overflow.
			chunk := pl.size(target)
			c := pl.timed(crossing(chunk, chunk*(receivers-1), 1), link, plan.Scatter, chunk*receivers, len(to.Devices), 1)
			out = append(out, edge{kind: edgeScatter, typ: ir.DIDx, to: target, cost: c})
		}
	}
	if from.Rank() == 1 && onlyType(s, 0) && !pl.isReplicated(s) {
		target := moved
		target.pick = [3]int{}
		full := size * int64(from.Size(ir.DIDx)) // the replicated buffer
		if busiest, total, ok := gatherBytes(from, to, size); pl.fits(ok) {
			c := pl.timed(crossing(busiest, total, len(to.Devices)), link, plan.Gather, full, len(from.Devices)+1, len(to.Devices))
			out = append(out, edge{kind: edgeGather, typ: ir.DIDx, to: target, cost: c})
		}
	}
	return out
}

// gatherBytes is what the Gathers of a cross-mesh edge make the busiest
// receiver and all receivers receive, as the plan counts it: one Gather to
// each device of to from every device of from but itself (a root that is
// in from already holds its chunk; one outside is appended to the team).
func gatherBytes(from, to *ir.Mesh, chunk int64) (busiest, total int64, ok bool) {
	for _, d := range to.Devices {
		senders := int64(len(from.Devices))
		if from.Contains(d) {
			senders--
		}
		recv, ok1 := product(senders, chunk)
		sum, ok2 := checked.Add(total, recv)
		if !ok1 || !ok2 {
			return 0, 0, false
		}
		busiest, total = max(busiest, recv), sum
	}
	return busiest, total, true
}

// worse is the slower of link and the link class of team.
func (pl *planner) worse(link string, team []int) string {
	if link == cost.LinkNetwork {
		return link
	}
	return pl.c.topology.LinkOf(team)
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
