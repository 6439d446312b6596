package reshard

import (
	"github.com/nvcomm/nvcomm/internal/ir"
	"github.com/nvcomm/nvcomm/internal/plan"
	"sync"
)

// The optimal policy's steps between meshes (optimal_cross.go prices them).
// nvFuser's own, which its policy keeps, are in collectives.go.

// sendRecvPairs: the same sharding on meshes of one shape; device i of
// src's mesh sends its buffer to device i of dst's, and the devices of
// both copy theirs in one local step. The pairs that move go in one
// SendRecv step (pairBatches): between two pipeline stages, as Megatron-LM
// batches its stages' sends and receives; between meshes that overlap
// shifted, a device sending its block while it receives another's.
func (c lowering) sendRecvPairs(src, dst *view) {
	out, after := c.finish(src.stored, dst, "received")
	var stay []int
	for i, from := range src.mesh.Devices {
		if dst.mesh.Devices[i] == from {
			stay = append(stay, from)
		}
	}
	if len(stay) > 0 {
		c.emitLocalOn(plan.Step{Type: plan.Copy, Input: src.name, Output: out}, stay, src.size(), src.size())
	}
	for _, teams := range pairBatches(src.mesh.Devices, dst.mesh.Devices) {
		step := plan.Step{Type: plan.SendRecv, Input: src.name, Output: out, Axis: src.firstAxis()}
		if len(teams) == 1 {
			step.Root = new(teams[0][0]) // one pair names its sender; several have none
		}
		c.emitCollective(step, teams, src, dst, src.size(), src.size())
	}
	after()
}

// pairBatches groups the pairs from[i] → to[i] that move (from[i] ≠ to[i])
// into SendRecv steps, each a list of teams [sender, receiver] in which a
// device sends at most once and receives at most once: in order, each pair
// joins the first step where its sender sends nothing and its receiver
// receives nothing yet. Pairs from one mesh to another are one step (the
// devices of a mesh are distinct).
func pairBatches(from, to []int) [][][]int {
	var batches [][][]int
	var sends, receives []map[int]bool
	for i, d := range from {
		r := to[i]
		if r == d {
			continue
		}
		k := 0
		for k < len(batches) && (sends[k][d] || receives[k][r]) {
			k++
		}
		if k == len(batches) {
			batches, sends, receives = append(batches, nil), append(sends, map[int]bool{}), append(receives, map[int]bool{})
		}
		batches[k] = append(batches[k], []int{d, r})
		sends[k][d], receives[k][r] = true, true
	}
	return batches
}

// broadcastTo: both replicated, meshes differ. One Broadcast to the
// consumer's devices, or with skip to those that do not hold the data,
// which then copy it.
func (c lowering) broadcastTo(src, dst *view, skip bool) {
	team, copies := broadcastTeam(src.mesh, dst.mesh, skip)
	out, after := c.finish(src.stored, dst, "received")
	if team != nil && !dst.mesh.Contains(team[0]) {
		out, after = c.finishOutside(src.stored, dst, "received")
	}
	if team != nil {
		c.emitCollective(plan.Step{Type: plan.Broadcast, Root: new(team[0]), Input: src.name, Output: out},
			[][]int{team}, src, dst, src.size(), src.size())
	}
	if len(copies) > 0 {
		c.emitLocalOn(plan.Step{Type: plan.Copy, Input: src.name, Output: out}, copies, src.size(), src.size())
	}
	after()
}

// scatterTo: src replicated, dst sharded along DIDx of its 1-D mesh. Rooted
// at a device of both meshes when there is one (scatterCrossMesh); else at
// src's first device, appended to the team, whose input a Pad extends by a
// chunk that it scatters to itself.
func (c lowering) scatterTo(src, dst *view) {
	team, root, padded := scatterTeam(src.mesh, dst.mesh)
	if !padded {
		c.scatterCrossMesh(src, dst, ir.DIDx)
		return
	}
	in, got := sliceOrders(src.stored, dst.did[ir.DIDx])
	arranged := c.arrange(src, in, "in", []int{root})
	chunk, n := dst.size(), len(dst.mesh.Devices)
	pad := &view{name: c.buffer("padded"), mesh: src.mesh, dtype: src.dtype, did: src.did, stored: arranged.stored}
	c.emitLocalOn(plan.Step{Type: plan.Pad, Input: arranged.name, Output: pad.name, Dims: []int{n + 1, chunk},
		Valid: [][]int{{n, chunk}}, Fill: new("0")}, []int{root}, n*chunk, (n+1)*chunk)
	out, after := c.finishOutside(got, dst, "scattered")
	c.emitCollective(plan.Step{Type: plan.Scatter, Root: new(root), Input: pad.name, Output: out, Axis: new(dst.axisOf(ir.DIDx))},
		[][]int{team}, pad, dst, (n+1)*chunk, chunk)
	after()
}

