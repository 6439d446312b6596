package explain

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"

	"github.com/nvcomm/nvcomm/internal/cost"
	"github.com/nvcomm/nvcomm/internal/plan"
)

// Trace is a timeline in Chrome's Trace Event format, which
// ui.perfetto.dev and chrome://tracing open: one process per node, one
// track (thread) per device, each step a complete event on the tracks of
// the devices that run it.
type Trace struct {
	TraceEvents     []TraceEvent `json:"traceEvents"`
	DisplayTimeUnit string       `json:"displayTimeUnit"`
}

// TraceEvent is one event: a complete event (Ph "X", Ts and Dur in
// microseconds) or a metadata event naming a process or a thread (Ph "M").
type TraceEvent struct {
	Name string         `json:"name"`
	Cat  string         `json:"cat,omitempty"`
	Ph   string         `json:"ph"`
	Ts   float64        `json:"ts"`
	Dur  float64        `json:"dur,omitempty"`
	Pid  int            `json:"pid"`
	Tid  int            `json:"tid"`
	Args map[string]any `json:"args,omitempty"`
}

// Measured is a run's measured time of each step, in seconds, by step id
// (the steps of `export torch`'s --json result).
type Measured map[int]float64

// measuredPid offsets the processes of measured tracks from the predicted
// ones: node n's measured process is measuredPid + n.
const measuredPid = 1000

// NewTrace lays out p's steps one after another with the predicted times
// of pr (and, when measured is not nil, a second set of processes with the
// measured times): every step is an event on each device that runs it.
func NewTrace(p *plan.Plan, pr *cost.Prediction, t *cost.Topology, measured Measured) (*Trace, error) {
	if len(pr.Steps) != len(p.Steps) {
		return nil, fmt.Errorf("the prediction has %d steps, the plan %d", len(pr.Steps), len(p.Steps))
	}
	tr := &Trace{DisplayTimeUnit: "ns"}
	perNode := max(t.DevicesPerNode, 1)
	what := "predicted"
	if b := BubbleOf(p, pr); b != nil && b.Makespan > 0 {
		what = fmt.Sprintf("predicted; pipeline %s, %d micro-batches, bubble %s for equal stages", b.Schedule, b.Microbatches, percent(b.Ideal))
	}
	tr.name(p, perNode, 0, what, !p.Graph())
	if p.Graph() {
		tr.graph(p, pr, perNode)
	} else {
		at := 0.0
		for i := range p.Steps {
			at += tr.step(p, &p.Steps[i], perNode, 0, at, pr.Steps[i].Seconds, "predicted")
		}
	}
	if measured == nil {
		return tr, nil
	}
	tr.name(p, perNode, measuredPid, "measured", true)
	at := 0.0
	for i := range p.Steps {
		s := &p.Steps[i]
		sec, ok := measured[s.ID]
		if !ok {
			return nil, fmt.Errorf("the run has no measured time of step %d", s.ID)
		}
		at += tr.step(p, s, perNode, measuredPid, at, sec, "measured")
	}
	return tr, nil
}

// graph lays out the steps of p, a plan of format 2, at the starts of pr
// (cost.Schedule), each on its stream's own track of every device that
// runs it: device d's stream k (in order of first use, compute and comm
// first) is track d·n + k of n streams, named "device d: stream".
func (tr *Trace) graph(p *plan.Plan, pr *cost.Prediction, perNode int) {
	streams := []string{plan.StreamCompute, plan.StreamComm}
	for i := range p.Steps {
		if name := p.Steps[i].StreamName(); !slices.Contains(streams, name) {
			streams = append(streams, name)
		}
	}
	n := len(streams)
	named := map[int]bool{}
	for i := range p.Steps {
		s := &p.Steps[i]
		k := slices.Index(streams, s.StreamName())
		first := len(tr.TraceEvents)
		tr.step(p, s, perNode, 0, pr.Steps[i].Start, pr.Steps[i].Seconds, "predicted")
		var names []TraceEvent
		for e := first; e < len(tr.TraceEvents); e++ {
			ev := &tr.TraceEvents[e]
			d := ev.Tid
			ev.Tid = d*n + k
			if !named[ev.Tid] {
				named[ev.Tid] = true
				names = append(names,
					TraceEvent{Name: "thread_name", Ph: "M", Pid: ev.Pid, Tid: ev.Tid, Args: map[string]any{"name": fmt.Sprintf("device %d: %s", d, streams[k])}},
					TraceEvent{Name: "thread_sort_index", Ph: "M", Pid: ev.Pid, Tid: ev.Tid, Args: map[string]any{"sort_index": ev.Tid}})
			}
		}
		tr.TraceEvents = append(tr.TraceEvents, names...)
	}
}

