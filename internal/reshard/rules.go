package reshard

import (
	"fmt"
	"slices"
	"strings"

	"github.com/nvcomm/nvcomm/internal/ir"
	"github.com/nvcomm/nvcomm/internal/plan"
)

// changedTypes lists the device types along which src and dst place data
// differently.
func changedTypes(src, dst *view) []ir.ParallelType {
	var out []ir.ParallelType
	for _, t := range ir.DeviceTypes {
		if !slices.Equal(src.did[t], dst.did[t]) {
			out = append(out, t)
		}
	}
	return out
}

// lowerSet lowers a copy from src to dst (docs/lowering.md, "Policy
// nvfuser": the rows of set).
func (c lowering) lowerSet(src, dst *view) {
	if !src.mesh.Equal(dst.mesh) {
		c.lowerCrossMesh(src, dst)
		return
	}
	changed := changedTypes(src, dst)
	switch {
	case len(changed) == 0:
		c.local(src, dst)
	case len(changed) > 1:
		c.fail(fmt.Sprintf("it changes the sharding along %s and %s; nvFuser lowers one change per op", changed[0], changed[1]),
			"split it into one set per device type")
	default:
		t := changed[0]
		switch {
		case src.sharded(t) && !dst.sharded(t):
			c.allgather(src, dst, t)
		case !src.sharded(t) && dst.sharded(t):
			c.scatterSameMesh(src, dst, t)
		case src.axisOf(t) != dst.axisOf(t):
			c.allToAll(src, dst, t)
		default:
			c.fail(fmt.Sprintf("producer and consumer shard logical axis %d along %s with different index maps; nvFuser would lower it to SendRecv and copy each part to itself, giving wrong data", src.axisOf(t), t),
				"use the same split on both sides")
		}
	}
}

// meshSizeMismatch reports a set between 1-D meshes of different sizes whose
// sides both shard the same logical axis along DIDx: nvFuser lowers it to
// SendRecv pairs (mesh index i to mesh index i) and rejects it ("Receiver
// and sender meshes have different sizes"). Checked before the digits are
// refined, which would otherwise fail with a less telling message.
func meshSizeMismatch(op *ir.Op) (string, bool) {
	producer, consumer := op.In(), op.Out
	if op.Kind != ir.OpSet || producer.Mesh.Equal(consumer.Mesh) || producer.Mesh.Rank() != 1 || consumer.Mesh.Rank() != 1 {
		return "", false
	}
	ps, pok := producer.ShardingOf(ir.DIDx)
	cs, cok := consumer.ShardingOf(ir.DIDx)
	if !pok || !cok || ps.Axis() != cs.Axis() || len(producer.Mesh.Devices) == len(consumer.Mesh.Devices) {
		return "", false
	}
	return fmt.Sprintf("both sides shard logical axis %d along DIDx, but mesh %q has %d devices and mesh %q has %d; nvFuser pairs device i of one mesh with device i of the other (SendRecv) and needs meshes of the same size",
		ps.Axis(), producer.Mesh.Name, len(producer.Mesh.Devices), consumer.Mesh.Name, len(consumer.Mesh.Devices)), true
}

// lowerCrossMesh lowers a set between different meshes; both must be 1-D.
func (c lowering) lowerCrossMesh(src, dst *view) {
	if src.mesh.Rank() != 1 || dst.mesh.Rank() != 1 {
		c.fail(fmt.Sprintf("it moves data between meshes %q and %q, and nvFuser lowers that only between 1-D meshes", src.mesh.Name, dst.mesh.Name),
			"reshard within one mesh first, then move between 1-D meshes")
		return
	}
	t := ir.DIDx
	switch ps, cs := src.sharded(t), dst.sharded(t); {
	case !ps && !cs:
		c.broadcast(src, dst)
	case ps && !cs:
		c.gather(src, dst, t)
	case !ps && cs:
		c.scatterCrossMesh(src, dst, t)
	case src.axisOf(t) != dst.axisOf(t):
		c.fail(fmt.Sprintf("it changes the sharded axis (%d to %d) and the mesh at once; AllToAll needs one mesh", src.axisOf(t), dst.axisOf(t)),
			"change the sharded axis on one mesh, then move to the other")
	case !slices.Equal(src.did[t], dst.did[t]):
		c.fail(fmt.Sprintf("producer and consumer shard logical axis %d with different index maps across meshes", src.axisOf(t)),
			"use the same split on both sides")
	default:
		c.sendRecv(src, dst)
	}
}

// lowerReduction lowers a reduction over the op's axis: a local reduction of
// the locally stored part of the axis, then the collective that combines the
// devices sharing it, or the set rows when the reduced axis is not sharded.
func (c lowering) lowerReduction(pv, cv *view) {
	r := c.op.Axis
	var reducedBy []ir.ParallelType
	for _, t := range ir.DeviceTypes {
		if pv.sharded(t) && pv.axisOf(t) == r {
			reducedBy = append(reducedBy, t)
		}
	}
	if len(reducedBy) > 1 {
		c.fail(fmt.Sprintf("the reduced axis %d is sharded along both %s and %s; nvFuser lowers one change per op", r, reducedBy[0], reducedBy[1]),
			"reduce in two steps, one device type each")
		return
	}
	src := pv
	if local := onAxis(pv.stored, r); len(local) > 0 || len(reducedBy) == 0 {
		src = c.localReduce(pv, local)
	}
	if len(reducedBy) == 0 {
		c.lowerSet(src, cv)
		return
	}
	t := reducedBy[0]
	for _, u := range changedTypes(src, cv) {
		if u != t {
			c.fail(fmt.Sprintf("it reduces over %s and changes the sharding along %s at once; nvFuser lowers one change per op", t, u),
				"reduce first, then reshard with a set")
			return
		}
	}
	switch {
	case !src.mesh.Equal(cv.mesh) && cv.sharded(t):
		c.fail("a ReduceScatter needs the same mesh on both sides (as in nvFuser)",
			"insert a set before or after the reduction to move to the other mesh")
	case !src.mesh.Equal(cv.mesh):
		if src.mesh.Rank() != 1 || cv.mesh.Rank() != 1 {
			c.fail("a Reduce between different meshes needs 1-D meshes", "reduce on one mesh, then move the result")
			return
		}
		c.reduce(src, cv, t)
	case cv.sharded(t):
		c.reduceScatter(src, cv, t)
	default:
		c.allreduce(src, cv, t)
	}
}

