package plan

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
)

// WriteText writes a readable table of p's steps and its summary.
func WriteText(w io.Writer, p *Plan) error {
	ratio := "-"
	if r := p.Summary.BytesRatio; r != nil {
		ratio = fmt.Sprintf("%.3g", *r)
	}
	fmt.Fprintf(w, "plan %s (policy %s): %d collectives, %d local steps, max bytes received per device %d (lower bound %d, ratio %s)\n\n",
		p.Fusion, p.Policy, p.Summary.Collectives, p.Summary.LocalSteps, p.Summary.BytesReceivedMax, p.Summary.BytesLowerBound, ratio)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "step\top\ttype\tinput -> output\tteams / devices\troot\treduce\tcount in/out\tbytes sent/recv/bound")
	for _, s := range p.Steps {
		who := fmt.Sprint(s.Devices)
		if s.Kind == KindCollective {
			who = teamsText(s.Teams)
		}
		root, red, bytes := "-", "-", "-"
		if s.Root != nil {
			root = fmt.Sprint(*s.Root)
		}
		if s.ReduceOp != nil {
			red = *s.ReduceOp
		}
		if s.Bytes != nil {
			bytes = fmt.Sprintf("%d/%d/%d", s.Bytes.SentPerDevice, s.Bytes.ReceivedPerDevice, s.Bytes.LowerBound)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s -> %s\t%s\t%s\t%s\t%d/%d\t%s\n",
			s.ID, s.Expr, s.Type, strings.Join(s.Operands(), ", "), s.Output, who, root, red, s.Count.Input, s.Count.Output, bytes)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	return writePropagated(w, p)
}

// writePropagated lists, after the steps, the tensors whose sharding
// format 2 propagated, with their mesh and placements as a fusion file
// would write them, so that a reader can tell them from the shardings the
// file gave. A plan without any writes nothing.
func writePropagated(w io.Writer, p *Plan) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	header := false
	for _, t := range p.Tensors {
		if !t.Propagated {
			continue
		}
		if !header {
			fmt.Fprintln(tw, "\npropagated shardings (format 2):")
			header = true
		}
		fmt.Fprintf(tw, "  %s\ton %s\t%s\n", t.Name, t.Mesh, placementsText(p, t))
	}
	return tw.Flush()
}

// placementsText renders t's sharding as placements, one per axis of its
// mesh: Shard(d) for a device type that splits dim d, Partial(op) for one
// that splits the reduction axis of a reduction or contraction output (the
// notation fusion files give that split), both joined by + when one type
// does both, Replicate() otherwise.
func placementsText(p *Plan, t Tensor) string {
	rank := len(p.Meshes[t.Mesh].Shape)
	pls := make([]string, rank)
	for i := range pls {
		pls[i] = "Replicate()"
	}
	at := func(typ string) int { return rank - 1 - slices.Index(deviceTypes, typ) }
	for _, s := range t.Sharding {
		if a := at(s.Type); a >= 0 && a < rank {
			pls[a] = fmt.Sprintf("Shard(%d)", s.LogicalAxis)
			if s.Kind != "block" {
				pls[a] = fmt.Sprintf("Shard(%d, %s)", s.LogicalAxis, s.Kind)
			}
		}
	}
	for _, s := range reductionSplits(t) {
		a := at(s.typ)
		if a < 0 || a >= rank {
			continue
		}
		partial := fmt.Sprintf("Partial(%s)", reduceOpOf(p, t.Name))
		if pls[a] == "Replicate()" {
			pls[a] = partial
		} else {
			// Summed over the mesh axis and split along a dim by it: a
			// ReduceScatter's output, which no one placement names.
			pls[a] += "+" + partial
		}
	}
	return "[" + strings.Join(pls, ", ") + "]"
}

// reduceOpOf is the op that combines the partial results of the op
// producing name: a reduction's own, else sum (a contraction's).
func reduceOpOf(p *Plan, name string) string {
	for _, op := range p.Ops {
		if op.Output == name && slices.Contains([]string{"prod", "max", "min"}, op.Op) {
			return op.Op
		}
	}
	return "sum"
}

// typedAxis is a logical axis and the device type that splits it.
type typedAxis struct {
	typ  string
	axis int
}

// reductionSplits replays t's schedule far enough to find the reduction
// axes (their positions in Shape) that device types split: the summed
// axes of partial results, which Sharding, of non-reduction axes only,
// does not show. A schedule it cannot follow ends the search.
func reductionSplits(t Tensor) []typedAxis {
	origin := make([]int, len(t.Shape)) // the logical axis of each loop axis; -1 after a merge
	for i := range origin {
		origin[i] = i
	}
	var out []typedAxis
	for _, s := range t.Schedule {
		var a int
		switch {
		case s.Split != nil, s.OuterSplit != nil:
			if a = splitAxis(s); a < 0 || a >= len(origin) {
				return out
			}
			origin = slices.Insert(origin, a, origin[a])
		case s.Merge != nil:
			if a = s.Merge.Axis; a < 0 || a+1 >= len(origin) {
				return out
			}
			origin = slices.Replace(origin, a, a+2, -1)
		case s.Reorder != nil:
			if origin = reordered(origin, s.Reorder); origin == nil {
				return out
			}
		case s.Parallelize != nil:
			a = s.Parallelize.Axis
			if a >= 0 && a < len(origin) && slices.Contains(deviceTypes, s.Parallelize.Type) && slices.Contains(t.ReductionAxes, origin[a]) {
				out = append(out, typedAxis{s.Parallelize.Type, origin[a]})
			}
		}
	}
	return out
}

// splitAxis is the axis a split or outer_split step splits.
func splitAxis(s ScheduleStep) int {
	if s.Split != nil {
		return s.Split.Axis
	}
	return s.OuterSplit.Axis
}

// reordered permutes xs by order (new position -> old), or returns nil
// when order is not a permutation of xs's positions.
func reordered(xs, order []int) []int {
	if !isPermutation(order, len(xs)) {
		return nil
	}
	out := make([]int, len(xs))
	for i, old := range order {
		out[i] = xs[old]
	}
	return out
}

func teamsText(teams [][]int) string {
	parts := make([]string, len(teams))
	for i, t := range teams {
		parts[i] = fmt.Sprint(t)
	}
	return strings.Join(parts, " ")
}
