package reshard

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nvcomm/nvcomm/internal/ir"
	"github.com/nvcomm/nvcomm/internal/ops"
	"github.com/nvcomm/nvcomm/internal/shard"
)

// headsRules are the rules of a reshape [s, h·d] -> [s, h, d] (the split of
// a projection into heads) and of its inverse, written in factors s = 8,
// h = 4, d = 16, as ops' TestSplitAlikeThroughReshape writes them.
func headsRules() (split, merge *ops.Rule) {
	factors := []ops.Factor{{Size: 8}, {Size: 4}, {Size: 16}}
	split = &ops.Rule{Factors: factors, Operands: [][]ops.Dim{{{0}, {1, 2}}}, Result: []ops.Dim{{0}, {1}, {2}}}
	merge = &ops.Rule{Factors: factors, Operands: [][]ops.Dim{{{0}, {1}, {2}}}, Result: []ops.Dim{{0}, {1, 2}}}
	return split, merge
}

// pairTensor builds tensor name of shape on a mesh of two devices, placed
// as placements say.
func pairTensor(t *testing.T, name string, shape []int, placements ...shard.Placement) *ir.Tensor {
	t.Helper()
	mesh, err := ir.NewMesh("m", []int{2}, []int{0, 1})
	if err != nil {
		t.Fatal(err)
	}
	if placements == nil {
		placements = []shard.Placement{{Kind: shard.Replicate}}
	}
	x, err := ir.NewTensor(ir.TensorSpec{Name: name, Mesh: mesh, DType: "float32", Shape: shape, Placements: placements})
	if err != nil {
		t.Fatal(err)
	}
	return x
}

// TestPairingFollowsFactors checks that a pair's axes pair as its op's
// rule places the factors: a set's and a reduction's as the one-int maps
// of before, a reshape's split dimensions as parts of the operand's
// compound one, and a merge's not at all.
func TestPairingFollowsFactors(t *testing.T) {
	split, merge := headsRules()
	rule := func(op string, in [][]int, out []int, axis int) *ops.Rule {
		r := ops.Lookup(op).Rule(in, out, ops.Attrs{Axis: axis})
		return &r
	}
	type pairing struct {
		Producer, Consumer, At []int
		OK                     bool
	}
	for _, tc := range []struct {
		name    string
		rule    *ops.Rule
		in, out []int
		want    pairing
	}{
		{"set", rule("set", [][]int{{4, 6}}, []int{4, 6}, -1), []int{4, 6}, []int{4, 6}, pairing{[]int{0, 1}, []int{0, 1}, nil, true}},
		{"sum over axis 1", rule("sum", [][]int{{4, 6, 8}}, []int{4, 8}, 1), []int{4, 6, 8}, []int{4, 8}, pairing{[]int{0, 1, 2}, []int{0, 2}, nil, true}},
		{"heads split", split, []int{8, 64}, []int{8, 4, 16}, pairing{[]int{0, 1}, []int{0, 1, 1}, []int{1, 16, 1}, true}},
		{"heads merge", merge, []int{8, 4, 16}, []int{8, 64}, pairing{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, ok := opPairing(tc.rule, pairTensor(t, "x", tc.in), pairTensor(t, "y", tc.out))
			got := pairing{m.producer.to, m.consumer.to, m.consumer.at, ok}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
}

// TestSplitPairsAlongFactors lowers nothing but factors the pair of the
// heads split, [8, 64] split in two along its second dimension, against
// results split along each dimension: split along heads, the outer factor
// of h·d, each device already holds its block (nothing to receive); along
// s or d, it holds half of it.
func TestSplitPairsAlongFactors(t *testing.T) {
	split, _ := headsRules()
	x := pairTensor(t, "x", []int{8, 64}, shard.Placement{Kind: shard.Shard, Dim: 1})
	for _, tc := range []struct {
		name string
		dim  int
		want []int64
	}{
		{"along s", 0, []int64{128, 128}},
		{"along heads", 1, []int64{0, 0}},
		{"along d", 2, []int64{128, 128}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			y := pairTensor(t, "y", []int{8, 4, 16}, shard.Placement{Kind: shard.Shard, Dim: tc.dim})
			m, ok := opPairing(split, x, y)
			if !ok {
				t.Fatal("the split does not pair")
			}
			f, ok := newFactoring(paddedExtents(x, y, m.consumer), []*ir.Tensor{x, y}, []valueAxes{m.producer, m.consumer})
			if !ok {
				t.Fatal("the split does not factor")
			}
			src, dst := f.tensorView(x, m.producer), f.tensorView(y, m.consumer)
			var got []int64
			for _, d := range y.Mesh.Devices {
				got = append(got, need(src, dst, d))
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("elements each device receives (-want +got):\n%s", d)
			}
		})
	}
}

// TestPairingsKeptByRule checks that the ledger's pairings are kept by
// what an op's rule depends on: two sets of the same extents share one,
// reductions over different axes do not.
func TestPairingsKeptByRule(t *testing.T) {
	tensor := func(name string, reduced ...int) *ir.Tensor {
		mesh, err := ir.NewMesh("m", []int{2}, []int{0, 1})
		if err != nil {
			t.Fatal(err)
		}
		x, err := ir.NewTensor(ir.TensorSpec{Name: name, Mesh: mesh, DType: "float32", Shape: []int{4, 6, 8}, ReductionAxes: reduced})
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	x := tensor("x")
	lowered := []*ir.Op{
		{Kind: ir.OpSet, Inputs: []*ir.Tensor{x}, Out: tensor("y")},
		{Kind: ir.OpSet, Inputs: []*ir.Tensor{tensor("x2")}, Out: tensor("y2")},
		{Kind: ir.OpSum, Inputs: []*ir.Tensor{x}, Out: tensor("s1", 1), Axis: 1},
		{Kind: ir.OpSum, Inputs: []*ir.Tensor{x}, Out: tensor("s2", 2), Axis: 2},
	}
	var ps pairings
	var got [][]int
	for _, op := range lowered {
		m, ok := ps.of(op)
		if !ok {
			t.Fatalf("%s does not pair", op.Expr())
		}
		got = append(got, m.consumer.to)
	}
	want := [][]int{{0, 1, 2}, {0, 1, 2}, {0, 2}, {0, 1}}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("consumer maps (-want +got):\n%s", d)
	}
	if len(ps.byKey) != 3 {
		t.Errorf("%d pairings kept, want 3 (the sets share one)", len(ps.byKey))
	}
}
