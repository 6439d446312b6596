package auto

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.yaml.in/yaml/v3"

	"github.com/nvcomm/nvcomm/internal/diag"
)

// TestRepoint moves diagnostics of the annotated fusion of mlp(8, 16) to
// the user's file: a chosen tensor's placements to its placements: auto,
// an op to the op, a tensor the user left undeclared (h, which the
// annotated file declares at its end) to the op that writes it, and a
// position the annotated file has no node at to none.
func TestRepoint(t *testing.T) {
	src := mlp(8, 16)
	res, err := Solve("mlp.yaml", []byte(src), Options{})
	if err != nil {
		t.Fatal(err)
	}
	var annotated yaml.Node
	if err := yaml.Unmarshal(res.Fusion, &annotated); err != nil {
		t.Fatal(err)
	}
	root := annotated.Content[0]
	at := func(n *yaml.Node) diag.Pos { return diag.At(n.Line, n.Column) }
	tensors, ops := lookup(root, "tensors"), lookup(root, "ops")
	for _, tc := range []struct {
		name string
		in   diag.Pos // in the annotated file
		want diag.Pos // in src
	}{
		{"chosen placements", at(lookup(lookup(tensors, "w1"), "placements")), diag.Pos{Line: 7, Col: 47}},
		{"op", at(ops.Content[1]), diag.Pos{Line: 12, Col: 5}},
		{"undeclared tensor", at(lookup(tensors, "h")), diag.Pos{Line: 11, Col: 5}},
		{"undeclared tensor's placements", at(lookup(lookup(tensors, "h"), "placements")), diag.Pos{Line: 11, Col: 5}},
		{"no node", diag.Pos{Line: 1, Col: 3}, diag.Pos{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := &diag.List{File: "annotated"}
			l.Add(tc.in, "wrong")
			var got *diag.List
			if !errors.As(res.Repoint(l), &got) {
				t.Fatalf("Repoint returned no list")
			}
			want := []diag.Diagnostic{{File: "mlp.yaml", Pos: tc.want, Message: "wrong"}}
			if d := cmp.Diff(want, got.Items); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
}

// TestCannotLower checks the error of an op that no sharding lets lower:
// at the op in the user's file, with why under the first combination.
func TestCannotLower(t *testing.T) {
	src := `format: 2
meshes:
  m: [0, 1, 2]
tensors:
  x: {mesh: m, shape: [8, 4], placements: [Shard(0)]}
  w: {mesh: m, shape: [4, 4], placements: auto}
  y: {placements: [Shard(0)]}
ops:
  - {op: matmul, in: [x, w], out: y}
`
	_, err := Solve("uneven.yaml", []byte(src), Options{})
	var d diag.Diagnostic
	if !errors.As(err, &d) {
		t.Fatalf("got %v, want a diagnostic", err)
	}
	if want := "uneven.yaml:9:5: error: op \"y = matmul(x, w)\" cannot be lowered under any sharding --auto may choose; with x [Shard(0)], w [Replicate()], y [Shard(0)]: op \"y = matmul(x, w)\" cannot be lowered: \"y\" is split unevenly"; !strings.HasPrefix(d.Error(), want) {
		t.Errorf("got\n%s\nwant it to start with\n%s", d.Error(), want)
	}
}
