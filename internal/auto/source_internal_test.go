package auto

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nvcomm/nvcomm/internal/ir"
	"github.com/nvcomm/nvcomm/internal/shard"
	"github.com/nvcomm/nvcomm/internal/syntax"
)

// TestAnnotateCombined checks that a chosen Partial of an op's output,
// which the auto-sharder means held complete (the op sums across the
// devices), is written as the schedule that splits the op's reduction
// axis, since placements with a Partial would leave pending terms, and
// that the file then parses to that tensor: its reduction axis split, its
// values complete.
func TestAnnotateCombined(t *testing.T) {
	src := `format: 2
meshes:
  g: [[0, 1], [2, 3]]
tensors:
  x: {mesh: g, shape: [4, 8], placements: [Shard(0), Shard(1)]}
  w: {mesh: g, shape: [6, 8], placements: [Replicate(), Shard(1)]}
  y: {placements: auto}
ops:
  - {op: linear, in: [x, w], out: y}
`
	f, err := syntax.ParseAuto("in.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	tree, err := readSource([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	y := f.Tensor("y")
	chosen := sharding{{Kind: shard.Shard, Dim: 0}, {Kind: shard.Partial, Op: "sum"}}
	out, err := tree.annotate([]string{"y"}, map[string]sharding{"y": chosen}, nil, map[string]*ir.Tensor{"y": y})
	if err != nil {
		t.Fatal(err)
	}
	want := "  y: {schedule: [{outer_split: {axis: 2, factor: 2}}, {parallelize: {axis: 2, type: DIDx}}, {outer_split: {axis: 0, factor: 2}}, {parallelize: {axis: 0, type: DIDy}}]}"
	if !strings.Contains(string(out), want+"\n") {
		t.Errorf("annotated file lacks %q:\n%s", want, out)
	}
	g, err := syntax.Parse("out.yaml", out)
	if err != nil {
		t.Fatal(err)
	}
	got := g.Tensor("y")
	if diff := cmp.Diff([]int{2, 6}, got.LocalShape()); diff != "" || got.Partial != "" {
		t.Errorf("y: Partial %q, local shape (-want +got):\n%s", got.Partial, diff)
	}
}
