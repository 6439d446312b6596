package sim

import (
	"encoding/json"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/nvcomm/nvcomm/internal/plan"
)

// seedPlan is the seed PR's non-contiguous Allgather: tv0 [2, 12] with a DID
// loop split of axis 1 on four devices, tv1 = set(tv0) unsharded.
func seedPlan() *plan.Plan {
	return &plan.Plan{
		Format: 1, Fusion: "allgather_noncontiguous", Policy: "nvfuser",
		Meshes: map[string]plan.Mesh{"m": mesh1(0, 1, 2, 3)},
		Tensors: []plan.Tensor{
			{Name: "tv0", DType: "float32", Mesh: "m", Shape: []int{2, 12},
				Schedule: []plan.ScheduleStep{osplit(1, 4), par(1, "DIDx")}},
			{Name: "tv1", DType: "float32", Mesh: "m", Shape: []int{2, 12}},
		},
		Ops: []plan.Op{{Index: 0, Op: "set", Input: "tv0", Output: "tv1"}},
		Steps: []plan.Step{
			permuteStep3(0, "tv0", "tv1/in", []int{2, 3}, []int{1, 0}),
			{ID: 1, Kind: plan.KindCollective, Type: plan.Allgather, Teams: [][]int{{0, 1, 2, 3}},
				Input: "tv1/in", Output: "tv1/gathered", Axis: ip(1), Count: plan.Count{Input: 6, Output: 24},
				Bytes: &plan.Bytes{SentPerDevice: 72, ReceivedPerDevice: 72}},
			permuteStep3(2, "tv1/gathered", "tv1", []int{4, 3, 2}, []int{2, 0, 1}),
		},
		Summary: plan.Summary{BytesReceivedMax: 72},
	}
}

func permuteStep3(id int, in, out string, dims, perm []int) plan.Step {
	n := product(dims)
	return plan.Step{ID: id, Kind: plan.KindLocal, Type: plan.Permute, Devices: []int{0, 1, 2, 3},
		Input: in, Output: out, Count: plan.Count{Input: n, Output: n}, Dims: dims, Perm: perm}
}

// bareAllgather is the seed plan without the permutes: the flat
// concatenation orders the data wrongly.
func bareAllgather() *plan.Plan {
	p := seedPlan()
	ag := p.Steps[1]
	ag.ID, ag.Input, ag.Output = 0, "tv0", "tv1"
	p.Steps = []plan.Step{ag}
	return p
}

