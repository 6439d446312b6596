package reshard

import (
	"slices"

	"github.com/nvcomm/nvcomm/internal/cost"
	"github.com/nvcomm/nvcomm/internal/ir"
	"github.com/nvcomm/nvcomm/internal/plan"
	"github.com/nvcomm/nvcomm/internal/shard"
)

// Device permutations (optimal.go): placements on the same mesh that
// select the same digits, assigned to other device types. Each device
// sends its whole buffer to the device that must hold it (SendRecv pairs):
// the direct exchange for transposed shardings such as [S(0), S(1)] →
// [S(1), S(0)], and, followed by a collective, for nested ones. A SendRecv
// has one sender, so every pair is a step of its own; on a mesh of at most
// 64 devices the same transfers are also one AllToAllV (swapExchange), a
// step in all.

// swap is a device permutation: per mesh position, the position that
// receives its buffer, and how many pairs move over each link class.
type swap struct {
	to              []int
	nvlink, network int
	stayed          int
}

// swapEdges lists the device permutations out of s.
func (pl *searcher) swapEdges(s searchState, out []edge) []edge {
	if pl.isReplicated(s.placement) {
		return out
	}
	size := pl.size(s.placement)
	bytes := int64(size) * pl.elem
	for _, to := range pl.bySet[pl.setKey(s.placement)] {
		if to == s.placement {
			continue
		}
		sw := pl.relabel(s.placement, to)
		if sw == nil {
			continue
		}
		e := pl.swapCost(sw, size, bytes)
		out = pl.appendEdge(out, edgeSwap, 0, to, pl.decode(s.order), e)
		if e := pl.swapExchangeCost(sw, pl.mesh(s.placement), bytes); e != nil {
			out = pl.appendEdge(out, edgeSwapExchange, 0, to, pl.decode(s.order), e)
		}
	}
	return out
}

// swapExchangeCost prices a permutation (so far) done in one AllToAllV
// over the mesh, every device sending its buffer to the one that must hold
// it: the bytes of the SendRecv pairs in one step, over a team of the
// mesh m's devices (the network's when they span nodes). It is nil when
// nothing moves or the mesh has more devices than an exchange's team may.
func (pl *searcher) swapExchangeCost(sw *swap, m *ir.Mesh, bytes int64) *edgeCost {
	moved := int64(sw.nvlink + sw.network)
	if moved == 0 || len(sw.to) > maxExchangeTeam {
		return nil
	}
	e := pl.newCost()
	e.add(pl.topology.ExchangeSeconds(pl.linkAlong(m, allTypes), bytes), true)
	e.bytes(bytes, e.times(bytes, moved))
	return e
}

// swapCost prices the steps of a permutation (so far) of buffers of size
// elements, bytes each.
func (pl *searcher) swapCost(sw *swap, size int, bytes int64) *edgeCost {
	e := pl.newCost()
	sw.price(e, size)
	if moved := int64(sw.nvlink + sw.network); moved > 0 {
		e.bytes(bytes, e.times(bytes, moved))
	}
	return e
}

// tooCostly reports whether a permutation, counted up to some device,
// already costs more than the limit: it cannot be on a better path, and
// the rest of the mesh need not be looked at.
func (pl *searcher) tooCostly(sw *swap, from placement) bool {
	if pl.limit == nil {
		return false
	}
	size := pl.size(from)
	bytes := int64(size) * pl.elem
	if e := pl.swapExchangeCost(sw, pl.mesh(from), bytes); e != nil && !pl.obj.Less(*pl.limit, e.c) {
		return false // in one AllToAllV it may still be on a better path
	}
	return pl.obj.Less(*pl.limit, pl.swapCost(sw, size, bytes).c)
}

// price adds the steps of the permutation of buffers of size elements: a
// Copy on the devices that keep theirs, one SendRecv per pair.
func (sw *swap) price(e *edgeCost, size int) {
	if sw.stayed > 0 {
		e.local(plan.Copy, size, size)
	}
	e.repeat(sw.nvlink, cost.LinkNVLink, plan.SendRecv, plan.Count{Input: size, Output: size}, 2)
	e.repeat(sw.network, cost.LinkNetwork, plan.SendRecv, plan.Count{Input: size, Output: size}, 2)
}

// relabel returns the permutation from one placement to another of the
// same digits, or nil when there is none or it costs more than the limit;
// the search asks for each pair many times, and a mesh may have thousands
// of devices.
func (pl *searcher) relabel(from, to placement) *swap {
	key := [2]placement{from, to}
	if sw, ok := pl.swaps[key]; ok {
		return sw
	}
	sw := pl.computeSwap(from, to)
	pl.swaps[key] = sw
	return sw
}

