package explain

import (
	"fmt"
	"strings"

	"github.com/nvcomm/nvcomm/internal/plan"
)

// overlapOf says how op i, a linear or matmul, computes its decomposed
// collective and why that form: its chunks or rounds, and every form's
// price where the lowering's choice is known (Options.Overlaps); nil for
// an op that no decomposed collective concerns.
func (e *explainer) overlapOf(i int, op plan.Op) []string {
	var o *Overlap
	for k := range e.o.Overlaps {
		if e.o.Overlaps[k].Op == i {
			o = &e.o.Overlaps[k]
		}
	}
	if o == nil {
		return nil
	}
	what := "Allgather + " + op.Op + ": its first operand gathered along its rows"
	switch o.Kind {
	case plan.OverlapReduceScatter:
		what = op.Op + " + ReduceScatter: its partial sums reduce-scattered along their rows"
	case plan.OverlapAllgatherWeight:
		what = "Allgather + " + op.Op + ": its weight gathered along its output rows, as FSDP gathers it"
	}
	line := "a decomposed collective could compute it (" + what + "); "
	switch c := o.Chosen; c.Form {
	case "none":
		line += "it is computed undecomposed"
	case "ring":
		line += fmt.Sprintf("it is computed ring-based, in %d rounds: each device passes its block to the next (one SendRecv of pairs a round) while it multiplies the block it holds", c.Chunks)
	default:
		line += fmt.Sprintf("it is computed collective-based, in %d chunks of every device's rows: each chunk's collective runs beside another chunk's Matmul", c.Chunks)
	}
	var prices []string
	for _, p := range o.Prices {
		price := Seconds(p.Price) + " as a step graph"
		if o.Kind == plan.OverlapAllgatherWeight {
			// Priced after the steps of the ops before it, which the
			// undecomposed Allgather runs beside (lower's contextPrice).
			price = Seconds(p.Price) + " added to the steps before it"
		}
		if o.Bytes {
			price = plan.Size(int64(p.Price)) + " received by the busiest device"
		}
		prices = append(prices, overlapName(p)+" "+price)
	}
	by := "the objective"
	if a, ok := op.Attrs.Get("overlap"); ok && a.Str != "auto" {
		by = "the fusion's overlap: " + a.Str
	}
	lines := []string{line, fmt.Sprintf("why this form: %s; %s (%s chosen)", by, strings.Join(prices, ", "), overlapName(o.Chosen))}
	if _, forced := op.Attrs.Get("chunks"); !forced && !o.Bytes {
		if why := whyChunks(o); why != "" {
			lines = append(lines, why)
		}
	}
	return lines
}

// whyChunks says why the makespan chose the collective-based form's k
// among those it tried (every k dividing each device's rows, up to a
// cap): the next fewer chunks leave more of the transfer exposed (the
// first chunk's Allgather, or the last chunk's ReduceScatter, overlaps no
// Matmul, and it is larger), the next more pay one more collective's
// launch floor each and multiply smaller blocks. Empty unless a
// collective-based form is chosen among two or more k.
func whyChunks(o *Overlap) string {
	c := o.Chosen
	if c.Form != "collective" {
		return ""
	}
	var fewer, more *OverlapPrice
	for i := range o.Prices {
		p := &o.Prices[i]
		if p.Form != "collective" {
			continue
		}
		if p.Chunks < c.Chunks && (fewer == nil || p.Chunks > fewer.Chunks) {
			fewer = p
		}
		if p.Chunks > c.Chunks && (more == nil || p.Chunks < more.Chunks) {
			more = p
		}
	}
	if fewer == nil && more == nil {
		return ""
	}
	exposed := "first chunk's Allgather"
	if o.Kind == plan.OverlapReduceScatter {
		exposed = "last chunk's ReduceScatter"
	}
	var why []string
	if fewer != nil {
		why = append(why, fmt.Sprintf("fewer chunks leave a larger %s beside no Matmul (%s %s)", exposed, overlapName(*fewer), Seconds(fewer.Price)))
	}
	if more != nil {
		why = append(why, fmt.Sprintf("more chunks each pay a collective's launch floor and multiply smaller blocks (%s %s)", overlapName(*more), Seconds(more.Price)))
	}
	return fmt.Sprintf("why k=%d: the cheapest of the k that divide each device's rows; %s", c.Chunks, strings.Join(why, ", "))
}

// overlapName names a form of a decomposed collective: "undecomposed",
// "collective k=2", "ring k=4".
func overlapName(p OverlapPrice) string {
	if p.Form == "none" {
		return "undecomposed"
	}
	return fmt.Sprintf("%s k=%d", p.Form, p.Chunks)
}
