package explain

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/nvcomm/nvcomm/internal/cost"
	"github.com/nvcomm/nvcomm/internal/plan"
)

// SummaryOps is the most ops a summary lists one by one: with more, it
// lists the SummaryOps that take the longest (unpriced: that receive the
// most), in plan order, and sums the others in one row, so that a summary
// fits a screen whatever the plan's size.
const SummaryOps = 24

// WriteSummary writes p's summary: the headline, one row per collective
// type (its steps, what the busiest device of each receives, the bound and
// the predicted time), one row per kind of op (matmul, the sets nvcomm
// inserted, …) and one row per op, with the same totals and their share of
// the predicted time. It reads each step once and analyses no
// tensor, so it takes time linear in the plan's size. o's Tensor and Op
// are ignored.
func WriteSummary(w io.Writer, p *plan.Plan, o Options) error {
	e := &explainer{p: p, o: o, st: newStyles(o.Color), times: map[int]cost.StepTime{}}
	if o.Topology != nil {
		e.prices()
	}
	byType := map[string]*tally{}
	byOp := make([]tally, len(p.Ops))
	var all tally
	for k := range p.Steps {
		s := &p.Steps[k]
		secs := e.times[s.ID].Seconds
		all.add(s, secs)
		if s.Op >= 0 && s.Op < len(byOp) {
			byOp[s.Op].add(s, secs)
		}
		if s.Kind == plan.KindCollective {
			if byType[s.Type] == nil {
				byType[s.Type] = &tally{}
			}
			byType[s.Type].add(s, secs)
		}
	}
	var b strings.Builder
	e.summary(&b)
	e.collectiveRows(&b, byType)
	e.kindRows(&b, byOp, all)
	e.opRows(&b, byOp, all)
	if p.Graph() && len(e.times) > 0 {
		fmt.Fprintf(&b, "\nThe steps form a graph (format 2) and overlap: their times sum to %s%s, the plan takes %s.\n",
			Seconds(all.seconds), contention(p, e.times), Seconds(e.total))
	}
	var time func(int) (float64, float64)
	if len(e.times) > 0 {
		time = func(i int) (float64, float64) { st := e.times[p.Steps[i].ID]; return st.Start, st.Seconds }
	}
	if bub := PipelineBubble(p, time, e.total); bub != nil {
		b.WriteString("\n" + bub.Text())
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// contention words what the steps' times include for collectives and
// Matmuls that share a device (cost.Contention), or nothing; summed in
// the plan's order, so that the words are the same every time.
func contention(p *plan.Plan, times map[int]cost.StepTime) string {
	slowed := 0.0
	for i := range p.Steps {
		slowed += times[p.Steps[i].ID].Slowed
	}
	if slowed == 0 {
		return ""
	}
	return fmt.Sprintf(" (%s of it collectives and Matmuls slowing each other where they share a device, by %g)", Seconds(slowed), cost.Contention)
}

// tally is the totals of a group of steps.
type tally struct {
	steps int
	// collectives counts the collective steps by type.
	collectives map[string]int
	// recv and bound sum what the busiest device of each collective
	// receives and its lower bound.
	recv, bound int64
	seconds     float64
}

// add counts step s, predicted to take secs.
func (t *tally) add(s *plan.Step, secs float64) {
	t.steps++
	t.seconds += secs
	if s.Bytes != nil {
		t.recv += s.Bytes.ReceivedPerDevice
		t.bound += s.Bytes.LowerBound
	}
	if s.Kind == plan.KindCollective {
		if t.collectives == nil {
			t.collectives = map[string]int{}
		}
		t.collectives[s.Type]++
	}
}

// merge adds u's totals to t's.
func (t *tally) merge(u tally) {
	t.steps += u.steps
	t.seconds += u.seconds
	t.recv += u.recv
	t.bound += u.bound
	for typ, n := range u.collectives {
		if t.collectives == nil {
			t.collectives = map[string]int{}
		}
		t.collectives[typ] += n
	}
}

// kinds lists t's collectives in plan.CollectiveTypes order, a count
// before a type that occurs more than once: "2× Allgather, ReduceScatter";
// "-" for none.
func (t *tally) kinds() string {
	var out []string
	for _, typ := range plan.CollectiveTypes {
		switch n := t.collectives[typ]; {
		case n == 1:
			out = append(out, typ)
		case n > 1:
			out = append(out, fmt.Sprintf("%d× %s", n, typ))
		}
	}
	if len(out) == 0 {
		return "-"
	}
	return strings.Join(out, ", ")
}

// collectiveRows writes one row per collective type of the plan and their
// total.
func (e *explainer) collectiveRows(b *strings.Builder, byType map[string]*tally) {
	st := e.st
	b.WriteString("\n" + st.paint(st.title, "Collectives") + "\n")
	if len(byType) == 0 {
		b.WriteString("  none: no device receives anything\n")
		return
	}
	rows := [][]cell{{{"type", st.name}, {"steps", st.name}, {"received", st.name}, {"bound", st.name}, {"time", st.name}}}
	var total tally
	for _, typ := range plan.CollectiveTypes {
		if t := byType[typ]; t != nil {
			total.merge(*t)
			rows = append(rows, e.tallyCells(cell{typ, st.collective}, *t, false))
		}
	}
	rows = append(rows, e.tallyCells(cell{"total", st.name}, total, false))
	st.writeTable(b, "  ", rows)
}

// kindRows writes one row per kind of op, in order of first appearance:
// how many ops of that kind there are and their totals.
func (e *explainer) kindRows(b *strings.Builder, byOp []tally, all tally) {
	st := e.st
	b.WriteString("\n" + st.paint(st.title, "Op kinds") + "\n")
	var kinds []string
	byKind, ops := map[string]*tally{}, map[string]int{}
	for i, op := range e.p.Ops {
		kind := op.Op
		if op.Inserted != nil {
			kind += " (inserted)"
		}
		if byKind[kind] == nil {
			kinds = append(kinds, kind)
			byKind[kind] = &tally{}
		}
		byKind[kind].merge(byOp[i])
		ops[kind]++
	}
	rows := [][]cell{{{"ops", st.name}, {"kind", st.name}, {"steps", st.name}, {"collectives", st.name},
		{"received", st.name}, {"bound", st.name}, {"time", st.name}, {"share", st.name}}}
	for _, kind := range kinds {
		rows = append(rows, e.opCells(fmt.Sprint(ops[kind]), cell{kind, nil}, *byKind[kind], all))
	}
	st.writeTable(b, "  ", rows)
}

// opRows writes one row per op, or the SummaryOps that take the longest
// and a row for the others, then the plan's total.
func (e *explainer) opRows(b *strings.Builder, byOp []tally, all tally) {
	st := e.st
	b.WriteString("\n" + st.paint(st.title, "Ops") + "\n")
	rows := [][]cell{{{"op", st.name}, {"expr", st.name}, {"steps", st.name}, {"collectives", st.name},
		{"received", st.name}, {"bound", st.name}, {"time", st.name}, {"share", st.name}}}
	shown := e.longest(byOp)
	var others tally
	for i := range byOp {
		if !shown[i] {
			others.merge(byOp[i])
			continue
		}
		rows = append(rows, e.opCells(fmt.Sprint(i), cell{e.p.Ops[i].Expr(), nil}, byOp[i], all))
	}
	if n := len(byOp) - len(shown); n > 0 {
		rows = append(rows, e.opCells("…", cell{count(n, "other op"), st.dim}, others, all))
	}
	rows = append(rows, e.opCells("", cell{"total", st.name}, all, all))
	st.writeTable(b, "  ", rows)
}

// longest picks the ops a summary lists: all of them up to SummaryOps,
// else the SummaryOps with the most predicted time, then the most bytes
// received, then the first.
func (e *explainer) longest(byOp []tally) map[int]bool {
	order := make([]int, len(byOp))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		if c := cmp.Compare(byOp[b].seconds, byOp[a].seconds); c != 0 {
			return c
		}
		return cmp.Compare(byOp[b].recv, byOp[a].recv)
	})
	shown := map[int]bool{}
	for _, i := range order[:min(len(order), SummaryOps)] {
		shown[i] = true
	}
	return shown
}

