package ir

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nvcomm/nvcomm/internal/diag"
)

// FuzzParse checks that Parse never panics, that stream and the tree way
// parse alike every file stream takes, that every diagnostic points into
// the file, and that every tensor of a parsed fusion has a consistent
// sharding: a local shape that divides its shape and a layout that is a
// permutation of its axes.
func FuzzParse(f *testing.F) {
	err := filepath.WalkDir("../../testdata", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && (strings.HasSuffix(path, ".yaml") || strings.HasSuffix(path, ".yml")) {
			src, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			f.Add(src)
		}
		return nil
	})
	if err != nil {
		f.Fatal(err)
	}
	for _, tt := range slices.Concat(validTests, layerTests) {
		f.Add([]byte(tt.src))
	}
	for _, tt := range invalidTests {
		f.Add([]byte(tt.src))
	}
	for _, tt := range propagateTests {
		f.Add([]byte(tt.src))
	}
	for _, tt := range compositeTests {
		f.Add([]byte(compositeHead + tt.ops))
	}
	for _, tt := range compositeErrorTests {
		f.Add([]byte(compositeHead + tt.ops))
	}
	f.Add([]byte(sdpaHead + sdpaOp))
	for _, tt := range sdpaErrorTests {
		f.Add([]byte(sdpaHead + tt.ops))
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		streamAsTree(t, "fuzz.yaml", src)
		fus, err := Parse("fuzz.yaml", src)
		if err != nil {
			checkDiagnostics(t, src, err)
			return
		}
		checkFusion(t, fus)
	})
}

// lineCount counts the lines of src as the YAML parser does: \n, \r\n, \r,
// NEL, LS and PS all end a line.
func lineCount(src []byte) int {
	n := 1
	for i := 0; i < len(src); i++ {
		switch {
		case src[i] == '\n':
			n++
		case src[i] == '\r':
			n++
			if i+1 < len(src) && src[i+1] == '\n' {
				i++
			}
		case bytes.HasPrefix(src[i:], []byte("\u0085")),
			bytes.HasPrefix(src[i:], []byte("\u2028")),
			bytes.HasPrefix(src[i:], []byte("\u2029")):
			n++
		}
	}
	return n
}

func checkDiagnostics(t *testing.T, src []byte, err error) {
	t.Helper()
	var list *diag.List
	if !errors.As(err, &list) {
		t.Fatalf("Parse error is %T, want *diag.List: %v", err, err)
	}
	if list.Len() == 0 || list.Len() > diag.MaxErrors {
		t.Fatalf("Parse reported %d diagnostics, want 1..%d", list.Len(), diag.MaxErrors)
	}
	lines := lineCount(src)
	for _, d := range list.Items {
		if d.Pos.Line < 1 || int(d.Pos.Line) > lines+1 || d.Pos.Col < 1 {
			t.Errorf("diagnostic at %v outside a file of %d lines: %s", d.Pos, lines, d.Error())
		}
		if d.Message == "" {
			t.Errorf("diagnostic at %v has no message", d.Pos)
		}
	}
	_ = err.Error()
}

func checkFusion(t *testing.T, f *Fusion) {
	t.Helper()
	for _, m := range f.Meshes {
		n := 1
		for _, e := range m.Shape {
			n *= e
		}
		if m.Rank() < 1 || m.Rank() > 3 || n != len(m.Devices) {
			t.Fatalf("mesh %q has shape %v and %d devices", m.Name, m.Shape, len(m.Devices))
		}
		for _, pt := range DeviceTypes {
			m.Teams(pt)
		}
	}
	for _, tv := range f.Tensors {
		if tv.Mesh == nil {
			t.Fatalf("tensor %q has no mesh", tv.Name)
		}
		shape := tv.PaddedShape() // shards tile the padded shape
		local := tv.LocalShape()
		layout := tv.Layout()
		sh := tv.Shardings()
		if len(local) != len(shape) {
			t.Fatalf("tensor %q: local shape %v for shape %v", tv.Name, local, shape)
		}
		for i := range shape {
			if local[i] < 1 || shape[i]%local[i] != 0 {
				t.Errorf("tensor %q: local shape %v does not divide shape %v", tv.Name, local, shape)
			}
		}
		perm := slices.Sorted(slices.Values(layout))
		for i := range perm {
			if perm[i] != i {
				perm = nil // not a permutation
				break
			}
		}
		if len(perm) != len(shape) {
			t.Errorf("tensor %q: layout %v is not a permutation of %d axes", tv.Name, layout, len(shape))
		}
		for _, s := range sh {
			extent := 1
			for _, d := range s.Digits {
				if d.Axis < 0 || d.Axis >= len(shape) || d.Extent < 2 || d.Stride < 1 || shape[d.Axis]%d.Span() != 0 {
					t.Errorf("tensor %q: sharding %+v of shape %v", tv.Name, s, shape)
				}
				extent *= d.Extent
			}
			if extent != tv.Mesh.Size(s.Type) {
				t.Errorf("tensor %q: %s digits span %d, not the mesh size %d", tv.Name, s.Type, extent, tv.Mesh.Size(s.Type))
			}
		}
		if _, ok := Bytes(shape, tv.DType); !ok {
			t.Errorf("tensor %q: padded shape %v of %s does not fit in int64 bytes", tv.Name, shape, tv.DType)
		}
		tv.LocalSize()
	}
	for _, op := range f.Ops {
		if len(op.Inputs) == 0 || op.In() == nil || op.Out == nil || op.Out.Producer != op {
			t.Fatalf("op %d is not linked to its tensors", op.Index)
		}
		_ = op.Expr()
		checkAxisMaps(t, op)
	}
}

// checkAxisMaps checks that InputAxis maps each output dimension to an
// input dimension of the same extent (or to none), and that a
// contraction's contracted axes have the extent of its output's trailing
// reduction axis. An op whose output holds pending terms maps the axes of
// what it computes, its Result.
func checkAxisMaps(t *testing.T, op *Op) {
	t.Helper()
	res := op.Result()
	out := res.Shape()
	for i, in := range op.Inputs {
		shape := in.Shape()
		for j := range out {
			a := op.InputAxis(i, j)
			if a != -1 && (a < 0 || a >= len(shape) || shape[a] != out[j]) {
				t.Errorf("%s: InputAxis(%d, %d) = %d: input shape %v, output shape %v", op.Expr(), i, j, a, shape, out)
			}
		}
		k := op.ContractedAxis(i)
		switch {
		case k == -1 && op.Kind.IsContraction() && i < 2 && !(indexed(op) && i == op.Kind.Entry().Indexed.Indices), k != -1 && !op.Kind.IsContraction():
			t.Errorf("%s: ContractedAxis(%d) = %d", op.Expr(), i, k)
		case k != -1 && (k < 0 || k >= len(shape) || shape[k] != res.Logical[len(res.Logical)-1].Extent):
			t.Errorf("%s: ContractedAxis(%d) = %d: input shape %v, output logical %v", op.Expr(), i, k, shape, res.LogicalExtents())
		}
	}
}
