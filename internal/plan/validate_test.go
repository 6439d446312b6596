package plan

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nvcomm/nvcomm/internal/diag"
)

// allgatherPlan is the smallest valid plan: tv1 = set(tv0) on a 4-device
// mesh, tv0 [8, 1024] sharded DIDx on axis 1, tv1 replicated, one Allgather.
func allgatherPlan() *Plan {
	return &Plan{
		Format: Format,
		Fusion: "allgather",
		Policy: "nvfuser",
		Meshes: map[string]Mesh{"m": {Shape: []int{4}, Devices: []int{0, 1, 2, 3}}},
		Tensors: []Tensor{
			{
				Name: "tv0", DType: "float32", Mesh: "m", Shape: []int{8, 1024},
				Schedule: []ScheduleStep{
					{OuterSplit: &SplitArgs{Axis: 1, Factor: 4}},
					{Parallelize: &ParallelizeArgs{Axis: 1, Type: "DIDx"}},
				},
				Sharding:   []Sharding{{Type: "DIDx", LogicalAxis: 1, Kind: "block"}},
				LocalShape: []int{8, 256},
				Layout:     []int{0, 1},
			},
			{
				Name: "tv1", DType: "float32", Mesh: "m", Shape: []int{8, 1024},
				Sharding:   []Sharding{},
				LocalShape: []int{8, 1024},
				Layout:     []int{0, 1},
			},
		},
		Ops: []Op{{Index: 0, Op: "set", Input: "tv0", Output: "tv1"}},
		Steps: []Step{{
			ID: 0, Op: 0, Expr: "tv1 = set(tv0)", Kind: KindCollective, Type: Allgather,
			Teams: [][]int{{0, 1, 2, 3}}, Input: "tv0", Output: "tv1", Axis: new(1),
			Count: Count{Input: 2048, Output: 8192},
			Bytes: &Bytes{SentPerDevice: 24576, ReceivedPerDevice: 24576},
		}},
		Summary: Summary{Collectives: 1, ByType: map[string]int{Allgather: 1}, BytesReceivedMax: 24576},
	}
}

// twoOpPlan extends allgatherPlan with a Permute before the Allgather (tv1
// is stored axis 1 outermost) and a second op, tv3 = sum(tv2, axis=0) on a 2x2
// mesh, lowered to an Allreduce with two teams.
func twoOpPlan() *Plan {
	p := allgatherPlan()
	p.Fusion = "two_ops"
	p.Meshes["g"] = Mesh{Shape: []int{2, 2}, Devices: []int{0, 1, 2, 3}}
	p.Tensors[1].Layout = []int{1, 0}
	p.Tensors = append(p.Tensors,
		Tensor{
			Name: "tv2", DType: "float32", Mesh: "g", Shape: []int{2, 64},
			Schedule:   []ScheduleStep{{Parallelize: &ParallelizeArgs{Axis: 0, Type: "DIDx"}}},
			Sharding:   []Sharding{{Type: "DIDx", LogicalAxis: 0, Kind: "block"}},
			LocalShape: []int{1, 64},
			Layout:     []int{0, 1},
		},
		Tensor{
			Name: "tv3", DType: "float32", Mesh: "g", Shape: []int{2, 64},
			ReductionAxes: []int{0},
			Sharding:      []Sharding{},
			LocalShape:    []int{64},
			Layout:        []int{0},
		},
	)
	p.Ops = append(p.Ops, Op{Index: 1, Op: "sum", Input: "tv2", Output: "tv3", Axis: new(0)})
	permute := Step{
		ID: 0, Op: 0, Expr: "tv1 = set(tv0)", Kind: KindLocal, Type: Permute,
		Devices: []int{0, 1, 2, 3}, Input: "tv0", Output: "tv1/permuted",
		Count: Count{Input: 2048, Output: 2048}, Dims: []int{8, 256}, Perm: []int{1, 0},
	}
	gather := p.Steps[0]
	gather.ID, gather.Input = 1, "tv1/permuted"
	allreduce := Step{
		ID: 2, Op: 1, Expr: "tv3 = sum(tv2, axis=0)", Kind: KindCollective, Type: Allreduce,
		Teams: [][]int{{0, 1}, {2, 3}}, ReduceOp: new("sum"), Input: "tv2", Output: "tv3",
		Axis: new(0), Count: Count{Input: 64, Output: 64},
		Bytes: &Bytes{SentPerDevice: 256, ReceivedPerDevice: 256},
	}
	p.Steps = []Step{permute, gather, allreduce}
	p.Summary = Summary{
		Collectives: 2, LocalSteps: 1,
		ByType:           map[string]int{Allgather: 1, Allreduce: 1},
		BytesReceivedMax: 24576 + 256,
	}
	return p
}

// replicated makes tensor k of p unsharded on mesh.
func replicated(p *Plan, k int, mesh string) {
	t := &p.Tensors[k]
	t.Mesh, t.Schedule, t.Sharding = mesh, nil, []Sharding{}
	t.LocalShape = append([]int(nil), t.Shape...)
}

// asStep turns p's only step into one of type typ.
func asStep(p *Plan, typ string, root *int, count Count, bytes Bytes) *Step {
	s := &p.Steps[0]
	s.Type, s.Root, s.Count, s.Bytes = typ, root, count, &bytes
	p.Summary.ByType = map[string]int{typ: 1}
	p.Summary.BytesReceivedMax = bytes.ReceivedPerDevice
	return s
}

// broadcastPlan broadcasts tv0 from device 0 to the mesh.
func broadcastPlan() *Plan {
	p := allgatherPlan()
	p.Meshes["r"] = Mesh{Shape: []int{1}, Devices: []int{0}}
	replicated(p, 0, "r")
	s := asStep(p, Broadcast, new(0), Count{Input: 8192, Output: 8192}, Bytes{SentPerDevice: 98304, ReceivedPerDevice: 32768})
	s.Axis = nil
	return p
}

// sendRecvPlan sends tv0 from device 0 to device 1.
func sendRecvPlan() *Plan {
	p := allgatherPlan()
	p.Meshes = map[string]Mesh{"a": {Shape: []int{1}, Devices: []int{0}}, "b": {Shape: []int{1}, Devices: []int{1}}}
	replicated(p, 0, "a")
	replicated(p, 1, "b")
	s := asStep(p, SendRecv, new(0), Count{Input: 8192, Output: 8192}, Bytes{SentPerDevice: 32768, ReceivedPerDevice: 32768})
	s.Teams, s.Axis = [][]int{{0, 1}}, nil
	return p
}

// sendRecvPairsPlan sends tv0 from devices 0 and 1 to devices 2 and 3, two
// pairs in one step, as between two pipeline stages.
func sendRecvPairsPlan() *Plan {
	p := allgatherPlan()
	p.Meshes = map[string]Mesh{"a": {Shape: []int{2}, Devices: []int{0, 1}}, "b": {Shape: []int{2}, Devices: []int{2, 3}}}
	replicated(p, 0, "a")
	replicated(p, 1, "b")
	s := asStep(p, SendRecv, nil, Count{Input: 8192, Output: 8192}, Bytes{SentPerDevice: 32768, ReceivedPerDevice: 32768})
	s.Teams, s.Axis = [][]int{{0, 2}, {1, 3}}, nil
	return p
}

