package plan

import "github.com/nvcomm/nvcomm/internal/diag"

// unevenPlan lowers tv1 = set(tv0) where tv0 [3] is split over two devices
// (shards of 2 and 1, padded to 4) and tv1 is replicated: Pad, Allgather,
// Unpad.
func unevenPlan() *Plan {
	return &Plan{
		Format: Format, Fusion: "uneven", Policy: "optimal",
		Meshes: map[string]Mesh{"m": {Shape: []int{2}, Devices: []int{0, 1}}},
		Tensors: []Tensor{
			{Name: "tv0", DType: "float32", Mesh: "m", Shape: []int{3},
				Schedule: []ScheduleStep{
					{OuterSplit: &SplitArgs{Axis: 0, Factor: 2}},
					{Parallelize: &ParallelizeArgs{Axis: 0, Type: "DIDx"}},
				},
				Sharding:   []Sharding{{Type: "DIDx", LogicalAxis: 0, Kind: "block"}},
				LocalShape: []int{2}, PaddedShape: []int{4}, Layout: []int{0}},
			{Name: "tv1", DType: "float32", Mesh: "m", Shape: []int{3}, Sharding: []Sharding{}, LocalShape: []int{3}, Layout: []int{0}},
		},
		Ops: []Op{{Index: 0, Op: "set", Input: "tv0", Output: "tv1"}},
		Steps: []Step{
			{ID: 0, Op: 0, Expr: "tv1 = set(tv0)", Kind: KindLocal, Type: Pad, Devices: []int{0, 1},
				Input: "tv0", Output: "tv1/padded", Count: Count{Input: 2, Output: 2},
				Dims: []int{2}, Valid: [][]int{{2}, {1}}, Fill: new("0")},
			{ID: 1, Op: 0, Expr: "tv1 = set(tv0)", Kind: KindCollective, Type: Allgather, Teams: [][]int{{0, 1}},
				Input: "tv1/padded", Output: "tv1/unpadded", Axis: new(0), Count: Count{Input: 2, Output: 4},
				Bytes: &Bytes{SentPerDevice: 8, ReceivedPerDevice: 8, LowerBound: 8}},
			{ID: 2, Op: 0, Expr: "tv1 = set(tv0)", Kind: KindLocal, Type: Unpad, Devices: []int{0, 1},
				Input: "tv1/unpadded", Output: "tv1", Count: Count{Input: 4, Output: 3},
				Dims: []int{4}, Valid: [][]int{{3}, {3}}},
		},
		Summary: Summary{Collectives: 1, LocalSteps: 2, ByType: map[string]int{Allgather: 1}, BytesReceivedMax: 8},
	}
}

// slicePlan lowers tv1 = set(tv0), tv0 [4] replicated and tv1 split over two
// devices, to a Slice.
func slicePlan() *Plan {
	p := unevenPlan()
	p.Tensors[0] = Tensor{Name: "tv0", DType: "float32", Mesh: "m", Shape: []int{4}, Sharding: []Sharding{}, LocalShape: []int{4}, Layout: []int{0}}
	p.Tensors[1] = Tensor{Name: "tv1", DType: "float32", Mesh: "m", Shape: []int{4},
		Schedule: []ScheduleStep{
			{OuterSplit: &SplitArgs{Axis: 0, Factor: 2}},
			{Parallelize: &ParallelizeArgs{Axis: 0, Type: "DIDx"}},
		},
		Sharding: []Sharding{{Type: "DIDx", LogicalAxis: 0, Kind: "block"}}, LocalShape: []int{2}, Layout: []int{0}}
	p.Steps = []Step{{ID: 0, Op: 0, Expr: "tv1 = set(tv0)", Kind: KindLocal, Type: Slice, Teams: [][]int{{0, 1}},
		Input: "tv0", Output: "tv1", Axis: new(0), Count: Count{Input: 4, Output: 2}}}
	p.Summary = Summary{LocalSteps: 1, ByType: map[string]int{}, BytesRatio: new(1.0)}
	return p
}

// shortSlicePlan lowers tv1 = set(tv0), tv0 [3] replicated and tv1 split
// over two devices (shards of 2 and 1), to a Slice of a short input (rank 1
// keeps tv0[2:3] and a zero) and an Unpad.
func shortSlicePlan() *Plan {
	p := unevenPlan()
	p.Tensors[0] = Tensor{Name: "tv0", DType: "float32", Mesh: "m", Shape: []int{3}, Sharding: []Sharding{}, LocalShape: []int{3}, Layout: []int{0}}
	p.Tensors[1] = Tensor{Name: "tv1", DType: "float32", Mesh: "m", Shape: []int{3},
		Schedule: []ScheduleStep{
			{OuterSplit: &SplitArgs{Axis: 0, Factor: 2}},
			{Parallelize: &ParallelizeArgs{Axis: 0, Type: "DIDx"}},
		},
		Sharding: []Sharding{{Type: "DIDx", LogicalAxis: 0, Kind: "block"}}, LocalShape: []int{2}, PaddedShape: []int{4}, Layout: []int{0}}
	p.Steps = []Step{
		{ID: 0, Op: 0, Expr: "tv1 = set(tv0)", Kind: KindLocal, Type: Slice, Teams: [][]int{{0, 1}},
			Input: "tv0", Output: "tv1/unpadded", Axis: new(0), Count: Count{Input: 3, Output: 2}},
		{ID: 1, Op: 0, Expr: "tv1 = set(tv0)", Kind: KindLocal, Type: Unpad, Devices: []int{0, 1},
			Input: "tv1/unpadded", Output: "tv1", Count: Count{Input: 2, Output: 2},
			Dims: []int{2}, Valid: [][]int{{2}, {1}}},
	}
	p.Summary = Summary{LocalSteps: 2, ByType: map[string]int{}, BytesRatio: new(1.0)}
	return p
}