func TestRunSeedAllgather(t *testing.T) {
	res, err := Run(seedPlan(), Options{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	want := &Result{
		Pass: true,
		Steps: []StepTraffic{
			{Step: 0, Type: "Permute"},
			{Step: 1, Type: "Allgather", Sent: 72, Received: 72},
			{Step: 2, Type: "Permute"},
		},
		DeviceReceived: map[int]int64{0: 72, 1: 72, 2: 72, 3: 72},
		MaxReceived:    72,
		TotalSent:      288,
	}
	if diff := cmp.Diff(want, res); diff != "" {
		t.Errorf("Run (-want +got):\n%s", diff)
	}
}

func TestRunBareAllgatherFails(t *testing.T) {
	res, err := Run(bareAllgather(), Options{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if res.Pass || res.Mismatch == nil {
		t.Fatalf("Run passed, want a mismatch")
	}
	// Device 0's buffer starts with its own two rows of three; the
	// fourth element should be tv0[0, 3] but is tv0[1, 0].
	want := &Mismatch{Op: 0, Step: 0, Tensor: "tv1", Device: 0, FlatIndex: 3, LogicalIndex: []int{0, 3}, Reason: "value differs"}
	if diff := cmp.Diff(want, res.Mismatch, cmpopts.IgnoreFields(Mismatch{}, "Expected", "Actual")); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}
	ref := inputData(1, 0, 24, Wide, 0)
	if float64(res.Mismatch.Expected) != ref[3] || float64(res.Mismatch.Actual) != ref[12] {
		t.Errorf("expected, actual = %v, %v; want tv0[0,3] = %v, tv0[1,0] = %v", res.Mismatch.Expected, res.Mismatch.Actual, ref[3], ref[12])
	}
}

// reductionPlan is tv1 = sum(tv0, axis 0) with tv0 [4, 6] block-sharded on
// axis 0 over two devices: a local reduction, then the given collective
// into tv1, whose schedule is out.
func reductionPlan(op string, out []plan.ScheduleStep, last plan.Step, bytes int64) *plan.Plan {
	last.ID, last.Input, last.Output, last.ReduceOp = 1, "tv1/partial", "tv1", sp(op)
	last.Kind, last.Bytes = plan.KindCollective, &plan.Bytes{SentPerDevice: bytes, ReceivedPerDevice: bytes}
	return &plan.Plan{
		Format: 1, Meshes: map[string]plan.Mesh{"m": mesh1(0, 1)},
		Tensors: []plan.Tensor{
			{Name: "tv0", DType: "float32", Mesh: "m", Shape: []int{4, 6}, Schedule: []plan.ScheduleStep{osplit(0, 2), par(0, "DIDx")}},
			{Name: "tv1", DType: "float32", Mesh: "m", Shape: []int{4, 6}, ReductionAxes: []int{0}, Schedule: out},
		},
		Ops: []plan.Op{{Index: 0, Op: op, Input: "tv0", Output: "tv1", Axis: ip(0)}},
		Steps: []plan.Step{
			{ID: 0, Kind: plan.KindLocal, Type: plan.LocalReduce, Devices: []int{0, 1}, ReduceOp: sp(op),
				Input: "tv0", Output: "tv1/partial", Count: plan.Count{Input: 12, Output: 6}, Dims: []int{2, 6}, ReduceDims: []int{0}},
			last,
		},
		Summary: plan.Summary{BytesReceivedMax: bytes},
	}
}

func TestRunPasses(t *testing.T) {
	sharded := []plan.ScheduleStep{osplit(1, 2), par(1, "DIDx")}
	tests := map[string]*plan.Plan{
		"seed plan":       seedPlan(),
		"sum, Allreduce":  reductionPlan("sum", nil, plan.Step{Type: plan.Allreduce, Teams: [][]int{{0, 1}}, Count: plan.Count{Input: 6, Output: 6}}, 24),
		"prod, Allreduce": reductionPlan("prod", nil, plan.Step{Type: plan.Allreduce, Teams: [][]int{{0, 1}}, Count: plan.Count{Input: 6, Output: 6}}, 24),
		"max, ReduceScatter": reductionPlan("max", sharded,
			plan.Step{Type: plan.ReduceScatter, Teams: [][]int{{0, 1}}, Count: plan.Count{Input: 6, Output: 3}}, 12),
		"scatter to another mesh":                    scatterPlan(),
		"gather to a root outside the mesh":          gatherPlan(),
		"column-major output needs no final permute": columnMajorPlan(),
		"merged shards, copied":                      mergedSetPlan(),
	}
	for name, p := range tests {
		t.Run(name, func(t *testing.T) {
			for seed := range uint64(3) {
				res, err := Run(p, Options{Seed: seed})
				if err != nil {
					t.Fatal(err)
				}
				if !res.Pass {
					t.Fatalf("seed %d: %v", seed, res.Mismatch)
				}
			}
		})
	}
}

// columnMajorPlan is the seed plan with tv1 stored column-major: the
// Allgather of the transposed blocks already is tv1's layout.
func columnMajorPlan() *plan.Plan {
	p := seedPlan()
	p.Tensors[1].Allocation = []int{1, 0}
	p.Steps = p.Steps[:2]
	p.Steps[1].Output = "tv1"
	return p
}

// scatterPlan sets an unsharded tv0 on mesh [0] into tv1 block-sharded on
// mesh [0, 1].
func scatterPlan() *plan.Plan {
	return &plan.Plan{
		Format: 1, Meshes: map[string]plan.Mesh{"a": mesh1(0), "b": mesh1(0, 1)},
		Tensors: []plan.Tensor{
			{Name: "tv0", DType: "float16", Mesh: "a", Shape: []int{4}},
			{Name: "tv1", DType: "float16", Mesh: "b", Shape: []int{4}, Schedule: []plan.ScheduleStep{osplit(0, 2), par(0, "DIDx")}},
		},
		Ops: []plan.Op{{Index: 0, Op: "set", Input: "tv0", Output: "tv1"}},
		Steps: []plan.Step{{ID: 0, Kind: plan.KindCollective, Type: plan.Scatter, Teams: [][]int{{0, 1}}, Root: ip(0),
			Input: "tv0", Output: "tv1", Count: plan.Count{Input: 4, Output: 2}, Bytes: &plan.Bytes{SentPerDevice: 4, ReceivedPerDevice: 4}}},
		Summary: plan.Summary{BytesReceivedMax: 4},
	}
}

// gatherPlan sets tv0, block-sharded on mesh [0, 1], into tv1 unsharded on
// mesh [2]: one Gather rooted at 2, which holds no input.
func gatherPlan() *plan.Plan {
	return &plan.Plan{
		Format: 1, Meshes: map[string]plan.Mesh{"a": mesh1(0, 1), "b": mesh1(2)},
		Tensors: []plan.Tensor{
			{Name: "tv0", DType: "int64", Mesh: "a", Shape: []int{6}, Schedule: []plan.ScheduleStep{osplit(0, 2), par(0, "DIDx")}},
			{Name: "tv1", DType: "int64", Mesh: "b", Shape: []int{6}},
		},
		Ops: []plan.Op{{Index: 0, Op: "set", Input: "tv0", Output: "tv1"}},
		Steps: []plan.Step{{ID: 0, Kind: plan.KindCollective, Type: plan.Gather, Teams: [][]int{{0, 1, 2}}, Root: ip(2),
			Input: "tv0", Output: "tv1", Count: plan.Count{Input: 3, Output: 6}, Bytes: &plan.Bytes{SentPerDevice: 24, ReceivedPerDevice: 48}}},
		Summary: plan.Summary{BytesReceivedMax: 48},
	}
}

func TestRunMismatches(t *testing.T) {
	noSteps := seedPlan()
	noSteps.Steps, noSteps.Summary.BytesReceivedMax = nil, 0
	wrongOp := reductionPlan("sum", nil, plan.Step{Type: plan.Allreduce, Teams: [][]int{{0, 1}}, Count: plan.Count{Input: 6, Output: 6}}, 24)
	wrongOp.Steps[1].ReduceOp = sp("max")
	missing := seedPlan()
	missing.Steps[2].Devices = []int{0, 1, 2}
	colMajor := seedPlan()
	colMajor.Tensors[1].Allocation = []int{1, 0}
	tests := map[string]struct {
		p    *plan.Plan
		want string
	}{
		"op without steps":      {noSteps, "no step implements op 0 (set)"},
		"wrong reduce op":       {wrongOp, "value differs"},
		"device lacks output":   {missing, `device 3 holds no buffer "tv1"`},
		"output layout ignored": {colMajor, "value differs"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			res, err := Run(tc.p, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if res.Pass || res.Mismatch == nil || !strings.Contains(res.Mismatch.Reason, tc.want) {
				t.Errorf("Run = pass %v, mismatch %+v; want a mismatch with reason %q", res.Pass, res.Mismatch, tc.want)
			}
		})
	}
}

func TestRunSizeMismatch(t *testing.T) {
	// [10] block-split by four holds 3, 3, 3 and 1 elements: an Allgather
	// of count 3 cannot run (nvFuser's assertBuffersHaveSameSize).
	p := &plan.Plan{
		Format: 1, Meshes: map[string]plan.Mesh{"m": mesh1(0, 1, 2, 3)},
		Tensors: []plan.Tensor{
			{Name: "tv0", DType: "float32", Mesh: "m", Shape: []int{10}, Schedule: []plan.ScheduleStep{osplit(0, 4), par(0, "DIDx")}},
			{Name: "tv1", DType: "float32", Mesh: "m", Shape: []int{10}},
		},
		Ops: []plan.Op{{Index: 0, Op: "set", Input: "tv0", Output: "tv1"}},
		Steps: []plan.Step{{ID: 0, Kind: plan.KindCollective, Type: plan.Allgather, Teams: [][]int{{0, 1, 2, 3}},
			Input: "tv0", Output: "tv1", Count: plan.Count{Input: 3, Output: 12}, Bytes: &plan.Bytes{SentPerDevice: 36, ReceivedPerDevice: 36}}},
		Summary: plan.Summary{BytesReceivedMax: 36},
	}
	_, err := Run(p, Options{})
	want := `step 0 (Allgather): buffer "tv0" on device 3 has 1 elements, count.input is 3 (team sizes 0:3 1:3 2:3 3:1)`
	if err == nil || err.Error() != want {
		t.Errorf("Run error = %v, want %q", err, want)
	}
}

func TestRunErrors(t *testing.T) {
	wrongBytes := seedPlan()
	wrongBytes.Steps[1].Bytes = &plan.Bytes{SentPerDevice: 96, ReceivedPerDevice: 96}
	noBytes := seedPlan()
	noBytes.Steps[1].Bytes = nil
	wrongSummary := seedPlan()
	wrongSummary.Summary.BytesReceivedMax = 288
	missingInput := seedPlan()
	missingInput.Steps[0].Input = "tv9"
	badShape := seedPlan()
	badShape.Tensors[1].Shape = []int{2, 11}
	badReduction := reductionPlan("sum", nil, plan.Step{Type: plan.Allreduce, Teams: [][]int{{0, 1}}, Count: plan.Count{Input: 6, Output: 6}}, 24)
	badReduction.Tensors[1].ReductionAxes = []int{1}
	badDType := seedPlan()
	badDType.Tensors[0].DType = "float8"
	tests := map[string]struct {
		p    *plan.Plan
		opts Options
		want string
	}{
		"memory guard":      {seedPlan(), Options{MaxBytes: 100}, "too large to simulate: it needs about"},
		"step bytes wrong":  {wrongBytes, Options{}, "step 1 (Allgather): the plan says 96 bytes sent and 96 received per device, the simulation measured 72 and 72"},
		"step bytes absent": {noBytes, Options{}, "step 1 (Allgather): the plan gives no bytes"},
		"summary wrong":     {wrongSummary, Options{}, "bytes_received_max is 288, the simulation measured 72"},
		"missing buffer":    {missingInput, Options{}, `step 0 (Permute): device 0 has no buffer "tv9"`},
		"output shape":      {badShape, Options{}, `op 0 (set): output "tv1" has logical shape [2 11] with reduction axes [], expected [2 12] with reduction axes []`},
		"reduction axes":    {badReduction, Options{}, `op 0 (sum): output "tv1" has logical shape [4 6] with reduction axes [1], expected [4 6] with reduction axes [0]`},
		"dtype":             {badDType, Options{}, `unknown dtype "float8"`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := Run(tc.p, tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Run error = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestMemoryGuardDefault(t *testing.T) {
	p := seedPlan()
	// The first Permute computes 1 GiB of float64 on each of four devices
	// (the guard refuses before the counts are checked).
	p.Steps[0].Count = plan.Count{Input: 1 << 27, Output: 1 << 27}
	_, err := Run(p, Options{})
	if err == nil || !strings.Contains(err.Error(), "more than the limit of 1.0 GiB") {
		t.Errorf("Run error = %v, want the 1 GiB limit", err)
	}
}

func TestInputData(t *testing.T) {
	a, b := inputData(5, 2, 1000, Wide, 0), inputData(5, 2, 1000, Wide, 0)
	if diff := cmp.Diff(a, b); diff != "" {
		t.Errorf("data is not deterministic:\n%s", diff)
	}
	if cmp.Equal(a, inputData(6, 2, 1000, Wide, 0)) || cmp.Equal(a, inputData(5, 3, 1000, Wide, 0)) {
		t.Errorf("seed and tensor index should change the data")
	}
	for _, v := range a {
		if v != float64(int(v)) || v < -512 || v > 512 {
			t.Fatalf("value %v outside the integers of [-512, 512]", v)
		}
	}
	for _, v := range inputData(5, 2, 1000, Small, 0) {
		if v != -2 && v != -1 && v != 1 && v != 2 {
			t.Fatalf("prod value %v outside {-2, -1, 1, 2}", v)
		}
	}
}

// TestInputDataSteps checks that inputData, which steps the generator's
// state, gives inputValue's values.
func TestInputDataSteps(t *testing.T) {
	for _, data := range []DataSet{Wide, Small, Positive} {
		key := streamKey(9, 4)
		for i, v := range inputData(9, 4, 300, data, 0) {
			if want := inputValue(key, i, data, 0); v != want {
				t.Fatalf("data set %v, value %d: %v, inputValue gives %v", data, i, v, want)
			}
		}
	}
}

// TestDataOf checks which ops choose which data set: the positive one
// wins over prod's small one.
func TestDataOf(t *testing.T) {
	for _, tc := range []struct {
		ops  []string
		want DataSet
	}{
		{[]string{"set", "sum", "mul", "square"}, Wide},
		{[]string{"prod", "add"}, Small},
		{[]string{"prod", "exp"}, Positive},
		{[]string{"div"}, Positive},
		{[]string{"relu", "gelu_tanh", "silu", "prod"}, Small},
		{[]string{"rsqrt"}, Positive},
		{[]string{"erf"}, Wide},
	} {
		p := &plan.Plan{}
		for _, op := range tc.ops {
			p.Ops = append(p.Ops, plan.Op{Op: op})
		}
		if got := DataOf(p); got != tc.want {
			t.Errorf("DataOf(%v) = %v, want %v", tc.ops, got, tc.want)
		}
	}
}

// TestCombineInto checks the loops of combineInto against combine.
func TestCombineInto(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, op := range plan.ReduceOps() {
		a, b := make([]float64, 200), make([]float64, 200)
		for i := range a {
			a[i] = float64(r.IntN(modulus) - modulus/2)
			b[i] = float64(r.IntN(modulus) - modulus/2)
		}
		got := slices.Clone(a)
		combineInto(op, got, b)
		for i := range a {
			if want := combine(op, a[i], b[i]); got[i] != want {
				t.Fatalf("%s(%v, %v) = %v, combine gives %v", op, a[i], b[i], got[i], want)
			}
		}
	}
}

// TestInputValuesPinned pins the documented SplitMix64 formula
// (docs/simulate.md): exported programs reproduce these values.
func TestInputValuesPinned(t *testing.T) {
	tests := map[string]struct {
		seed     uint64
		index, n int
		data     DataSet
		want     []float64
	}{
		"seed 0, tensor 0": {0, 0, 8, Wide, []float64{-26, -110, -288, 92, -195, -297, 176, -183}},
		"seed 7, tensor 3": {7, 3, 8, Wide, []float64{-63, -189, 59, -438, -384, 156, -10, 78}},
		"small":            {7, 3, 8, Small, []float64{2, -2, -1, -2, -1, -2, -2, -1}},
		"positive":         {7, 3, 8, Positive, []float64{4, 1, 2, 1, 2, 1, 1, 2}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, InputValues(tc.seed, tc.index, tc.n, tc.data, 0)); diff != "" {
				t.Errorf("InputValues mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCombine(t *testing.T) {
	tests := map[string]struct {
		op   string
		a, b float64
		want float64
	}{
		"small sum is plain":        {"sum", 512, -3, 509},
		"sum wraps to the negative": {"sum", modulus / 2, 1, -(modulus / 2)},
		"small product is plain":    {"prod", -2, 1 << 20, -(1 << 21)},
		"2^31 is 1":                 {"prod", 1 << 16, 1 << 15, 1},
		"max":                       {"max", -4, 3, 3},
		"min":                       {"min", -4, 3, -4},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := combine(tc.op, tc.a, tc.b); got != tc.want {
				t.Errorf("combine(%s, %v, %v) = %v, want %v", tc.op, tc.a, tc.b, got, tc.want)
			}
		})
	}
}

// TestCombineAnyGrouping checks that every reduce op gives the same result
// in any order and grouping, even far outside float64's exact integers.
func TestCombineAnyGrouping(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, op := range plan.ReduceOps() {
		xs := make([]float64, 200)
		for i := range xs {
			xs[i] = residue(r.Int64N(1<<40) - 1<<39)
		}
		want := fold(op, xs)
		for range 20 {
			shuffled := slices.Clone(xs)
			r.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
			cut := r.IntN(len(xs)-1) + 1
			got := combine(op, fold(op, shuffled[:cut]), fold(op, shuffled[cut:]))
			if got != want {
				t.Fatalf("%s: grouping changed the result: %v != %v", op, got, want)
			}
		}
	}
}

func fold(op string, xs []float64) float64 {
	acc := xs[0]
	for _, x := range xs[1:] {
		acc = combine(op, acc, x)
	}
	return acc
}

func TestWriteText(t *testing.T) {
	res, err := Run(bareAllgather(), Options{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := res.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	ref := inputData(1, 0, 24, Wide, 0)
	want := "FAIL: op 0 (after step 0), tensor tv1, device 0, flat index 3, logical index [0 3]: expected " +
		formatValue(ref[3]) + ", actual " + formatValue(ref[12]) + " (value differs)\n" +
		"step  type       sent  received\n" +
		"0     Allgather  72 B  72 B\n" +
		"\n" +
		"device  received\n" +
		"0       72 B\n" +
		"1       72 B\n" +
		"2       72 B\n" +
		"3       72 B\n" +
		"max received per device: 72 B\n" +
		"total sent: 288 B\n"
	if diff := cmp.Diff(want, b.String()); diff != "" {
		t.Errorf("WriteText (-want +got):\n%s", diff)
	}
}

func formatValue(v float64) string {
	out, _ := json.Marshal(v)
	return string(out)
}

func TestResultJSON(t *testing.T) {
	res, err := Run(seedPlan(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	out, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	keys := []string{}
	for k := range got {
		keys = append(keys, k)
	}
	want := []string{"device_received", "max_received", "mismatch", "pass", "steps", "total_sent"}
	if diff := cmp.Diff(want, keys, cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
		t.Errorf("JSON keys (-want +got):\n%s", diff)
	}
}

func TestRunReportsEarliestOp(t *testing.T) {
	p := bareAllgather() // op 0 computes wrong data
	p.Tensors = append(p.Tensors, plan.Tensor{Name: "tv2", DType: "float32", Mesh: "m", Shape: []int{2, 12}})
	p.Ops = append(p.Ops, plan.Op{Index: 1, Op: "set", Input: "tv1", Output: "tv2"}) // op 1 has no steps
	res, err := Run(p, Options{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if res.Mismatch == nil || res.Mismatch.Op != 0 || res.Mismatch.Reason != "value differs" {
		t.Errorf("mismatch = %+v, want op 0's wrong value", res.Mismatch)
	}
}