// gatherPlan gathers tv0 on device 4, which is outside tv0's mesh and is
// appended to the team, as nvFuser does.
func gatherPlan() *Plan {
	p := allgatherPlan()
	p.Meshes["r"] = Mesh{Shape: []int{1}, Devices: []int{4}}
	replicated(p, 1, "r")
	s := asStep(p, Gather, new(4), Count{Input: 2048, Output: 8192}, Bytes{SentPerDevice: 8192, ReceivedPerDevice: 32768})
	s.Teams = [][]int{{0, 1, 2, 3, 4}}
	return p
}

// scatterPlan scatters tv0 from device 0, splitting axis 0.
func scatterPlan() *Plan {
	p := allgatherPlan()
	p.Meshes["r"] = Mesh{Shape: []int{1}, Devices: []int{0}}
	replicated(p, 0, "r")
	t := &p.Tensors[1]
	t.Sharding, t.LocalShape = []Sharding{{Type: "DIDx", LogicalAxis: 0, Kind: "block"}}, []int{2, 1024}
	s := asStep(p, Scatter, new(0), Count{Input: 8192, Output: 2048}, Bytes{SentPerDevice: 24576, ReceivedPerDevice: 8192})
	s.Axis = new(0)
	return p
}

// allToAllPlan moves tv0's sharding from axis 1 to axis 0.
func allToAllPlan() *Plan {
	p := allgatherPlan()
	t := &p.Tensors[1]
	t.Sharding, t.LocalShape = []Sharding{{Type: "DIDx", LogicalAxis: 0, Kind: "block"}}, []int{2, 1024}
	asStep(p, AllToAll, nil, Count{Input: 2048, Output: 2048}, Bytes{SentPerDevice: 6144, ReceivedPerDevice: 6144})
	return p
}

// allToAllVCounts are allToAllVPlan's split sizes: rows and columns sum
// to 2048, the chunks are unequal, and every member keeps a chunk for
// itself (the diagonal), which moves nothing. Member d sends, and
// receives, 2048 minus its own chunk: 1048 elements for 0, 1 and 2, 848
// for 3.
func allToAllVCounts() [][]int {
	return [][]int{
		{1000, 600, 300, 148},
		{48, 1000, 700, 300},
		{500, 148, 1000, 400},
		{500, 300, 48, 1200},
	}
}

// allToAllVPlan moves tv0's sharding from axis 1 to axis 0, as
// allToAllPlan does, with an AllToAllV of unequal chunks: the validator
// checks its counts and bytes, not what it computes (Certify's and
// simulate's part).
func allToAllVPlan() *Plan {
	p := allToAllPlan()
	s := asStep(p, AllToAllV, nil, Count{Input: 2048, Output: 2048}, Bytes{SentPerDevice: 4192, ReceivedPerDevice: 4192})
	s.SendCounts = allToAllVCounts()
	return p
}

// reduceScatterPlan lowers tv1 = sum(tv0, axis=0), tv0 [4, 1024] sharded on the
// reduced axis and tv1 sharded on the other, to a ReduceScatter.
func reduceScatterPlan() *Plan {
	p := allgatherPlan()
	p.Tensors[0].Shape, p.Tensors[0].Sharding[0].LogicalAxis = []int{4, 1024}, 0
	p.Tensors[0].Schedule, p.Tensors[0].LocalShape = nil, []int{1, 1024}
	t := &p.Tensors[1]
	t.Shape, t.ReductionAxes, t.LocalShape, t.Layout = []int{4, 1024}, []int{0}, []int{256}, []int{0}
	t.Sharding = []Sharding{{Type: "DIDx", LogicalAxis: 0, ShapeAxis: new(1), Kind: "block"}}
	p.Ops[0].Op, p.Ops[0].Axis = "sum", new(0)
	s := asStep(p, ReduceScatter, nil, Count{Input: 1024, Output: 256}, Bytes{SentPerDevice: 3072, ReceivedPerDevice: 3072})
	s.ReduceOp, s.Expr, s.Axis = new("sum"), "tv1 = sum(tv0, axis=0)", new(0)
	return p
}

// localReducePlan lowers tv1 = sum(tv0, axis=0), with tv0 sharded on the other
// axis, to a LocalReduce on every device.
func localReducePlan() *Plan {
	p := allgatherPlan()
	t := &p.Tensors[1]
	t.ReductionAxes, t.LocalShape, t.Layout = []int{0}, []int{256}, []int{0}
	t.Sharding = []Sharding{{Type: "DIDx", LogicalAxis: 0, ShapeAxis: new(1), Kind: "block"}}
	p.Ops[0].Op, p.Ops[0].Axis = "sum", new(0)
	p.Steps[0] = Step{
		ID: 0, Op: 0, Expr: "tv1 = sum(tv0, axis=0)", Kind: KindLocal, Type: LocalReduce,
		Devices: []int{0, 1, 2, 3}, ReduceOp: new("sum"), Input: "tv0", Output: "tv1",
		Count: Count{Input: 2048, Output: 256}, Dims: []int{8, 256}, ReduceDims: []int{0},
	}
	p.Summary = Summary{LocalSteps: 1, BytesRatio: new(1.0)}
	return p
}

