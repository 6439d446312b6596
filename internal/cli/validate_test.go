package cli_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nvcomm/nvcomm/internal/plan"
)

// certFusion lowers (policy nvfuser) to an Allgather and a Permute, then a
// LocalReduce and an Allreduce, on a 2x4 mesh.
const certFusion = `name: cert
meshes:
  g: [[0, 1, 2, 3], [4, 5, 6, 7]]
tensors:
  tv0:
    mesh: g
    shape: [8, 16]
    schedule:
      - outer_split: {axis: 1, factor: 4}
      - parallelize: {axis: 1, type: DIDx}
      - outer_split: {axis: 0, factor: 2}
      - parallelize: {axis: 0, type: DIDy}
  tv1:
    mesh: g
    schedule:
      - outer_split: {axis: 0, factor: 2}
      - parallelize: {axis: 0, type: DIDy}
ops:
  - {op: set, in: tv0, out: tv1}
  - {op: sum, in: tv1, out: tv2, axis: 0}
`

// unevenFusion lowers under the optimal policy only: nvFuser rejects
// uneven shards.
const unevenFusion = `name: uneven
meshes: {m: [0, 1]}
tensors:
  x: {mesh: m, shape: [3], schedule: [{outer_split: {axis: 0, factor: 2}}, {parallelize: {axis: 0, type: DIDx}}]}
ops:
  - {op: set, in: x, out: y}
`

