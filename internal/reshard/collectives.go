package reshard

import (
	"slices"

	"github.com/nvcomm/nvcomm/internal/ir"
	"github.com/nvcomm/nvcomm/internal/plan"
)

// maskOf is the mask of one device type.
func maskOf(t ir.ParallelType) uint8 { return 1 << typeIndex(t) }

// axisAlong is the axis of v's digits for the outermost type of mask: the
// axis a step over their teams names.
func axisAlong(v *view, mask uint8) *int {
	return new(v.axisOf(typesOf(v.mesh, mask)[0]))
}

// allgather: src sharded along t, dst not, same mesh.
func (c lowering) allgather(src, dst *view, t ir.ParallelType) { c.allgatherAlong(src, dst, maskOf(t)) }

// allgatherAlong: src sharded along the types of mask, dst not, same mesh.
// Concatenation in team order puts their digits outermost, so the input is
// first arranged as dst's order without them.
func (c lowering) allgatherAlong(src, dst *view, mask uint8) {
	in, got := gatherOrders(rankDigits(src, mask), dst.stored)
	arranged := c.arrange(src, in, "in", src.mesh.Devices)
	out, after := c.finish(got, dst, "gathered")
	c.emitCollective(plan.Step{Type: plan.Allgather, Input: arranged.name, Output: out, Axis: axisAlong(src, mask)},
		teamsAlong(src.mesh, mask), arranged, dst, arranged.size(), dst.size())
	after()
}

// sliceAlong: src replicated along the types of mask, dst sharded; each
// device keeps its part locally, no communication. Where dst's digits for
// those types lie together in src's buffer, in rank order, a Slice with
// dims [outer, T, inner] keeps each rank's chunks where they are;
// otherwise the input is arranged with those digits outermost, and every
// team member keeps the chunk of its rank.
func (c lowering) sliceAlong(src, dst *view, mask uint8) {
	d := rankDigits(dst, mask)
	if outer, inner, ok := stridedSlice(src.stored, d); ok {
		out, after := c.finish(without(src.stored, d), dst, "sliced")
		c.emitLocalTeams(plan.Step{Type: plan.Slice, Input: src.name, Output: out, Axis: axisAlong(dst, mask), Dims: []int{outer, src.size() / (outer * inner), inner}},
			teamsAlong(src.mesh, mask), src.size(), dst.size())
		after()
		return
	}
	in, got := sliceOrders(src.stored, d)
	arranged := c.arrange(src, in, "in", src.mesh.Devices)
	out, after := c.finish(got, dst, "sliced")
	c.emitLocalTeams(plan.Step{Type: plan.Slice, Input: arranged.name, Output: out, Axis: axisAlong(dst, mask)},
		teamsAlong(src.mesh, mask), arranged.size(), dst.size())
	after()
}

// scatterSameMesh: src replicated along t, dst sharded; one Scatter per
// slice of the mesh along t, rooted at the slice's first device.
func (c lowering) scatterSameMesh(src, dst *view, t ir.ParallelType) {
	teams := src.mesh.Teams(t)
	var roots []int
	for _, team := range teams {
		roots = append(roots, team[0])
	}
	d := dst.did[t]
	rest := without(src.stored, d)
	in := c.arrange(src, concat(d, rest), "in", roots)
	out, after := c.finish(rest, dst, "scattered")
	for _, team := range teams {
		c.emitCollective(plan.Step{Type: plan.Scatter, Root: new(team[0]), Input: in.name, Output: out, Axis: new(dst.axisOf(t))},
			[][]int{team}, in, dst, in.size(), dst.size())
	}
	after()
}

// scatterCrossMesh: src replicated on one 1-D mesh, dst sharded on another;
// the root is the first device of src's mesh that is in dst's mesh.
func (c lowering) scatterCrossMesh(src, dst *view, t ir.ParallelType) {
	root := -1
	for _, d := range src.mesh.Devices {
		if dst.mesh.Contains(d) {
			root = d
			break
		}
	}
	if root < 0 {
		c.fail("a Scatter needs a device in both meshes to act as root, and these meshes share none",
			"add a set that first moves the tensor onto a device of the destination mesh")
		return
	}
	d := dst.did[t]
	rest := without(src.stored, d)
	in := c.arrange(src, concat(d, rest), "in", []int{root})
	out, after := c.finish(rest, dst, "scattered")
	c.emitCollective(plan.Step{Type: plan.Scatter, Root: new(root), Input: in.name, Output: out, Axis: new(dst.axisOf(t))},
		[][]int{slices.Clone(dst.mesh.Devices)}, in, dst, in.size(), dst.size())
	after()
}

// allToAll: the sharded axis along t moves from one logical axis to another
// on one mesh.
func (c lowering) allToAll(src, dst *view, t ir.ParallelType) { c.allToAllAlong(src, dst, maskOf(t)) }