// clonePlan deep-copies p through its encoding.
func clonePlan(t *testing.T, p *Plan) *Plan {
	t.Helper()
	b, err := Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	q, err := Decode("clone.json", b)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

func validPlans() map[string]func() *Plan {
	return map[string]func() *Plan{
		"allgather":     allgatherPlan,
		"two_ops":       twoOpPlan,
		"broadcast":     broadcastPlan,
		"send_recv":     sendRecvPlan,
		"gather":        gatherPlan,
		"scatter":       scatterPlan,
		"all_to_all":    allToAllPlan,
		"all_to_all_v":  allToAllVPlan,
		"reducescatter": reduceScatterPlan,
		"local_reduce":  localReducePlan,
		"uneven":        unevenPlan,
		"slice":         slicePlan,
		"linear":        linearPlan,
		"layers":        layersPlan,
		"scalar":        scalarPlan,
		"embedding":     embeddingPlan,
	}
}

func TestValidateValidPlans(t *testing.T) {
	for name, build := range validPlans() {
		t.Run(name, func(t *testing.T) {
			if got := Validate(build()); got != nil {
				t.Errorf("Validate(built) = %v, want nil", got)
			}
			if got := Validate(clonePlan(t, build())); got != nil {
				t.Errorf("Validate(decoded) = %v, want nil", got)
			}
		})
	}
}

func TestValidateNil(t *testing.T) {
	want := []diag.Diagnostic{{Message: "no plan"}}
	if diff := cmp.Diff(want, Validate(nil)); diff != "" {
		t.Errorf("Validate(nil) mismatch (-want +got):\n%s", diff)
	}
}

func TestValidateEmpty(t *testing.T) {
	want := []diag.Diagnostic{
		{Message: "format is 0, want 1 (steps one after another) or 2 (a step graph)"},
		{Message: "fusion name is empty"},
		{Message: "policy is empty; it names the policy that lowered the plan"},
		{Message: "summary: bytes_ratio is null, want 1 (bytes_received_max / bytes_lower_bound, to 3 decimals)"},
	}
	if diff := cmp.Diff(want, Validate(&Plan{})); diff != "" {
		t.Errorf("Validate(&Plan{}) mismatch (-want +got):\n%s", diff)
	}
}

func TestProblemText(t *testing.T) {
	for _, tc := range []struct {
		d    diag.Diagnostic
		want string
	}{
		{sp(3, Allgather, "team 0 is empty"), "step 3 (Allgather): team 0 is empty"},
		{sp(0, "", "kind \"\" is not collective or local"), "step 0: kind \"\" is not collective or local"},
		{pp("fusion name is empty"), "fusion name is empty"},
	} {
		if got := tc.d.Text(); got != tc.want {
			t.Errorf("%#v.Text() = %q, want %q", tc.d, got, tc.want)
		}
	}
}

// pp is a problem outside the steps; sp one of step i, of type typ.
func pp(msg string) diag.Diagnostic { return diag.Diagnostic{Message: msg} }
func sp(i int, typ, msg string) diag.Diagnostic {
	return diag.Diagnostic{Subject: StepSubject(i, typ), Message: msg}
}

type validateCase struct {
	name   string
	base   func() *Plan
	mutate func(p *Plan)
	want   []diag.Diagnostic
}

func TestValidate(t *testing.T) {
	var cases []validateCase
	cases = append(cases, planCases()...)
	cases = append(cases, tensorCases()...)
	cases = append(cases, opCases()...)
	cases = append(cases, stepCases()...)
	cases = append(cases, rootCases()...)
	cases = append(cases, bufferCases()...)
	cases = append(cases, countCases()...)
	cases = append(cases, allToAllVCases()...)
	cases = append(cases, localFieldCases()...)
	cases = append(cases, coverageCases()...)
	cases = append(cases, summaryCases()...)
	cases = append(cases, padCases()...)
	cases = append(cases, scheduleCases()...)
	cases = append(cases, opOutputCases()...)
	cases = append(cases, certificateCases()...)
	cases = append(cases, flowCases()...)
	cases = append(cases, layerOpCases()...)
	cases = append(cases, computeStepCases()...)
	cases = append(cases, scalarCases()...)
	seen := map[string]bool{}
	for _, tc := range cases {
		if seen[tc.name] {
			t.Fatalf("duplicate case %q", tc.name)
		}
		seen[tc.name] = true
		runValidateCase(t, tc)
	}
}

// runValidateCase runs one case as a subtest: its base plan (allgatherPlan
// when nil), mutated, must give exactly its problems.
func runValidateCase(t *testing.T, tc validateCase) {
	t.Run(tc.name, func(t *testing.T) {
		base := tc.base
		if base == nil {
			base = allgatherPlan
		}
		p := clonePlan(t, base())
		if tc.mutate != nil {
			tc.mutate(p)
		}
		got := Validate(p)
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("Validate mismatch (-want +got):\n%s", diff)
		}
	})
}

// Rule 1: format, fusion, policy, meshes.
func planCases() []validateCase {
	return []validateCase{
		{name: "format", mutate: func(p *Plan) { p.Format = 3 },
			want: []diag.Diagnostic{pp("format is 3, want 1 (steps one after another) or 2 (a step graph)")}},
		{name: "fusion name", mutate: func(p *Plan) { p.Fusion = "" },
			want: []diag.Diagnostic{pp("fusion name is empty")}},
		{name: "policy", mutate: func(p *Plan) { p.Policy = "" },
			want: []diag.Diagnostic{pp("policy is empty; it names the policy that lowered the plan")}},
		{name: "policy nvcomm does not have (Certify's to reject)", mutate: func(p *Plan) { p.Policy = "greedy" }},
		{name: "policy optimal", mutate: func(p *Plan) { p.Policy = "optimal" }},
		{name: "mesh product", mutate: func(p *Plan) { p.Meshes["n"] = Mesh{Shape: []int{3}, Devices: []int{4, 5}} },
			want: []diag.Diagnostic{pp(`mesh "n": shape [3] does not hold its 2 devices`)}},
		{name: "mesh extent", mutate: func(p *Plan) { p.Meshes["n"] = Mesh{Shape: []int{0}} },
			want: []diag.Diagnostic{pp(`mesh "n": shape[0] is 0, want >= 1`)}},
		{name: "mesh rank", mutate: func(p *Plan) { p.Meshes["n"] = Mesh{Shape: []int{1, 1, 1, 1}, Devices: []int{4}} },
			want: []diag.Diagnostic{pp(`mesh "n" has 4 axes, want 1 to 3`)}},
		{name: "mesh negative device", mutate: func(p *Plan) { p.Meshes["n"] = Mesh{Shape: []int{1}, Devices: []int{-1}} },
			want: []diag.Diagnostic{pp(`mesh "n": device -1 is negative`)}},
		{name: "mesh duplicate device", mutate: func(p *Plan) { p.Meshes["n"] = Mesh{Shape: []int{3}, Devices: []int{5, 5, 5}} },
			want: []diag.Diagnostic{pp(`mesh "n": device 5 is listed more than once`)}},
	}
}