// computeSwap maps each device of the mesh to the device that holds its
// buffer in placement to: the same digit values, and the same coordinates
// along the replicated axes (matched in order, which must have equal
// sizes). It runs once per pair of placements over every device of the
// mesh, so it looks nothing up by key.
func (pl *searcher) computeSwap(from, to placement) *swap {
	m := pl.mesh(from)
	freeFrom, freeTo := pl.freeTypes(from), pl.freeTypes(to)
	if len(freeFrom) != len(freeTo) {
		return nil
	}
	for k := range freeFrom {
		if m.Size(freeFrom[k]) != m.Size(freeTo[k]) {
			return nil
		}
	}
	src, dst := pl.digitAxes(from, m), pl.digitAxes(to, m)
	sw := &swap{to: make([]int, len(m.Devices))}
	vals := make([]int, len(pl.order))
	coords, target := make([]int, m.Rank()), make([]int, m.Rank())
	for idx := range m.Devices {
		k := idx
		for a := m.Rank() - 1; a >= 0; a-- {
			coords[a], k = k%m.Shape[a], k/m.Shape[a]
		}
		for _, g := range src { // the digit values from the coordinates
			c := coords[g.axis]
			for k := len(g.digits) - 1; k >= 0; k-- {
				vals[g.digits[k]] = c % g.extents[k]
				c /= g.extents[k]
			}
		}
		copy(target, coords)
		for _, g := range dst {
			c := 0
			for k, d := range g.digits {
				c = c*g.extents[k] + vals[d]
			}
			target[g.axis] = c
		}
		for k := range freeTo {
			target[m.Axis(freeTo[k])] = coords[m.Axis(freeFrom[k])]
		}
		sw.to[idx] = shard.Index(target, m.Shape)
		sw.count(pl, m, idx)
		if idx%64 == 63 && pl.tooCostly(sw, from) {
			return nil
		}
	}
	if pl.tooCostly(sw, from) {
		return nil
	}
	return sw
}

// axisDigits are the digits a device type selects, by index into
// searcher.order, with their extents, and the mesh axis they are read from.
type axisDigits struct {
	axis            int
	digits, extents []int
}

// digitAxes lists the digits each device type of p selects on m.
func (pl *searcher) digitAxes(p placement, m *ir.Mesh) []axisDigits {
	var out []axisDigits
	for i, t := range ir.DeviceTypes {
		ds := pl.options[i][p.pick[i]]
		if len(ds) == 0 || !m.Has(t) {
			continue
		}
		g := axisDigits{axis: m.Axis(t), digits: make([]int, 0, len(ds)), extents: make([]int, 0, len(ds))}
		for _, d := range ds {
			g.digits, g.extents = append(g.digits, pl.index[d]), append(g.extents, d.Extent)
		}
		out = append(out, g)
	}
	return out
}

// count books the pair of position idx by its link class.
func (sw *swap) count(pl *searcher, m *ir.Mesh, idx int) {
	pair := [2]int{m.Devices[idx], m.Devices[sw.to[idx]]}
	switch {
	case sw.to[idx] == idx:
		sw.stayed++
	case pl.topology.LinkOf(pair[:]) == cost.LinkNetwork:
		sw.network++
	default:
		sw.nvlink++
	}
}

// freeTypes lists the types a placement leaves replicated on a mesh axis
// of size > 1.
func (pl *searcher) freeTypes(p placement) []ir.ParallelType {
	m := pl.mesh(p)
	var out []ir.ParallelType
	for i, t := range ir.DeviceTypes {
		if m.Size(t) > 1 && pl.options[i][p.pick[i]] == nil {
			out = append(out, t)
		}
	}
	return out
}

// swap emits a permutation: one Copy on the devices that keep their
// buffer, then a SendRecv per device that moves.
func (c lowering) swap(src, dst *view, sw *swap) {
	out, after := c.finish(src.stored, dst, "swapped")
	var stay []int
	for idx, d := range src.mesh.Devices {
		if sw.to[idx] == idx {
			stay = append(stay, d)
		}
	}
	if len(stay) > 0 {
		c.emitLocalOn(plan.Step{Type: plan.Copy, Input: src.name, Output: out}, stay, src.size(), src.size())
	}
	for idx, from := range src.mesh.Devices {
		if to := src.mesh.Devices[sw.to[idx]]; to != from {
			c.emitCollective(plan.Step{Type: plan.SendRecv, Root: new(from), Input: src.name, Output: out, Axis: src.firstAxis()},
				[][]int{{from, to}}, src, dst, src.size(), src.size())
		}
	}
	after()
}

// allTypes is the mask of every device type: its teams are whole meshes.
const allTypes uint8 = 1<<3 - 1 // DIDx, DIDy, DIDz

// swapExchange emits a permutation as one AllToAllV over the mesh: each
// device sends its whole buffer to the device that must hold it (itself,
// for those that keep theirs).
func (c lowering) swapExchange(src, dst *view, sw *swap) {
	n, size := len(src.mesh.Devices), src.size()
	counts, cells := make([][]int, n), make([]int, n*n)
	for idx, to := range sw.to {
		counts[idx] = cells[idx*n : (idx+1)*n : (idx+1)*n]
		counts[idx][to] = size
	}
	out, after := c.finish(src.stored, dst, "swapped")
	c.emitCollective(plan.Step{Type: plan.AllToAllV, SendCounts: counts, Input: src.name, Output: out, Axis: src.firstAxis()},
		[][]int{slices.Clone(src.mesh.Devices)}, src, dst, size, size)
	after()
}
