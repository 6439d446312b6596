package cost

import (
	"slices"

	"github.com/nvcomm/nvcomm/internal/plan"
)

// The kernel model: how a plan's local steps become GPU kernels.
//
// A run of consecutive local steps of the fusable types below, on one set
// of devices, is one kernel, as a fusing compiler (torch.compile's
// Inductor, nvFuser) generates for a chain of elementwise, reduction and
// layout ops between two collectives or matrix products: the run pays one
// latency (the line's α, with its launch floor λ), charged to its first
// step, and every step its bytes at its line's bandwidth. A step that
// moves nothing (a view) launches nothing and neither starts nor breaks a
// run. A collective, a Matmul (a library call), a Lookup (a gather of
// rows) or a step on other devices ends the run. Bytes are still counted
// per step, every buffer written and read once, as the plan's steps
// materialise them.
//
// `nvcomm export torch` runs each step eagerly, one kernel each, and so
// predicts each of its blocks on its own ([Topology.Step]); the gap
// between the two is the latencies a fused run saves.

// fusable reports whether step s runs inside a fused kernel.
func fusable(s *plan.Step) bool {
	if s.Kind != plan.KindLocal {
		return false
	}
	switch s.Type {
	case plan.Pointwise, plan.LocalReduce:
		return true
	}
	return false
}

// fuseRuns charges one latency per run of fusable steps: every step of a
// run but its first (the one that launches the kernel) pays its bytes at
// its line's bandwidth only. times are the steps' prices on their own, in
// p's order.
func (t *Topology) fuseRuns(p *plan.Plan, times []StepTime) {
	head := -1
	for i := range p.Steps {
		s := &p.Steps[i]
		switch {
		case !fusable(s):
			head = -1
		case times[i].Seconds == 0: // a view: no kernel
		case head >= 0 && sameDevices(&p.Steps[head], s):
			times[i].Seconds = t.streamed(localType(s), times[i].Bytes)
		default:
			head = i
		}
	}
}

// streamed is the time of a local step of type typ that moves bytes inside
// a kernel already launched: its bytes at its line's bandwidth.
func (t *Topology) streamed(typ string, bytes int64) float64 {
	p := t.Memory.Params
	if stridedType(typ) {
		p = t.Memory.StridedParams()
	}
	return float64(bytes) / (p.Bandwidth * 1e9)
}

// sameDevices reports whether two steps run on the same devices.
func sameDevices(a, b *plan.Step) bool {
	return slices.Equal(deviceSet(a), deviceSet(b))
}

func deviceSet(s *plan.Step) []int {
	return slices.Compact(slices.Sorted(slices.Values(s.Members())))
}
