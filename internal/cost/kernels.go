package cost

import (
	"fmt"
	"slices"

	"github.com/nvcomm/nvcomm/internal/plan"
)

// The kernel model: how a plan's local steps become GPU kernels.
//
// A run of consecutive elementwise and reduction steps (Pointwise,
// LocalReduce) on one set of devices is one kernel, as a fusing compiler
// (torch.compile's Inductor, nvFuser) generates for a chain of such ops
// between two collectives or matrix products: the run pays one latency
// (the memory line's α, with its launch floor λ), charged to its first
// step, and every step its bytes at the line's bandwidth. Anything else —
// a collective, a Matmul (a library call), a Lookup, a Concat, a layout
// step (Permute, Copy, Slice, Pad, Unpad: the resharding planner prices them
// as kernels of their own, so its sums stay the plan's prediction) — or a
// step on other devices ends the run. Bytes are still counted per step,
// every buffer written and read once, as the plan's steps materialise
// them.
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
// p's order; taken marks the steps already priced inside an attention
// kernel (attention.go), which end a run.
func (t *Topology) fuseRuns(p *plan.Plan, times []StepTime, taken []bool) {
	head := -1
	for i := range p.Steps {
		s := &p.Steps[i]
		switch {
		case !fusable(s) || taken[i]:
			head = -1
		case head >= 0 && sameDevices(&p.Steps[head], s):
			times[i].Seconds = t.streamed(localType(s), times[i].Bytes)
			id := p.Steps[head].ID // a copy: the prediction does not alias the plan
			times[i].FusedInto = &id
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

// Ends says how a plan's first and last steps join runs of the plans
// before and after it when plans are priced apart and then run one after
// another (`lower --auto` prices each op of a fusion alone): a run
// continues from a plan whose Tail is d into the next whose Head is d,
// whose time then drops by Saving, its first step's latency.
type Ends struct {
	// Head is the devices of the plan's first step when it may continue
	// a run ("" when it may not); Tail those of its last step when a run
	// may continue from it.
	Head, Tail string
	// Saving is, in seconds, what the first step's time drops by when it
	// continues a run: its time alone less its bytes at the bandwidth.
	Saving float64
	// Empty is true for a plan of no steps, through which a run passes.
	Empty bool
}

// PlanEnds is p's Ends, pr its prediction.
func (t *Topology) PlanEnds(p *plan.Plan, pr *Prediction) Ends {
	n := len(p.Steps)
	if n == 0 {
		return Ends{Empty: true}
	}
	var e Ends
	if first := &p.Steps[0]; fusable(first) {
		e.Head = runKey(first)
		e.Saving = pr.Steps[0].Seconds - t.streamed(localType(first), pr.Steps[0].Bytes)
	}
	if last := &p.Steps[n-1]; fusable(last) {
		e.Tail = runKey(last)
	}
	return e
}

// runKey names a step's devices.
func runKey(s *plan.Step) string { return fmt.Sprint(deviceSet(s)) }
