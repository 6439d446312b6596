package cost

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nvcomm/nvcomm/internal/plan"
)

// TestSchedule: in a plan of format 2, a step starts when its stream is
// free on each of its devices and the steps it waits for have finished;
// the plan's time is the makespan. Format 1's steps run one after another.
func TestSchedule(t *testing.T) {
	local := func(devs []int, after ...int) plan.Step {
		return plan.Step{Kind: plan.KindLocal, Type: plan.Matmul, Devices: devs, After: after}
	}
	copying := func(devs []int, after ...int) plan.Step {
		return plan.Step{Kind: plan.KindLocal, Type: plan.Copy, Devices: devs, After: after}
	}
	coll := func(team []int, after ...int) plan.Step {
		return plan.Step{Kind: plan.KindCollective, Type: plan.Allgather, Teams: [][]int{team}, After: after}
	}
	all := []int{0, 1, 2, 3}
	tests := map[string]struct {
		steps  []plan.Step
		times  []float64
		starts []float64
		slowed []float64 // nil: none
		total  float64
	}{
		"a collective beside a computation": { // each slowed by 0.2 × the 60 they share
			steps: []plan.Step{local(all), coll(all), local(all, 1)}, times: []float64{100, 60, 100},
			starts: []float64{0, 0, 112}, slowed: []float64{12, 12, 0}, total: 212},
		"a collective beside a copy": { // no contention: only a Matmul contends
			steps: []plan.Step{copying(all), coll(all), copying(all, 1)}, times: []float64{100, 60, 100},
			starts: []float64{0, 0, 100}, total: 200},
		"collectives beside a computation on one of their devices": { // each shares 40 with the second Matmul, on device 2
			steps: []plan.Step{local([]int{2}), coll(all, 0), coll(all), local([]int{2})}, times: []float64{100, 40, 40, 100},
			starts: []float64{0, 100, 148, 100}, slowed: []float64{0, 8, 8, 16}, total: 216},
		"waiting for the computation": {
			steps: []plan.Step{local(all), coll(all, 0), local(all, 1)}, times: []float64{100, 60, 100},
			starts: []float64{0, 100, 160}, total: 260},
		"one stream in list order": {
			steps: []plan.Step{coll(all), coll(all), copying(all)}, times: []float64{50, 50, 30},
			starts: []float64{0, 50, 0}, total: 100},
		"devices apart": {
			steps: []plan.Step{local([]int{0, 1}), local([]int{2, 3}), local(all)}, times: []float64{40, 70, 10},
			starts: []float64{0, 0, 70}, total: 80},
		"a stream of its own": {
			steps: []plan.Step{coll(all), {Kind: plan.KindCollective, Type: plan.Allgather, Teams: [][]int{all}, Stream: "comm2"}},
			times: []float64{50, 50}, starts: []float64{0, 0}, total: 50},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			p := &plan.Plan{Format: plan.FormatGraph, Steps: tc.steps}
			times := make([]StepTime, len(tc.times))
			for i, x := range tc.times {
				times[i].Seconds = x
			}
			total := Schedule(p, times)
			var starts, slowed []float64
			for _, st := range times {
				starts = append(starts, round(st.Start, 9))
				slowed = append(slowed, round(st.Slowed, 9))
			}
			if tc.slowed == nil {
				tc.slowed = make([]float64, len(times))
			}
			if diff := cmp.Diff(tc.starts, starts); diff != "" || round(total, 9) != tc.total {
				t.Errorf("makespan %v, want %v; starts (-want +got):\n%s", total, tc.total, diff)
			}
			if diff := cmp.Diff(tc.slowed, slowed); diff != "" {
				t.Errorf("slowed (-want +got):\n%s", diff)
			}
		})
	}
}

// TestPredictGraph: Predict gives a plan of format 2 its makespan, and one
// of format 1 the sum of its steps.
func TestPredictGraph(t *testing.T) {
	p := &plan.Plan{Format: plan.Format, Tensors: []plan.Tensor{{Name: "a", DType: "float32"}, {Name: "b", DType: "float32"}},
		Ops: []plan.Op{{Input: "a", Output: "b"}}}
	for i := range 2 {
		p.Steps = append(p.Steps, plan.Step{ID: i, Kind: plan.KindCollective, Type: plan.Allgather, Teams: [][]int{{0, 1}},
			Input: "a", Output: "b", Count: plan.Count{Input: 1 << 20, Output: 2 << 20}})
	}
	seq, err := Predict(Default(), p)
	if err != nil {
		t.Fatal(err)
	}
	p.Format, p.Steps[1].Stream = plan.FormatGraph, "comm2"
	graph, err := Predict(Default(), p)
	if err != nil {
		t.Fatal(err)
	}
	one := seq.Steps[0].Seconds
	if !approx(seq.Total, 2*one) || !approx(graph.Total, one) || graph.Steps[1].Start != 0 {
		t.Errorf("format 1: %g s, format 2: %g s (second step at %g s); want %g and %g, at 0", seq.Total, graph.Total, graph.Steps[1].Start, 2*one, one)
	}
}
