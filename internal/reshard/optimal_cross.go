package reshard

import (
	"slices"

	"github.com/nvcomm/nvcomm/internal/cost"
	"github.com/nvcomm/nvcomm/internal/ir"
	"github.com/nvcomm/nvcomm/internal/plan"
)

// The moves of the optimal policy's search from the producer's mesh to the
// consumer's (optimal.go). Each destination receives only what it keeps
// and does not already hold: a Broadcast skips the devices of both meshes
// (they copy), a Gather collects on each destination only the chunks of
// its block.

// crossEdges lists the moves from the producer's mesh to the consumer's.
func (pl *searcher) crossEdges(s searchState, out []edge) []edge {
	from, to := pl.src.mesh, pl.dst.mesh
	moved := s.placement
	moved.onDst = true
	if slices.Equal(from.Shape, to.Shape) && pl.valid(moved) {
		out = pl.sendRecvEdge(s, moved, out)
	}
	if pl.isReplicated(s.placement) {
		out = pl.broadcastEdges(s, moved, out)
		if g := pl.goal.placement; to.Rank() == 1 && !pl.isReplicated(g) && onlyType(g, 0) {
			out = pl.scatterEdge(s, out)
		}
	}
	if from.Rank() == 1 && to.Rank() == 1 && onlyType(s.placement, 0) && !pl.isReplicated(s.placement) {
		for k := range pl.options[0] {
			out = pl.gatherEdge(s, k, out)
		}
	}
	return pl.crossExchangeEdge(s, out)
}

// sendRecvEdge: the same sharding on a mesh of the same shape; device i of
// one mesh sends its buffer to device i of the other, or copies it when
// they are the same device. The pairs run in one SendRecv step
// (pairBatches), as long as its slowest pair.
func (pl *searcher) sendRecvEdge(s searchState, to placement, out []edge) []edge {
	size := pl.size(s.placement)
	bytes := int64(size) * pl.elem
	e := pl.newCost()
	from, dst := pl.src.mesh.Devices, pl.dst.mesh.Devices
	moved := int64(0)
	for _, teams := range pairBatches(from, dst) {
		moved += int64(len(teams))
		e.slowest(pairLinks(pl.topology, teams), plan.SendRecv, plan.Count{Input: size, Output: size}, 2)
	}
	if copied := int(moved) < len(from); copied {
		e.local(plan.Copy, size, size)
	}
	if moved > 0 {
		e.bytes(bytes, e.times(bytes, moved))
	}
	e.crossing()
	return pl.appendEdge(out, edgeSendRecv, 0, to, pl.decode(s.order), e)
}

// pairLinks lists the link classes of a step's pairs, each once, in the
// order first met.
func pairLinks(t *cost.Topology, teams [][]int) []string {
	var links []string
	for _, team := range teams {
		if l := t.LinkOf(team); !slices.Contains(links, l) {
			links = append(links, l)
		}
	}
	return links
}

// broadcastTeam is the team of a replicated move's Broadcast — its root
// (a device of both meshes when there is one, so that it keeps its copy)
// and the consumer's other devices, or with skip only those that do not
// hold the data — and the devices that copy it instead; no team when every
// consumer device holds it. Skipping saves bytes, not time: a Broadcast
// takes as long to any number of devices, and the copy is one more step.
func broadcastTeam(from, to *ir.Mesh, skip bool) (team, copies []int) {
	root := commonRoot(from, to)
	if root < 0 {
		root = from.Devices[0]
	}
	team = []int{root}
	for _, d := range to.Devices {
		switch {
		case d == root:
		case !skip || !from.Contains(d):
			team = append(team, d)
		default:
			copies = append(copies, d)
		}
	}
	if len(team) == 1 {
		team = nil
		if to.Contains(root) {
			copies = append(copies, root)
		}
	}
	return team, copies
}

