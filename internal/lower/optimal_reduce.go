package lower

import (
	"slices"

	"github.com/nvcomm/nvcomm/internal/ir"
	"github.com/nvcomm/nvcomm/internal/plan"
)

// The optimal policy's lowering of reductions: what each device must
// combine, and where the result goes.

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
	teams := src.mesh.Teams(t)
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