// reduceOp is the op's reduce operator.
func (c lowering) reduceOp() *string { return new(string(c.op.Kind)) }

// buffer names a new intermediate buffer of the op, "out/what", numbered
// when the op already has one of that name.
func (c lowering) buffer(what string) string {
	name := c.op.Out.Name + "/" + what
	if c.job.names == nil {
		c.job.names = map[string]int{}
	}
	c.job.names[what]++
	if n := c.job.names[what]; n > 1 {
		name = fmt.Sprintf("%s%d", name, n)
	}
	if c.job.rec != nil {
		c.job.rec.whats, c.job.rec.names = append(c.job.rec.whats, what), append(c.job.rec.names, name)
	}
	return name
}

// Buffer names a new intermediate buffer of the job's op, as buffer does.
func (j *Job) Buffer(what string) string { return j.ctx(j.op, nil).buffer(what) }

// local lowers a same-mesh set that keeps the sharding: a copy, or a permute
// when the layouts differ. A preceding local step of this op that produced
// src is redirected to write dst instead.
func (c lowering) local(src, dst *view) {
	if sameOrder(src.stored, dst.stored) && c.retarget(src, dst) {
		return
	}
	if sameOrder(src.stored, dst.stored) {
		c.emitLocal(plan.Step{Type: plan.Copy, Input: src.name, Output: dst.name}, src, src.size())
		return
	}
	c.permute(src, dst.stored, dst.name, src.mesh.Devices)
}

// retarget renames the output of the op's steps that produced the
// intermediate src, when the last step did, saving a copy.
func (c lowering) retarget(src, dst *view) bool {
	steps := &c.ledger.steps
	n := steps.len()
	if n == steps.base || steps.at(n-1).Op != c.op.Index || steps.at(n-1).Output != src.name || !strings.Contains(src.name, "/") {
		return false
	}
	for i := n - 1; i >= steps.base && steps.at(i).Op == c.op.Index; i-- {
		if s := steps.at(i); s.Output == src.name {
			s.Output = dst.name
		}
	}
	return true
}

// localReduce reduces the digits in local (of the op's axis) on every device
// of pv's mesh; with nothing to reduce it is a copy.
func (c lowering) localReduce(pv *view, local []ir.Digit) *view {
	out := &view{name: c.buffer("partial"), mesh: pv.mesh, dtype: pv.dtype, did: pv.did, stored: without(pv.stored, local)}
	if len(local) == 0 {
		c.emitLocal(plan.Step{Type: plan.Copy, Input: pv.name, Output: out.name}, pv, pv.size())
		return out
	}
	dims, reduce := reduceDims(pv.stored, local)
	c.emitLocal(plan.Step{Type: plan.LocalReduce, ReduceOp: c.reduceOp(), Input: pv.name, Output: out.name,
		Dims: dims, ReduceDims: reduce}, pv, out.size())
	return out
}

// reduceDims views a buffer as dims, merging neighbouring digits that are
// both reduced or both kept, and returns which dims are reduced.
func reduceDims(stored, reduced []ir.Digit) (dims, reduce []int) {
	prev := -1
	for _, d := range stored {
		r := 0
		if slices.Contains(reduced, d) {
			r = 1
		}
		if r == prev {
			dims[len(dims)-1] *= d.Extent
			continue
		}
		dims = append(dims, d.Extent)
		if r == 1 {
			reduce = append(reduce, len(dims)-1)
		}
		prev = r
	}
	return dims, reduce
}

// permute reorders src's buffer into order on the given devices.
func (c lowering) permute(src *view, order []ir.Digit, name string, devices []int) *view {
	out := &view{name: name, mesh: src.mesh, dtype: src.dtype, did: src.did, stored: order}
	dims, perm := permutation(src.stored, order)
	c.emitLocalOn(plan.Step{Type: plan.Permute, Input: src.name, Output: name, Dims: dims, Perm: perm}, devices, src.size(), src.size())
	return out
}

// arrange makes src's buffer have the given order, with a Permute into an
// intermediate buffer when it does not already.
func (c lowering) arrange(src *view, order []ir.Digit, what string, devices []int) *view {
	if sameOrder(src.stored, order) {
		return src
	}
	return c.permute(src, order, c.buffer(what), devices)
}

// finish makes the collective's result (order got, written to the buffer
// returned) end up in dst: the collective writes dst directly when the
// orders agree or dst is an intermediate free to take any order, else an
// intermediate that a final Permute turns into dst.
func (c lowering) finish(got []ir.Digit, dst *view, what string) (output string, after func()) {
	if dst.flexible {
		dst.stored = got
	}
	if sameOrder(got, dst.stored) {
		return dst.name, func() {}
	}
	tmp := &view{name: c.buffer(what), mesh: dst.mesh, dtype: dst.dtype, did: dst.did, stored: got}
	return tmp.name, func() { c.permute(tmp, dst.stored, dst.name, dst.mesh.Devices) }
}
