package plan

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nvcomm/nvcomm/internal/diag"
)

// scheduleCases break the schedule and allocation rules (issue 10: plans
// with parallel type "DIDw", factor 0, axis 99, allocation [7, -1] or a DID
// extent other than the mesh's were valid).
func scheduleCases() []validateCase {
	par := func(axis int, typ string) ScheduleStep {
		return ScheduleStep{Parallelize: &ParallelizeArgs{Axis: axis, Type: typ}}
	}
	return []validateCase{
		{name: "schedule parallel type", mutate: func(p *Plan) { p.Tensors[0].Schedule[1].Parallelize.Type = "DIDw" },
			want: []diag.Diagnostic{pp(`tensor "tv0": schedule[1]: parallel type "DIDw" is not Serial, DIDx, DIDy or DIDz`)}},
		{name: "schedule serial", mutate: func(p *Plan) {
			p.Tensors[1].Schedule = []ScheduleStep{par(0, "Serial")}
		}},
		{name: "schedule parallel type on a missing mesh axis", mutate: func(p *Plan) { p.Tensors[0].Schedule[1].Parallelize.Type = "DIDy" },
			want: []diag.Diagnostic{pp(`tensor "tv0": schedule[1]: parallel type DIDy, but the mesh has 1 axes`)}},
		{name: "schedule factor 0", mutate: func(p *Plan) { p.Tensors[0].Schedule[0].OuterSplit.Factor = 0 },
			want: []diag.Diagnostic{pp(`tensor "tv0": schedule[0]: outer_split factor is 0, want >= 1`)}},
		{name: "schedule split factor negative", mutate: func(p *Plan) {
			p.Tensors[0].Schedule[0] = ScheduleStep{Split: &SplitArgs{Axis: 1, Factor: -4}}
		},
			want: []diag.Diagnostic{pp(`tensor "tv0": schedule[0]: split factor is -4, want >= 1`)}},
		{name: "schedule axis 99", mutate: func(p *Plan) { p.Tensors[0].Schedule[1].Parallelize.Axis = 99 },
			want: []diag.Diagnostic{pp(`tensor "tv0": schedule[1]: parallelize axis 99 is not a position in a loop domain of 3 axes`)}},
		{name: "schedule split axis negative", mutate: func(p *Plan) { p.Tensors[0].Schedule[0].OuterSplit.Axis = -1 },
			want: []diag.Diagnostic{pp(`tensor "tv0": schedule[0]: outer_split axis -1 is not a position in a loop domain of 2 axes`)}},
		{name: "schedule DID extent", mutate: func(p *Plan) { p.Tensors[0].Schedule[0].OuterSplit.Factor = 8 },
			want: []diag.Diagnostic{pp(`tensor "tv0": loop axis 1 is parallelized on DIDx with extent 8, but the mesh has 4 devices along DIDx`)}},
		{name: "schedule two DIDx axes", mutate: func(p *Plan) {
			p.Tensors[0].Schedule = append(p.Tensors[0].Schedule,
				ScheduleStep{OuterSplit: &SplitArgs{Axis: 0, Factor: 4}}, par(0, "DIDx"))
		},
			want: []diag.Diagnostic{pp(`tensor "tv0": loop axes 0 and 2 are both parallelized on DIDx`)}},
		{name: "schedule split of a device axis", mutate: func(p *Plan) {
			p.Tensors[0].Schedule = append(p.Tensors[0].Schedule, ScheduleStep{Split: &SplitArgs{Axis: 1, Factor: 2}})
		},
			want: []diag.Diagnostic{pp(`tensor "tv0": schedule[2]: split of loop axis 1, which is parallelized on DIDx`)}},
		{name: "schedule merge of a device axis", mutate: func(p *Plan) {
			p.Tensors[0].Schedule = append(p.Tensors[0].Schedule, ScheduleStep{Merge: &AxisArgs{Axis: 0}})
		},
			want: []diag.Diagnostic{pp(`tensor "tv0": schedule[2]: merge of loop axes 0 and 1, one of which is parallelized on devices`)}},
		{name: "schedule merge without partner", mutate: func(p *Plan) {
			p.Tensors[0].Schedule = append(p.Tensors[0].Schedule, ScheduleStep{Merge: &AxisArgs{Axis: 2}})
		},
			want: []diag.Diagnostic{pp(`tensor "tv0": schedule[2]: merge axis 2 has no partner in a loop domain of 3 axes`)}},
		{name: "schedule merge of a reduction axis", base: localReducePlan, mutate: func(p *Plan) {
			p.Tensors[1].Schedule = []ScheduleStep{{Merge: &AxisArgs{Axis: 0}}}
		},
			want: []diag.Diagnostic{pp(`tensor "tv1": schedule[0]: merge of loop axes 0 and 1, a reduction and a non-reduction axis`)}},
		{name: "schedule reorder", mutate: func(p *Plan) {
			p.Tensors[0].Schedule = append(p.Tensors[0].Schedule, ScheduleStep{Reorder: []int{0, 0, 1}})
		},
			want: []diag.Diagnostic{pp(`tensor "tv0": schedule[2]: reorder [0 0 1] is not a permutation of the 3 loop positions`)}},
		{name: "schedule two transforms", mutate: func(p *Plan) { p.Tensors[0].Schedule[1].Merge = &AxisArgs{Axis: 0} },
			want: []diag.Diagnostic{pp(`tensor "tv0": schedule[1]: has 2 transforms, want exactly one of split, outer_split, merge, reorder, parallelize`)}},
		{name: "schedule no transform", mutate: func(p *Plan) { p.Tensors[0].Schedule[1] = ScheduleStep{} },
			want: []diag.Diagnostic{pp(`tensor "tv0": schedule[1]: has 0 transforms, want exactly one of split, outer_split, merge, reorder, parallelize`)}},
		{name: "allocation 7 -1", mutate: func(p *Plan) { p.Tensors[0].Allocation = []int{7, -1} },
			want: []diag.Diagnostic{pp(`tensor "tv0": allocation[0]: 7 is not a position in a loop domain of 3 axes`)}},
		{name: "allocation device axis", mutate: func(p *Plan) { p.Tensors[0].Allocation = []int{0, 1, 2} },
			want: []diag.Diagnostic{pp(`tensor "tv0": allocation[1]: loop axis 1 is parallelized on DIDx, which is not stored`)}},
		{name: "allocation twice", mutate: func(p *Plan) { p.Tensors[0].Allocation = []int{0, 0} },
			want: []diag.Diagnostic{pp(`tensor "tv0": allocation[1]: loop axis 0 is listed twice`)}},
		{name: "allocation missing axis", mutate: func(p *Plan) { p.Tensors[0].Allocation = []int{2} },
			want: []diag.Diagnostic{pp(`tensor "tv0": allocation lacks loop axis 0; it must list every stored loop axis once`)}},
		{name: "allocation reduction axis", base: localReducePlan, mutate: func(p *Plan) { p.Tensors[1].Allocation = []int{0, 1} },
			want: []diag.Diagnostic{pp(`tensor "tv1": allocation[0]: loop axis 0 is a reduction axis, which is not stored`)}},
		{name: "allocation permuted", mutate: func(p *Plan) { p.Tensors[0].Allocation = []int{2, 0} }},
	}
}

