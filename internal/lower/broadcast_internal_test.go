package lower

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nvcomm/nvcomm/internal/syntax"
)

// TestBroadcastAxes checks which axes of each tensor are broadcast axes:
// the new axes of a broadcast, and those that every operand of an op
// either lacks or has as a broadcast axis.
func TestBroadcastAxes(t *testing.T) {
	tests := map[string]struct {
		ops  string
		want map[string][]bool
	}{
		"a broadcast's new axes": {
			ops:  `  - {op: broadcast, in: v, out: w, axes: [0, 2]}`,
			want: map[string][]bool{"w": {true, false, true}},
		},
		"kept by set, unary ops and a reduction over another axis": {
			ops: `  - {op: broadcast, in: v, out: w, axes: [0, 2]}
  - {op: set, in: w, out: w1}
  - {op: relu, in: w1, out: w2}
  - {op: sum, in: w2, out: w3, axis: 1}`,
			want: map[string][]bool{"w": {true, false, true}, "w1": {true, false, true}, "w2": {true, false, true}, "w3": {true, true}},
		},
		"an elementwise op with an operand varying along the axis": {
			ops: `  - {op: broadcast, in: v, out: w, axes: [0, 2]}
  - {op: add, in: [w, x], out: y}`,
			want: map[string][]bool{"w": {true, false, true}},
		},
		"an elementwise op with an extent-1 operand": {
			ops: `  - {op: broadcast, in: v, out: w, axes: [0, 2]}
  - {op: mul, in: [one, w], out: y}`,
			want: map[string][]bool{"w": {true, false, true}, "y": {true, false, true}},
		},
		"matmul: a batch axis that every factor with it has as a broadcast axis": {
			ops: `  - {op: broadcast, in: a2, out: a, axes: [0]}
  - {op: broadcast, in: b2, out: b, axes: [0]}
  - {op: matmul, in: [a, b], out: c}
  - {op: matmul, in: [a, bs], out: d}
  - {op: matmul, in: [a, bx], out: e}`,
			want: map[string][]bool{"a": {true, false, false}, "b": {true, false, false}, "c": {true, false, false}, "d": {true, false, false}},
		},
		"none along the axes tril masks: its rows and columns differ": {
			ops: `  - {op: broadcast, in: v, out: w, axes: [0, 2]}
  - {op: tril, in: w, out: y, diagonal: 0}
  - {op: broadcast, in: a2, out: a, axes: [0]}
  - {op: tril, in: a, out: z, diagonal: 1}`,
			want: map[string][]bool{"w": {true, false, true}, "y": {true, false, false}, "a": {true, false, false}, "z": {true, false, false}},
		},
		"no broadcast": {
			ops:  `  - {op: add, in: [x, x], out: y}`,
			want: map[string][]bool{},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			src := `format: 1
meshes:
  m: [0, 1]
tensors:
  v:   {mesh: m, shape: [6]}
  w:   {mesh: m, shape: [4, 6, 2]}
  x:   {mesh: m, shape: [4, 6, 2]}
  one: {mesh: m, shape: [1, 6, 1]}
  a2:  {mesh: m, shape: [3, 5]}
  a:   {mesh: m, shape: [4, 3, 5]}
  b2:  {mesh: m, shape: [5, 2]}
  b:   {mesh: m, shape: [4, 5, 2]}
  bs:  {mesh: m, shape: [5, 2]}
  bx:  {mesh: m, shape: [4, 5, 2]}
ops:
` + tc.ops + "\n"
			f, err := syntax.Parse("f.yaml", []byte(src))
			if err != nil {
				t.Fatal(err)
			}
			b := bcastAxes{}
			for _, op := range f.Ops {
				b.record(op)
			}
			got := map[string][]bool{}
			for x, axes := range b {
				got[x.Name] = axes
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("broadcast axes (-want +got):\n%s", d)
			}
		})
	}
}
