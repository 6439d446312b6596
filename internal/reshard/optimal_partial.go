package reshard

import (
	"math/bits"
	"slices"

	"github.com/nvcomm/nvcomm/internal/ir"
	"github.com/nvcomm/nvcomm/internal/plan"
)

// The steps of the optimal policy's search that combine the partial terms
// of a reduction (optimal.go): an Allreduce over any set of the partial
// device types at once (one Allreduce over a 2×4 mesh instead of one per
// axis), a ReduceScatter onto the digits of one type (or of several, onto
// the consumer's), and a Reduce to a consumer of one device. The other
// steps may run before them on the other types: a Slice first shrinks the
// buffer to combine, and a ReduceScatter then a Gather moves fewer bytes to
// one device than a Reduce.

// partialEdges lists the steps that combine partial terms out of s.
func (pl *searcher) partialEdges(s searchState, out []edge) []edge {
	for mask := s.partial; mask > 0; mask = (mask - 1) & s.partial {
		to := s.placement
		to.partial &^= mask
		out = pl.combineEdge(s, to, mask, edgeAllreduce, out)
		if bits.OnesCount8(mask) == 1 {
			i := bits.TrailingZeros8(mask)
			for k := 1; k < len(pl.options[i]); k++ {
				onto := to
				onto.pick[i] = k
				out = pl.combineEdge(s, onto, mask, edgeReduceScatter, out)
			}
			continue
		}
		onto, all := to, true
		for i := range pl.options {
			if mask&(1<<i) != 0 {
				onto.pick[i] = pl.goal.pick[i]
				all = all && onto.pick[i] != 0
			}
		}
		if all {
			out = pl.combineEdge(s, onto, mask, edgeReduceScatter, out)
		}
	}
	if len(pl.dst.mesh.Devices) == 1 && !pl.src.mesh.Equal(pl.dst.mesh) && pl.isReplicated(s.placement) {
		out = pl.reduceEdge(s, out)
	}
	return out
}

// combineEdge prices an Allreduce, or a ReduceScatter, of the partial
// terms along the types of mask, from s to placement to.
func (pl *searcher) combineEdge(s searchState, to placement, mask uint8, kind edgeKind, out []edge) []edge {
	if !pl.valid(to) {
		return out
	}
	m := pl.mesh(s.placement)
	n := teamSize(m, mask)
	cur := pl.decode(s.order)
	size := pl.size(s.placement)
	bytes, devices := int64(size)*pl.elem, int64(len(m.Devices))
	e := pl.newCost()
	got := cur
	if kind == edgeAllreduce {
		e.collective(pl.linkAlong(m, mask), plan.Allreduce, plan.Count{Input: size, Output: size}, n)
		recv := e.share(2*int64(n-1), bytes, int64(n))
		e.bytes(recv, e.times(recv, devices))
	} else {
		var in []ir.Digit
		in, got = reduceScatterOrders(pl.rankPicks(to, m, mask), pl.target(to))
		e.permute(cur, in, size)
		e.collective(pl.linkAlong(m, mask), plan.ReduceScatter, plan.Count{Input: size, Output: pl.size(to)}, n)
		recv := e.share(int64(n-1), bytes, int64(n))
		e.bytes(recv, e.times(recv, devices))
	}
	return pl.appendEdge(out, kind, mask, to, got, e)
}

// reduceTeam is the team of a Reduce of terms partial along the types of
// mask on mesh m to root: the team along them that holds the root, or the
// first with the root added (it contributes nothing).
func reduceTeam(m *ir.Mesh, mask uint8, root int) []int {
	teams := teamsAlong(m, mask)
	for _, t := range teams {
		if slices.Contains(t, root) {
			return t
		}
	}
	return append(slices.Clone(teams[0]), root)
}

// reduceEdge: the partial terms, otherwise replicated, reduced onto the
// consumer's single device.
func (pl *searcher) reduceEdge(s searchState, out []edge) []edge {
	team := reduceTeam(pl.src.mesh, s.partial, pl.dst.mesh.Devices[0])
	size := pl.size(s.placement)
	bytes := int64(size) * pl.elem
	e := pl.newCost()
	e.collective(pl.topology.LinkOf(team), plan.Reduce, plan.Count{Input: size, Output: size}, len(team))
	// A chain: every member but the first after the root receives one
	// buffer (plan.Traffic).
	e.bytes(bytes, e.times(int64(len(team)-1), bytes))
	e.crossing()
	return pl.appendEdge(out, edgeReduce, s.partial, pl.goal.placement, pl.decode(s.order), e)
}

// reduceTo reduces src, partial along the types of mask, onto dst's single
// device with one Reduce.
func (c lowering) reduceTo(src, dst *view, mask uint8) {
	root := dst.mesh.Devices[0]
	team := reduceTeam(src.mesh, mask, root)
	out, after := c.finish(src.stored, dst, "reduced")
	c.emitCollective(plan.Step{Type: plan.Reduce, Root: new(root), ReduceOp: c.reduceOp(), Input: src.name, Output: out, Axis: new(c.op.Axis)},
		[][]int{team}, src, dst, src.size(), src.size())
	after()
}