// opOutputCases break the rules that tie an op's output to its input.
func opOutputCases() []validateCase {
	return []validateCase{
		{name: "op dtype change", mutate: func(p *Plan) { p.Tensors[1].DType = "float16" },
			want: []diag.Diagnostic{pp(`op 0: output "tv1" has dtype float16, but its input "tv0" has float32 (operands share a dtype; use cast)`)}},
		{name: "op output shape", mutate: func(p *Plan) {
			p.Tensors[1].Shape, p.Tensors[1].LocalShape = []int{1024, 8}, []int{1024, 8}
		},
			want: []diag.Diagnostic{pp(`op 0: output "tv1" has shape [1024 8] and reduction_axes [], want [8 1024] and [] (the input's non-reduction shape, the reduced axis)`)}},
		{name: "op output reduction axis", base: localReducePlan, mutate: func(p *Plan) { p.Ops[0].Axis = new(1) },
			want: []diag.Diagnostic{
				pp(`op 0: output "tv1" has shape [8 1024] and reduction_axes [0], want [8 1024] and [1] (the input's non-reduction shape, the reduced axis)`),
			}},
	}
}

// certificateCases edit the numbers a plan certifies and the fields that
// name what a step does.
func certificateCases() []validateCase {
	return []validateCase{
		{name: "bytes sent edited", mutate: func(p *Plan) { p.Steps[0].Bytes.SentPerDevice = 1 },
			want: []diag.Diagnostic{sp(0, Allgather, "bytes are {sent 1, received 24576} per device, but the step moves {24576, 24576} (docs/plan.md, Bytes)")}},
		{name: "bytes received edited", mutate: func(p *Plan) {
			p.Steps[0].Bytes.ReceivedPerDevice = 2
			p.Summary.BytesReceivedMax = 2
		},
			want: []diag.Diagnostic{
				sp(0, Allgather, "bytes are {sent 24576, received 2} per device, but the step moves {24576, 24576} (docs/plan.md, Bytes)"),
				pp("summary: bytes_received_max is 2, but the steps make a device receive at most 24576 bytes"),
			}},
		{name: "bytes of a Gather count holders", base: gatherPlan, mutate: func(p *Plan) { p.Steps[0].Bytes.ReceivedPerDevice = 40960 },
			want: []diag.Diagnostic{sp(0, Gather, "bytes are {sent 8192, received 40960} per device, but the step moves {8192, 32768} (docs/plan.md, Bytes)")}},
		{name: "lower bound above received", mutate: func(p *Plan) { p.Steps[0].Bytes.LowerBound = 24577 },
			want: []diag.Diagnostic{sp(0, Allgather, "lower_bound is 24577, not between 0 and received_per_device 24576")}},
		{name: "lower bound negative", mutate: func(p *Plan) { p.Steps[0].Bytes.LowerBound = -1 },
			want: []diag.Diagnostic{sp(0, Allgather, "lower_bound is -1, not between 0 and received_per_device 24576")}},
		{name: "bytes ratio edited", mutate: func(p *Plan) { p.Summary.BytesRatio = new(1.0) },
			want: []diag.Diagnostic{pp("summary: bytes_ratio is 1, want null (bytes_received_max / bytes_lower_bound, to 3 decimals)")}},
		{name: "bytes ratio of a bound", mutate: func(p *Plan) {
			p.Summary.BytesLowerBound, p.Summary.BytesRatio = 12288, new(2.0)
		}},
		{name: "bytes ratio rounded", mutate: func(p *Plan) {
			p.Summary.BytesLowerBound, p.Summary.BytesRatio = 24000, new(1.02)
		},
			want: []diag.Diagnostic{pp("summary: bytes_ratio is 1.02, want 1.024 (bytes_received_max / bytes_lower_bound, to 3 decimals)")}},
		{name: "bytes lower bound negative", mutate: func(p *Plan) { p.Summary.BytesLowerBound = -5 },
			want: []diag.Diagnostic{pp("summary: bytes_lower_bound is -5, want >= 0")}},
		{name: "expr edited", mutate: func(p *Plan) { p.Steps[0].Expr = "tv1 = sum(tv0)" },
			want: []diag.Diagnostic{sp(0, Allgather, `expr is "tv1 = sum(tv0)", but op 0 is "tv1 = set(tv0)"`)}},
		{name: "axis on a local step", base: twoOpPlan, mutate: func(p *Plan) { p.Steps[0].Axis = new(0) },
			want: []diag.Diagnostic{sp(0, Permute, "axis is 0, but a local step other than Slice takes none")}},
		{name: "slice axis", base: slicePlan, mutate: func(p *Plan) {
			p.Tensors[0].Shape, p.Tensors[0].LocalShape, p.Tensors[0].Layout = []int{2, 2}, []int{2, 2}, []int{0, 1}
			p.Tensors[1].Shape, p.Tensors[1].LocalShape, p.Tensors[1].Layout = []int{2, 2}, []int{1, 2}, []int{0, 1}
			p.Steps[0].Axis = new(1)
		},
			want: []diag.Diagnostic{sp(0, Slice, "axis is 1, but the step changes the sharding of axis 0")}},
	}
}