// opCells is an op row: its index, its expression, its tally and its
// share of the plan's predicted time.
func (e *explainer) opCells(index string, expr cell, t, all tally) []cell {
	row := append([]cell{{index, nil}, expr}, e.tallyCells(cell{fmt.Sprint(t.steps), nil}, t, true)...)
	share := "-"
	if len(e.times) > 0 && all.seconds > 0 {
		share = percent(t.seconds / all.seconds)
	}
	return append(row, cell{share, nil})
}

// percent renders a fraction as a whole percentage, saying "<1%" and
// ">99%" rather than rounding a part to 0% or 100%.
func percent(f float64) string {
	s := fmt.Sprintf("%.0f%%", 100*f)
	switch {
	case s == "0%" && f > 0:
		return "<1%"
	case s == "100%" && f < 1:
		return ">99%"
	}
	return s
}

// tallyCells are a tally's cells after first: its collectives (when
// kinds says so, else its step count), what they receive, their bound and
// their predicted time ("-" for none, or unpriced).
func (e *explainer) tallyCells(first cell, t tally, kinds bool) []cell {
	row := []cell{first}
	if kinds {
		row = append(row, cell{t.kinds(), e.st.collective})
	} else {
		n := 0
		for _, c := range t.collectives {
			n += c
		}
		row = append(row, cell{fmt.Sprint(n), nil})
	}
	recv, bound, secs := "-", "-", "-"
	if len(t.collectives) > 0 {
		recv, bound = plan.Size(t.recv), plan.Size(t.bound)
	}
	if len(e.times) > 0 {
		secs = Seconds(t.seconds)
	}
	return append(row, cell{recv, nil}, cell{bound, nil}, cell{secs, nil})
}