// Rule 2: tensors.
func tensorCases() []validateCase {
	return []validateCase{
		{name: "tensor duplicate", mutate: func(p *Plan) { p.Tensors = append(p.Tensors, p.Tensors[1]) },
			want: []diag.Diagnostic{pp(`tensor "tv1" is declared more than once`)}},
		{name: "tensor no name", mutate: func(p *Plan) { p.Tensors = append(p.Tensors, p.Tensors[1]); p.Tensors[2].Name = "" },
			want: []diag.Diagnostic{pp(`tensor 2 has no name`)}},
		{name: "tensor mesh", mutate: func(p *Plan) { p.Tensors[1].Mesh = "nope" },
			want: []diag.Diagnostic{pp(`tensor "tv1": mesh "nope" does not exist`)}},
		{name: "tensor dtype", mutate: func(p *Plan) { p.Tensors[1].DType = "float8" },
			want: []diag.Diagnostic{pp(`tensor "tv1": dtype "float8" is not one of bfloat16, float16, float32, float64, int32, int64`)}},
		{name: "tensor extent", mutate: func(p *Plan) { p.Tensors[1].Shape[0] = 0 },
			want: []diag.Diagnostic{
				pp(`tensor "tv1": shape[0] is 0, want >= 1`),
				pp(`op 0: output "tv1" has shape [0 1024] and reduction_axes [], want [8 1024] and [] (the input's non-reduction shape, the reduced axis)`),
			}},
		{name: "reduction axis range", mutate: func(p *Plan) { p.Tensors[1].ReductionAxes = []int{2} },
			want: []diag.Diagnostic{pp(`tensor "tv1": reduction_axes[0] is 2, not a position in a shape of 2 axes`)}},
		{name: "reduction axis twice", base: reduceScatterPlan, mutate: func(p *Plan) { p.Tensors[1].ReductionAxes = []int{0, 0} },
			want: []diag.Diagnostic{pp(`tensor "tv1": reduction axis 0 is listed more than once`)}},
		{name: "sharding type twice", mutate: func(p *Plan) {
			p.Tensors[0].Sharding = append(p.Tensors[0].Sharding, Sharding{Type: "DIDx", LogicalAxis: 0, Kind: "block"})
		},
			want: []diag.Diagnostic{pp(`tensor "tv0": sharding[1]: DIDx shards the tensor more than once`)}},
		{name: "sharding type unknown", mutate: func(p *Plan) { p.Tensors[0].Sharding[0].Type = "DIDw" },
			want: []diag.Diagnostic{pp(`tensor "tv0": sharding[0]: type "DIDw" is not DIDx, DIDy or DIDz`)}},
		{name: "sharding axis missing", mutate: func(p *Plan) { p.Tensors[0].Sharding[0].Type = "DIDy" },
			want: []diag.Diagnostic{pp(`tensor "tv0": sharding[0]: mesh "m" has no DIDy axis`)}},
		{name: "sharding DIDy on 2-D mesh", base: twoOpPlan, mutate: func(p *Plan) {
			p.Tensors[2].Sharding[0].Type = "DIDy"
		}},
		{name: "sharding kind", mutate: func(p *Plan) { p.Tensors[0].Sharding[0].Kind = "cyclic" },
			want: []diag.Diagnostic{pp(`tensor "tv0": sharding[0]: kind "cyclic" is not block, strided, nested or merged`)}},
		{name: "sharding logical axis", mutate: func(p *Plan) { p.Tensors[0].Sharding[0].LogicalAxis = 2 },
			want: []diag.Diagnostic{pp(`tensor "tv0": sharding[0]: logical_axis 2 is not among the 2 non-reduction axes`)}},
		{name: "local shape length", mutate: func(p *Plan) { p.Tensors[0].LocalShape = []int{8} },
			want: []diag.Diagnostic{pp(`tensor "tv0": local_shape has 1 entries, want 2 (one per non-reduction axis)`)}},
		{name: "local shape extent", mutate: func(p *Plan) { p.Tensors[0].LocalShape = []int{8, 512} },
			want: []diag.Diagnostic{
				pp(`tensor "tv0": local_shape[1] is 512, want 256 (extent 1024 over 4 devices)`),
				sp(0, Allgather, `count.input is 2048, but "tv0" holds 4096 elements per device`),
			}},
		{name: "local shape uneven", mutate: func(p *Plan) { p.Tensors[0].Shape[1] = 1022 },
			want: []diag.Diagnostic{
				pp(`tensor "tv0": extent 1022 of axis 1 does not divide among 4 devices`),
				pp(`op 0: output "tv1" has shape [8 1024] and reduction_axes [], want [8 1022] and [] (the input's non-reduction shape, the reduced axis)`),
			}},
		{name: "layout", mutate: func(p *Plan) { p.Tensors[0].Layout = []int{0, 0} },
			want: []diag.Diagnostic{pp(`tensor "tv0": layout [0 0] is not a permutation of the 2 non-reduction axes`)}},
	}
}

// Rule 3: ops.
func opCases() []validateCase {
	return []validateCase{
		{name: "op index", mutate: func(p *Plan) { p.Ops[0].Index = 1 },
			want: []diag.Diagnostic{pp("op 0: index is 1")}},
		{name: "op name", mutate: func(p *Plan) { p.Ops[0].Op = "erfc" },
			want: []diag.Diagnostic{pp(`op 0: op "erfc" is not one of set, sum, prod, max, min, add, sub, mul, maximum, minimum, gt, eq, relu, neg, abs, div, exp, log, tanh, sigmoid, silu, gelu, gelu_tanh, erf, sqrt, rsqrt, reciprocal, square, broadcast, matmul, linear, embedding, gather, scatter_add, permute, reshape, cast, slice, cat, tril`)}},
		{name: "op input", mutate: func(p *Plan) { p.Ops[0].Input = "tv9" },
			want: []diag.Diagnostic{
				pp(`op 0: input "tv9" is not a tensor`),
				sp(0, Allgather, `input "tv0" is neither the input nor the output of op 0`),
			}},
		{name: "op output", mutate: func(p *Plan) { p.Ops[0].Output = "tv9" },
			want: []diag.Diagnostic{
				pp(`op 0: output "tv9" is not a tensor`),
				sp(0, Allgather, `output "tv1" is a fusion input`),
				pp(`op 0: no step of the op writes its output "tv9"`),
			}},
		{name: "op output twice", base: twoOpPlan, mutate: func(p *Plan) { p.Ops[1].Output = "tv1" },
			want: []diag.Diagnostic{
				pp(`op 1: output "tv1" is also the output of op 0`),
				pp(`op 1: output "tv1" has shape [8 1024] and reduction_axes [], want [2 64] and [0] (the input's non-reduction shape, the reduced axis)`),
				sp(2, Allreduce, `output "tv3" is a fusion input`),
				pp(`op 1: no step of the op writes its output "tv1"`),
			}},
		{name: "op set axis", mutate: func(p *Plan) { p.Ops[0].Axis = new(0) },
			want: []diag.Diagnostic{pp("op 0: set takes no axis")}},
		{name: "op sum no axis", base: twoOpPlan, mutate: func(p *Plan) { p.Ops[1].Axis = nil },
			want: []diag.Diagnostic{pp("op 1: sum needs an axis")}},
		{name: "op sum axis range", base: twoOpPlan, mutate: func(p *Plan) { p.Ops[1].Axis = new(2) },
			want: []diag.Diagnostic{pp(`op 1: axis 2 is not among the 2 non-reduction axes of "tv2"`)}},
	}
}

