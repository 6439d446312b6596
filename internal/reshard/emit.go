package reshard

import (
	"fmt"
	"slices"

	"github.com/nvcomm/nvcomm/internal/plan"
)

// emitCollective appends a collective step run by teams on buffer in, with
// countIn and countOut elements per device (docs/plan.md), and accounts its
// bytes.
func (c lowering) emitCollective(s plan.Step, teams [][]int, in, out *view, countIn, countOut int) {
	// need counts elements of out, one buffer: no overflow (sizes.go).
	need := func(dev int) int64 { return c.real.need(in, out, dev) }
	c.emitCollectiveNeeding(s, teams, in.dtype.Size(), in.mesh.Contains, need, countIn, countOut)
}

// emitCollectiveNeeding is emitCollective of elements of elem bytes, which
// the devices holds says hold, where need is the elements of the output a
// device does not hold: what its step's bound counts.
func (c lowering) emitCollectiveNeeding(s plan.Step, teams [][]int, elemSize int, holds func(int) bool, need func(int) int64, countIn, countOut int) {
	s.Kind = plan.KindCollective
	s.Teams = teams
	s.Count = plan.Count{Input: countIn, Output: countOut}
	elem := int64(elemSize)
	sent, recv, ok := plan.Traffic(&s, elem, holds)
	if !ok {
		c.overflow(fmt.Sprintf("the bytes its %s of %d elements per device sends or receives", s.Type, max(countIn, countOut)))
		return
	}
	b := &plan.Bytes{}
	for _, n := range sent {
		b.SentPerDevice = max(b.SentPerDevice, n)
	}
	for _, dev := range sortedKeys(recv) { // an overflow names the first device
		n := recv[dev]
		b.ReceivedPerDevice = max(b.ReceivedPerDevice, n)
		c.addBytes(bookReceived, dev, n)
		if c.job.rec != nil {
			c.job.rec.received = append(c.job.rec.received, deviceBytes{dev, n})
		}
	}
	// A reducing step receives what it must (bound.go): an Allreduce and a
	// ReduceScatter meet the bandwidth bounds, a Reduce's chain one buffer
	// at the root, one value per element of its input.
	b.LowerBound = b.ReceivedPerDevice
	if !plan.IsReduction(s.Type) {
		b.LowerBound = 0
		for dev := range recv {
			b.LowerBound = max(b.LowerBound, need(dev)*elem)
		}
	}
	s.Bytes = b
	c.append(s)
}

// sortedKeys lists m's keys in order, in one allocation (slices.Sorted
// grows its slice as it goes).
func sortedKeys(m map[int]int64) []int {
	keys := make([]int, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// emitLocal appends a local step on every device of src's mesh.
func (c lowering) emitLocal(s plan.Step, src *view, countOut int) {
	c.emitLocalOn(s, src.mesh.Devices, src.size(), countOut)
}

// emitLocalOn appends a local step run by devices.
func (c lowering) emitLocalOn(s plan.Step, devices []int, countIn, countOut int) {
	s.Kind = plan.KindLocal
	s.Devices = slices.Clone(devices)
	s.Count = plan.Count{Input: countIn, Output: countOut}
	c.append(s)
}

func (c lowering) append(s plan.Step) {
	if s.Axis != nil && c.toOpAxis != nil {
		a := c.toOpAxis[*s.Axis]
		s.Axis = nil // an axis the op's first input lacks: none to name
		if a >= 0 {
			s.Axis = new(a)
		}
	}
	s.ID = c.ledger.steps.len()
	s.Op = c.op.Index
	s.Expr = c.job.expr()
	c.ledger.steps.add(s)
}

// EmitLocal appends a local step of the job's op run by devices, with
// countIn and countOut elements per device.
func (j *Job) EmitLocal(s plan.Step, devices []int, countIn, countOut int) {
	j.ctx(j.op, nil).emitLocalOn(s, devices, countIn, countOut)
}

// EmitCollective appends a collective step s of the job's op, run by
// s.Teams with s.Count, on elements of elemSize bytes that every member
// holds, and accounts its bytes; need(dev) is the elements of its output
// device dev does not hold, what the step's bound counts.
func (j *Job) EmitCollective(s plan.Step, elemSize int, need func(dev int) int64) {
	all := func(int) bool { return true }
	j.ctx(j.op, nil).emitCollectiveNeeding(s, s.Teams, elemSize, all, need, s.Count.Input, s.Count.Output)
}

// emitLocalTeams appends a local step whose devices act by rank in their
// team (Slice): no data moves between devices.
func (c lowering) emitLocalTeams(s plan.Step, teams [][]int, countIn, countOut int) {
	s.Kind = plan.KindLocal
	s.Teams = teams
	s.Count = plan.Count{Input: countIn, Output: countOut}
	c.append(s)
}
