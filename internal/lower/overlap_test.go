package lower

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nvcomm/nvcomm/internal/cost"
	"github.com/nvcomm/nvcomm/internal/ops"
	"github.com/nvcomm/nvcomm/internal/plan"
	"github.com/nvcomm/nvcomm/internal/syntax"
)

// spMLP is a sequence-parallel TP MLP on {T} devices (Allgather + linear,
// then linear + ReduceScatter): x [{S}, {H}] split by sequence, the ffn
// {F} = 4·{H} wide, of dtype {DT}, the linears with attributes {A1} and
// {A2}.
const spMLP = `format: 2
meshes:
  tp: {DEVICES}
tensors:
  x:  {mesh: tp, shape: [{S}, {H}], dtype: {DT}, placements: [Shard(0)]}
  w1: {mesh: tp, shape: [{F}, {H}], dtype: {DT}, placements: [Shard(0)]}
  w2: {mesh: tp, shape: [{H}, {F}], dtype: {DT}, placements: [Shard(1)]}
  y:
    mesh: tp
    schedule:
      - outer_split: {axis: 2, factor: {T}}
      - parallelize: {axis: 2, type: DIDx}
      - outer_split: {axis: 0, factor: {T}}
      - parallelize: {axis: 0, type: DIDx}
ops:
  - {op: linear, in: [x, w1], out: h{A1}}
  - {op: relu, in: h, out: a}
  - {op: linear, in: [a, w2], out: y{A2}}
`

// spFusion is spMLP on t devices at s × h of dtype dt with the linears'
// attributes a1 and a2 (", overlap: ring").
func spFusion(t int, s, h int, dt, a1, a2 string) string {
	devices := make([]string, t)
	for i := range devices {
		devices[i] = fmt.Sprint(i)
	}
	return strings.NewReplacer("{DEVICES}", "["+strings.Join(devices, ", ")+"]", "{S}", fmt.Sprint(s), "{H}", fmt.Sprint(h),
		"{F}", fmt.Sprint(4*h), "{DT}", dt, "{A1}", a1, "{A2}", a2, "{T}", fmt.Sprint(t)).Replace(spMLP)
}

// overlapsOf says how p computes its linears: "none" or the form and k of
// each decomposed collective, from the steps (Overlaps is checked apart).
func overlapsOf(p *plan.Plan) []string {
	var out []string
	for i, op := range p.Ops {
		if op.Op != "linear" {
			continue
		}
		form, n := "none", 0
		for _, s := range p.Steps {
			switch {
			case s.Op != i || s.Kind != plan.KindCollective:
			case s.Type == plan.SendRecv:
				form = "ring"
			case strings.Contains(s.Output, "/overlap/") && form != "ring":
				form, n = "collective", n+1
			}
		}
		if form == "ring" {
			n = len(p.Meshes["tp"].Devices)
		}
		if form != "none" {
			form = fmt.Sprintf("%s k=%d", form, n)
		}
		out = append(out, op.Output+": "+form)
	}
	return out
}