// Rule 4: id, op, kind, type, teams and devices.
func stepCases() []validateCase {
	return []validateCase{
		{name: "step id", mutate: func(p *Plan) { p.Steps[0].ID = 5 },
			want: []diag.Diagnostic{sp(0, Allgather, "id is 5, want 0")}},
		{name: "step op", mutate: func(p *Plan) { p.Steps[0].Op = 3 },
			want: []diag.Diagnostic{
				sp(0, Allgather, "op 3 is not an op of the plan (1 ops)"),
				pp("op 0: no step implements it"),
			}},
		{name: "step kind", mutate: func(p *Plan) { p.Steps[0].Kind = "remote" },
			want: []diag.Diagnostic{
				sp(0, Allgather, `kind "remote" is not collective or local`),
				pp("summary: collectives is 1, but the plan has 0 collective steps"),
				pp(`summary: by_type has "Allgather", but no collective step has that type`),
			}},
		{name: "step type of kind", base: twoOpPlan, mutate: func(p *Plan) { p.Steps[0].Type = Allgather },
			want: []diag.Diagnostic{sp(0, Allgather, `type "Allgather" is not a local step type`)}},
		{name: "collective with devices", mutate: func(p *Plan) { p.Steps[0].Devices = []int{0} },
			want: []diag.Diagnostic{sp(0, Allgather, "a collective takes teams, not devices")}},
		{name: "collective without teams", mutate: func(p *Plan) { p.Steps[0].Teams = nil },
			want: []diag.Diagnostic{sp(0, Allgather, "a collective needs teams")}},
		{name: "local with teams", base: twoOpPlan, mutate: func(p *Plan) { p.Steps[0].Teams = [][]int{{0}} },
			want: []diag.Diagnostic{sp(0, Permute, "a local step takes devices, not teams")}},
		{name: "local without devices", base: twoOpPlan, mutate: func(p *Plan) { p.Steps[0].Devices = nil },
			want: []diag.Diagnostic{sp(0, Permute, "a local step needs devices")}},
		{name: "local device twice", base: twoOpPlan, mutate: func(p *Plan) { p.Steps[0].Devices = []int{0, 1, 1} },
			want: []diag.Diagnostic{sp(0, Permute, "device 1 is listed more than once")}},
		{name: "local device unknown", base: twoOpPlan, mutate: func(p *Plan) { p.Steps[0].Devices = []int{0, 9} },
			want: []diag.Diagnostic{sp(0, Permute, "device 9 is in no mesh")}},
		{name: "team device unknown", mutate: func(p *Plan) { p.Steps[0].Teams[0][3] = 7 },
			want: []diag.Diagnostic{sp(0, Allgather, "device 7 of team 0 is in no mesh")}},
		{name: "team device twice", mutate: func(p *Plan) { p.Steps[0].Teams[0][3] = 2 },
			want: []diag.Diagnostic{sp(0, Allgather, "device 2 is in team 0 more than once")}},
		{name: "team empty", base: twoOpPlan, mutate: func(p *Plan) { p.Steps[2].Teams[1] = nil },
			want: []diag.Diagnostic{sp(2, Allreduce, "team 1 is empty")}},
		{name: "device in two teams", base: twoOpPlan, mutate: func(p *Plan) { p.Steps[2].Teams[1][0] = 1 },
			want: []diag.Diagnostic{sp(2, Allreduce, "device 1 is in teams 0 and 1")}},
		{name: "step axis range", mutate: func(p *Plan) { p.Steps[0].Axis = new(2) },
			want: []diag.Diagnostic{sp(0, Allgather, `axis 2 is not among the 2 non-reduction axes of "tv0"`)}},
		{name: "step axis negative", mutate: func(p *Plan) { p.Steps[0].Axis = new(-1) },
			want: []diag.Diagnostic{sp(0, Allgather, "axis is -1, want >= 0")}},
		{name: "bytes negative", mutate: func(p *Plan) { p.Steps[0].Bytes.SentPerDevice = -1 },
			want: []diag.Diagnostic{sp(0, Allgather, "bytes {-1, 24576} are negative")}},
	}
}

// Rule 4: roots and reduce ops.
func rootCases() []validateCase {
	return []validateCase{
		{name: "root on Allgather", mutate: func(p *Plan) { p.Steps[0].Root = new(0) },
			want: []diag.Diagnostic{sp(0, Allgather, "root is 0, but type Allgather takes no root")}},
		{name: "root missing", base: broadcastPlan, mutate: func(p *Plan) { p.Steps[0].Root = nil },
			want: []diag.Diagnostic{sp(0, Broadcast, "root is null, but type Broadcast needs one")}},
		{name: "root outside team", base: broadcastPlan, mutate: func(p *Plan) { p.Steps[0].Root = new(5) },
			want: []diag.Diagnostic{sp(0, Broadcast, "root 5 is not in the team")}},
		{name: "rooted two teams", base: broadcastPlan, mutate: func(p *Plan) { p.Steps[0].Teams = [][]int{{0, 1}, {2, 3}} },
			want: []diag.Diagnostic{sp(0, Broadcast, "type Broadcast needs exactly one team, got 2")}},
		{name: "send recv root", base: sendRecvPlan, mutate: func(p *Plan) { p.Steps[0].Root = new(1) },
			want: []diag.Diagnostic{sp(0, SendRecv, "root 1 is not the sender 0 (the first member of the team)")}},
		{name: "send recv team size", base: sendRecvPlan, mutate: func(p *Plan) { p.Steps[0].Teams[0] = []int{0, 1, 2} },
			want: []diag.Diagnostic{
				sp(0, SendRecv, "device 2 of team 0 is in no mesh"),
				sp(0, SendRecv, "a SendRecv team is [sender, receiver], got 3 members"),
			}},
		{name: "send recv pairs", base: sendRecvPairsPlan, mutate: func(*Plan) {}},
		{name: "send recv pairs with a root", base: sendRecvPairsPlan, mutate: func(p *Plan) { p.Steps[0].Root = new(0) },
			want: []diag.Diagnostic{sp(0, SendRecv, "root is 0, but a SendRecv of 2 pairs has none: each team's first member sends")}},
		{name: "send recv pairs of three", base: sendRecvPairsPlan, mutate: func(p *Plan) { p.Steps[0].Teams[1] = []int{1, 3, 3} },
			want: []diag.Diagnostic{
				sp(0, SendRecv, "device 3 is in team 1 more than once"),
				sp(0, SendRecv, "team 1 of a SendRecv of several pairs must be [sender, receiver], two devices, got [1 3 3]"),
			}},
		{name: "send recv pairs share a receiver", base: sendRecvPairsPlan, mutate: func(p *Plan) { p.Steps[0].Teams[1] = []int{1, 2} },
			want: []diag.Diagnostic{
				sp(0, SendRecv, "device 2 receives in teams 0 and 1; in a SendRecv of pairs a device sends at most once and receives at most once"),
			}},
		{name: "send recv pairs of a shift", base: sendRecvPairsPlan, mutate: func(p *Plan) {
			p.Meshes["b"] = Mesh{Shape: []int{2}, Devices: []int{1, 2}}
			p.Steps[0].Teams = [][]int{{0, 1}, {1, 2}} // device 1 receives 0's copy and sends its own
		}},
		{name: "send recv pairs of a shift in place", base: sendRecvPairsPlan, mutate: func(p *Plan) {
			p.Meshes["b"] = Mesh{Shape: []int{2}, Devices: []int{1, 2}}
			p.Steps[0].Teams = [][]int{{0, 1}, {1, 2}}
			p.Steps[0].Output = p.Steps[0].Input
		},
			want: []diag.Diagnostic{
				sp(0, SendRecv, "device 1 both sends and receives \"tv0\": a SendRecv of pairs must not write the buffer it reads"),
				sp(0, SendRecv, "output \"tv0\" is a fusion input"),
				{Severity: diag.Error, Message: "op 0: no step of the op writes its output \"tv1\""},
			}},
		{name: "send recv self copy", base: sendRecvPlan, mutate: func(p *Plan) {
			p.Meshes["b"] = Mesh{Shape: []int{1}, Devices: []int{0}}
			p.Steps[0].Teams[0] = []int{0, 0}
			p.Steps[0].Bytes = &Bytes{} // a copy on one device moves nothing between devices
			p.Summary.BytesReceivedMax, p.Summary.BytesRatio = 0, new(1.0)
		}},
		{name: "self copy only for SendRecv", base: broadcastPlan, mutate: func(p *Plan) { p.Steps[0].Teams[0] = []int{0, 0} },
			want: []diag.Diagnostic{sp(0, Broadcast, "device 0 is in team 0 more than once")}},
		{name: "reduce op missing", base: twoOpPlan, mutate: func(p *Plan) { p.Steps[2].ReduceOp = nil },
			want: []diag.Diagnostic{sp(2, Allreduce, "reduce_op is null, but type Allreduce needs one")}},
		{name: "reduce op on Allgather", mutate: func(p *Plan) { p.Steps[0].ReduceOp = new("sum") },
			want: []diag.Diagnostic{sp(0, Allgather, `reduce_op is "sum", but type Allgather does not reduce`)}},
		{name: "reduce op unknown", base: twoOpPlan, mutate: func(p *Plan) { p.Steps[2].ReduceOp = new("avg") },
			want: []diag.Diagnostic{sp(2, Allreduce, `reduce_op "avg" is not sum, prod, max or min`)}},
		{name: "reduce op not the op's", base: twoOpPlan, mutate: func(p *Plan) { p.Steps[2].ReduceOp = new("max") },
			want: []diag.Diagnostic{sp(2, Allreduce, `reduce_op is "max", but op 1 is a sum`)}},
	}
}