// flowCases break who holds what: a step's source must hold its input,
// and every device of an op output's mesh must end up with the output.
func flowCases() []validateCase {
	return []validateCase{
		{name: "broadcast root without the input", base: broadcastPlan, mutate: func(p *Plan) {
			p.Meshes["r"] = Mesh{Shape: []int{1}, Devices: []int{1}}
		},
			want: []diag.Diagnostic{sp(0, Broadcast, `device 0 reads "tv0", which it does not hold`)}},
		{name: "gather root moved", base: gatherPlan, mutate: func(p *Plan) {
			p.Meshes["r"] = Mesh{Shape: []int{1}, Devices: []int{5}}
		},
			want: []diag.Diagnostic{sp(0, Gather, "device 4 of team 0 is in no mesh")}},
		{name: "gather output on the wrong device", base: gatherPlan, mutate: func(p *Plan) {
			p.Meshes["r"] = Mesh{Shape: []int{2}, Devices: []int{4, 5}}
			p.Tensors[1].Mesh = "r"
		},
			want: []diag.Diagnostic{pp(`op 0: device 5 of mesh "r" never receives the output "tv1"`)}},
		{name: "send recv from a non-holder", base: sendRecvPlan, mutate: func(p *Plan) {
			p.Steps[0].Teams[0], p.Steps[0].Root = []int{1, 0}, new(1)
		},
			want: []diag.Diagnostic{
				sp(0, SendRecv, `device 1 reads "tv0", which it does not hold`),
				pp(`op 0: device 1 of mesh "b" never receives the output "tv1"`),
			}},
		{name: "local step on fewer devices", base: twoOpPlan, mutate: func(p *Plan) { p.Steps[0].Devices = []int{0, 1, 2} },
			want: []diag.Diagnostic{sp(1, Allgather, `device 3 reads "tv1/permuted", which it does not hold`)}},
	}
}