// broadcastEdges: replicated to replicated on the other mesh, by a
// Broadcast to every consumer device, and to those that do not hold the
// data when some do.
func (pl *searcher) broadcastEdges(s searchState, to placement, out []edge) []edge {
	team, copies := broadcastTeam(pl.src.mesh, pl.dst.mesh, true)
	if team == nil {
		return pl.relabelEdge(s, to, out)
	}
	out = pl.broadcastEdge(s, to, false, out)
	if len(copies) > 0 {
		out = pl.broadcastEdge(s, to, true, out)
	}
	return out
}

// relabelEdge: replicated, and every consumer device holds the data: the
// buffer becomes the consumer's as it is, with no step. Into the consumer
// itself, the step that wrote the buffer writes the consumer instead
// (rules.go, local), or a Copy does: when the buffer is the producer, and
// when a later op reads the consumer (the writer ran on the producer's
// other devices too, cross_collectives.go, finishOutside).
func (pl *searcher) relabelEdge(s searchState, to placement, out []edge) []edge {
	cur := pl.decode(s.order)
	e := pl.newCost()
	if !pl.readLater && !(s == pl.start && !pl.fromBuffer) {
		return pl.appendEdge(out, edgeRelabel, 0, to, cur, e) // renamed, or a Permute
	}
	pl.copyInto(e, to, cur)
	return pl.appendEdge(out, edgeRelabel, 0, to, cur, e)
}

// copyInto adds the Copy into the consumer that a step into placement to
// needs when it does not write the consumer itself (finishOutside): none
// into an intermediate, and none when the buffer's order differs, since
// the Permute appendEdge adds writes the consumer.
func (pl *searcher) copyInto(e *edgeCost, to placement, got []ir.Digit) {
	if to == pl.goal.placement && sameOrder(got, pl.dst.stored) {
		e.local(plan.Copy, pl.size(to), pl.size(to))
	}
}

// outside adds the Copy of a step whose root is outside the consumer's
// mesh into the consumer, when a later op reads it (finishOutside).
func (pl *searcher) outside(e *edgeCost, to placement, got []ir.Digit) {
	if pl.readLater {
		pl.copyInto(e, to, got)
	}
}

// broadcastEdge: a Broadcast to the consumer's devices, or with skip to
// those that do not hold the data.
func (pl *searcher) broadcastEdge(s searchState, to placement, skip bool, out []edge) []edge {
	size := pl.size(s.placement)
	bytes := int64(size) * pl.elem
	team, copies := broadcastTeam(pl.src.mesh, pl.dst.mesh, skip)
	e := pl.newCost()
	if team != nil {
		e.collective(pl.topology.LinkOf(team), plan.Broadcast, plan.Count{Input: size, Output: size}, len(team))
		e.bytes(bytes, e.times(bytes, int64(len(team)-1)))
	}
	if len(copies) > 0 {
		e.local(plan.Copy, size, size)
	}
	if team != nil && !pl.dst.mesh.Contains(team[0]) {
		pl.outside(e, to, pl.decode(s.order))
	}
	e.crossing()
	return pl.appendEdge(out, edgeBroadcast, boolMask(skip), to, pl.decode(s.order), e)
}

// scatterTeam is the team of a Scatter from the producer's mesh to the
// consumer's devices and its root: a device of both when there is one,
// else the producer's first device appended to the team, which then needs
// a padded input (one chunk more, which it keeps).
func scatterTeam(from, to *ir.Mesh) (team []int, root int, padded bool) {
	team = slices.Clone(to.Devices)
	if root = commonRoot(from, to); root >= 0 {
		return team, root, false
	}
	root = from.Devices[0]
	return append(team, root), root, true
}

// scatterEdge: replicated on the producer's mesh to the consumer's
// sharding along DIDx of its 1-D mesh.
func (pl *searcher) scatterEdge(s searchState, out []edge) []edge {
	target := pl.goal.placement
	cur := pl.decode(s.order)
	size, chunk := pl.size(s.placement), pl.size(target)
	team, _, padded := scatterTeam(pl.src.mesh, pl.dst.mesh)
	in, got := sliceOrders(cur, pl.options[0][target.pick[0]])
	e := pl.newCost()
	e.permute(cur, in, size)
	input := size
	if padded {
		input += chunk
		e.local(plan.Pad, size, input)
	}
	e.collective(pl.topology.LinkOf(team), plan.Scatter, plan.Count{Input: input, Output: chunk}, len(team))
	if padded {
		pl.outside(e, target, got)
	}
	b := int64(chunk) * pl.elem
	e.bytes(b, e.times(b, int64(len(team)-1)))
	e.crossing()
	return pl.appendEdge(out, edgeScatter, 1, target, got, e)
}

