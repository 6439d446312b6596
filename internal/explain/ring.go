package explain

import (
	"fmt"
	"maps"
	"slices"

	"github.com/nvcomm/nvcomm/internal/plan"
)

// computesWhole reports whether op k computes its composite whole: other
// ops of the plan are computed within its steps (plan.Op.Within), as an
// sdpa's last op does for ring attention.
func (e *explainer) computesWhole(k int) bool {
	for _, op := range e.p.Ops {
		if op.Within != nil && *op.Within == k {
			return true
		}
	}
	return false
}

// formOf says how op i, the last op of an sdpa's expansion, computes
// the sdpa and why that form: ring attention (its rounds, the ops within
// it) or the expansion planned op by op; the two prices where the
// lowering's choice is known (Options.Forms), else who chose.
func (e *explainer) formOf(i int, op plan.Op) []string {
	var form *Form
	for k := range e.o.Forms {
		if e.o.Forms[k].Op == i {
			form = &e.o.Forms[k]
		}
	}
	whole := e.computesWhole(i)
	if !whole && form == nil {
		return nil
	}
	var lines []string
	if whole {
		within := 0
		for _, o := range e.p.Ops {
			if o.Within != nil && *o.Within == i {
				within++
			}
		}
		shifts := 0 // k's and v's, between rounds
		for _, s := range e.stepsOf(i) {
			if s.Type == plan.SendRecv {
				shifts++
			}
		}
		rounds := shifts/2 + 1
		lines = append(lines, fmt.Sprintf("computes %s whole, as ring attention: %d rounds of attention on the k and v blocks each device holds, merged by online softmax, the blocks passed along the ring between rounds; %d ops are computed within its steps",
			op.Of.Expr(), rounds, within))
		if skipped := e.skippedBlocks(i, rounds); skipped != "" {
			lines = append(lines, skipped)
		}
	}
	switch {
	case form != nil:
		price := func(x float64) string {
			if form.Bytes {
				return plan.Size(int64(x)) + " received by the busiest device"
			}
			return Seconds(x) + " as a step graph"
		}
		chosen, other := "the ring", "the expansion planned op by op"
		if !form.Chosen {
			chosen, other = other, "the ring"
		}
		by := "the objective"
		if op.Of != nil && op.Of.CP != "" {
			by = "the fusion's cp: " + op.Of.CP
		}
		lines = append(lines, fmt.Sprintf("why this form: %s; ring %s, expansion %s (%s chosen over %s)",
			by, price(form.Ring), price(form.Expansion), chosen, other))
	case op.Of != nil && op.Of.CP != "":
		lines = append(lines, "why this form: the fusion's cp: "+op.Of.CP)
	default:
		lines = append(lines, "why this form: the objective, which priced the ring below the expansion planned op by op (the makespans of their step graphs)")
	}
	return lines
}

// skippedBlocks says, for ring attention op i of rounds rounds, how many
// blocks each device computes (its q·kᵀ Matmuls) when some device skips
// one: the blocks the causal mask zeroes whole, still passed along the
// ring; "" when every device computes every round.
func (e *explainer) skippedBlocks(i, rounds int) string {
	computed := map[int]int{}
	for _, s := range e.stepsOf(i) {
		if s.Type == plan.Matmul && s.TransposeB {
			for _, d := range s.Devices {
				computed[d]++
			}
		}
	}
	devices := slices.Sorted(maps.Keys(computed))
	counts := make([]int, len(devices))
	skips := false
	for k, d := range devices {
		counts[k] = computed[d]
		skips = skips || computed[d] < rounds
	}
	if !skips {
		return ""
	}
	return fmt.Sprintf("skips the blocks the causal mask zeroes whole (their keys all after the device's queries), which still pass along the ring: devices %s compute %s of the %d blocks",
		joinInts(devices, ", "), joinInts(counts, ", "), rounds)
}
