package reshard

import (
	"github.com/nvcomm/nvcomm/internal/ir"
)

// The optimal policy's lowering of reductions: each device first combines
// the part of the reduced axis it stores; the search (optimal.go) then
// combines the devices' partial terms along the device types that split
// the axis (optimal_partial.go) and moves the result where the consumer
// wants it, in whatever order is best.

// optimalReduction lowers a reduction under the optimal policy.
func (c lowering) optimalReduction(pv, cv *view) {
	r := c.op.Axis
	var partial uint8
	for i, t := range ir.DeviceTypes {
		switch on := len(onAxis(pv.did[t], r)); {
		case on == 0:
		case on == len(pv.did[t]):
			partial |= 1 << i
		default:
			// A merged device axis that spans the reduced axis and others:
			// its devices hold different elements of the other axes, so
			// gather it first and reduce the whole axis locally.
			next := &view{name: c.buffer("gathered"), mesh: pv.mesh, dtype: pv.dtype, did: pv.did,
				stored: concat(pv.did[t], pv.stored), flexible: true}
			next.did[t] = nil
			c.allgather(pv, next, t)
			pv = next
		}
	}
	src := pv
	if local := onAxis(pv.stored, r); len(local) > 0 || partial == 0 {
		src = c.localReduce(pv, local)
	}
	c.optimal(src, cv, partial)
}
