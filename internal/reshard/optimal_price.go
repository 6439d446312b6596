package reshard

import (
	"math"
	"slices"

	"github.com/nvcomm/nvcomm/internal/checked"
	"github.com/nvcomm/nvcomm/internal/cost"
	"github.com/nvcomm/nvcomm/internal/ir"
	"github.com/nvcomm/nvcomm/internal/plan"
)

// Pricing the steps of an edge as cost.Predict prices the plan: each step
// in sequence, a collective's teams at once (its slowest team), local
// steps at the memory's rate. Every emission function of an edge has a
// pricing counterpart here or in the edge's builder, which must emit and
// price the same steps: TestSearchPricesWhatItEmits holds them together.

// edgeCost accumulates the cost of an edge's steps; ok turns false when a
// count does not fit in int64, and the edge is then left out.
type edgeCost struct {
	pl *searcher
	c  pathCost
	ok bool
}

func (pl *searcher) newCost() *edgeCost { return &edgeCost{pl: pl, ok: true} }

// local adds a local step of type typ with counts in and out per device.
func (e *edgeCost) local(typ string, in, out int) {
	s, ok := e.pl.topology.LocalSeconds(typ, plan.Count{Input: in, Output: out}, e.pl.elem)
	e.add(s, ok)
}

// permute adds the Permute that arranges a buffer of n elements stored as
// have into want, when they differ (rules.go, arrange and finish).
func (e *edgeCost) permute(have, want []ir.Digit, n int) {
	if !sameOrder(have, want) {
		e.local(plan.Permute, n, n)
	}
}

// collective adds the time of a collective step whose slowest team has n
// devices on link, with the given counts; its bytes are the caller's to
// add (a swap's SendRecv steps make each device receive once).
func (e *edgeCost) collective(link, typ string, c plan.Count, n int) {
	s, _, ok := e.pl.topology.TeamSeconds(link, typ, c, n, e.pl.elem)
	e.add(s, ok)
}

// slowest adds one collective step whose teams of n devices span the
// given link classes: as cost.Predict prices it, its slowest team's time
// (on the calibrated topology a network pair may be the faster: its
// latency is assumed, NVLink's SendRecv has a measured launch floor).
func (e *edgeCost) slowest(links []string, typ string, c plan.Count, n int) {
	most, fits := 0.0, true
	for _, link := range links {
		s, _, ok := e.pl.topology.TeamSeconds(link, typ, c, n, e.pl.elem)
		most, fits = max(most, s), fits && ok
	}
	e.add(most, fits)
}

// repeat adds k collective steps alike (the SendRecv pairs of a device
// permutation): priced once, added k times.
func (e *edgeCost) repeat(k int, link, typ string, c plan.Count, n int) {
	if k == 0 {
		return
	}
	s, _, ok := e.pl.topology.TeamSeconds(link, typ, c, n, e.pl.elem)
	ps, fits := checked.Mul(picoseconds(s), int64(k))
	if !fits {
		ps = math.MaxInt64
	}
	e.c.ps = saturated(e.c.ps, ps)
	e.c.steps += k
	e.ok = e.ok && ok
}

// bytes adds what a step makes devices receive.
func (e *edgeCost) bytes(busiest, total int64) {
	var ok1, ok2 bool
	e.c.busiest, ok1 = checked.Add(e.c.busiest, busiest)
	e.c.total, ok2 = checked.Add(e.c.total, total)
	e.ok = e.ok && ok1 && ok2
}

func (e *edgeCost) add(seconds float64, ok bool) {
	e.c.ps = saturated(e.c.ps, picoseconds(seconds))
	e.c.steps++
	e.ok = e.ok && ok
}

// crossing marks the edge's bytes as crossing from one mesh to the other.
func (e *edgeCost) crossing() { e.c.cross = e.c.total }

// result returns the cost, noting an overflow in the searcher.
func (e *edgeCost) result() (pathCost, bool) { return e.c, e.pl.fits(e.ok) }