// Rule 4: input and output buffers.
func bufferCases() []validateCase {
	return []validateCase{
		{name: "input not written", base: twoOpPlan, mutate: func(p *Plan) { p.Steps[1].Input = "tv1/other" },
			want: []diag.Diagnostic{sp(1, Allgather, `input "tv1/other" is neither a fusion input nor written by an earlier step`)}},
		{name: "input written later", mutate: func(p *Plan) { p.Steps[0].Input = "tv1" },
			want: []diag.Diagnostic{
				sp(0, Allgather, `input "tv1" is neither a fusion input nor written by an earlier step`),
				sp(0, Allgather, `count.input is 2048, but "tv1" holds 8192 elements per device`),
			}},
		{name: "input of another op", base: twoOpPlan, mutate: func(p *Plan) {
			p.Steps[2].Input = "tv0"
			p.Steps[2].Count.Input = 2048
			p.Steps[2].Count.Output = 2048
		},
			want: []diag.Diagnostic{
				sp(2, Allreduce, `input "tv0" is neither the input nor the output of op 1`),
				sp(2, Allreduce, `count.output is 2048, but "tv3" holds 64 elements per device`),
			}},
		{name: "output fusion input", mutate: func(p *Plan) { p.Steps[0].Output = "tv0" },
			want: []diag.Diagnostic{
				sp(0, Allgather, `output "tv0" is a fusion input`),
				sp(0, Allgather, `count.output is 8192, but "tv0" holds 2048 elements per device`),
				pp(`op 0: no step of the op writes its output "tv1"`),
			}},
		{name: "output of another op", base: twoOpPlan, mutate: func(p *Plan) { p.Steps[1].Op = 1 },
			want: []diag.Diagnostic{
				sp(1, Allgather, `input "tv1/permuted" is an intermediate buffer of op 0 (step 0 writes it); an op's intermediate buffers are its own`),
				sp(1, Allgather, `output "tv1" is not the output "tv3" of op 1`),
				pp(`op 0: no step of the op writes its output "tv1"`),
			}},
		{name: "intermediate of another op", base: twoOpPlan, mutate: func(p *Plan) {
			p.Steps[2].Input = "tv1/permuted"
		},
			want: []diag.Diagnostic{
				sp(2, Allreduce, `input "tv1/permuted" is an intermediate buffer of op 0 (step 0 writes it); an op's intermediate buffers are its own`),
				sp(2, Allreduce, `count.input is 64, but step 0 wrote "tv1/permuted" with 2048 elements`),
			}},
		{name: "any intermediate name", base: twoOpPlan, mutate: func(p *Plan) {
			p.Steps[0].Output, p.Steps[1].Input = "tmp", "tmp"
		}},
		{name: "intermediate without op", base: twoOpPlan, mutate: func(p *Plan) {
			p.Steps[0].Op = -1
			p.Steps[0].Output, p.Steps[1].Input = "tmp", "tmp"
		},
			want: []diag.Diagnostic{
				sp(0, Permute, "op -1 is not an op of the plan (2 ops)"),
				sp(1, Allgather, `input "tmp" is an intermediate buffer of op -1 (step 0 writes it); an op's intermediate buffers are its own`),
			}},
	}
}

// Rule 5: counts.
func countCases() []validateCase {
	return []validateCase{
		{name: "count negative", mutate: func(p *Plan) { p.Steps[0].Count.Input = -1 },
			want: []diag.Diagnostic{sp(0, Allgather, "count {-1, 8192} is negative")}},
		{name: "count Allgather", mutate: func(p *Plan) { p.Steps[0].Count.Output = 4096 },
			want: []diag.Diagnostic{
				sp(0, Allgather, "count.output is 4096, want count.input * 4 = 8192 (the team size)"),
				sp(0, Allgather, `count.output is 4096, but "tv1" holds 8192 elements per device`),
			}},
		{name: "count tensors", mutate: func(p *Plan) { p.Steps[0].Count = Count{Input: 1024, Output: 4096} },
			want: []diag.Diagnostic{
				sp(0, Allgather, `count.input is 1024, but "tv0" holds 2048 elements per device`),
				sp(0, Allgather, `count.output is 4096, but "tv1" holds 8192 elements per device`),
			}},
		{name: "count teams differ", mutate: func(p *Plan) { p.Steps[0].Teams = [][]int{{0, 1}, {2}} },
			want: []diag.Diagnostic{sp(0, Allgather, "teams 0 and 1 differ in size (2 and 1)")}},
		{name: "count Allreduce", base: twoOpPlan, mutate: func(p *Plan) { p.Steps[2].Count.Output = 32 },
			want: []diag.Diagnostic{
				sp(2, Allreduce, "count.output is 32, want count.input = 64"),
				sp(2, Allreduce, `count.output is 32, but "tv3" holds 64 elements per device`),
			}},
		{name: "count producer", base: twoOpPlan, mutate: func(p *Plan) { p.Steps[0].Count.Output = 1024 },
			want: []diag.Diagnostic{
				sp(0, Permute, "count.output is 1024, want count.input = 2048"),
				sp(1, Allgather, `count.input is 2048, but step 0 wrote "tv1/permuted" with 1024 elements`),
			}},
		{name: "count Scatter", base: scatterPlan, mutate: func(p *Plan) { p.Steps[0].Teams[0] = []int{0, 1, 2} },
			want: []diag.Diagnostic{sp(0, Scatter, "count.input is 8192, want count.output * 3 = 6144 (the team size)")}},
		{name: "count ReduceScatter", base: reduceScatterPlan, mutate: func(p *Plan) { p.Steps[0].Count.Output = 512 },
			want: []diag.Diagnostic{
				sp(0, ReduceScatter, "count.input is 1024, want count.output * 4 = 2048 (the team size)"),
				sp(0, ReduceScatter, `count.output is 512, but "tv1" holds 256 elements per device`),
			}},
		{name: "count AllToAll", base: allToAllPlan, mutate: func(p *Plan) { p.Steps[0].Teams[0] = []int{0, 1, 2} },
			want: []diag.Diagnostic{sp(0, AllToAll, "count.input 2048 does not divide among the 3 members of a team")}},
		{name: "count Gather senders", base: gatherPlan, mutate: func(p *Plan) { p.Steps[0].Teams[0] = []int{0, 1, 4} },
			want: []diag.Diagnostic{sp(0, Gather, `count.output is 8192, want count.input * 2 = 4096 (the team members that hold "tv0")`)}},
		{name: "count Gather root in mesh", base: gatherPlan, mutate: func(p *Plan) {
			p.Meshes["r"] = Mesh{Shape: []int{1}, Devices: []int{0}}
			p.Steps[0].Teams[0] = []int{0, 1, 2, 3}
			p.Steps[0].Root = new(0)
			p.Steps[0].Bytes.ReceivedPerDevice = 24576 // the root holds its own part
			p.Summary.BytesReceivedMax = 24576
		}},
		{name: "count LocalReduce", base: localReducePlan, mutate: func(p *Plan) { p.Steps[0].Count.Output = 512 },
			want: []diag.Diagnostic{
				sp(0, LocalReduce, "count.input is 2048, want count.output * 8 = 4096 (the extent of reduce_dims)"),
				sp(0, LocalReduce, `count.output is 512, but "tv1" holds 256 elements per device`),
			}},
	}
}

