package lower_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nvcomm/nvcomm/internal/diag"
	"github.com/nvcomm/nvcomm/internal/lower"
	"github.com/nvcomm/nvcomm/internal/plan"
	"github.com/nvcomm/nvcomm/internal/syntax"
)

// goldenPlans lists every plan checked in under testdata.
func goldenPlans(t testing.TB) []string {
	files, err := filepath.Glob("../../testdata/*/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden plans (%v)", err)
	}
	return files
}

// readPlan decodes a plan file.
func readPlan(t testing.TB, file string) *plan.Plan {
	t.Helper()
	src, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	p, err := plan.Decode(file, src)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// lowerSource lowers a fusion and returns the plan as decoded from its
// encoding, as validate sees it.
func lowerSource(t *testing.T, src string, policy lower.Policy) *plan.Plan {
	t.Helper()
	f, err := syntax.Parse("f.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	p, err := lower.Lower(f, lower.Options{Policy: policy})
	if err != nil {
		t.Fatal(err)
	}
	b, err := plan.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	q, err := plan.Decode("f.json", b)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// TestCertifyGoldens: every plan nvcomm wrote is certified.
func TestCertifyGoldens(t *testing.T) {
	for _, file := range goldenPlans(t) {
		p := readPlan(t, file)
		if got := plan.Validate(p); got != nil {
			t.Errorf("%s: Validate = %v", filepath.Base(file), got)
			continue
		}
		if got, unproven := lower.Certify(p); got != nil || unproven != nil {
			t.Errorf("%s: Certify = %v, unproven ops %v", filepath.Base(file), got, unproven)
		}
	}
}

// unevenSource is an uneven Allgather: shards of 2 and 1 of [3].
const unevenSource = `name: uneven
meshes: {m: [0, 1]}
tensors:
  x: {mesh: m, shape: [3], schedule: [{outer_split: {axis: 0, factor: 2}}, {parallelize: {axis: 0, type: DIDx}}]}
ops:
  - {op: set, in: x, out: y}
`

// mergedSource shards a merged axis (the optimal policy lowers it).
const mergedSource = `name: merged
meshes: {m: [0, 1, 2, 3]}
tensors:
  x:
    mesh: m
    shape: [2, 6]
    schedule:
      - merge: {axis: 0}
      - outer_split: {axis: 0, factor: 4}
      - parallelize: {axis: 0, type: DIDx}
ops:
  - {op: set, in: x, out: y}
`

func pp(msg string) diag.Diagnostic { return diag.Diagnostic{Message: msg} }

// TestCertify edits what a plan states about its fusion, one field at a
// time (issue 10: a plan is a certificate, and its numbers may not be
// edited), and breaks the preconditions Validate would report.
func TestCertify(t *testing.T) {
	seed := func(t *testing.T) *plan.Plan { return readPlan(t, "../../testdata/examples/allgather_loop_split.json") }
	strided := func(t *testing.T) *plan.Plan {
		return readPlan(t, "../../testdata/conformance/E-07_strided_inner_split.json")
	}
	uneven := func(t *testing.T) *plan.Plan { return lowerSource(t, unevenSource, lower.PolicyOptimal) }
	merged := func(t *testing.T) *plan.Plan { return lowerSource(t, mergedSource, lower.PolicyOptimal) }
	for _, tc := range []struct {
		name   string
		base   func(t *testing.T) *plan.Plan
		mutate func(p *plan.Plan)
		want   []diag.Diagnostic
	}{
		{name: "unedited", base: seed, mutate: func(*plan.Plan) {}},
		{name: "sharding kind", base: strided, mutate: func(p *plan.Plan) { p.Tensors[0].Sharding[0].Kind = "block" },
			want: []diag.Diagnostic{pp(`tensor "tv0": sharding is [{"type":"DIDx","logical_axis":0,"kind":"block"}], but its schedule gives [{"type":"DIDx","logical_axis":0,"kind":"strided"}]`)}},
		{name: "sharding dropped", base: seed, mutate: func(p *plan.Plan) {
			p.Tensors[0].Sharding, p.Tensors[0].LocalShape = []plan.Sharding{}, []int{16}
			p.Steps[0].Count.Input = 16
			p.Steps[0].Count.Output = 64
			p.Steps[0].Bytes = &plan.Bytes{SentPerDevice: 192, ReceivedPerDevice: 192, LowerBound: 48}
			p.Summary.BytesReceivedMax, p.Summary.BytesRatio = 192, new(4.0)
		},
			want: []diag.Diagnostic{
				pp(`tensor "tv0": sharding is [], but its schedule gives [{"type":"DIDx","logical_axis":0,"kind":"block"}]`),
				pp(`tensor "tv0": local_shape is [16], but its schedule gives [4]`),
			}},
		{name: "merged axes", base: merged, mutate: func(p *plan.Plan) { p.Tensors[0].Sharding[0].LogicalAxes = []int{0} },
			want: []diag.Diagnostic{pp(`tensor "x": sharding is [{"type":"DIDx","logical_axis":0,"kind":"merged","logical_axes":[0]}], but its schedule gives [{"type":"DIDx","logical_axis":0,"kind":"merged","logical_axes":[0,1]}]`)}},
		{name: "uneven local shape", base: uneven, mutate: func(p *plan.Plan) { p.Tensors[0].LocalShape = []int{1} },
			want: []diag.Diagnostic{pp(`tensor "x": local_shape is [1], but its schedule gives [2]`)}},
		{name: "padded shape", base: uneven, mutate: func(p *plan.Plan) { p.Tensors[0].PaddedShape = []int{6} },
			want: []diag.Diagnostic{pp(`tensor "x": padded_shape is [6], but its schedule gives [4]`)}},
		{name: "padded shape dropped", base: uneven, mutate: func(p *plan.Plan) { p.Tensors[0].PaddedShape = nil },
			want: []diag.Diagnostic{pp(`tensor "x": padded_shape is absent, but its schedule gives [4]`)}},
		{name: "layout", base: merged, mutate: func(p *plan.Plan) { p.Tensors[0].Layout = []int{1, 0} },
			want: []diag.Diagnostic{pp(`tensor "x": layout is [1,0], but its schedule gives [0,1]`)}},
		{name: "bytes lower bound", base: seed, mutate: func(p *plan.Plan) {
			p.Summary.BytesLowerBound, p.Summary.BytesRatio = 24, new(2.0)
		},
			want: []diag.Diagnostic{pp("summary: bytes_lower_bound is 24, but nvcomm computes 48 for the plan's fusion (policy nvfuser)")}},
		{name: "step lower bound", base: seed, mutate: func(p *plan.Plan) { p.Steps[0].Bytes.LowerBound = 0 },
			want: []diag.Diagnostic{{Subject: plan.StepSubject(0, plan.Allgather), Message: "lower_bound is 0, but nvcomm's lowering of op 0, whose steps these are, bounds this step at 48"}}},
		{name: "step axis", base: seed, mutate: func(p *plan.Plan) { p.Steps[0].Axis = nil },
			want: []diag.Diagnostic{{Subject: plan.StepSubject(0, plan.Allgather), Message: "axis is null, but nvcomm's lowering of op 0, whose steps these are, gives 0"}}},
		{name: "policy", base: uneven, mutate: func(p *plan.Plan) { p.Policy = "nvfuser" },
			want: []diag.Diagnostic{pp(`nvcomm cannot lower the plan's fusion (policy nvfuser): op "y = set(x)" cannot be lowered (policy nvfuser): a sharded axis does not divide evenly among its devices, which nvFuser rejects ("Sharded axis must be evenly divisible by mesh"); use --policy optimal, which pads uneven shards`)}},
		{name: "schedule", base: seed, mutate: func(p *plan.Plan) { p.Tensors[0].Schedule[1].Parallelize.Type = "DIDw" },
			want: []diag.Diagnostic{pp(`tensor "tv0" parallelize: unknown parallel type "ParallelType(-1)" (expected DIDx, DIDy, DIDz or Serial)`)}},
		{name: "mesh", base: seed, mutate: func(p *plan.Plan) { p.Meshes["m"] = plan.Mesh{Shape: []int{3}, Devices: []int{0, 1, 2, 3}} },
			want: []diag.Diagnostic{pp(`mesh "m": shape [3] does not hold its 4 devices`)}},
		{name: "op", base: seed, mutate: func(p *plan.Plan) { p.Ops[0].Op = "sum" },
			want: []diag.Diagnostic{pp(`op 0: sum needs an axis among the input's non-reduction axes`)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := tc.base(t)
			tc.mutate(p)
			got, _ := lower.Certify(p)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Certify mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// gatherBroadcast lowers the seed example's Allgather another way, a
// Gather to device 0 and a Broadcast from it, with bounds nvcomm cannot
// certify: its own lowering has one Allgather.
func gatherBroadcast(t *testing.T) *plan.Plan {
	p := readPlan(t, "../../testdata/examples/allgather_loop_split.json")
	gather := p.Steps[0]
	gather.Type, gather.Root, gather.Output = plan.Gather, new(0), "tv1/gathered"
	gather.Bytes = &plan.Bytes{SentPerDevice: 16, ReceivedPerDevice: 48, LowerBound: 5}
	bcast := plan.Step{ID: 1, Op: 0, Expr: gather.Expr, Kind: plan.KindCollective, Type: plan.Broadcast,
		Teams: [][]int{{0, 1, 2, 3}}, Root: new(0), Input: "tv1/gathered", Output: "tv1",
		Count: plan.Count{Input: 16, Output: 16}, Bytes: &plan.Bytes{SentPerDevice: 192, ReceivedPerDevice: 64, LowerBound: 64}}
	p.Steps = []plan.Step{gather, bcast}
	p.Summary.Collectives, p.Summary.ByType = 2, map[string]int{plan.Gather: 1, plan.Broadcast: 1}
	p.Summary.BytesReceivedMax, p.Summary.BytesRatio = 64, new(1.333)
	return p
}

// TestCertifyOtherLowering: a plan that lowers an op in steps nvcomm would
// not emit is certified when its analyses and totals are nvcomm's, with
// the op unproven (the CLI proves it by simulation); the bounds of its
// steps only lie between 0 and what they receive.
func TestCertifyOtherLowering(t *testing.T) {
	p := gatherBroadcast(t)
	if got := plan.Validate(p); got != nil {
		t.Fatalf("Validate = %v", got)
	}
	got, unproven := lower.Certify(p)
	if got != nil || !slices.Equal(unproven, []int{0}) {
		t.Errorf("Certify = %v, unproven %v; want nil, [0]", got, unproven)
	}
	p.Summary.BytesLowerBound, p.Summary.BytesRatio = 64, new(1.0)
	want := []diag.Diagnostic{pp("summary: bytes_lower_bound is 64, but nvcomm computes 48 for the plan's fusion (policy nvfuser)")}
	got, _ = lower.Certify(p)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Certify mismatch (-want +got):\n%s", diff)
	}
}

// FuzzCertify checks that Certify never panics on a plan Validate accepts
// and answers the same twice.
func FuzzCertify(f *testing.F) {
	for _, file := range goldenPlans(f) {
		src, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(src)
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		p, err := plan.Decode("fuzz.json", src)
		if err != nil || plan.Validate(p) != nil {
			return
		}
		got, unproven := lower.Certify(p)
		again, unprovenAgain := lower.Certify(p)
		if !slices.Equal(got, again) || !slices.Equal(unproven, unprovenAgain) {
			t.Fatalf("Certify is not deterministic:\n%v %v\n%v %v", got, unproven, again, unprovenAgain)
		}
	})
}

// chainSource is a fusion of n sets, each moving the sharding between the
// two axes of [8, 16]: an AllToAll and local steps per op.
func chainSource(n int) string {
	var b strings.Builder
	b.WriteString("name: chain\nmeshes: {m: [0, 1, 2, 3]}\ntensors:\n")
	for i := range n + 1 {
		shape := ""
		if i == 0 {
			shape = "shape: [8, 16], "
		}
		fmt.Fprintf(&b, "  t%d: {mesh: m, %sschedule: [{outer_split: {axis: %d, factor: 4}}, {parallelize: {axis: %d, type: DIDx}}]}\n", i, shape, i%2, i%2)
	}
	b.WriteString("ops:\n")
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "  - {op: set, in: t%d, out: t%d}\n", i-1, i)
	}
	return b.String()
}

// BenchmarkValidateCertify validates and certifies a plan of 2000 ops
// (about 4000 steps); validate followed buffers back through every earlier
// step, quadratic in the steps, before it indexed them.
func BenchmarkValidateCertify(b *testing.B) {
	f, err := syntax.Parse("chain.yaml", []byte(chainSource(2000)))
	if err != nil {
		b.Fatal(err)
	}
	p, err := lower.Lower(f, lower.Options{})
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if got := plan.Validate(p); got != nil {
			b.Fatal(got)
		}
		if got, unproven := lower.Certify(p); got != nil || unproven != nil {
			b.Fatal(got, unproven)
		}
	}
	b.ReportMetric(float64(len(p.Steps)), "steps")
}

// TestCertifyTensorsAlike edits the analyses of tensors whose specs repeat
// an earlier tensor's, which Certify builds once (a chain's tensors take
// two specs): each edit is reported under the edited tensor's name, and
// only there.
func TestCertifyTensorsAlike(t *testing.T) {
	chain := func(t *testing.T) *plan.Plan { return lowerSource(t, chainSource(6), lower.PolicyOptimal) }
	for _, tc := range []struct {
		name   string
		mutate func(p *plan.Plan)
		want   []diag.Diagnostic
	}{
		{name: "unedited", mutate: func(*plan.Plan) {}},
		{name: "local shape of a repeat", mutate: func(p *plan.Plan) { p.Tensors[4].LocalShape = []int{8, 16} },
			want: []diag.Diagnostic{pp(`tensor "t4": local_shape is [8,16], but its schedule gives [2,16]`)}},
		{name: "sharding of a repeat", mutate: func(p *plan.Plan) { p.Tensors[5].Sharding[0].LogicalAxis = 0 },
			want: []diag.Diagnostic{pp(`tensor "t5": sharding is [{"type":"DIDx","logical_axis":0,"kind":"block"}], but its schedule gives [{"type":"DIDx","logical_axis":1,"kind":"block"}]`)}},
		{name: "layout of the first and of a repeat", mutate: func(p *plan.Plan) {
			p.Tensors[1].Layout = []int{1, 0}
			p.Tensors[3].PaddedShape = []int{8, 16}
		},
			want: []diag.Diagnostic{
				pp(`tensor "t1": layout is [1,0], but its schedule gives [0,1]`),
				pp(`tensor "t3": padded_shape is [8,16], but its schedule gives absent`),
			}},
		{name: "schedule of a repeat made another's", mutate: func(p *plan.Plan) {
			p.Tensors[6].Schedule[0].OuterSplit.Axis, p.Tensors[6].Schedule[1].Parallelize.Axis = 1, 1
		},
			want: []diag.Diagnostic{
				pp(`tensor "t6": sharding is [{"type":"DIDx","logical_axis":0,"kind":"block"}], but its schedule gives [{"type":"DIDx","logical_axis":1,"kind":"block"}]`),
				pp(`tensor "t6": local_shape is [2,16], but its schedule gives [8,4]`),
				pp("summary: bytes_lower_bound is 576, but nvcomm computes 480 for the plan's fusion (policy optimal)"),
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := chain(t)
			tc.mutate(p)
			got, _ := lower.Certify(p)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Certify mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