// TestOverlapChosen lowers the sequence-parallel MLP at a small size
// (x [16, 8] on 4 devices) and at a realistic one (hidden 8192, seq 8192,
// bfloat16 on 8 devices), as lists (format 1) and as step graphs, with and
// without the linears' overlap, under both policies and objectives, and
// checks which forms the plans take: never a decomposed one in a list
// unless overlap forces it (which makes the plan a graph), nor under
// nvFuser's policy; at the small size the undecomposed form (each chunk
// pays a collective's launch floor, which no overlap hides), at the
// realistic size the ring for the Allgather + linear and 4 chunks for the
// linear + ReduceScatter, at twice its sequence 8 chunks (each chunk's
// product is longer, so more chunks hide more of the transfer before
// their launch floors cost more than they hide); under the bytes objective the undecomposed form
// (the chunks move the same bytes). Every plan is valid, and the fusion's
// bound the same in every plan of one size.
func TestOverlapChosen(t *testing.T) {
	small := spFusion(4, 16, 8, "float32", "", "")
	big := spFusion(8, 8192, 8192, "bfloat16", "", "")
	forced := spFusion(4, 16, 8, "float32", ", overlap: collective, chunks: 2", ", overlap: ring")
	auto := spFusion(8, 8192, 8192, "bfloat16", ", overlap: auto", ", overlap: auto")
	longer := spFusion(8, 16384, 8192, "bfloat16", "", "")
	collective := spFusion(4, 48, 8, "float32", ", overlap: collective", ", overlap: collective")
	none := []string{"h: none", "y: none"}
	for _, tc := range []struct {
		name, src string
		opts      Options
		want      []string
		graph     bool
	}{
		{"small, a list", small, Options{}, none, false},
		{"small, a graph", small, Options{StepGraph: true}, none, true},
		{"realistic, a list", big, Options{}, none, false},
		{"realistic, a graph", big, Options{StepGraph: true}, []string{"h: ring k=8", "y: collective k=4"}, true},
		{"realistic, a graph, nvfuser", big, Options{StepGraph: true, Policy: PolicyNvFuser}, none, true},
		{"realistic, a graph, bytes", big, Options{StepGraph: true, Objective: ObjectiveBytes}, none, true},
		{"realistic, overlap: auto", auto, Options{}, []string{"h: ring k=8", "y: collective k=4"}, true},
		{"sequence 16384, a graph", longer, Options{StepGraph: true}, []string{"h: ring k=8", "y: collective k=8"}, true},
		{"small, collective, k left out", collective, Options{}, []string{"h: collective k=2", "y: collective k=2"}, true},
		{"small, forced", forced, Options{}, []string{"h: collective k=2", "y: ring k=4"}, true},
		{"small, forced, nvfuser", forced, Options{Policy: PolicyNvFuser}, none, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := syntax.Parse("mlp.yaml", []byte(tc.src))
			if err != nil {
				t.Fatal(err)
			}
			p, err := Lower(f, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			if ds := plan.Validate(p); len(ds) > 0 {
				t.Fatalf("validate: %v", ds)
			}
			if d := cmp.Diff(tc.want, overlapsOf(p)); d != "" {
				t.Errorf("forms (-want +got):\n%s", d)
			}
			if p.Graph() != tc.graph {
				t.Errorf("format %d, want a graph: %v", p.Format, tc.graph)
			}
		})
	}
}

