package explain

import (
	"bytes"
	"encoding/json"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nvcomm/nvcomm/internal/cost"
)

// TestTrace checks the trace of every example: it is JSON with the Trace
// Event fields, every step's events lie on the tracks of exactly the
// devices that run it, on the process of their node, and the last event
// ends at the predicted total; with a run, the measured tracks repeat the
// steps with the measured times.
func TestTrace(t *testing.T) {
	for _, name := range []string{"megatron_mlp", "dp_tp_mlp", "gpu2_sendrecv_swap", "sequence_parallel_mlp"} {
		p := decode(t, "../../testdata/examples/"+name+".optimal.json")
		topo := cost.Default()
		topo.DevicesPerNode = 2 // several nodes, so that process ids matter
		pr, err := cost.Predict(topo, p)
		if err != nil {
			t.Fatal(err)
		}
		measured := Measured{}
		for _, s := range p.Steps {
			measured[s.ID] = 1e-6 * float64(s.ID+1)
		}
		tr, err := NewTrace(p, pr, topo, measured)
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		if err := tr.Write(&b); err != nil {
			t.Fatal(err)
		}
		var got struct {
			TraceEvents []map[string]any `json:"traceEvents"`
		}
		if err := json.Unmarshal(b.Bytes(), &got); err != nil {
			t.Fatalf("%s: not JSON: %v\n%s", name, err, b.String())
		}
		byStep := map[[2]int][]int{} // (pid set, step) -> devices
		end := map[int]float64{}     // pid set -> last end
		for _, e := range got.TraceEvents {
			for _, f := range []string{"name", "ph", "ts", "pid", "tid"} {
				if _, ok := e[f]; !ok {
					t.Fatalf("%s: event without %q: %v", name, f, e)
				}
			}
			if e["ph"] != "X" {
				continue
			}
			pid, tid := int(e["pid"].(float64)), int(e["tid"].(float64))
			set := pid / measuredPid
			if pid%measuredPid != tid/topo.DevicesPerNode {
				t.Errorf("%s: device %d's event on process %d", name, tid, pid)
			}
			step := int(e["args"].(map[string]any)["step"].(float64))
			byStep[[2]int{set, step}] = append(byStep[[2]int{set, step}], tid)
			end[set] = max(end[set], e["ts"].(float64)+e["dur"].(float64))
		}
		for _, s := range p.Steps {
			for set := range 2 {
				got := byStep[[2]int{set, s.ID}]
				slices.Sort(got)
				if diff := cmp.Diff(stepDevices(&s), got); diff != "" {
					t.Errorf("%s: step %d's tracks (set %d) (-want +got):\n%s", name, s.ID, set, diff)
				}
			}
		}
		if math.Abs(end[0]-pr.Total*1e6) > 1e-3*float64(len(p.Steps)) {
			t.Errorf("%s: predicted events end at %g µs, the total is %g µs", name, end[0], pr.Total*1e6)
		}
		n := float64(len(p.Steps))
		if want := n * (n + 1) / 2; math.Abs(end[1]-want) > 1e-6 {
			t.Errorf("%s: measured events end at %g µs, want %g", name, end[1], want)
		}
	}
}

func TestReadMeasured(t *testing.T) {
	tests := map[string]struct {
		src  string
		want Measured
		err  string
	}{
		"ok":          {`{"plan": "f", "steps": [{"step": 0, "type": "Allgather", "measured_s": 2e-5, "predicted_s": 1e-5}]}`, Measured{0: 2e-5}, ""},
		"other plan":  {`{"plan": "g", "steps": []}`, nil, `the run is of "g", the plan of "f"`},
		"no bench":    {`{"plan": "f", "steps": []}`, nil, "--bench"},
		"not json":    {`PASS`, nil, "not a run's JSON result"},
		"no measured": {`{"plan": "f", "steps": [{"step": 0}]}`, nil, "steps[0]: needs"},
		"negative":    {`{"plan": "f", "steps": [{"step": 0, "measured_s": -1}]}`, nil, "non-negative"},
	}
	for name, tc := range tests {
		got, err := ReadMeasured([]byte(tc.src), "f")
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: error %v, want %q", name, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", name, diff)
		}
	}
}

// TestTraceMissingStep: a run without a step's time is an error.
func TestTraceMissingStep(t *testing.T) {
	p := decode(t, "../../testdata/examples/megatron_mlp.optimal.json")
	pr, err := cost.Predict(cost.Default(), p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewTrace(p, pr, cost.Default(), Measured{0: 1}); err == nil || !strings.Contains(err.Error(), "no measured time of step 1") {
		t.Errorf("error %v", err)
	}
	pr.Steps = pr.Steps[1:]
	if _, err := NewTrace(p, pr, cost.Default(), nil); err == nil {
		t.Error("no error for a prediction of other steps")
	}
}
