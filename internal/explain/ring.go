package explain

import (
	"fmt"
	"maps"
	"slices"
	"strings"

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

// wholeForm names the form in which op k computes its sdpa whole: the
// all-gather form where its steps gather, else ring attention.
func (e *explainer) wholeForm(k int) string {
	if k >= 0 && k < len(e.p.Ops) && e.p.Ops[k].Of == nil {
		return "a decomposed Allgather + " + e.p.Ops[k].Op
	}
	for _, s := range e.stepsOf(k) {
		if s.Type == plan.Allgather {
			return "the all-gather form"
		}
	}
	return "ring attention"
}

// formOf says how op i, the last op of an sdpa's expansion, computes
// the sdpa and why that form: ring attention (its rounds, the ops within
// it), the all-gather form, or the expansion planned op by op; the three
// prices where the lowering's choice is known (Options.Forms), else who
// chose.
func (e *explainer) formOf(i int, op plan.Op) []string {
	var form *Form
	for k := range e.o.Forms {
		if e.o.Forms[k].Op == i {
			form = &e.o.Forms[k]
		}
	}
	whole := e.computesWhole(i) && op.Of != nil
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
		shifts, gathers := 0, 0 // k's and v's, between rounds; or gathered whole
		for _, s := range e.stepsOf(i) {
			switch s.Type {
			case plan.SendRecv:
				shifts++
			case plan.Allgather:
				gathers++
			}
		}
		if gathers > 0 {
			lines = append(lines, fmt.Sprintf("computes %s whole, in the all-gather form: k and v gathered whole along the sequence, then each device's queries against every key, locally%s; %d ops are computed within its steps",
				op.Of.Expr(), causalGather(op), within))
			return append(lines, e.whyForm(op, form)...)
		}
		rounds := shifts/2 + 1
		lines = append(lines, fmt.Sprintf("computes %s whole, as ring attention: %d rounds of attention on the k and v blocks each device holds, merged by online softmax, the blocks passed along the ring between rounds; %d ops are computed within its steps",
			op.Of.Expr(), rounds, within))
		if skipped := e.skippedBlocks(i, rounds); skipped != "" {
			lines = append(lines, skipped)
		}
	}
	return append(lines, e.whyForm(op, form)...)
}

// causalGather is what the all-gather form's causal mask does, for
// formOf: "" when op's sdpa is not causal.
func causalGather(op plan.Op) string {
	if op.Of == nil || !op.Of.Causal {
		return ""
	}
	return " (causal: each device masks with its own diagonal, its first query, and computes the tiles on or below it: the last device nearly all of its block)"
}

// formNames are the forms' names in explain, by sdpa's cp.
var formNames = map[string]string{
	"ring":      "the ring",
	"allgather": "the all-gather form",
	"expansion": "the expansion planned op by op",
}

// whyForm says why op, the last op of an sdpa's expansion, takes its form:
// the three prices with the lowering's choice (form), else who chose.
func (e *explainer) whyForm(op plan.Op, form *Form) []string {
	switch {
	case form != nil:
		price := func(x float64) string {
			if form.Bytes {
				return plan.Size(int64(x)) + " received by the busiest device"
			}
			return Seconds(x) + " as a step graph"
		}
		var others []string
		for _, f := range []string{"ring", "allgather", "expansion"} {
			if f != form.Chosen {
				others = append(others, formNames[f])
			}
		}
		by := "the objective"
		if op.Of != nil && op.Of.CP != "" {
			by = "the fusion's cp: " + op.Of.CP
		}
		return []string{fmt.Sprintf("why this form: %s; ring %s, all-gather %s, expansion %s (%s chosen over %s)",
			by, price(form.Ring), price(form.Gather), price(form.Expansion), formNames[form.Chosen], strings.Join(others, " and "))}
	case op.Of != nil && op.Of.CP != "":
		return []string{"why this form: the fusion's cp: " + op.Of.CP}
	}
	return []string{"why this form: the objective, which priced it below the other forms (the makespans of their step graphs)"}
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