// TestOverlapBound: every form of the small MLP's linears, forced, has
// the undecomposed plan's bound and busiest device's received bytes (the
// chunks move the same bytes), and Overlaps reports the prices the
// lowering chose between, the forced form chosen.
func TestOverlapBound(t *testing.T) {
	lowerSrc := func(src string) *plan.Plan {
		f, err := syntax.Parse("mlp.yaml", []byte(src))
		if err != nil {
			t.Fatal(err)
		}
		p, err := Lower(f, Options{StepGraph: true})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	base := lowerSrc(spFusion(4, 16, 8, "float32", ", overlap: none", ", overlap: none"))
	for _, attr := range []string{", overlap: collective, chunks: 2", ", overlap: collective, chunks: 4", ", overlap: ring"} {
		p := lowerSrc(spFusion(4, 16, 8, "float32", attr, attr))
		if p.Summary.BytesLowerBound != base.Summary.BytesLowerBound || p.Summary.BytesReceivedMax != base.Summary.BytesReceivedMax {
			t.Errorf("%s: bound %d, busiest %d; undecomposed %d, %d", attr, p.Summary.BytesLowerBound, p.Summary.BytesReceivedMax,
				base.Summary.BytesLowerBound, base.Summary.BytesReceivedMax)
		}
		choices, err := Overlaps(p, nil)
		if err != nil || len(choices) != 2 {
			t.Fatalf("%s: Overlaps = %v, %v", attr, choices, err)
		}
		for _, c := range choices {
			form := strings.Fields(strings.Trim(attr, ", "))[1]
			if c.Chosen.Form != strings.TrimSuffix(form, ",") || len(c.Prices) < 3 || c.Prices[0].Form != ops.OverlapNone {
				t.Errorf("%s: op %d chose %+v among %+v", attr, c.Op, c.Chosen, c.Prices)
			}
		}
	}
}

// TestOverlapErrors: a decomposed form forced where it cannot be taken,
// or chunks that do not fit, is an error naming the op.
func TestOverlapErrors(t *testing.T) {
	replicated := strings.Replace(spFusion(4, 16, 8, "float32", ", overlap: ring", ""), "x:  {mesh: tp, shape: [16, 8], dtype: float32, placements: [Shard(0)]}", "x:  {mesh: tp, shape: [16, 8], dtype: float32}", 1)
	for _, tc := range []struct{ name, src, want string }{
		{"nothing gathered", replicated, "overlap: ring needs its first operand (or a linear's weight) gathered along its rows"},
		{"chunks not dividing", spFusion(4, 16, 8, "float32", ", overlap: collective, chunks: 3", ""), "chunks: 3 does not divide each device's 4 rows"},
		{"chunks of a ring", spFusion(4, 16, 8, "float32", ", overlap: ring, chunks: 2", ""), "chunks: 2 without overlap: collective"},
		{"chunks alone", spFusion(4, 16, 8, "float32", "", ", chunks: 2"), "chunks: 2 without overlap: collective"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := syntax.Parse("mlp.yaml", []byte(tc.src))
			if err != nil {
				t.Fatal(err)
			}
			_, err = Lower(f, Options{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one with %q", err, tc.want)
			}
		})
	}
}

// TestChunkCandidates: the makespan tries every k from 2 to ops.MaxChunks
// that divides each device's rows, in increasing order (a tie keeps the
// fewer chunks), 3 and 6 as well as powers of two.
func TestChunkCandidates(t *testing.T) {
	for _, tc := range []struct {
		rows int
		want []int
	}{
		{1, nil},
		{4, []int{2, 4}},
		{7, []int{7}},
		{12, []int{2, 3, 4, 6, 12}},
		{17, nil},
		{1024, []int{2, 4, 8, 16}},
		{48, []int{2, 3, 4, 6, 8, 12, 16}},
	} {
		if d := cmp.Diff(tc.want, chunkCandidates(tc.rows)); d != "" {
			t.Errorf("rows %d (-want +got):\n%s", tc.rows, d)
		}
	}
}

// fsdpMLP is an FSDP MLP forward on 8 devices: x [{S}, {H}], the ffn 4·{H}
// wide, both weights stored Shard(0) and gathered before their linear
// (the set inserted for it), bfloat16, the linears with attributes {A1}
// and {A2}.
const fsdpMLP = `format: 2
meshes:
  tp: [0, 1, 2, 3, 4, 5, 6, 7]
tensors:
  x:  {mesh: tp, shape: [{S}, {H}], dtype: bfloat16, placements: [Shard(0)]}
  w1: {mesh: tp, shape: [{F}, {H}], dtype: bfloat16, placements: [Shard(0)]}
  w2: {mesh: tp, shape: [{H}, {F}], dtype: bfloat16, placements: [Shard(0)]}
  h:  {placements: [Shard(0)]}
  y:  {placements: [Shard(0)]}
ops:
  - {op: linear, in: [x, w1], out: h{A1}}
  - {op: relu, in: h, out: a}
  - {op: linear, in: [a, w2], out: y{A2}}
`

// TestOverlapWeightInContext: the Allgather of a linear's weight (FSDP's)
// is priced after the steps of the ops before it. At 32768 tokens,
// hidden 8192, the first weight's gather, which nothing runs beside, is
// decomposed (the ring), and the second's is not: its undecomposed
// Allgather runs beside the first linear, where a decomposed form's cuts
// would wait for that linear. Forcing the second decomposed (what pricing
// it alone chooses) makes the plan slower; at a small size nothing is
// decomposed. Every plan is valid.
func TestOverlapWeightInContext(t *testing.T) {
	fusion := func(s, h int, a1, a2 string) string {
		return strings.NewReplacer("{S}", fmt.Sprint(s), "{H}", fmt.Sprint(h), "{F}", fmt.Sprint(4*h), "{A1}", a1, "{A2}", a2).Replace(fsdpMLP)
	}
	lowered := func(src string) (*plan.Plan, float64) {
		t.Helper()
		f, err := syntax.Parse("fsdp.yaml", []byte(src))
		if err != nil {
			t.Fatal(err)
		}
		p, err := Lower(f, Options{StepGraph: true})
		if err != nil {
			t.Fatal(err)
		}
		if ds := plan.Validate(p); len(ds) > 0 {
			t.Fatalf("validate: %v", ds)
		}
		pr, err := cost.Predict(cost.Default(), p)
		if err != nil {
			t.Fatal(err)
		}
		return p, pr.Total
	}
	small, _ := lowered(fusion(64, 8, "", ""))
	if d := cmp.Diff([]string{"h: none", "y: none"}, overlapsOf(small)); d != "" {
		t.Errorf("small: forms (-want +got):\n%s", d)
	}
	chosen, took := lowered(fusion(32768, 8192, "", ""))
	if d := cmp.Diff([]string{"h: ring k=8", "y: none"}, overlapsOf(chosen)); d != "" {
		t.Errorf("realistic: forms (-want +got):\n%s", d)
	}
	for _, a2 := range []string{", overlap: ring", ", overlap: collective, chunks: 8"} {
		if _, forced := lowered(fusion(32768, 8192, "", a2)); forced <= took {
			t.Errorf("second weight%s: %.4g s, not slower than the plan chosen (%.4g s)", a2, forced, took)
		}
	}
	_, none := lowered(fusion(32768, 8192, ", overlap: none", ", overlap: none"))
	if none <= took {
		t.Errorf("undecomposed: %.4g s, not slower than the plan chosen (%.4g s)", none, took)
	}
}