// Rule 5: an AllToAllV's send_counts, one t×t matrix for every team,
// row k what member k sends (count.input in all), column r what member r
// receives (count.output in all).
func allToAllVCases() []validateCase {
	v := allToAllVPlan
	return []validateCase{
		{name: "AllToAllV rows", base: v, mutate: func(p *Plan) { p.Steps[0].SendCounts = p.Steps[0].SendCounts[:3] },
			want: []diag.Diagnostic{sp(0, AllToAllV, "send_counts has 3 rows, want one per member of a team (4)")}},
		{name: "AllToAllV no send_counts", base: v, mutate: func(p *Plan) { p.Steps[0].SendCounts = nil },
			want: []diag.Diagnostic{sp(0, AllToAllV, "send_counts has 0 rows, want one per member of a team (4)")}},
		{name: "AllToAllV row length", base: v, mutate: func(p *Plan) { p.Steps[0].SendCounts[1] = p.Steps[0].SendCounts[1][:3] },
			want: []diag.Diagnostic{sp(0, AllToAllV, "send_counts[1] has 3 counts, want one per member of a team (4)")}},
		{name: "AllToAllV negative count", base: v, mutate: func(p *Plan) { p.Steps[0].SendCounts[0] = []int{1000, 749, 300, -1} },
			want: []diag.Diagnostic{sp(0, AllToAllV, "send_counts[0][3] is -1, want >= 0")}},
		// Rows 2 and 3 trade one element of column 0: the columns still
		// sum to count.output, and the busiest sender is still device 0.
		{name: "AllToAllV row sum", base: v, mutate: func(p *Plan) {
			p.Steps[0].SendCounts[2][0], p.Steps[0].SendCounts[3][0] = 499, 501
		},
			want: []diag.Diagnostic{
				sp(0, AllToAllV, "send_counts[2] sums to 2047, but member 2 sends its whole input, count.input = 2048, or nothing"),
				sp(0, AllToAllV, "send_counts[3] sums to 2049, but member 3 sends its whole input, count.input = 2048, or nothing"),
			}},
		// Row 0 moves one element from member 1's chunk to its own: the
		// rows still sum to count.input.
		{name: "AllToAllV column sum", base: v, mutate: func(p *Plan) {
			p.Steps[0].SendCounts[0][0], p.Steps[0].SendCounts[0][1] = 1001, 599
		},
			want: []diag.Diagnostic{
				sp(0, AllToAllV, "member 0 receives 2049 elements (column 0 of send_counts), but count.output is 2048, or nothing"),
				sp(0, AllToAllV, "member 1 receives 2047 elements (column 1 of send_counts), but count.output is 2048, or nothing"),
			}},
		{name: "AllToAllV teams differ in size", base: v, mutate: func(p *Plan) { p.Steps[0].Teams = [][]int{{0, 1, 2}, {3}} },
			want: []diag.Diagnostic{sp(0, AllToAllV, "teams 0 and 1 differ in size (3 and 1)")}},
		{name: "AllToAllV device twice", base: v, mutate: func(p *Plan) { p.Steps[0].Teams[0][3] = 2 },
			want: []diag.Diagnostic{sp(0, AllToAllV, "device 2 is in team 0 more than once")}},
		{name: "AllToAllV bytes of an AllToAll", base: v, mutate: func(p *Plan) {
			p.Steps[0].Bytes = &Bytes{SentPerDevice: 6144, ReceivedPerDevice: 6144}
			p.Summary.BytesReceivedMax = 6144
		},
			want: []diag.Diagnostic{
				sp(0, AllToAllV, "bytes are {sent 6144, received 6144} per device, but the step moves {4192, 4192} (docs/plan.md, Bytes)"),
				pp("summary: bytes_received_max is 6144, but the steps make a device receive at most 4192 bytes"),
			}},
		{name: "AllToAllV every chunk kept", base: v, mutate: func(p *Plan) {
			p.Steps[0].SendCounts = [][]int{{2048, 0, 0, 0}, {0, 2048, 0, 0}, {0, 0, 2048, 0}, {0, 0, 0, 2048}}
			p.Steps[0].Bytes = &Bytes{}
			p.Summary.BytesReceivedMax, p.Summary.BytesRatio = 0, new(1.0)
		}},
		{name: "send_counts on Permute", base: twoOpPlan, mutate: func(p *Plan) { p.Steps[0].SendCounts = [][]int{{2048}} },
			want: []diag.Diagnostic{sp(0, Permute, "send_counts is set, but only an AllToAllV takes them")}},
	}
}

// Rule 6: dims, perm and reduce_dims.
func localFieldCases() []validateCase {
	return []validateCase{
		{name: "permute perm", base: twoOpPlan, mutate: func(p *Plan) { p.Steps[0].Perm = []int{0, 0} },
			want: []diag.Diagnostic{sp(0, Permute, "perm [0 0] is not a permutation of the 2 dims")}},
		{name: "permute no perm", base: twoOpPlan, mutate: func(p *Plan) { p.Steps[0].Perm = nil },
			want: []diag.Diagnostic{sp(0, Permute, "perm [] is not a permutation of the 2 dims")}},
		{name: "permute dims product", base: twoOpPlan, mutate: func(p *Plan) { p.Steps[0].Dims = []int{8, 128} },
			want: []diag.Diagnostic{sp(0, Permute, "dims [8 128] hold 1024 elements, but count.input is 2048")}},
		{name: "permute dims extent", base: twoOpPlan, mutate: func(p *Plan) { p.Steps[0].Dims = []int{0, 256} },
			want: []diag.Diagnostic{sp(0, Permute, "dims[0] is 0, want >= 1")}},
		{name: "permute no dims", base: twoOpPlan, mutate: func(p *Plan) { p.Steps[0].Dims = nil },
			want: []diag.Diagnostic{
				sp(0, Permute, "dims is missing, but type Permute needs it"),
				sp(0, Permute, "perm [1 0] is not a permutation of the 0 dims"),
			}},
		{name: "local reduce dims", base: localReducePlan, mutate: func(p *Plan) { p.Steps[0].Dims = []int{8, 128} },
			want: []diag.Diagnostic{
				sp(0, LocalReduce, "dims [8 128] hold 1024 elements, but count.input is 2048"),
			}},
		{name: "local reduce dims range", base: localReducePlan, mutate: func(p *Plan) { p.Steps[0].ReduceDims = []int{2} },
			want: []diag.Diagnostic{sp(0, LocalReduce, "reduce_dims [2] are not distinct positions in the 2 dims")}},
		{name: "local reduce dims twice", base: localReducePlan, mutate: func(p *Plan) { p.Steps[0].ReduceDims = []int{0, 0} },
			want: []diag.Diagnostic{sp(0, LocalReduce, "reduce_dims [0 0] are not distinct positions in the 2 dims")}},
		{name: "local reduce no reduce dims", base: localReducePlan, mutate: func(p *Plan) { p.Steps[0].ReduceDims = nil },
			want: []diag.Diagnostic{sp(0, LocalReduce, "reduce_dims is missing, but type LocalReduce needs it")}},
		{name: "dims on collective", mutate: func(p *Plan) { p.Steps[0].Dims = []int{2048} },
			want: []diag.Diagnostic{sp(0, Allgather, "dims is set, but a collective takes none")}},
		{name: "reduce dims on collective", base: twoOpPlan, mutate: func(p *Plan) { p.Steps[2].ReduceDims = []int{0} },
			want: []diag.Diagnostic{sp(2, Allreduce, "reduce_dims is set, but a collective takes none")}},
		{name: "perm on Copy", base: twoOpPlan, mutate: func(p *Plan) { p.Steps[0].Type = Copy },
			want: []diag.Diagnostic{sp(0, Copy, "perm is set, but only a Permute takes one")}},
		{name: "reduce dims on Permute", base: twoOpPlan, mutate: func(p *Plan) { p.Steps[0].ReduceDims = []int{0} },
			want: []diag.Diagnostic{sp(0, Permute, "reduce_dims is set, but only a LocalReduce takes them")}},
	}
}

