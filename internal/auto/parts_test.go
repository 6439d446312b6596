package auto

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nvcomm/nvcomm/internal/cost"
	"github.com/nvcomm/nvcomm/internal/lower"
	"github.com/nvcomm/nvcomm/internal/scale"
)

// partsFusions are layers that pricing by parts must get right or leave
// alone: a tensor read twice (one set serves both slots where both need
// the same sharding, so the parts would count it twice), an op across
// two meshes, a linear with a bias, and a contraction whose factors may
// both split the summed axis (the optimal policy's choice of a sum).
var partsFusions = map[string]string{
	"read twice": `format: 2
meshes:
  m: [0, 1]
tensors:
  x: {mesh: m, shape: [8, 8], placements: [Shard(0)]}
ops:
  - {op: relu, in: x, out: a}
  - {op: mul, in: [a, a], out: b}
  - {op: matmul, in: [b, b], out: y}
`,
	"two meshes": `format: 2
meshes:
  p: [0, 1]
  q: [2, 3]
tensors:
  x: {mesh: p, shape: [8, 8], placements: [Shard(0)]}
  w: {mesh: q, shape: [8, 8], placements: auto}
ops:
  - {op: matmul, in: [x, w], out: y}
`,
	"bias and sum": `format: 2
meshes:
  g: [[0, 1], [2, 3]]
tensors:
  x: {mesh: g, shape: [8, 8], placements: auto}
  w: {mesh: g, shape: [4, 8], placements: auto}
  b: {mesh: g, shape: [4], placements: auto}
ops:
  - {op: linear, in: [x, w, b], out: y}
`,
}

// TestPricesByParts fills every op's table of the test layers, the
// examples and MLP blocks on 1-D and 2-D meshes (one block and two) both
// by parts, where the op decomposes, and by lowering every combination
// whole, and requires the same prices to the picosecond; and that parts
// priced some of them (the decomposition is used). On the 3-D mesh it
// compares every 97th combination (all of them with NVCOMM_EXACT_3D set:
// a minute on 2 cores).
func TestPricesByParts(t *testing.T) {
	srcs := map[string]string{}
	for _, set := range []map[string]string{layers, priceFusions, partsFusions} {
		for name, src := range set {
			srcs[name] = src
		}
	}
	files, err := filepath.Glob("../../testdata/examples/auto_*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range files {
		src, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		srcs[filepath.Base(path)] = string(src)
	}
	for _, mesh := range [][]int{{8}, {2, 4}} {
		for _, n := range []int{1, 2} {
			srcs[fmt.Sprintf("%d blocks on %v", n, mesh)] = string(scale.MLPBlocks(n, mesh))
		}
	}
	every := 97
	if os.Getenv("NVCOMM_EXACT_3D") != "" {
		every = 1
	}
	srcs["1 block on [2 2 4]"] = string(scale.MLPBlocks(1, []int{2, 2, 4}))
	byParts := 0
	for name, src := range srcs {
		t.Run(name, func(t *testing.T) {
			step := 1
			if name == "1 block on [2 2 4]" {
				step = every
			}
			byParts += comparePricing(t, src, step)
		})
	}
	if byParts == 0 {
		t.Error("no combination was priced by parts")
	}
}

// comparePricing compares, on every step-th combination of every op of
// the fusion src, the price by parts (or whole, where the op does not
// decompose) with the price of the whole lowering, and returns how many
// combinations were priced by parts.
func comparePricing(t *testing.T, src string, step int) int {
	t.Helper()
	m := unpricedModel(t, src)
	opts := lower.Options{Topology: cost.Default()}
	ev := newEvaluator(opts)
	byParts := 0
	for _, fa := range m.factors {
		d := m.decompose(fa)
		var todo []int
		for i := 0; i < len(fa.table); i += step {
			todo = append(todo, i)
			if d != nil {
				if _, ok := d.recipeFor(m.combination(fa, i, nil)); ok {
					byParts++
				}
			}
		}
		got, gotEnds := ev.priceAll(m, fa, todo)
		want, wantEnds := make([]int64, len(todo)), make([]cost.Ends, len(todo))
		parallel(len(todo), func(j int) {
			f, err := m.opFusion(fa, m.combination(fa, todo[j], nil))
			p := &part{}
			p.price(f, err, opts)
			want[j], wantEnds[j] = sumParts([]*part{p}), p.ends
		})
		for j, i := range todo {
			if got[j] != want[j] || got[j] != maxCost && gotEnds[j] != wantEnds[j] {
				t.Errorf("op %q, %s: by parts %d ps, ends %+v; whole %d ps, ends %+v", fa.op.Expr(), m.describe(fa, m.combination(fa, i, nil)), got[j], gotEnds[j], want[j], wantEnds[j])
			}
		}
	}
	return byParts
}

// TestDecompose checks which ops are priced by parts.
func TestDecompose(t *testing.T) {
	for _, tc := range []struct {
		name, src string
		want      []bool // per op
	}{
		{"read twice", partsFusions["read twice"], []bool{false, false, false}},
		{"two meshes", partsFusions["two meshes"], []bool{false}},
		{"bias and sum", partsFusions["bias and sum"], []bool{true}},
		{"residual", layers["residual"], []bool{true, false, true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := unpricedModel(t, tc.src)
			var got []bool
			for _, fa := range m.factors {
				got = append(got, m.decompose(fa) != nil)
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("decomposed (-want +got):\n%s", d)
			}
		})
	}
}
