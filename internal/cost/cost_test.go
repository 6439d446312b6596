package cost

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nvcomm/nvcomm/internal/plan"
)

// update reports whether golden files are to be rewritten
// (NVCOMM_UPDATE=1 go test ./...).
var update = os.Getenv("NVCOMM_UPDATE") == "1"

const calibration = "testdata/nccl-h200-2gpu.csv"

// computeCalibration is the compute part of the built-in topology's
// calibration: one H200's products (calibrate.py's matmul rows).
const computeCalibration = "testdata/matmul-h200.csv"

// defaultSource documents the built-in topology's provenance.
const defaultSource = "nvlink: minimax relative-error fit (nvcomm calibrate --fit, messages >= 1 MiB, " +
	"outliers dropped) of internal/cost/testdata/nccl-h200-2gpu.csv (2x H200, NCCL 2.28.9, torch 2.11, NVLS off); " +
	"Gather and Scatter take SendRecv's parameters. network: assumed (one 400 Gb/s NIC a GPU), not measured. " +
	"memory: H200 device-to-device copy, about 4.3 TB/s read plus written. " +
	"compute: minimax relative-error fit of internal/cost/testdata/matmul-h200.csv (one H200, torch 2.11, " +
	"linear of normally distributed operands, sides 256 to 16384, products of 2·1024³ operations or more, device time); float64: the H200 SXM " +
	"datasheet's 67 TFLOPS. device_memory_bytes: torch.cuda.get_device_properties(0).total_memory on an H200 " +
	"(nvidia-smi: 143,771 MiB, 615 MiB of it reserved)."

// readSamples reads a calibration CSV.
func readSamples(tb testing.TB, path string) []Sample {
	tb.Helper()
	src, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	samples, err := ReadSamples(bytes.NewReader(src))
	if err != nil {
		tb.Fatalf("%s: %v", path, err)
	}
	return samples
}

func fitCalibration(t *testing.T) (*Topology, []FitPoint) {
	t.Helper()
	samples := append(readSamples(t, calibration), readSamples(t, computeCalibration)...)
	topo, points, err := Fit(samples, FitOptions{Name: "h200", Source: defaultSource, Base: Default()})
	if err != nil {
		t.Fatal(err)
	}
	return topo, points
}

// TestDefaultIsFit checks that the built-in topology is the fit of the
// calibration file; NVCOMM_UPDATE=1 rewrites h200.yaml.
func TestDefaultIsFit(t *testing.T) {
	topo, _ := fitCalibration(t)
	got, err := topo.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if update {
		if err := os.WriteFile("h200.yaml", got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if diff := cmp.Diff(string(DefaultYAML()), string(got)); diff != "" {
		t.Errorf("h200.yaml is not the fit of %s (-file +fit; NVCOMM_UPDATE=1 rewrites it):\n%s", calibration, diff)
	}
}

// TestDefaultWithinBand keeps the built-in model within 25% of every
// calibration measurement it is fitted to (messages of 1 MiB or more and
// products of 2·1024³ operations or more, outliers excepted), for every
// collective type and matmul dtype measured.
func TestDefaultWithinBand(t *testing.T) {
	_, points := fitCalibration(t)
	def := Default()
	types := map[string]bool{}
	for _, p := range points {
		if !p.Used {
			continue
		}
		types[p.Collective] = true
		pred := def.Collective(p.Link, p.Collective, p.Bytes, p.Ranks)
		if p.Link == LinkCompute {
			pred = def.Compute.Seconds(p.Collective, float64(p.Bytes))
		}
		if e := pred/p.Seconds - 1; math.Abs(e) > 0.25 {
			t.Errorf("%s %d B: predicted %.1f us, measured %.1f us (%+.0f%%)", p.Collective, p.Bytes, pred*1e6, p.Seconds*1e6, 100*e)
		}
	}
	if len(types) != 10 {
		t.Errorf("measured types = %v, want the 7 collectives and 3 dtypes of the calibration files", types)
	}
}

// TestOutliers lists the samples the fit drops as timing glitches.
func TestOutliers(t *testing.T) {
	_, points := fitCalibration(t)
	var got []string
	for _, p := range points {
		if p.Outlier && p.Bytes >= DefaultMinFitBytes {
			got = append(got, p.Collective)
		}
	}
	if diff := cmp.Diff([]string{plan.Allgather, plan.Broadcast}, got); diff != "" {
		t.Errorf("outliers >= 1 MiB (-want +got):\n%s", diff)
	}
}

func TestBusFactor(t *testing.T) {
	tests := map[string]struct {
		typ  string
		n    int
		want float64
	}{
		"allgather 4":     {plan.Allgather, 4, 0.75},
		"reducescatter 2": {plan.ReduceScatter, 2, 0.5},
		"allreduce 4":     {plan.Allreduce, 4, 1.5},
		"alltoall 8":      {plan.AllToAll, 8, 0.875},
		"gather 2":        {plan.Gather, 2, 0.5},
		"scatter 4":       {plan.Scatter, 4, 0.75},
		"broadcast 4":     {plan.Broadcast, 4, 1},
		"reduce 8":        {plan.Reduce, 8, 1},
		"sendrecv 2":      {plan.SendRecv, 2, 1},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := BusFactor(tc.typ, tc.n); got != tc.want {
				t.Errorf("BusFactor(%s, %d) = %v, want %v", tc.typ, tc.n, got, tc.want)
			}
		})
	}
}

