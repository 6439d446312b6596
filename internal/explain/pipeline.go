package explain

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/nvcomm/nvcomm/internal/cost"
	"github.com/nvcomm/nvcomm/internal/plan"
)

// This file words a pipeline's bubble (docs/pipeline.md): the fraction of
// the step that a stage waits, as the schedule's formula gives it for
// stages of equal time, and as the makespan of the plan's step graph
// predicts it.

// Bubble is a pipeline's idle time: the formula's and the prediction's.
type Bubble struct {
	Stages, Microbatches int
	// Groups is p, the device groups the stages run on: the stages but
	// under the interleaved schedule, where each group holds Stages/p
	// stages (stage s on group s mod p).
	Groups   int
	Schedule string
	// Backward is whether the plan has backward ops; without, the
	// schedule is forward only, and GPipe and 1F1B are one order.
	Backward bool
	// Ideal is (p − 1)/(v·m + p − 1), v = Stages/Groups: the fraction of
	// the step each device group idles while the pipeline fills and
	// drains, stages of equal time and transfers free (Narayanan et al.,
	// 2021, §2.2; §2.2.2 for v > 1, which divides the bubble's time by v).
	Ideal float64
	// Busy is, per device group, the predicted time its first device
	// computes (its compute stream's steps); Makespan the plan's
	// predicted time.
	Busy     []float64
	Makespan float64
	// Blocks are, per device group, the spans its first device computes
	// one micro-batch's forward or backward, in order.
	Blocks [][]Span
}

// Span is a span of a stage's compute stream spent on one micro-batch's
// forward or backward (Phase: "F2", "B2").
type Span struct {
	Phase      string
	Start, End float64
}

// Bubble of pr, a prediction of p: see PipelineBubble.
func BubbleOf(p *plan.Plan, pr *cost.Prediction) *Bubble {
	if pr == nil || len(pr.Steps) != len(p.Steps) {
		return PipelineBubble(p, nil, 0)
	}
	return PipelineBubble(p, func(i int) (float64, float64) { return pr.Steps[i].Start, pr.Steps[i].Seconds }, pr.Total)
}

// PipelineBubble is p's bubble, its steps' predicted starts and times
// given by time (of the step at index i; nil for none) and its makespan;
// nil for a plan without a pipeline.
func PipelineBubble(p *plan.Plan, time func(i int) (start, seconds float64), makespan float64) *Bubble {
	pl := p.Pipeline
	if pl == nil || len(pl.Stages) == 0 || pl.Microbatches < 1 {
		return nil
	}
	n, m := len(pl.Stages), pl.Microbatches
	first, stageOf := groupsOf(p)
	g := len(first)
	v := n / g
	b := &Bubble{Stages: n, Groups: g, Microbatches: m, Schedule: pl.Schedule, Makespan: makespan,
		Ideal: float64(g-1) / float64(v*m+g-1), Busy: make([]float64, g), Blocks: make([][]Span, g)}
	for i := range p.Ops {
		if of := p.Ops[i].Of; of != nil && of.Grad {
			b.Backward = true
		}
	}
	for i := range p.Steps {
		st := &p.Steps[i]
		if time == nil || !p.Graph() || st.StreamName() != plan.StreamCompute {
			continue
		}
		members := st.Members()
		start, secs := time(i)
		phase := StepPhase(p, st)
		if s := stageOf(st); v > 1 && phase != "" && s >= 0 {
			phase += strings.Repeat("'", s/g) // the group's chunk: F2' is micro-batch 2 on its second stage
		}
		for r, d := range first {
			if slices.Contains(members, d) {
				b.Busy[r] += secs
				b.add(r, phase, start, start+secs)
			}
		}
	}
	return b
}

// groupsOf is p's pipeline's device groups, by the first device of each
// (-1 for a stage whose mesh is missing): one per stage, but where stages
// share their devices (the interleaved schedule), and the stage of a step
// (by its op's output's mesh; -1 for none).
func groupsOf(p *plan.Plan) (first []int, stageOf func(*plan.Step) int) {
	pl := p.Pipeline
	for _, name := range pl.Stages {
		d := -1
		if mesh, ok := p.Meshes[name]; ok && len(mesh.Devices) > 0 {
			d = mesh.Devices[0]
		}
		if d >= 0 && slices.Contains(first, d) {
			break // the groups repeat
		}
		first = append(first, d)
	}
	meshOf := map[string]string{}
	for i := range p.Tensors {
		meshOf[p.Tensors[i].Name] = p.Tensors[i].Mesh
	}
	stageOf = func(s *plan.Step) int {
		if s.Op < 0 || s.Op >= len(p.Ops) {
			return -1
		}
		return slices.Index(pl.Stages, meshOf[p.Ops[s.Op].Output])
	}
	return first, stageOf
}