// gatherGroups returns, for a Gather from the producer's 1-D mesh sharded
// on digits g to the consumer's 1-D mesh sharded on their leading digits
// h (none: replicated), the first mesh position of the producer's devices
// each consumer device gathers from and their number; false when h is not
// a leading part of g, or a consumer device that is a producer device is
// not among those it gathers from (it would add its own chunk).
func gatherGroups(from, to *ir.Mesh, g, h []ir.Digit) (starts []int, n int, ok bool) {
	if len(h) >= len(g) || !slices.Equal(g[:len(h)], h) {
		return nil, 0, false
	}
	n = extentOf(g[len(h):])
	starts = make([]int, len(to.Devices))
	for k, d := range to.Devices {
		if len(h) > 0 {
			starts[k] = k * n
		}
		if i := from.Index(d); i >= 0 && (i < starts[k] || i >= starts[k]+n) {
			return nil, 0, false
		}
	}
	return starts, n, true
}

// gatherTeam is the team of the Gather to root from the producer's
// devices group: the group, with the root appended when not in it.
func gatherTeam(group []int, root int) []int {
	team := slices.Clone(group)
	if !slices.Contains(team, root) {
		team = append(team, root)
	}
	return team
}

// gatherEdge: sharded on the producer's 1-D mesh to option k of DIDx on the
// consumer's 1-D mesh (0: replicated), one Gather to each consumer device
// of the chunks of its block.
func (pl *searcher) gatherEdge(s searchState, k int, out []edge) []edge {
	target := placement{onDst: true}
	target.pick[0] = k
	g, h := pl.options[0][s.pick[0]], pl.options[0][k]
	starts, n, ok := gatherGroups(pl.src.mesh, pl.dst.mesh, g, h)
	if !ok || !pl.valid(target) {
		return out
	}
	size := pl.size(s.placement)
	bytes := int64(size) * pl.elem
	cur := pl.decode(s.order)
	in, got := gatherOrders(g[len(h):], pl.target(target))
	e := pl.newCost()
	e.permute(cur, in, size)
	links := map[int]string{} // by group start: most consumer devices share a few groups
	busiest, total := int64(0), int64(0)
	for i, root := range pl.dst.mesh.Devices {
		group := pl.src.mesh.Devices[starts[i] : starts[i]+n]
		holders := int64(n)
		if slices.Contains(group, root) {
			holders--
		}
		e.collective(pl.gatherLink(links, starts[i], group, root), plan.Gather, plan.Count{Input: size, Output: n * size}, int(holders)+1)
		recv := e.times(holders, bytes)
		busiest, total = max(busiest, recv), e.plus(total, recv)
	}
	e.bytes(busiest, total)
	e.crossing()
	return pl.appendEdge(out, edgeGather, 1, target, got, e)
}

// gatherLink is the link class of a Gather team: the group's own (cached
// by its start), or the network when the root is on another node.
func (pl *searcher) gatherLink(links map[int]string, start int, group []int, root int) string {
	link, ok := links[start]
	if !ok {
		link = pl.topology.LinkOf(group)
		links[start] = link
	}
	if link == cost.LinkNetwork {
		return link
	}
	return pl.topology.LinkOf([]int{group[0], root}) // the group is on group[0]'s node
}

// boolMask is an edge's mask that carries a choice (1: yes).
func boolMask(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}

// onlyType reports whether p selects digits for no type but DeviceTypes[i].
func onlyType(p placement, i int) bool {
	for k, x := range p.pick {
		if k != i && x != 0 {
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
