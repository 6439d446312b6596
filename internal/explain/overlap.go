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
	if o.Kind == plan.OverlapReduceScatter {
		what = op.Op + " + ReduceScatter: its partial sums reduce-scattered along their rows"
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
		if o.Bytes {
			price = plan.Size(int64(p.Price)) + " received by the busiest device"
		}
		prices = append(prices, overlapName(p)+" "+price)
	}
	by := "the objective"
	if a, ok := op.Attrs.Get("overlap"); ok && a.Str != "auto" {
		by = "the fusion's overlap: " + a.Str
	}
	return []string{line, fmt.Sprintf("why this form: %s; %s (%s chosen)", by, strings.Join(prices, ", "), overlapName(o.Chosen))}
}

// overlapName names a form of a decomposed collective: "undecomposed",
// "collective k=2", "ring k=4".
func overlapName(p OverlapPrice) string {
	if p.Form == "none" {
		return "undecomposed"
	}
	return fmt.Sprintf("%s k=%d", p.Form, p.Chunks)
}