// lowered lowers a fusion with a policy and decodes the plan.
func lowered(t *testing.T, fusion, policy string) *plan.Plan {
	t.Helper()
	dir := t.TempDir()
	src := writeFile(t, dir, "f.yaml", fusion)
	code, out, errs := run(t, "", "lower", "--policy", policy, src)
	if code != 0 {
		t.Fatalf("lower: exit %d: %s", code, errs)
	}
	p, err := plan.Decode("f.json", []byte(out))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestEditedPlansAreRejected: plans with broken schedules, allocations,
// dtypes, or edited analyses and numbers were "valid plan", and export
// torch wrote a program for them (issue 10). validate, export torch and
// simulate now all reject them, exit 1, with the same reasons.
func TestEditedPlansAreRejected(t *testing.T) {
	for _, tc := range []struct {
		name   string
		fusion string
		policy string
		mutate func(p *plan.Plan)
		raw    func(src string) string // an edit of the JSON text, after mutate
		want   []string
	}{
		{name: "parallel type DIDw", mutate: func(p *plan.Plan) { p.Tensors[0].Schedule[1].Parallelize.Type = "DIDw" },
			want: []string{`plan: tensor "tv0": schedule[1]: parallel type "DIDw" is not Serial, DIDx, DIDy or DIDz`}},
		{name: "factor 0", mutate: func(p *plan.Plan) { p.Tensors[0].Schedule[0].OuterSplit.Factor = 0 },
			want: []string{`plan: tensor "tv0": schedule[0]: outer_split factor is 0, want >= 1`}},
		{name: "axis 99", mutate: func(p *plan.Plan) { p.Tensors[0].Schedule[1].Parallelize.Axis = 99 },
			want: []string{`plan: tensor "tv0": schedule[1]: parallelize axis 99 is not a position in a loop domain of 3 axes`}},
		{name: "allocation 7 -1", mutate: func(p *plan.Plan) { p.Tensors[0].Allocation = []int{7, -1} },
			want: []string{`plan: tensor "tv0": allocation[0]: 7 is not a position in a loop domain of 4 axes`}},
		{name: "DID extent", mutate: func(p *plan.Plan) { p.Tensors[0].Schedule[0].OuterSplit.Factor = 2 },
			want: []string{`plan: tensor "tv0": loop axis 2 is parallelized on DIDx with extent 2, but the mesh has 4 devices along DIDx`}},
		{name: "dtype change", mutate: func(p *plan.Plan) { p.Tensors[1].DType = "float16" },
			want: []string{
				`plan: op 0: output "tv1" has dtype float16, but its input "tv0" has float32 (operands share a dtype; use cast)`,
				`plan: op 1: output "tv2" has dtype float32, but its input "tv1" has float16 (operands share a dtype; use cast)`,
			}},
		{name: "sharding kind", mutate: func(p *plan.Plan) { p.Tensors[1].Sharding[0].Kind = "strided" },
			want: []string{`plan: tensor "tv1": sharding is [{"type":"DIDy","logical_axis":0,"kind":"strided"}], but its schedule gives [{"type":"DIDy","logical_axis":0,"kind":"block"}]`}},
		{name: "layout", mutate: func(p *plan.Plan) { p.Tensors[0].Layout = []int{1, 0} },
			want: []string{`plan: tensor "tv0": layout is [1,0], but its schedule gives [0,1]`}},
		{name: "step bytes", mutate: func(p *plan.Plan) { p.Steps[0].Bytes.SentPerDevice = 1 },
			want: []string{`step 0 (Allgather): bytes are {sent 1, received 192} per device, but the step moves {192, 192} (docs/plan.md, Bytes)`}},
		{name: "bytes received max", mutate: func(p *plan.Plan) { p.Summary.BytesReceivedMax = 1000 },
			want: []string{
				`plan: summary: bytes_received_max is 1000, but the steps make a device receive at most 256 bytes`,
				`plan: summary: bytes_ratio is 1, want 3.906 (bytes_received_max / bytes_lower_bound, to 3 decimals)`,
			}},
		{name: "bytes lower bound", mutate: func(p *plan.Plan) { p.Summary.BytesLowerBound, p.Summary.BytesRatio = 128, new(2.0) },
			want: []string{`plan: summary: bytes_lower_bound is 128, but nvcomm computes 256 for the plan's fusion (policy nvfuser)`}},
		{name: "step lower bound", mutate: func(p *plan.Plan) { p.Steps[0].Bytes.LowerBound = 100 },
			want: []string{`step 0 (Allgather): lower_bound is 100, but nvcomm's lowering of op 0, whose steps these are, bounds this step at 192`}},
		{name: "duplicate key", raw: func(src string) string {
			return strings.Replace(src, `"fusion": "cert",`, `"fusion": "cert", "fusion": "other",`, 1)
		},
			want: []string{`p.json:3:21: error: invalid plan: duplicate key "fusion" (first at 3:3); a plan states each field once`}},
		{name: "policy nvfuser cannot lower it", fusion: unevenFusion, policy: "optimal", mutate: func(p *plan.Plan) { p.Policy = "nvfuser" },
			want: []string{`plan: nvcomm cannot lower the plan's fusion (policy nvfuser): op "y = set(x)" cannot be lowered (policy nvfuser): a sharded axis does not divide evenly among its devices, which nvFuser rejects ("Sharded axis must be evenly divisible by mesh"); use --policy optimal, which pads uneven shards`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fusion, policy := tc.fusion, tc.policy
			if fusion == "" {
				fusion, policy = certFusion, "nvfuser"
			}
			p := lowered(t, fusion, policy)
			if tc.mutate != nil {
				tc.mutate(p)
			}
			b, err := plan.Marshal(p)
			if err != nil {
				t.Fatal(err)
			}
			src := string(b)
			if tc.raw != nil {
				src = tc.raw(src)
			}
			dir := t.TempDir()
			writeFile(t, dir, "p.json", src)
			var want strings.Builder
			for _, line := range tc.want {
				if !strings.HasPrefix(line, "p.json:") {
					// Problems of the whole plan and of a step, without a
					// position: "p.json: error: message".
					line = "p.json: error: " + strings.TrimPrefix(line, "plan: ")
				}
				fmt.Fprintln(&want, line)
			}
			for _, args := range [][]string{
				{"validate", "p.json"},
				{"export", "torch", "-o", "run.py", "p.json"},
				{"simulate", "p.json"},
			} {
				t.Chdir(dir)
				code, stdout, stderr := run(t, "", args...)
				if code != 1 || stdout != "" {
					t.Errorf("%v: exit %d, stdout %q; want exit 1 and no output", args, code, stdout)
				}
				if diff := cmp.Diff(want.String(), stderr); diff != "" {
					t.Errorf("%v: stderr mismatch (-want +got):\n%s", args, diff)
				}
			}
			if _, err := os.Stat(filepath.Join(dir, "run.py")); !os.IsNotExist(err) {
				t.Errorf("export torch wrote run.py for an invalid plan (%v)", err)
			}
		})
	}
}

// TestValidateCapsProblems: a plan whose Allgather team holds 100k
// devices of no mesh printed a line for each (issue 10: 5M members, 1.15
// GB and 4,999,997 lines). validate prints ten and how many more.
func TestValidateCapsProblems(t *testing.T) {
	p := lowered(t, seedFusion, "nvfuser")
	const strangers = 100_000
	team := p.Steps[0].Teams[0]
	for d := range strangers {
		team = append(team, 100+d)
	}
	p.Steps[0].Teams[0] = team
	b, err := plan.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	path := writeFile(t, t.TempDir(), "big.json", string(b))
	code, stdout, stderr := run(t, "", "validate", path)
	lines := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n")
	if code != 1 || stdout != "" || len(lines) != plan.MaxProblems+1 {
		t.Fatalf("exit %d, stdout %q, %d lines of stderr; want exit 1, no output, %d lines", code, stdout, len(lines), plan.MaxProblems+1)
	}
	want := fmt.Sprintf("%s: error: too many problems (%d more)", path, strangers-plan.MaxProblems+1)
	if diff := cmp.Diff(want, lines[plan.MaxProblems]); diff != "" {
		t.Errorf("last line mismatch (-want +got):\n%s", diff)
	}
}

// gatherBroadcastPlan lowers the seed example's Allgather otherwise than
// nvcomm does: a Gather to device 0, then a Broadcast from it.
func gatherBroadcastPlan(t *testing.T) *plan.Plan {
	p := lowered(t, seedFusion, "nvfuser")
	gather := p.Steps[0]
	gather.Type, gather.Root, gather.Output = plan.Gather, new(0), "tv1/gathered"
	gather.Bytes = &plan.Bytes{SentPerDevice: 16, ReceivedPerDevice: 48, LowerBound: 48}
	bcast := plan.Step{ID: 1, Op: 0, Expr: gather.Expr, Kind: plan.KindCollective, Type: plan.Broadcast,
		Teams: [][]int{{0, 1, 2, 3}}, Root: new(0), Input: "tv1/gathered", Output: "tv1",
		Count: plan.Count{Input: 16, Output: 16}, Bytes: &plan.Bytes{SentPerDevice: 192, ReceivedPerDevice: 64, LowerBound: 64}}
	p.Steps = []plan.Step{gather, bcast}
	p.Summary.Collectives, p.Summary.ByType = 2, map[string]int{plan.Gather: 1, plan.Broadcast: 1}
	p.Summary.BytesReceivedMax, p.Summary.BytesRatio = 64, new(1.333)
	return p
}

// TestValidateProvesOtherLowerings: an op lowered otherwise than nvcomm
// lowers it cannot be certified by comparison; validate simulates the plan
// and accepts it when it computes the program, and rejects it when not.
func TestValidateProvesOtherLowerings(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(p *plan.Plan)
		code   int
		stderr string
	}{
		{name: "right data", mutate: func(*plan.Plan) {}},
		{name: "wrong order", mutate: func(p *plan.Plan) { p.Steps[0].Teams[0] = []int{0, 2, 1, 3} }, code: 1,
			stderr: "p.json: error: op 0 is lowered otherwise than nvcomm lowers it, which only a simulation proves, and the simulation finds wrong data: " +
				"op 0 (after step 1), tensor tv1, device 0, flat index 4, logical index [4]: expected -195, actual 231 (value differs)\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := gatherBroadcastPlan(t)
			tc.mutate(p)
			b, err := plan.Marshal(p)
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			writeFile(t, dir, "p.json", string(b))
			t.Chdir(dir)
			code, _, stderr := run(t, "", "validate", "p.json")
			if code != tc.code {
				t.Errorf("exit %d, want %d (stderr %q)", code, tc.code, stderr)
			}
			if diff := cmp.Diff(tc.stderr, stderr); diff != "" {
				t.Errorf("stderr mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