// times multiplies byte counts, noting an overflow.
func (e *edgeCost) times(xs ...int64) int64 {
	p, ok := checked.Product(xs...)
	e.ok = e.ok && ok
	return p
}

// plus adds byte counts, noting an overflow.
func (e *edgeCost) plus(a, b int64) int64 {
	s, ok := checked.Add(a, b)
	e.ok = e.ok && ok
	return s
}

// share is k·n/q bytes rounded down, as plan.Traffic counts a share of a
// buffer, noting an overflow.
func (e *edgeCost) share(k, n, q int64) int64 {
	p, ok := checked.MulDiv(int(k), int(n), int(q))
	e.ok = e.ok && ok
	return int64(p)
}

// typesOf lists the device types of a mask (bit i: DeviceTypes[i]) in
// team-rank order: the outermost mesh axis first, so that a team member's
// rank is its coordinates along them read as one row-major number.
func typesOf(m *ir.Mesh, mask uint8) []ir.ParallelType {
	var out []ir.ParallelType
	for i, t := range ir.DeviceTypes {
		if mask&(1<<i) != 0 && m.Has(t) {
			out = append(out, t)
		}
	}
	slices.SortFunc(out, func(a, b ir.ParallelType) int { return m.Axis(a) - m.Axis(b) })
	return out
}

// teamSize is the number of devices of a team along the types of mask.
func teamSize(m *ir.Mesh, mask uint8) int {
	n := 1
	for i, t := range ir.DeviceTypes {
		if mask&(1<<i) != 0 && m.Has(t) {
			n *= m.Size(t)
		}
	}
	return n
}

// spans reports whether every type of mask is an axis of m of more than
// one device.
func spans(m *ir.Mesh, mask uint8) bool {
	for i, t := range ir.DeviceTypes {
		if mask&(1<<i) != 0 && (!m.Has(t) || m.Size(t) == 1) {
			return false
		}
	}
	return true
}

// rankDigits are the digits of v selected by the types of mask, in
// team-rank order: chunk r of a team step along them is rank r's.
func rankDigits(v *view, mask uint8) []ir.Digit {
	var out []ir.Digit
	for _, t := range typesOf(v.mesh, mask) {
		out = append(out, v.did[t]...)
	}
	return out
}

// teamsAlong returns the teams along the types of mask: for every
// combination of the other coordinates, in row-major order, the devices
// that vary along those types' axes, ranked row-major over them.
func teamsAlong(m *ir.Mesh, mask uint8) [][]int {
	types := typesOf(m, mask)
	if len(types) == 1 {
		return m.Teams(types[0])
	}
	along := make([]bool, m.Rank())
	for _, t := range types {
		along[m.Axis(t)] = true
	}
	index := map[int]int{} // the other coordinates, row-major, to their team
	var teams [][]int
	for i, d := range m.Devices {
		key, k := 0, i
		for a := m.Rank() - 1; a >= 0; a-- {
			c := k % m.Shape[a]
			k /= m.Shape[a]
			if !along[a] {
				key = key*m.Shape[a] + c // reversed radix: unique, which is all a key needs
			}
		}
		j, ok := index[key]
		if !ok {
			j = len(teams)
			index[key] = j
			teams = append(teams, nil)
		}
		teams[j] = append(teams[j], d) // row-major over the mesh: row-major over the team's axes
	}
	return teams
}

// linkAlong is the link class of the teams along the types of mask on m:
// the network when any of them spans nodes (teams run at once; the step
// takes the slowest).
func (pl *searcher) linkAlong(m *ir.Mesh, mask uint8) string {
	key := linkKey{m, mask}
	if link, ok := pl.links[key]; ok {
		return link
	}
	link := cost.LinkNVLink
	for _, team := range teamsAlong(m, mask) {
		if pl.topology.LinkOf(team) == cost.LinkNetwork {
			link = cost.LinkNetwork
			break
		}
	}
	pl.links[key] = link
	return link
}

// linkKey names the teams along some device types of one mesh.
type linkKey struct {
	mesh *ir.Mesh
	mask uint8
}
