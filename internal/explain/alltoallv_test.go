package explain

import (
	"bytes"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nvcomm/nvcomm/internal/lower"
	"github.com/nvcomm/nvcomm/internal/plan"
	"github.com/nvcomm/nvcomm/internal/syntax"
)

// TestExchangePeers: an AllToAllV's reason says, from its split sizes, to
// how many of the other members a device sends at most; its own part,
// and empty parts, go to nobody.
func TestExchangePeers(t *testing.T) {
	tests := map[string]struct {
		teams  [][]int
		counts [][]int
		want   string
	}{
		"some":           {[][]int{{0, 1, 2, 3}}, [][]int{{4, 4, 0, 0}, {4, 4, 0, 0}, {0, 0, 1, 7}, {0, 0, 7, 1}}, ", to at most 1 of the 3 others"},
		"unequal, some":  {[][]int{{0, 1, 2, 3}}, [][]int{{5, 2, 1, 0}, {0, 8, 0, 0}, {1, 0, 7, 0}, {2, 6, 0, 0}}, ", to at most 2 of the 3 others"},
		"every other":    {[][]int{{0, 1, 2}}, [][]int{{0, 1, 2}, {2, 0, 1}, {1, 2, 0}}, ", to each of the 2 others"},
		"the other":      {[][]int{{4, 5}, {6, 7}}, [][]int{{3, 1}, {1, 3}}, ", to the other member"},
		"all stay":       {[][]int{{0, 1}}, [][]int{{2, 0}, {0, 2}}, "; here every part stays where it is"},
		"team of one":    {[][]int{{3}}, [][]int{{5}}, ""},
		"no counts":      {[][]int{{0, 1}}, nil, ""},
		"too few rows":   {[][]int{{0, 1}}, [][]int{{1, 1}}, ""},
		"a short row":    {[][]int{{0, 1}}, [][]int{{1, 1}, {2}}, ""},
		"a negative one": {[][]int{{0, 1}}, [][]int{{3, -1}, {1, 1}}, ", to the other member"},
	}
	for name, tc := range tests {
		s := &plan.Step{Kind: plan.KindCollective, Type: plan.AllToAllV, Teams: tc.teams, SendCounts: tc.counts}
		if diff := cmp.Diff(tc.want, exchangePeers(s)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", name, diff)
		}
	}
}

// swap2x4 reshards [8, 16] from [Shard(0), Shard(1)] to [Shard(1),
// Shard(0)] on a 2x4 mesh, which nvcomm lowers to one AllToAllV over the
// 8 devices and a Permute (docs/lowering.md).
const swap2x4 = `format: 1
name: swap_2x4
meshes:
  g: [[0, 1, 2, 3], [4, 5, 6, 7]]
tensors:
  a: {mesh: g, shape: [8, 16], placements: [Shard(0), Shard(1)]}
  b: {mesh: g, shape: [8, 16], placements: [Shard(1), Shard(0)]}
ops:
  - {op: set, in: a, out: b}
`

// TestExplainAllToAllV explains a lowered AllToAllV: its reason says what
// an all-to-all with split sizes does, the Permute after it why it is
// there, and its bytes are the plan's.
func TestExplainAllToAllV(t *testing.T) {
	f, err := syntax.Parse("swap_2x4.yaml", []byte(swap2x4))
	if err != nil {
		t.Fatal(err)
	}
	p, err := lower.Lower(f, lower.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, s := range p.Steps {
		types = append(types, s.Type)
	}
	if diff := cmp.Diff([]string{plan.AllToAllV, plan.Permute}, types); diff != "" {
		t.Fatalf("the 2x4 swap lowers to other steps (-want +got):\n%s", diff)
	}
	m := NewModel(p, All())
	if len(m.Ops) != 1 || len(m.Ops[0].Steps) != 2 {
		t.Fatalf("model has %d ops, want 1 of 2 steps: %+v", len(m.Ops), m.Ops)
	}
	steps := m.Ops[0].Steps
	want := StepModel{ID: 0, Type: plan.AllToAllV, Kind: plan.KindCollective, Buffers: "a -> b/exchanged", Team: "[0 1 2 3 4 5 6 7]",
		Received: "64 B", Bound: "64 B", Time: steps[0].Time,
		Why: "the split along DIDy (mesh g axis 0) and DIDx (mesh g axis 1) changes: an all-to-all with split sizes, " +
			"each device sending each part only to the member that keeps it, to at most 2 of the 7 others"}
	if diff := cmp.Diff(want, steps[0]); diff != "" {
		t.Errorf("AllToAllV step (-want +got):\n%s", diff)
	}
	if steps[0].Time == "-" {
		t.Error("the AllToAllV has no predicted time")
	}
	if want := "the AllToAllV lays the received blocks outermost, but dim 0 is not outermost in b's layout -> Permute"; steps[1].Why != want {
		t.Errorf("Permute's reason:\n got %q\nwant %q", steps[1].Why, want)
	}
	var b bytes.Buffer
	if err := Write(&b, p, All()); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), want.Why) {
		t.Errorf("Write lacks the AllToAllV's reason:\n%s", b.String())
	}
}

// TestExplainAllToAllVAcrossMeshes explains an AllToAllV whose team spans
// the devices that hold the data and the output's mesh: [S(0)] on 4
// devices to [S(0)] on 4 others.
func TestExplainAllToAllVAcrossMeshes(t *testing.T) {
	const src = `format: 1
name: stages
meshes:
  a: [0, 1, 2, 3]
  b: [4, 5, 6, 7]
tensors:
  x: {mesh: a, shape: [8, 12], placements: [Shard(0)]}
  y: {mesh: b, placements: [Shard(0)]}
ops:
  - {op: set, in: x, out: y}
`
	f, err := syntax.Parse("stages.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	p, err := lower.Lower(f, lower.Options{})
	if err != nil {
		t.Fatal(err)
	}
	m := NewModel(p, All())
	if len(m.Ops) != 1 || len(m.Ops[0].Steps) != 1 || m.Ops[0].Steps[0].Type != plan.AllToAllV {
		t.Fatalf("the move lowers to other steps: %+v", m.Ops)
	}
	want := "the data moves to the output's devices: an all-to-all with split sizes over them and the devices that hold it, " +
		"each of which sends each output device only what it keeps, to at most 1 of the 7 others"
	if got := m.Ops[0].Steps[0].Why; got != want {
		t.Errorf("reason:\n got %q\nwant %q", got, want)
	}
}