// finishOutside is finish for a step that also writes on a device outside
// dst's mesh (a root of the producer's mesh): there, when a later op reads
// the consumer on devices outside dst's mesh, its output must not be the
// consumer, which a Gather or a Reduce of that later resharding would take
// for the consumer's data. Into such a consumer, the step writes an
// intermediate that a Copy (or a Permute) on the consumer's devices turns
// into it. A later op on the consumer's own devices never runs a step on
// the outside device, so the consumer is written directly, as nvFuser's
// rules do, and costs no Copy.
func (c lowering) finishOutside(got []ir.Digit, dst *view, what string) (output string, after func()) {
	if dst.flexible || !c.readLater() {
		return c.finish(got, dst, what)
	}
	tmp := &view{name: c.buffer(what), mesh: dst.mesh, dtype: dst.dtype, did: dst.did, stored: got}
	return tmp.name, func() { c.copyTo(tmp, dst) }
}

// readLater reports whether an op after c's reads its output on a mesh
// with a device outside the output's mesh: only that op's resharding
// might run a step on a device the output's writer also wrote outside
// its mesh (finishOutside).
func (c lowering) readLater() bool {
	if c.ledger.memo.lastReader == nil {
		if c.planner.readers != nil {
			c.ledger.memo.lastReader = c.planner.readers.of(c.job.f)
		} else {
			c.ledger.memo.lastReader = lastReaders(c.job.f)
		}
	}
	if c.job.laterOf != c.op {
		// Asked several times an op: the answer is kept for the last op.
		last, ok := c.ledger.memo.lastReader[c.op.Out]
		c.job.laterOf, c.job.later = c.op, ok && last > c.op.Index
	}
	return c.job.later
}

// lastReaders indexes, for each tensor of f read on a mesh with a device
// outside its own, the last op that so reads it.
func lastReaders(f *ir.Fusion) map[*ir.Tensor]int {
	last := map[*ir.Tensor]int{}
	for _, op := range f.Ops {
		for _, in := range op.Inputs {
			if !within(op.Out.Mesh, in.Mesh) {
				last[in] = max(last[in], op.Index)
			}
		}
	}
	return last
}

// readerIndex is a planner's lastReaders of the fusion it last lowered:
// the trial lowerings of an op's forms (internal/lower's overlaps, rings
// and ways) each keep a ledger of their own, and indexing the whole
// fusion once a trial made a pipeline's lowering quadratic in its ops.
type readerIndex struct {
	mu   sync.Mutex
	f    *ir.Fusion
	last map[*ir.Tensor]int
}

// of is f's index, made on its first use.
func (r *readerIndex) of(f *ir.Fusion) map[*ir.Tensor]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.f != f {
		r.f, r.last = f, lastReaders(f)
	}
	return r.last
}

// within reports whether every device of mesh a is in mesh b (false when
// either is unknown).
func within(a, b *ir.Mesh) bool {
	if a == nil || b == nil {
		return false
	}
	for _, d := range a.Devices {
		if !b.Contains(d) {
			return false
		}
	}
	return true
}

// copyTo writes dst from tmp on dst's devices: a Copy, or a Permute where
// their orders differ.
func (c lowering) copyTo(tmp, dst *view) {
	if sameOrder(tmp.stored, dst.stored) {
		c.emitLocalOn(plan.Step{Type: plan.Copy, Input: tmp.name, Output: dst.name}, dst.mesh.Devices, tmp.size(), tmp.size())
		return
	}
	c.permute(tmp, dst.stored, dst.name, dst.mesh.Devices)
}

// gatherTo: src sharded along DIDx on digits g of its 1-D mesh, dst on
// their leading digits h (none: replicated) of its own; one Gather to each
// device of dst's mesh from the devices that hold the chunks of its block.
func (c lowering) gatherTo(src, dst *view, g, h []ir.Digit) {
	starts, n, _ := gatherGroups(src.mesh, dst.mesh, g, h)
	in, got := gatherOrders(g[len(h):], dst.stored)
	arranged := c.arrange(src, in, "in", src.mesh.Devices)
	out, after := c.finish(got, dst, "gathered")
	for i, root := range dst.mesh.Devices {
		team := gatherTeam(src.mesh.Devices[starts[i]:starts[i]+n], root)
		c.emitCollective(plan.Step{Type: plan.Gather, Root: new(root), Input: arranged.name, Output: out, Axis: new(src.axisOf(ir.DIDx))},
			[][]int{team}, arranged, dst, arranged.size(), n*arranged.size())
	}
	after()
}