// add extends stage s's last span with a step of phase from start to
// end when it follows at once, or starts a new span.
func (b *Bubble) add(s int, phase string, start, end float64) {
	if phase == "" {
		return
	}
	bs := b.Blocks[s]
	if k := len(bs) - 1; k >= 0 && bs[k].Phase == phase && start <= bs[k].End+1e-9 {
		bs[k].Start, bs[k].End = min(bs[k].Start, start), max(bs[k].End, end)
		return
	}
	b.Blocks[s] = append(bs, Span{Phase: phase, Start: start, End: end})
}

// Timeline draws each stage's blocks across width columns of the
// makespan: a block is its phase then '=' to its end, an idle column a
// space (the bubble, and the transfers a stage waits for).
func (b *Bubble) Timeline(width int) string {
	if b.Makespan <= 0 {
		return ""
	}
	var w strings.Builder
	col := func(t float64) int { return min(width, int(t/b.Makespan*float64(width)+0.5)) }
	for s, blocks := range b.Blocks {
		row := []byte(strings.Repeat(" ", width))
		for _, bl := range blocks {
			for c := col(bl.Start); c < min(max(col(bl.End), col(bl.Start)+1), width); c++ {
				row[c] = '='
			}
		}
		prev := ""
		for _, bl := range blocks {
			if bl.Phase != prev {
				copy(row[min(col(bl.Start), width):], bl.Phase) // a label: the micro-batch that starts
			}
			prev = bl.Phase
		}
		fmt.Fprintf(&w, "  %s %d |%s|\n", b.rowName(), s, strings.TrimRight(string(row), " ")+strings.Repeat(" ", width-len(strings.TrimRight(string(row), " "))))
	}
	return w.String()
}

// rowName names a row of the timeline: a stage, or under the interleaved
// schedule a device group.
func (b *Bubble) rowName() string {
	if b.Groups == b.Stages {
		return "stage"
	}
	return "group"
}

// Text is the bubble in a sentence or two.
func (b *Bubble) Text() string {
	var w strings.Builder
	if b.Groups == b.Stages {
		fmt.Fprintf(&w, "pipeline: %d stages, %d micro-batches, schedule %s", b.Stages, b.Microbatches, b.Schedule)
		if !b.Backward {
			w.WriteString(" (forward only: GPipe and 1F1B order the forwards alike)")
		}
		fmt.Fprintf(&w, "; its bubble, (p − 1)/(m + p − 1) = %d/%d, is %s of the step for stages of equal time\n",
			b.Stages-1, b.Microbatches+b.Stages-1, percent(b.Ideal))
	} else {
		v := b.Stages / b.Groups
		fmt.Fprintf(&w, "pipeline: %d stages on %d device groups (v = %d stages each), %d micro-batches, schedule %s", b.Stages, b.Groups, v, b.Microbatches, b.Schedule)
		fmt.Fprintf(&w, "; its bubble, (p − 1)/(v·m + p − 1) = %d/%d, is %s of the step for stages of equal time\n",
			b.Groups-1, v*b.Microbatches+b.Groups-1, percent(b.Ideal))
	}
	if b.Makespan <= 0 || slices.Max(b.Busy) == 0 {
		return w.String()
	}
	w.WriteString("predicted by the makespan:")
	for s, busy := range b.Busy {
		sep := ","
		if s == 0 {
			sep = ""
		}
		fmt.Fprintf(&w, "%s %s %d computes %s of %s (idle %s)", sep, b.rowName(), s, Seconds(busy), Seconds(b.Makespan), percent(1-busy/b.Makespan))
	}
	w.WriteString("\n")
	w.WriteString(b.Timeline(timelineWidth))
	return w.String()
}

// timelineWidth is the columns of Text's timeline.
const timelineWidth = 96

// StepPhase labels step s of a pipeline's plan by the micro-batch it
// belongs to, "F2" for the forward of micro-batch 2 and "B2" for its
// backward, from its op's output name (t@mbK) and provenance; "" for a
// step of no micro-batch, or a plan without a pipeline.
func StepPhase(p *plan.Plan, s *plan.Step) string {
	if p.Pipeline == nil || s.Op < 0 || s.Op >= len(p.Ops) {
		return ""
	}
	op := &p.Ops[s.Op]
	mb := microbatchOf(op.Output)
	if mb < 0 {
		return ""
	}
	if in := op.Inserted; in != nil && in.For >= 0 && in.For < len(p.Ops) {
		op = &p.Ops[in.For]
	}
	if op.Of != nil && op.Of.Grad {
		return "B" + strconv.Itoa(mb)
	}
	return "F" + strconv.Itoa(mb)
}

// microbatchOf is the micro-batch of a name t@mbK (or t@mbK/what), -1
// for another name.
func microbatchOf(name string) int {
	i := strings.LastIndex(name, "@mb")
	if i < 0 {
		return -1
	}
	rest := name[i+3:]
	j := 0
	for j < len(rest) && rest[j] >= '0' && rest[j] <= '9' {
		j++
	}
	mb, err := strconv.Atoi(rest[:j])
	if err != nil {
		return -1
	}
	return mb
}