// name adds the metadata events that name every node's process and, when
// devices is set, every device's track, ordered by device id.
func (tr *Trace) name(p *plan.Plan, perNode, pid0 int, what string, devices bool) {
	nodes := map[int]bool{}
	for _, d := range planDevices(p) {
		n := d / perNode
		if !nodes[n] {
			nodes[n] = true
			tr.TraceEvents = append(tr.TraceEvents,
				TraceEvent{Name: "process_name", Ph: "M", Pid: pid0 + n, Args: map[string]any{"name": fmt.Sprintf("node %d (%s)", n, what)}},
				TraceEvent{Name: "process_sort_index", Ph: "M", Pid: pid0 + n, Args: map[string]any{"sort_index": pid0 + n}})
		}
		if devices {
			tr.TraceEvents = append(tr.TraceEvents,
				TraceEvent{Name: "thread_name", Ph: "M", Pid: pid0 + n, Tid: d, Args: map[string]any{"name": fmt.Sprintf("device %d", d)}},
				TraceEvent{Name: "thread_sort_index", Ph: "M", Pid: pid0 + n, Tid: d, Args: map[string]any{"sort_index": d}})
		}
	}
}

// step adds one step's events, starting at `at` seconds and lasting sec,
// and returns sec.
func (tr *Trace) step(p *plan.Plan, s *plan.Step, perNode, pid0 int, at, sec float64, what string) float64 {
	args := map[string]any{"step": s.ID, "op": s.Expr, "input": s.Operands(), "output": s.Output, "time": what}
	if len(s.Teams) > 0 {
		args["teams"] = s.Teams
	}
	if s.Bytes != nil {
		args["bytes_received"] = s.Bytes.ReceivedPerDevice
		args["bytes_sent"] = s.Bytes.SentPerDevice
		args["bytes_lower_bound"] = s.Bytes.LowerBound
	}
	name := s.Type
	if phase := StepPhase(p, s); phase != "" {
		// A pipeline's micro-batch, forward or backward: the bars of a
		// stage's track spell its schedule (docs/pipeline.md).
		name = phase + " " + s.Type
		args["microbatch"] = phase
	}
	for _, d := range stepDevices(s) {
		tr.TraceEvents = append(tr.TraceEvents, TraceEvent{Name: name, Cat: s.Kind, Ph: "X",
			Ts: micros(at), Dur: micros(sec), Pid: pid0 + d/perNode, Tid: d, Args: args})
	}
	return sec
}

// micros converts seconds to the trace's microseconds, to the nanosecond.
func micros(sec float64) float64 { return math.Round(sec*1e9) / 1e3 }

// stepDevices lists the devices that run a step, sorted: its teams'
// members, or its devices.
func stepDevices(s *plan.Step) []int {
	ds := slices.Clone(s.Devices)
	for _, team := range s.Teams {
		ds = append(ds, team...)
	}
	slices.Sort(ds)
	return slices.Compact(ds)
}

// planDevices lists every device of p's meshes and steps, sorted.
func planDevices(p *plan.Plan) []int {
	var ds []int
	for _, m := range p.Meshes {
		ds = append(ds, m.Devices...)
	}
	for i := range p.Steps {
		ds = append(ds, stepDevices(&p.Steps[i])...)
	}
	slices.Sort(ds)
	return slices.Compact(ds)
}

// Write writes the trace as JSON, one event a line.
func (tr *Trace) Write(w io.Writer) error {
	if _, err := io.WriteString(w, "{\"displayTimeUnit\": \"ns\", \"traceEvents\": [\n"); err != nil {
		return err
	}
	for i, e := range tr.TraceEvents {
		b, err := json.Marshal(e)
		if err != nil {
			return err
		}
		sep := ",\n"
		if i == len(tr.TraceEvents)-1 {
			sep = "\n"
		}
		if _, err := fmt.Fprintf(w, "  %s%s", b, sep); err != nil {
			return err
		}
	}
	_, err := io.WriteString(w, "]}\n")
	return err
}

// ReadMeasured reads the measured step times from the JSON result of a
// program that `export torch` wrote, run with --bench and --json: its
// "steps" list of {"step", "measured_s"}. It checks that the result is of
// fusion.
func ReadMeasured(src []byte, fusion string) (Measured, error) {
	var run struct {
		Plan  string `json:"plan"`
		Steps []struct {
			Step     *int     `json:"step"`
			Measured *float64 `json:"measured_s"`
		} `json:"steps"`
	}
	if err := json.Unmarshal(src, &run); err != nil {
		return nil, fmt.Errorf("not a run's JSON result: %v", err)
	}
	if run.Plan != fusion {
		return nil, fmt.Errorf("the run is of %q, the plan of %q", run.Plan, fusion)
	}
	if len(run.Steps) == 0 {
		return nil, fmt.Errorf("the run has no measured steps: run the program with --bench N and --json FILE")
	}
	m := Measured{}
	for i, s := range run.Steps {
		if s.Step == nil || s.Measured == nil || *s.Measured < 0 {
			return nil, fmt.Errorf("steps[%d]: needs a step id and a non-negative measured_s", i)
		}
		m[*s.Step] = *s.Measured
	}
	return m, nil
}
