package lower

import (
	"slices"

	"github.com/nvcomm/nvcomm/internal/plan"
)

// emitCollective appends a collective step run by teams on buffer in, with
// countIn and countOut elements per device (docs/plan.md), and accounts its
// bytes.
func (c *opCtx) emitCollective(s plan.Step, teams [][]int, in, out *view, countIn, countOut int) {
	s.Kind = plan.KindCollective
	s.Teams = teams
	s.Count = plan.Count{Input: countIn, Output: countOut}
	elem := int64(in.dtype.Size())
	sent, recv := traffic(s, elem, in.mesh.Contains)
	b := &plan.Bytes{}
	for _, n := range sent {
		b.SentPerDevice = max(b.SentPerDevice, n)
	}
	for dev, n := range recv {
		b.ReceivedPerDevice = max(b.ReceivedPerDevice, n)
		c.received[dev] += n
		if plan.IsReduction(s.Type) {
			c.reduced[dev] += n
		}
	}
	b.LowerBound = b.ReceivedPerDevice
	if !plan.IsReduction(s.Type) {
		b.LowerBound = 0
		for dev := range recv {
			b.LowerBound = max(b.LowerBound, need(in, out, dev)*elem)
		}
	}
	s.Bytes = b
	c.append(s)
}

// emitLocal appends a local step on every device of src's mesh.
func (c *opCtx) emitLocal(s plan.Step, src *view, countOut int) {
	c.emitLocalOn(s, src.mesh.Devices, src.size(), countOut)
}

// emitLocalOn appends a local step run by devices.
func (c *opCtx) emitLocalOn(s plan.Step, devices []int, countIn, countOut int) {
	s.Kind = plan.KindLocal
	s.Devices = slices.Clone(devices)
	s.Count = plan.Count{Input: countIn, Output: countOut}
	c.append(s)
}

func (c *opCtx) append(s plan.Step) {
	if s.Axis != nil && c.toOpAxis != nil {
		s.Axis = ptr(c.toOpAxis[*s.Axis])
	}
	s.ID = len(c.steps)
	s.Op = c.op.Index
	s.Expr = c.op.Expr()
	c.steps = append(c.steps, s)
}

// traffic counts, per device, the bytes a collective step sends and
// receives under the direct-transfer model of docs/plan.md, for elements of
// elem bytes. holds reports whether a device holds the input (Gather and
// Reduce senders).
func traffic(s plan.Step, elem int64, holds func(int) bool) (sent, recv map[int]int64) {
	sent, recv = map[int]int64{}, map[int]int64{}
	in, out := int64(s.Count.Input)*elem, int64(s.Count.Output)*elem
	for _, team := range s.Teams {
		n := int64(len(team))
		for _, d := range team {
			switch s.Type {
			case plan.Allgather:
				sent[d], recv[d] = (n-1)*in, (n-1)*in
			case plan.ReduceScatter, plan.AllToAll:
				sent[d], recv[d] = (n-1)*in/n, (n-1)*in/n
			case plan.Allreduce:
				sent[d], recv[d] = 2*(n-1)*in/n, 2*(n-1)*in/n
			case plan.Broadcast, plan.Scatter:
				if d == *s.Root {
					sent[d] += (n - 1) * out
				} else {
					recv[d] += out
				}
			case plan.Gather, plan.Reduce:
				if d != *s.Root && holds(d) {
					sent[d] += in
					recv[*s.Root] += in
				}
			case plan.SendRecv:
				if len(team) == 2 && team[0] != team[1] && d == team[1] {
					sent[team[0]] += in
					recv[d] += in
				}
			}
		}
	}
	return sent, recv
}

// emitLocalTeams appends a local step whose devices act by rank in their
// team (Slice): no data moves between devices.
func (c *opCtx) emitLocalTeams(s plan.Step, teams [][]int, countIn, countOut int) {
	s.Kind = plan.KindLocal
	s.Teams = teams
	s.Count = plan.Count{Input: countIn, Output: countOut}
	c.append(s)
}
