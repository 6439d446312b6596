package report

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/nvcomm/nvcomm/internal/cost"
	"github.com/nvcomm/nvcomm/internal/explain"
	"github.com/nvcomm/nvcomm/internal/plan"
)

// The timeline's geometry, in CSS pixels: a gutter for the device labels,
// a plot of fixed width that the plan's predicted total fills, a row per
// device and an axis below.
const (
	gutter     = 110.0
	plotWidth  = 900.0
	rowHeight  = 24.0
	axisHeight = 30.0
	ticks      = 4
)

// timeline is the predicted timeline laid out: one row per device, each
// step a box on the rows of the devices that run it, from explain's trace,
// so that it is the timeline `nvcomm trace` writes.
type timeline struct {
	Width, Height float64
	Rows          []label
	Boxes         []box
	// The time axis runs from AxisX0 to AxisX1 at height AxisY, with
	// ticks labelled with their times.
	AxisX0, AxisX1, AxisY float64
	Ticks                 []tick
	Legend                []legendEntry
	Total                 string
	// Bubble is, for a pipeline's plan, its bubble in words and each
	// stage's timeline in text (explain.Bubble), "" otherwise.
	Bubble string
}

// tick is a mark of the time axis: a line down to TickEnd, its label at
// (X, Y).
type tick struct {
	label
	TickEnd float64
}

// box is one step on one device, its label centred at (CX, CY).
type box struct {
	X, Y, W, H, CX, CY float64
	Fill               string
	// Label is the step's type when the box is wide enough to hold it.
	Label string
	// Title is the tooltip: the step, its op, buffers, team, bytes and time.
	Title string
}

// legendEntry is a step type and its colour.
type legendEntry struct{ Type, Fill string }

// newTimeline lays out p's timeline on topology t, or says why there is
// none.
func newTimeline(p *plan.Plan, m *explain.Model, t *cost.Topology) (*timeline, string) {
	if t == nil {
		return nil, "No topology (--topology none): no predicted times, so no timeline."
	}
	if len(p.Steps) == 0 {
		return nil, "The plan has no steps."
	}
	pr, err := cost.Predict(t, p)
	if err != nil {
		return nil, fmt.Sprintf("No timeline: the plan cannot be priced on topology %s: %v.", t.Name, err)
	}
	tr, err := explain.NewTrace(p, pr, t, nil)
	if err != nil {
		return nil, fmt.Sprintf("No timeline: %v.", err)
	}
	if pr.Total <= 0 {
		return nil, "No timeline: every step is predicted to take no time."
	}
	tl := layoutTimeline(tr, m, pr.Total*1e6)
	if b := explain.BubbleOf(p, pr); b != nil {
		tl.Bubble = b.Text()
	}
	return tl, ""
}

// layoutTimeline places the trace's complete events, whose times are in
// microseconds, on a plot that total fills.
func layoutTimeline(tr *explain.Trace, m *explain.Model, total float64) *timeline {
	steps := stepsByID(m)
	rows := map[int]float64{} // device -> y of its row
	tl := &timeline{Width: gutter + plotWidth + 40, Total: explain.Seconds(total / 1e6)}
	for _, e := range tr.TraceEvents {
		if e.Ph == "M" && e.Name == "thread_name" {
			y := float64(len(rows)) * rowHeight
			rows[e.Tid] = y
			tl.Rows = append(tl.Rows, label{X: gutter - 8, Y: y + rowHeight/2, Text: fmt.Sprint(e.Args["name"])})
		}
	}
	types := map[string]string{}
	for _, e := range tr.TraceEvents {
		if e.Ph != "X" {
			continue
		}
		typ := e.Name // a pipeline's names its micro-batch too: coloured by its type
		if id, ok := e.Args["step"].(int); ok && steps[id].Type != "" {
			typ = steps[id].Type
		}
		if _, ok := types[typ]; !ok {
			types[typ] = colour(len(types))
			tl.Legend = append(tl.Legend, legendEntry{Type: typ, Fill: types[typ]})
		}
		tl.Boxes = append(tl.Boxes, newBox(e, rows[e.Tid], types[typ], steps, total))
	}
	tl.AxisX0, tl.AxisX1, tl.AxisY = gutter, gutter+plotWidth, float64(len(rows))*rowHeight
	tl.Height = tl.AxisY + axisHeight
	for k := range ticks + 1 {
		at := total * float64(k) / ticks
		tl.Ticks = append(tl.Ticks, tick{label{X: gutter + plotWidth*float64(k)/ticks, Y: tl.AxisY + 20, Text: explain.Seconds(at / 1e6)}, tl.AxisY + 5})
	}
	slices.SortStableFunc(tl.Legend, func(a, b legendEntry) int { return cmp.Compare(a.Type, b.Type) })
	return tl
}

// newBox is event e's box on the row at y: at least a pixel wide, so that
// a step of no predicted time still shows.
func newBox(e explain.TraceEvent, y float64, fill string, steps map[int]explain.StepModel, total float64) box {
	b := box{X: gutter + plotWidth*e.Ts/total, Y: y + 2, W: max(plotWidth*e.Dur/total, 1), H: rowHeight - 4, Fill: fill}
	b.CX, b.CY = b.X+b.W/2, b.Y+b.H/2
	if b.W >= textWidth(e.Name)*0.9+8 {
		b.Label = e.Name
	}
	id, _ := e.Args["step"].(int)
	s := steps[id]
	b.Title = fmt.Sprintf("step %d %s (%s): %s on %s, receives %s (bound %s), %s", s.ID, s.Type, e.Args["op"], s.Buffers, s.Team, s.Received, s.Bound, s.Time)
	return b
}

// stepsByID indexes the model's steps.
func stepsByID(m *explain.Model) map[int]explain.StepModel {
	out := map[int]explain.StepModel{}
	for _, op := range m.Ops {
		for _, s := range op.Steps {
			out[s.ID] = s
		}
	}
	return out
}