// testTopology has round numbers: 100 GB/s and 10 us on NVLink (Allreduce
// 50 GB/s and 20 us; Broadcast 200 GB/s, 5 us and a 30 us launch floor;
// Reduce 400 GB/s and 40 us, and a low-latency line of 20 GB/s and 2 us),
// 10 GB/s and 50 us across 4-device nodes, 1000 GB/s and 1 us in memory.
func testTopology() *Topology {
	return &Topology{Format: 1, Name: "test", DevicesPerNode: 4,
		NVLink: Link{Params: Params{Bandwidth: 100, Latency: 10}, Collectives: map[string]Params{
			plan.Allreduce: {Bandwidth: 50, Latency: 20},
			plan.Broadcast: {Bandwidth: 200, Latency: 5, Launch: 30},
			plan.Reduce:    {Bandwidth: 400, Latency: 40, LowLatency: &Line{Bandwidth: 20, Latency: 2}},
		}},
		Network: Link{Params: Params{Bandwidth: 10, Latency: 50}},
		Memory:  Memory{Params: Params{Bandwidth: 1000, Latency: 1}},
	}
}

func TestStep(t *testing.T) {
	one := func(v int) *int { return &v }
	tests := map[string]struct {
		step plan.Step
		want StepTime
	}{
		"allgather nvlink": {
			plan.Step{Kind: plan.KindCollective, Type: plan.Allgather, Teams: [][]int{{0, 1, 2, 3}}, Count: plan.Count{Input: 1e6, Output: 4e6}},
			StepTime{Type: plan.Allgather, Link: LinkNVLink, Bytes: 16e6, Seconds: 10e-6 + 16e6*0.75/100e9},
		},
		"allreduce override": {
			plan.Step{Kind: plan.KindCollective, Type: plan.Allreduce, Teams: [][]int{{0, 1}}, Count: plan.Count{Input: 1e6, Output: 1e6}},
			StepTime{Type: plan.Allreduce, Link: LinkNVLink, Bytes: 4e6, Seconds: 20e-6 + 4e6/50e9},
		},
		"slowest team crosses nodes": {
			plan.Step{Kind: plan.KindCollective, Type: plan.ReduceScatter, Teams: [][]int{{0, 1}, {3, 4}}, Count: plan.Count{Input: 2e6, Output: 1e6}},
			StepTime{Type: plan.ReduceScatter, Link: LinkNetwork, Bytes: 8e6, Seconds: 50e-6 + 8e6*0.5/10e9},
		},
		"gather counts the whole team": {
			plan.Step{Kind: plan.KindCollective, Type: plan.Gather, Teams: [][]int{{1, 2, 0}}, Root: one(0), Count: plan.Count{Input: 1000, Output: 2000}},
			StepTime{Type: plan.Gather, Link: LinkNVLink, Bytes: 12000, Seconds: 10e-6 + 12000*2.0/3/100e9},
		},
		"sendrecv to itself copies": {
			plan.Step{Kind: plan.KindCollective, Type: plan.SendRecv, Teams: [][]int{{2, 2}}, Root: one(2), Count: plan.Count{Input: 1000, Output: 1000}},
			StepTime{Type: plan.SendRecv, Link: LinkMemory, Bytes: 8000, Seconds: 1e-6 + 8000/1000e9},
		},
		"low-latency line": {
			plan.Step{Kind: plan.KindCollective, Type: plan.Reduce, Teams: [][]int{{0, 1}}, Root: one(0), Count: plan.Count{Input: 1000, Output: 1000}},
			StepTime{Type: plan.Reduce, Link: LinkNVLink, Bytes: 4000, Seconds: 2e-6 + 4000/20e9},
		},
		"low-latency line, main line faster": {
			plan.Step{Kind: plan.KindCollective, Type: plan.Reduce, Teams: [][]int{{0, 1}}, Root: one(0), Count: plan.Count{Input: 1e7, Output: 1e7}},
			StepTime{Type: plan.Reduce, Link: LinkNVLink, Bytes: 4e7, Seconds: 40e-6 + 4e7/400e9},
		},
		"launch floor": {
			plan.Step{Kind: plan.KindCollective, Type: plan.Broadcast, Teams: [][]int{{0, 1}}, Root: one(0), Count: plan.Count{Input: 1000, Output: 1000}},
			StepTime{Type: plan.Broadcast, Link: LinkNVLink, Bytes: 4000, Seconds: 30e-6},
		},
		"launch floor, link-bound": {
			plan.Step{Kind: plan.KindCollective, Type: plan.Broadcast, Teams: [][]int{{0, 1}}, Root: one(0), Count: plan.Count{Input: 1e7, Output: 1e7}},
			StepTime{Type: plan.Broadcast, Link: LinkNVLink, Bytes: 4e7, Seconds: 5e-6 + 4e7/200e9},
		},
		"permute": {
			plan.Step{Kind: plan.KindLocal, Type: plan.Permute, Devices: []int{0}, Count: plan.Count{Input: 1000, Output: 1000}},
			StepTime{Type: plan.Permute, Link: LinkMemory, Bytes: 8000, Seconds: 1e-6 + 8000/1000e9},
		},
	}
	p := &plan.Plan{Tensors: []plan.Tensor{{Name: "a", DType: "float32"}, {Name: "b", DType: "float32"}},
		Ops: []plan.Op{{Input: "a", Output: "b"}}}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := testTopology().Step(p, &tc.step)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got, cmp.Comparer(approx)); diff != "" {
				t.Errorf("Step mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestStepOverflow prices steps whose bytes reach int64's limit (issue 10):
// exact up to it, an error naming the step past it, never a wrapped count.
func TestStepOverflow(t *testing.T) {
	type result struct {
		Bytes int64
		Err   string
	}
	const quarter = 1 << 61 // float32 elements: 2^63 bytes
	tests := map[string]struct {
		step plan.Step
		want result
	}{
		"local at the limit": {
			plan.Step{ID: 3, Kind: plan.KindLocal, Type: plan.Copy, Devices: []int{0}, Count: plan.Count{Input: quarter/2 - 1, Output: quarter / 2}},
			result{Bytes: 1<<63 - 4},
		},
		"local in plus out": {
			plan.Step{ID: 3, Kind: plan.KindLocal, Type: plan.Copy, Devices: []int{0}, Count: plan.Count{Input: quarter / 2, Output: quarter / 2}},
			result{Err: "step 3 (Copy): its bytes exceed 9223372036854775807, the most nvcomm counts (int64); price the plan without a topology (--topology none)"},
		},
		"local count times size": {
			plan.Step{ID: 4, Kind: plan.KindLocal, Type: plan.Permute, Devices: []int{0}, Count: plan.Count{Input: quarter, Output: 0}},
			result{Err: "step 4 (Permute): its bytes exceed 9223372036854775807, the most nvcomm counts (int64); price the plan without a topology (--topology none)"},
		},
		"allgather team times input": {
			plan.Step{ID: 5, Kind: plan.KindCollective, Type: plan.Allgather, Teams: [][]int{{0, 1, 2, 3}}, Count: plan.Count{Input: quarter / 4, Output: quarter}},
			result{Err: "step 5 (Allgather): its bytes exceed 9223372036854775807, the most nvcomm counts (int64); price the plan without a topology (--topology none)"},
		},
		"allgather at the limit": {
			plan.Step{ID: 5, Kind: plan.KindCollective, Type: plan.Allgather, Teams: [][]int{{0, 1, 2, 3}}, Count: plan.Count{Input: quarter/4 - 1, Output: quarter - 4}},
			result{Bytes: 1<<63 - 16},
		},
		"sendrecv to itself": {
			plan.Step{ID: 6, Kind: plan.KindCollective, Type: plan.SendRecv, Teams: [][]int{{2, 2}}, Count: plan.Count{Input: quarter / 2, Output: quarter / 2}},
			result{Err: "step 6 (SendRecv): its bytes exceed 9223372036854775807, the most nvcomm counts (int64); price the plan without a topology (--topology none)"},
		},
	}
	p := &plan.Plan{Tensors: []plan.Tensor{{Name: "a", DType: "float32"}, {Name: "b", DType: "float32"}},
		Ops: []plan.Op{{Input: "a", Output: "b"}}}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			st, err := testTopology().Step(p, &tc.step)
			got := result{Bytes: st.Bytes}
			if err != nil {
				got = result{Err: err.Error()}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Step mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func approx(a, b float64) bool { return math.Abs(a-b) <= 1e-12*math.Max(math.Abs(a), math.Abs(b)) }

// TestPredictConformance prices every conformance plan with the built-in
// topology: every step gets a positive time.
func TestPredictConformance(t *testing.T) {
	files, _ := filepath.Glob("../../testdata/conformance/*.json")
	if len(files) == 0 {
		t.Fatal("no conformance plans")
	}
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		p, err := plan.Decode(f, src)
		if err != nil {
			t.Fatal(err)
		}
		pr, err := Predict(Default(), p)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, st := range pr.Steps {
			if !(st.Seconds > 0) {
				t.Errorf("%s: step %d predicted %v s", f, st.Step, st.Seconds)
			}
		}
	}
}

func TestLess(t *testing.T) {
	small := &plan.Plan{Tensors: []plan.Tensor{{Name: "a", DType: "float32"}, {Name: "b", DType: "float32"}},
		Ops:     []plan.Op{{Input: "a", Output: "b"}},
		Summary: plan.Summary{BytesReceivedMax: 100}}
	big := *small
	big.Summary.BytesReceivedMax = 200
	slow := *small
	slow.Steps = []plan.Step{{Kind: plan.KindLocal, Type: plan.Copy, Devices: []int{0}, Count: plan.Count{Input: 10, Output: 10}}}
	tests := map[string]struct {
		a, b *plan.Plan
		want bool
	}{
		"fewer bytes":             {small, &big, true},
		"more bytes":              {&big, small, false},
		"tie broken by time":      {small, &slow, true},
		"tie, slower is not less": {&slow, small, false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := Less(testTopology(), tc.a, tc.b)
			if err != nil || got != tc.want {
				t.Errorf("Less = %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

func TestParseTopologyErrors(t *testing.T) {
	tests := map[string]struct {
		src, want string
	}{
		"empty":                {"", "empty topology file"},
		"unknown field":        {"format: 1\nbogus: 2\n", "field bogus not found"},
		"bad format":           {strings.Replace(string(DefaultYAML()), "format: 1", "format: 2", 1), "format must be 1"},
		"negative bandwidth":   {strings.Replace(string(DefaultYAML()), "devices_per_node: 8", "devices_per_node: 0", 1), "devices_per_node must be at least 1"},
		"unknown collective":   {"format: 1\ndevices_per_node: 1\nnvlink: {bandwidth_gbps: 1, latency_us: 1, collectives: {Allgathr: {bandwidth_gbps: 1, latency_us: 1}}}\nnetwork: {bandwidth_gbps: 1, latency_us: 1}\nmemory: {bandwidth_gbps: 1, latency_us: 1}\n", `unknown collective "Allgathr"`},
		"negative launch":      {"format: 1\ndevices_per_node: 1\nnvlink: {bandwidth_gbps: 1, latency_us: 1, launch_us: -1}\nnetwork: {bandwidth_gbps: 1, latency_us: 1}\nmemory: {bandwidth_gbps: 1, latency_us: 1}\n", "nvlink: launch_us must be non-negative"},
		"bad low-latency line": {"format: 1\ndevices_per_node: 1\nnvlink: {bandwidth_gbps: 1, latency_us: 1, low_latency: {bandwidth_gbps: 0, latency_us: 1}}\nnetwork: {bandwidth_gbps: 1, latency_us: 1}\nmemory: {bandwidth_gbps: 1, latency_us: 1}\n", "nvlink.low_latency: bandwidth_gbps must be positive"},
		"zero bandwidth":       {"format: 1\ndevices_per_node: 1\nnvlink: {bandwidth_gbps: 0, latency_us: 1}\nnetwork: {bandwidth_gbps: 1, latency_us: 1}\nmemory: {bandwidth_gbps: 1, latency_us: 1}\n", "nvlink: bandwidth_gbps must be positive"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := ParseTopology("t.yaml", []byte(tc.src))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("ParseTopology error = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestReadSamplesErrors(t *testing.T) {
	tests := map[string]string{
		"no header":          "allgather,2,1024,1e-5\n",
		"unknown collective": "collective,ranks,bytes,seconds\nallgathr,2,1024,1e-5\n",
		"bad link":           "collective,ranks,bytes,seconds,link\nallgather,2,1024,1e-5,pcie\n",
		"one rank":           "collective,ranks,bytes,seconds\nallgather,1,1024,1e-5\n",
	}
	for name, src := range tests {
		t.Run(name, func(t *testing.T) {
			if _, err := ReadSamples(strings.NewReader(src)); err == nil {
				t.Errorf("ReadSamples(%q) succeeded, want an error", src)
			}
		})
	}
}

// TestFitRecoversModel fits samples drawn from known parameters: with and
// without a launch floor, the fit finds them again.
func TestFitRecoversModel(t *testing.T) {
	tests := map[string]Params{
		"no floor":              {Bandwidth: 300, Latency: 20},
		"launch floor":          {Bandwidth: 250, Latency: 10, Launch: 50},
		"low-latency line":      {Bandwidth: 300, Latency: 60, LowLatency: &Line{Bandwidth: 50, Latency: 5}},
		"floor and low latency": {Bandwidth: 300, Latency: 60, LowLatency: &Line{Bandwidth: 50, Latency: 5}, Launch: 25},
	}
	for name, want := range tests {
		t.Run(name, func(t *testing.T) {
			var samples []Sample
			for S := int64(1 << 20); S <= 1<<30; S *= 2 {
				samples = append(samples, Sample{Collective: plan.Allgather, Ranks: 2, Bytes: S, Link: LinkNVLink,
					Seconds: want.Seconds(float64(S) * BusFactor(plan.Allgather, 2))})
			}
			topo, points, err := Fit(samples, FitOptions{})
			if err != nil {
				t.Fatal(err)
			}
			got := topo.NVLink.For(plan.Allgather)
			near := cmp.Comparer(func(a, b float64) bool { return math.Abs(a-b) <= 0.01*math.Max(math.Abs(a), math.Abs(b))+0.2 })
			if diff := cmp.Diff(want, got, near); diff != "" {
				t.Errorf("fitted parameters (-want +got):\n%s", diff)
			}
			for _, p := range points {
				if math.Abs(p.RelErr()) > 0.01 {
					t.Errorf("%d B: predicted %.2f us, measured %.2f us", p.Bytes, p.Predicted*1e6, p.Seconds*1e6)
				}
			}
		})
	}
}

// BenchmarkFit fits the calibration file (6 sizes of 1 MiB or more for
// each of 7 collective types).
func BenchmarkFit(b *testing.B) {
	samples := readSamples(b, calibration)
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := Fit(samples, FitOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

// TestDeviceSweepWithinBand fits the device-time calibration measured on
// 2×H200 (docs/export-results/calibration-queued.csv, sizes by 2) and holds
// the fit to the size sweep measured in the same job (sweep.csv: nine
// collective types, 21 sizes from 1 MiB to 1 GiB, half of them between the
// calibration's samples, three runs): within 25% everywhere.
func TestDeviceSweepWithinBand(t *testing.T) {
	const dir = "../../docs/export-results/"
	topo, _, err := Fit(readSamples(t, dir+"calibration-queued.csv"), FitOptions{DevicesPerNode: 2})
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile(dir + "sweep.csv")
	if err != nil {
		t.Fatal(err)
	}
	types := map[string]string{
		"allgather": plan.Allgather, "reduce_scatter": plan.ReduceScatter, "allreduce": plan.Allreduce,
		"alltoall": plan.AllToAll, "broadcast": plan.Broadcast, "reduce": plan.Reduce,
		"gather": plan.Gather, "scatter": plan.Scatter, "sendrecv": plan.SendRecv,
	}
	name := regexp.MustCompile(`^(.+)_(\d+)kib$`)
	worst := map[string]float64{}
	for _, line := range strings.Split(strings.TrimSpace(string(src)), "\n")[1:] {
		// timing,run,plan,pass,step,type,measured_s,predicted_s
		rec := strings.Split(line, ",")
		m := name.FindStringSubmatch(rec[2])
		if rec[0] != "queued" || m == nil {
			continue
		}
		kib, _ := strconv.ParseInt(m[2], 10, 64)
		measured, err := strconv.ParseFloat(rec[6], 64)
		if err != nil || types[m[1]] == "" || rec[3] != "true" {
			t.Fatalf("sweep.csv: bad record %q", line)
		}
		pred := topo.Collective(LinkNVLink, types[m[1]], kib*1024, 2)
		e := math.Abs(pred/measured - 1)
		worst[m[1]] = max(worst[m[1]], e)
		if e > 0.25 {
			t.Errorf("%s: predicted %.1f us, measured %.1f us", rec[2], pred*1e6, measured*1e6)
		}
	}
	if len(worst) != len(types) {
		t.Errorf("sweep types = %v, want all nine", worst)
	}
	t.Logf("largest error per type: %v", worst)
}

// TestMatmulRoofline checks that a Matmul step costs the longer of its
// memory traffic and its dtype's compute line (α plus the multiply-adds at
// the line's throughput), and only its memory traffic for a dtype the
// topology does not list.
func TestMatmulRoofline(t *testing.T) {
	matmul := func(dims ...int) plan.Step {
		in, out := dims[0]*dims[1]*dims[2], dims[0]*dims[1]*dims[3]
		return plan.Step{ID: 1, Kind: plan.KindLocal, Type: plan.Matmul, Devices: []int{0}, Dims: dims, Count: plan.Count{Input: in, Output: out}}
	}
	tests := map[string]struct {
		dtype string
		step  plan.Step
		want  float64 // seconds
	}{
		// 7.4 µs and 2·4096³ multiply-adds at 719.3 TFLOPS; 64 MiB of memory is 16.8 µs.
		"large bfloat16 is compute-bound": {"bfloat16", matmul(1, 4096, 4096, 4096), 7.4e-6 + 2*4096*4096*4096/719.3e12},
		"large float32 at 48 TFLOPS":      {"float32", matmul(1, 4096, 4096, 4096), 17.7e-6 + 2*4096*4096*4096/48e12},
		// Its α, not its memory's 10 µs, bounds a small float32 product.
		"small float32 pays α": {"float32", matmul(1, 64, 64, 64), 17.7e-6 + 2*64*64*64/48e12},
		// A thin product moves more bytes than it computes.
		"thin product is memory-bound": {"bfloat16", matmul(1, 1<<20, 8, 1), 10e-6 + 2*float64(1<<20*8+1<<20)/4000e9},
		"unlisted dtype: memory only":  {"int32", matmul(1, 64, 64, 64), 10e-6 + 4*float64(2*64*64)/4000e9},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			p := &plan.Plan{Tensors: []plan.Tensor{{Name: "a", DType: tc.dtype}, {Name: "b", DType: tc.dtype}},
				Ops: []plan.Op{{Input: "a", Output: "b"}}}
			st, err := Default().Step(p, &tc.step)
			if err != nil {
				t.Fatal(err)
			}
			if !approx(st.Seconds, tc.want) {
				t.Errorf("%g s, want %g s", st.Seconds, tc.want)
			}
		})
	}
}
