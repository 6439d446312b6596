package reshard

import (
	"slices"

	"github.com/nvcomm/nvcomm/internal/ir"
	"github.com/nvcomm/nvcomm/internal/plan"
)

// An exchange is one AllToAllV: the devices of a team trade the digits
// they select for others that share some with them. An AllToAll sends a
// chunk to every member; when the digits the team selects before (dp) and
// after (dn) have digits in common, a device's data goes only to the
// members that agree with it on those, in chunks of the digits dn adds,
// and it receives from the members that agree with it, chunks of the
// digits dp drops. Every element then travels once, straight to the
// device that keeps it: each device receives what it lacks and nothing
// else, in one step (docs/lowering.md, "The search").

// maxExchangeTeam is the largest team an exchange is built for: its
// send_counts are a matrix of a count per pair of members.
const maxExchangeTeam = 64

// exchangeOrders: the input holds the digits dn adds outermost, in rank
// order, so that each member's chunks follow each other in the order of
// the members they go to; the output concatenates the chunks received in
// the order of the members they come from, whose digits dp drops vary
// among them. want is the order wanted for the result.
func exchangeOrders(dp, dn, want []ir.Digit) (in, got []ir.Digit) {
	return allToAllOrders(without(dp, dn), without(dn, dp), want)
}

// exchangeCounts is the send_counts, t×t, of an exchange from rank
// digits dp to dn (both in team-rank order) moving chunks of chunk
// elements. The members that select dp are ranks 0, 1, …; those that
// select dn are ranks at, at+1, … (at = 0 within one mesh, the number of
// producer devices between two). Member k sends to every member that
// selects, in dn, what k selects in dp on the digits both select, one
// chunk per value of the digits dn adds. Those are the input's outermost
// digits, read most significant first, and the receiver's rank grows with
// them, so each member's chunks follow each other in the order of the
// members they go to, as an AllToAllV cuts its input.
func exchangeCounts(dp, dn []ir.Digit, t, at, chunk int) [][]int {
	added := without(dn, dp)
	counts := make([][]int, t)
	cells := make([]int, t*t)
	for k := range counts {
		counts[k] = cells[k*t : (k+1)*t : (k+1)*t]
	}
	value := make([]int, len(dn)) // by position in dn
	for k := range extentOf(dp) {
		for i, x := range digitsOf(k, dp) {
			if j := slices.Index(dn, dp[i]); j >= 0 {
				value[j] = x
			}
		}
		for w := range extentOf(added) {
			for i, x := range digitsOf(w, added) {
				value[slices.Index(dn, added[i])] = x
			}
			counts[k][at+rankOf(dn, value)] = chunk
		}
	}
	return counts
}

// exchangeReceived is the most elements a member receives from others in
// an exchange (its own chunk stays), and the sum over the members of a
// team, without building send_counts: every member receives a chunk from
// each of the members that differ in the digits dp drops, one of which
// may be itself (when it selects the same values of the shared digits
// before and after).
func exchangeReceived(dp, dn []ir.Digit, n, chunk int) (most, total int) {
	from := extentOf(without(dp, dn))
	self := 0
	for r := range n {
		vp, vn := digitsOf(r, dp), digitsOf(r, dn)
		same := true
		for i, d := range dp {
			if j := slices.Index(dn, d); j >= 0 && vp[i] != vn[j] {
				same = false
				break
			}
		}
		if same {
			self++
		}
	}
	most = from * chunk
	if self == n {
		most -= chunk
	}
	return most, (from*n - self) * chunk
}

// digitsOf reads r as a mixed-radix number over ds, most significant
// first: the value of each digit, by position in ds.
func digitsOf(r int, ds []ir.Digit) []int {
	out := make([]int, len(ds))
	for i := len(ds) - 1; i >= 0; i-- {
		out[i] = r % ds[i].Extent
		r /= ds[i].Extent
	}
	return out
}

// rankOf reads values (by position in ds) as a mixed-radix number over
// ds, most significant first.
func rankOf(ds []ir.Digit, values []int) int {
	r := 0
	for i, d := range ds {
		r = r*d.Extent + values[i]
	}
	return r
}

// exchangeable reports whether an exchange may trade dp for dn: both
// select every member of teams of at most maxExchangeTeam, and share a
// digit (otherwise it is an AllToAll) or differ in order only (a device
// permutation in one step).
func exchangeable(dp, dn []ir.Digit, n int) bool {
	return len(dp) > 0 && len(dn) > 0 && n <= maxExchangeTeam && !disjoint(dp, dn) &&
		extentOf(dp) == n && extentOf(dn) == n && !sameOrder(dp, dn)
}