// TestValidateCapsProblems: a team of 5M devices in no mesh gave 4,999,997
// lines (issue 10). Validate keeps MaxProblems and says how many more.
func TestValidateCapsProblems(t *testing.T) {
	p := allgatherPlan()
	const strangers = 1000
	for d := range strangers {
		p.Steps[0].Teams[0] = append(p.Steps[0].Teams[0], 100+d)
	}
	got := Validate(p)
	var want []diag.Diagnostic
	for d := range MaxProblems {
		want = append(want, sp(0, Allgather, fmt.Sprintf("device %d of team 0 is in no mesh", 100+d)))
	}
	// 990 more strangers, and the step's count, which no longer matches
	// the team size.
	want = append(want, pp("too many problems (991 more)"))
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Validate mismatch (-want +got):\n%s", diff)
	}
}

func TestProblemsList(t *testing.T) {
	ps := NewProblems()
	if got := ps.All(); got != nil {
		t.Errorf("empty List() = %v, want nil", got)
	}
	for i := range MaxProblems + 3 {
		ps.AddAbout("", "problem %d", i)
	}
	AddStep(ps, 1, "", "one more")
	if got, want := ps.Count(), MaxProblems+4; got != want {
		t.Errorf("Count() = %d, want %d", got, want)
	}
	got := ps.All()
	if len(got) != MaxProblems+1 || got[MaxProblems] != pp("too many problems (4 more)") {
		t.Errorf("List() = %v, want %d problems and a count of 4 more", got, MaxProblems)
	}
}