// Rule 7: every op's output is written by one of its steps.
func coverageCases() []validateCase {
	return []validateCase{
		{name: "op without step", base: twoOpPlan, mutate: func(p *Plan) {
			p.Steps = p.Steps[:2]
			p.Summary = Summary{Collectives: 1, LocalSteps: 1, ByType: map[string]int{Allgather: 1}, BytesReceivedMax: 24576}
		},
			want: []diag.Diagnostic{pp("op 1: no step implements it")}},
		{name: "op output not written", base: twoOpPlan, mutate: func(p *Plan) { p.Steps[1].Output = "tv1/gathered" },
			want: []diag.Diagnostic{pp(`op 0: no step of the op writes its output "tv1"`)}},
	}
}

// Rule 8: summary.
func summaryCases() []validateCase {
	return []validateCase{
		{name: "summary collectives", mutate: func(p *Plan) { p.Summary.Collectives = 2 },
			want: []diag.Diagnostic{pp("summary: collectives is 2, but the plan has 1 collective steps")}},
		{name: "summary local steps", base: twoOpPlan, mutate: func(p *Plan) { p.Summary.LocalSteps = 0 },
			want: []diag.Diagnostic{pp("summary: local_steps is 0, but the plan has 1 local steps")}},
		{name: "summary by_type missing", base: twoOpPlan, mutate: func(p *Plan) { delete(p.Summary.ByType, Allreduce) },
			want: []diag.Diagnostic{pp(`summary: by_type lacks "Allreduce" (1 steps)`)}},
		{name: "summary by_type extra", mutate: func(p *Plan) { p.Summary.ByType[Scatter] = 0 },
			want: []diag.Diagnostic{pp(`summary: by_type has "Scatter", but no collective step has that type`)}},
		{name: "summary by_type count", mutate: func(p *Plan) { p.Summary.ByType[Allgather] = 3 },
			want: []diag.Diagnostic{pp(`summary: by_type["Allgather"] is 3, but the plan has 1 such collective steps`)}},
		{name: "summary bytes low", base: twoOpPlan, mutate: func(p *Plan) { p.Summary.BytesReceivedMax = 256 },
			want: []diag.Diagnostic{pp("summary: bytes_received_max is 256, but the steps make a device receive at most 24832 bytes")}},
		{name: "summary bytes high", base: twoOpPlan, mutate: func(p *Plan) { p.Summary.BytesReceivedMax = 24833 },
			want: []diag.Diagnostic{pp("summary: bytes_received_max is 24833, but the steps make a device receive at most 24832 bytes")}},
		{name: "collective without bytes", base: twoOpPlan, mutate: func(p *Plan) { p.Steps[2].Bytes = nil },
			want: []diag.Diagnostic{sp(2, Allreduce, "a collective needs bytes (sent_per_device, received_per_device)")}},
		{name: "local step with bytes", base: twoOpPlan, mutate: func(p *Plan) { p.Steps[0].Bytes = &Bytes{} },
			want: []diag.Diagnostic{sp(0, Permute, "a local step moves no bytes between devices; bytes must be absent")}},
	}
}

// TestShapeAxis checks that a sharding gives shape_axis exactly where its
// logical_axis, counted among the non-reduction axes, is another position
// in shape, and then that position.
func TestShapeAxis(t *testing.T) {
	tests := map[string]struct {
		shapeAxis *int
		want      []string
	}{
		"given and right": {new(1), nil},
		"missing":         {nil, []string{`tensor "tv1": sharding[0]: logical_axis 0 is position 1 in shape, which counts the reduction axes: shape_axis 1 is missing`}},
		"wrong":           {new(2), []string{`tensor "tv1": sharding[0]: shape_axis is 2, but logical_axis 0 is position 1 in shape`}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			p := localReducePlan()
			p.Tensors[1].Sharding[0].ShapeAxis = tc.shapeAxis
			var got []string
			for _, pr := range Validate(p) {
				got = append(got, pr.Text())
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("Validate (-want +got):\n%s", d)
			}
		})
	}
	p := allgatherPlan()
	p.Tensors[0].Sharding[0].ShapeAxis = new(0)
	if got := Validate(p); len(got) != 1 || !strings.Contains(got[0].Text(), "give shape_axis only where they differ") {
		t.Errorf("shape_axis equal to logical_axis: %v", got)
	}
}

// TestValidateSendCountsOnCollectives: only an AllToAllV takes
// send_counts, a collective of another type included. The check sits
// after checkLocalFields returns for collectives, so that Validate does
// not report it yet: the test skips until it does, and then holds it to
// the message local steps get.
func TestValidateSendCountsOnCollectives(t *testing.T) {
	tests := map[string]struct {
		base func() *Plan
		typ  string
	}{
		"AllToAll":  {allToAllPlan, AllToAll},
		"Allgather": {allgatherPlan, Allgather},
		"Allreduce": {twoOpPlan, Allreduce},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			p := tc.base()
			i := len(p.Steps) - 1
			p.Steps[i].SendCounts = [][]int{{1, 1, 1, 1}, {1, 1, 1, 1}, {1, 1, 1, 1}, {1, 1, 1, 1}}
			got := Validate(p)
			want := []diag.Diagnostic{sp(i, tc.typ, "send_counts is set, but only an AllToAllV takes them")}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Validate mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestValidateKeptPlans validates plans kept in testdata because the
// lowering that found a validator bug with them no longer writes them
// (each file says which bug in the fusion of the same name under
// testdata/regress): they must stay valid.
func TestValidateKeptPlans(t *testing.T) {
	files, err := filepath.Glob("testdata/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no kept plans (%v)", err)
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			p, err := Decode(file, data)
			if err != nil {
				t.Fatal(err)
			}
			if probs := Validate(p); probs != nil {
				t.Errorf("Validate = %v, want none", probs)
			}
		})
	}
}