// appendExchange prices an exchange along the types of mask from s to
// placement to and appends its edge.
func (pl *searcher) appendExchange(out []edge, s searchState, to placement, mask uint8) []edge {
	m := pl.mesh(s.placement)
	n := teamSize(m, mask)
	dp, dn := pl.rankPicks(s.placement, m, mask), pl.rankPicks(to, m, mask)
	if !exchangeable(dp, dn, n) {
		return out
	}
	size := pl.size(s.placement)
	most, total := exchangeReceived(dp, dn, n, size/extentOf(without(dn, dp)))
	cur := pl.decode(s.order)
	in, got := exchangeOrders(dp, dn, pl.target(to))
	e := pl.newCost()
	e.permute(cur, in, size)
	busiest := e.times(int64(most), pl.elem)
	e.add(pl.topology.ExchangeSeconds(pl.linkAlong(m, mask), busiest), true)
	e.bytes(busiest, e.times(int64(total), pl.elem, int64(len(m.Devices)/n)))
	return pl.appendEdge(out, edgeAllToAllV, mask, to, got, e)
}

// allToAllVAlong emits an exchange: the digits the types of mask select
// on src become dst's on the same mesh.
func (c lowering) allToAllVAlong(src, dst *view, mask uint8) {
	dp, dn := rankDigits(src, mask), rankDigits(dst, mask)
	n := teamSize(src.mesh, mask)
	counts := exchangeCounts(dp, dn, n, 0, src.size()/extentOf(without(dn, dp)))
	in, got := exchangeOrders(dp, dn, dst.stored)
	arranged := c.arrange(src, in, "in", src.mesh.Devices)
	out, after := c.finish(got, dst, "exchanged")
	c.emitCollective(plan.Step{Type: plan.AllToAllV, SendCounts: counts, Input: arranged.name, Output: out, Axis: axisAlong(src, mask)},
		teamsAlong(src.mesh, mask), arranged, dst, arranged.size(), dst.size())
	after()
}

// crossExchangeable reports whether one AllToAllV can move the data from
// placement p on the producer's mesh to the consumer: the meshes share no
// device, every element has one holder before and one after (p and the
// goal select digits along every type of their meshes), and the team of
// both meshes has at most maxExchangeTeam members.
func (pl *searcher) crossExchangeable(p placement) (dp, dn []ir.Digit, ok bool) {
	from, to := pl.src.mesh, pl.dst.mesh
	if len(from.Devices)+len(to.Devices) > maxExchangeTeam || slices.ContainsFunc(from.Devices, to.Contains) {
		return nil, nil, false
	}
	dp, dn = pl.rankPicks(p, from, allTypes), pl.rankPicks(pl.goal.placement, to, allTypes)
	return dp, dn, extentOf(dp) == len(from.Devices) && extentOf(dn) == len(to.Devices)
}

// crossExchangeEdge prices the move from s to the consumer in one
// AllToAllV over the devices of both meshes, the producer's sending and
// the consumer's receiving: each consumer device receives its block,
// chunk by chunk, straight from the devices that hold it.
func (pl *searcher) crossExchangeEdge(s searchState, out []edge) []edge {
	dp, dn, ok := pl.crossExchangeable(s.placement)
	if !ok {
		return out
	}
	size, next := pl.size(s.placement), pl.size(pl.goal.placement)
	in, got := exchangeOrders(dp, dn, pl.dst.stored)
	e := pl.newCost()
	e.permute(pl.decode(s.order), in, size)
	busiest := e.times(int64(next), pl.elem)
	team := slices.Concat(pl.src.mesh.Devices, pl.dst.mesh.Devices)
	e.add(pl.topology.ExchangeSeconds(pl.topology.LinkOf(team), busiest), true)
	e.bytes(busiest, e.times(busiest, int64(len(pl.dst.mesh.Devices))))
	e.crossing()
	return pl.appendEdge(out, edgeCrossExchange, 0, pl.goal.placement, got, e)
}

// crossExchange emits the move of src, on the producer's mesh, to dst on
// the consumer's, a mesh of other devices, in one AllToAllV over both.
func (c lowering) crossExchange(src, dst *view) {
	dp, dn := rankDigits(src, allTypes), rankDigits(dst, allTypes)
	team := slices.Concat(src.mesh.Devices, dst.mesh.Devices)
	counts := exchangeCounts(dp, dn, len(team), len(src.mesh.Devices), src.size()/extentOf(without(dn, dp)))
	in, got := exchangeOrders(dp, dn, dst.stored)
	arranged := c.arrange(src, in, "in", src.mesh.Devices)
	out, after := c.finish(got, dst, "exchanged")
	c.emitCollective(plan.Step{Type: plan.AllToAllV, SendCounts: counts, Input: arranged.name, Output: out, Axis: src.firstAxis()},
		[][]int{team}, arranged, dst, arranged.size(), dst.size())
	after()
}