// allToAllAlong: the digits the types of mask select change to others on
// one mesh. Each rank sends chunk j (dst's digits = j) to rank j and
// receives src's digits as the outermost part.
func (c lowering) allToAllAlong(src, dst *view, mask uint8) {
	in, got := allToAllOrders(rankDigits(src, mask), rankDigits(dst, mask), dst.stored)
	arranged := c.arrange(src, in, "in", src.mesh.Devices)
	out, after := c.finish(got, dst, "exchanged")
	c.emitCollective(plan.Step{Type: plan.AllToAll, Input: arranged.name, Output: out, Axis: axisAlong(src, mask)},
		teamsAlong(src.mesh, mask), arranged, dst, arranged.size(), dst.size())
	after()
}

// broadcast: both replicated, meshes differ; the root is the first device
// of src's mesh, the team dst's mesh with the root appended when absent.
func (c lowering) broadcast(src, dst *view) {
	root := src.mesh.Devices[0]
	team := slices.Clone(dst.mesh.Devices)
	if !slices.Contains(team, root) {
		team = append(team, root)
	}
	out, after := c.finish(src.stored, dst, "received")
	c.emitCollective(plan.Step{Type: plan.Broadcast, Root: new(root), Input: src.name, Output: out},
		[][]int{team}, src, dst, src.size(), src.size())
	after()
}

// gather: src sharded, dst replicated on another mesh; one Gather per device
// of dst's mesh, team = src's mesh with the root appended when absent.
func (c lowering) gather(src, dst *view, t ir.ParallelType) {
	d := src.did[t]
	in := c.arrange(src, without(dst.stored, d), "in", src.mesh.Devices)
	out, after := c.finish(concat(d, in.stored), dst, "gathered")
	for _, root := range dst.mesh.Devices {
		team := slices.Clone(src.mesh.Devices)
		if !slices.Contains(team, root) {
			team = append(team, root)
		}
		c.emitCollective(plan.Step{Type: plan.Gather, Root: new(root), Input: in.name, Output: out, Axis: new(src.axisOf(t))},
			[][]int{team}, in, dst, in.size(), dst.size())
	}
	after()
}

// sendRecv: same sharding on two 1-D meshes of one size; device i of src's
// mesh sends its shard to device i of dst's mesh (a local copy when they are
// the same device).
func (c lowering) sendRecv(src, dst *view) {
	out, after := c.finish(src.stored, dst, "received")
	for i, from := range src.mesh.Devices {
		to := dst.mesh.Devices[i]
		if from == to {
			c.emitLocalOn(plan.Step{Type: plan.Copy, Input: src.name, Output: out}, []int{from}, src.size(), src.size())
			continue
		}
		c.emitCollective(plan.Step{Type: plan.SendRecv, Root: new(from), Input: src.name, Output: out, Axis: src.firstAxis()},
			[][]int{{from, to}}, src, dst, src.size(), src.size())
	}
	after()
}

// allreduce: the reduced axis is sharded along t and dst is replicated along
// t on the same mesh.
func (c lowering) allreduce(src, dst *view, t ir.ParallelType) { c.allreduceAlong(src, dst, maskOf(t)) }

// allreduceAlong: src holds partial terms along the types of mask, dst
// their combination on the same mesh.
func (c lowering) allreduceAlong(src, dst *view, mask uint8) {
	out, after := c.finish(src.stored, dst, "reduced")
	c.emitCollective(plan.Step{Type: plan.Allreduce, ReduceOp: c.reduceOp(), Input: src.name, Output: out, Axis: new(c.op.Axis)},
		teamsAlong(src.mesh, mask), src, dst, src.size(), src.size())
	after()
}

// reduceScatter: the reduced axis is sharded along t and dst is sharded
// along t on another axis, same mesh.
func (c lowering) reduceScatter(src, dst *view, t ir.ParallelType) {
	c.reduceScatterAlong(src, dst, maskOf(t))
}

// reduceScatterAlong: src holds partial terms along the types of mask, dst
// their combination sharded along them. Chunk r of the input must hold
// dst's rank-r shard, so dst's digits for those types go outermost.
func (c lowering) reduceScatterAlong(src, dst *view, mask uint8) {
	in, _ := reduceScatterOrders(rankDigits(dst, mask), dst.stored)
	arranged := c.arrange(src, in, "in", src.mesh.Devices)
	c.emitCollective(plan.Step{Type: plan.ReduceScatter, ReduceOp: c.reduceOp(), Input: arranged.name, Output: dst.name, Axis: new(c.op.Axis)},
		teamsAlong(src.mesh, mask), arranged, dst, arranged.size(), dst.size())
}

// reduce: the reduced axis is sharded along t, dst replicated on another 1-D
// mesh; one Reduce per device of dst's mesh.
func (c lowering) reduce(src, dst *view, t ir.ParallelType) {
	out, after := c.finish(src.stored, dst, "reduced")
	for _, root := range dst.mesh.Devices {
		team := slices.Clone(src.mesh.Devices)
		if !slices.Contains(team, root) {
			team = append(team, root)
		}
		c.emitCollective(plan.Step{Type: plan.Reduce, Root: new(root), ReduceOp: c.reduceOp(), Input: src.name, Output: out, Axis: new(c.op.Axis)},
			[][]int{team}, src, dst, src.size(), src.size())
	}
	after()
}