// padCases break the Pad, Unpad and Slice rules, one each.
func padCases() []validateCase {
	return []validateCase{
		{name: "pad without fill", base: unevenPlan, mutate: func(p *Plan) { p.Steps[0].Fill = nil },
			want: []diag.Diagnostic{sp(0, Pad, "a Pad needs a fill of 0, 1, -inf or inf")}},
		{name: "pad with an odd fill", base: unevenPlan, mutate: func(p *Plan) { p.Steps[0].Fill = new("2") },
			want: []diag.Diagnostic{sp(0, Pad, "a Pad needs a fill of 0, 1, -inf or inf")}},
		{name: "unpad with fill", base: unevenPlan, mutate: func(p *Plan) { p.Steps[2].Fill = new("0") },
			want: []diag.Diagnostic{sp(2, Unpad, "an Unpad takes no fill")}},
		{name: "pad box per device", base: unevenPlan, mutate: func(p *Plan) { p.Steps[0].Valid = [][]int{{2}} },
			want: []diag.Diagnostic{sp(0, Pad, "valid has 1 boxes for 2 devices")}},
		{name: "pad box beyond dims", base: unevenPlan, mutate: func(p *Plan) { p.Steps[0].Valid[1] = []int{3} },
			want: []diag.Diagnostic{sp(0, Pad, "valid box [3] of device 1 is not within dims [2]")}},
		{name: "pad padded count", base: unevenPlan, mutate: func(p *Plan) { p.Steps[0].Dims = []int{3} },
			want: []diag.Diagnostic{sp(0, Pad, "the padded count is 2, want 3 (the product of dims [3])")}},
		{name: "unpad unpadded count", base: unevenPlan, mutate: func(p *Plan) { p.Steps[2].Valid = [][]int{{2}, {2}} },
			want: []diag.Diagnostic{sp(2, Unpad, "the unpadded count is 3, want 2 (the box that holds every valid box)")}},
		{name: "valid on another step", base: unevenPlan, mutate: func(p *Plan) { p.Steps[1].Valid = [][]int{{1}} },
			want: []diag.Diagnostic{sp(1, Allgather, "valid is set, but a collective takes none")}},
		{name: "padded shape short", base: unevenPlan, mutate: func(p *Plan) { p.Tensors[0].PaddedShape = []int{2} },
			want: []diag.Diagnostic{pp(`tensor "tv0": padded_shape[0] is 2, less than the extent 3`)}},
		{name: "slice with devices", base: slicePlan, mutate: func(p *Plan) { p.Steps[0].Devices = []int{0} },
			want: []diag.Diagnostic{sp(0, Slice, "a Slice takes teams, not devices")}},
		{name: "slice without teams", base: slicePlan, mutate: func(p *Plan) { p.Steps[0].Teams = nil },
			want: []diag.Diagnostic{sp(0, Slice, "a Slice needs teams (each member keeps the chunk of its rank)")}},
		{name: "slice count", base: slicePlan, mutate: func(p *Plan) { p.Steps[0].Count.Output = 1 },
			want: []diag.Diagnostic{
				sp(0, Slice, "count.input is 4, want 1 to count.output * 2 = 2 (the team size; the last chunks may be short)"),
				sp(0, Slice, "count.output is 1, but \"tv1\" holds 2 elements per device"),
			}},
		{name: "short slice", base: shortSlicePlan, mutate: func(*Plan) {}},
		{name: "slice input too long", base: shortSlicePlan, mutate: func(p *Plan) { p.Steps[0].Count.Input = 5 },
			want: []diag.Diagnostic{
				sp(0, Slice, "count.input is 5, want 1 to count.output * 2 = 4 (the team size; the last chunks may be short)"),
				sp(0, Slice, "count.input is 5, but \"tv0\" holds 3 elements per device"),
			}},
		{name: "strided slice of a short input", base: shortSlicePlan, mutate: func(p *Plan) { p.Steps[0].Dims = []int{1, 2, 2} },
			want: []diag.Diagnostic{
				sp(0, Slice, "count.input is 3, want count.output * 2 = 4 (the team size)"),
				sp(0, Slice, "dims [1 2 2] hold 4 elements, but count.input is 3"),
			}},
	}
}
