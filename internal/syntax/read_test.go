package syntax

import (
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nvcomm/nvcomm/internal/ir"
)

// TestRead checks what Read hands back under each reader: a Source for a
// file whose frame is whole (built or not by Build, for its own
// problems), none and the frame's problems for one whose frame is broken,
// and ErrNotStreamed from the streaming reader alone for a file it does
// not take.
func TestRead(t *testing.T) {
	const good = "meshes:\n  m: [0, 1]\ntensors:\n  a: {mesh: m, shape: [4]}\nops:\n- {op: set, in: a, out: b}\n"
	tests := []struct {
		name   string
		src    string
		reader Reader
		// source is whether Read gives a Source; err its error, "" for
		// none; built whether that Source builds a fusion.
		source bool
		err    string
		built  bool
	}{
		{"streamed", good, AnyReader, true, "", true},
		{"streamed alone", good, StreamReader, true, "", true},
		{"the tree", good, TreeReader, true, "", true},
		{"a comment: the tree", "# c\n" + good, AnyReader, true, "", true},
		{"a comment: not streamed", "# c\n" + good, StreamReader, false, ErrNotStreamed.Error(), false},
		{"an entry's problem is Build's", "meshes:\n  m: [0, 1]\ntensors:\n  a: {mesh: k, shape: [4]}\n", AnyReader, true,
			"", false},
		{"no meshes: the frame", "tensors:\n  a: {shape: [4]}\n", AnyReader, false,
			`f.yaml:1:1: error: fusion: missing key "meshes"`, false},
		{"a list: the frame", "- meshes\n", AnyReader, false,
			"f.yaml:1:1: error: fusion: expected a mapping, got a list", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src, err := Read("f.yaml", []byte(tt.src), Options{Reader: tt.reader})
			if got := errText(err); got != tt.err {
				t.Errorf("error %q, want %q", got, tt.err)
			}
			if (src != nil) != tt.source {
				t.Fatalf("Source %v, want one: %v", src, tt.source)
			}
			if src == nil {
				return
			}
			f, err := src.Build(false)
			if (f != nil) != tt.built || (err == nil) != tt.built {
				t.Errorf("Build: fusion %v, error %v; want built: %v", f != nil, err, tt.built)
			}
		})
	}
}

// TestParseWithReaders requires the same fusion or diagnostics of every
// reader that takes a file, and ErrNotStreamed for the streaming reader
// alone where it does not.
func TestParseWithReaders(t *testing.T) {
	for name, src := range map[string]string{
		"good":    "meshes:\n  m: [0, 1]\ntensors:\n  a: {mesh: m, shape: [4], placements: [Shard(0)]}\nops:\n- {op: set, in: a, out: b}\n",
		"errors":  "meshes:\n  m: [0, 1]\ntensors:\n  a: {mesh: m, shape: [0], placements: [Shard(2)]}\nops:\n- {op: sett, in: a, out: b}\n",
		"library": "meshes: {m: [0, 1]}  # a comment\ntensors:\n  a: {mesh: m, shape: [4]}\nops:\n- {op: set, in: a, out: b}\n",
	} {
		var texts [][]string
		var errs []string
		for _, r := range []Reader{AnyReader, StreamReader, TreeReader} {
			f, err := ParseWith(name+".yaml", []byte(src), Options{Reader: r})
			if errors.Is(err, ErrNotStreamed) {
				if name != "library" || r != StreamReader {
					t.Errorf("%s: reader %d does not take it", name, r)
				}
				continue
			}
			texts, errs = append(texts, fusionText(f)), append(errs, errText(err))
		}
		for i := 1; i < len(texts); i++ {
			if diff := cmp.Diff(texts[0], texts[i]); diff != "" {
				t.Errorf("%s: fusions differ (-first +other):\n%s", name, diff)
			}
			if diff := cmp.Diff(errs[0], errs[i]); diff != "" {
				t.Errorf("%s: diagnostics differ (-first +other):\n%s", name, diff)
			}
		}
	}
}

// TestBuiltAsRead requires the streaming reader to build the fusion of a
// file whose ops come in order as it reads them, keeping no op, and to give
// up on any other file, which is read again and built once read: either
// way the fusion, its inputs and outputs and every position, or the
// diagnostics, are those of the tree reader, which always builds once the
// file is read.
func TestBuiltAsRead(t *testing.T) {
	const head = "format: 2\nmeshes:\n  m: [0, 1]\n"
	tests := []struct {
		name, src string
		asRead    bool
	}{
		{"a chain", head + "tensors:\n  a: {mesh: m, shape: [4], placements: [Shard(0)]}\n  b: {mesh: m, placements: [Replicate()]}\n" +
			"ops:\n- {op: set, in: a, out: b}\n- {op: relu, in: b, out: c}\n", true},
		{"inputs read out of their order, one never read", head + "tensors:\n" +
			"  w: {mesh: m, shape: [4, 4]}\n  u: {mesh: m, shape: [4, 4]}\n  x: {mesh: m, shape: [4, 4], placements: [Shard(1)]}\n" +
			"ops:\n- {op: relu, in: x, out: y}\n- {op: add, in: [y, w], out: z}\n", true},
		{"partial terms reduced for an op", head + "tensors:\n  p: {mesh: m, shape: [4], placements: [Partial(sum)]}\n" +
			"  q: {mesh: m, shape: [4], placements: [Shard(0)]}\nops:\n- {op: add, in: [p, q], out: r}\n", true},
		{"an op before the one writing what it reads", head + "tensors:\n  a: {mesh: m, shape: [4]}\n" +
			"ops:\n- {op: relu, in: b, out: c}\n- {op: set, in: a, out: b}\n", false},
		{"a declared tensor read before an op writes it", head + "tensors:\n  a: {mesh: m, shape: [4]}\n  b: {mesh: m}\n" +
			"ops:\n- {op: relu, in: b, out: c}\n- {op: set, in: a, out: b}\n", false},
		{"the format after the ops", "meshes:\n  m: [0, 1]\ntensors:\n  a: {mesh: m, shape: [4], placements: [Shard(0)]}\n" +
			"ops:\n- {op: set, in: a, out: b}\nformat: 2\n", false},
		{"inputs and outputs lists", head + "tensors:\n  a: {mesh: m, shape: [4]}\nops:\n- {op: set, in: a, out: b}\n" +
			"- {op: relu, in: b, out: c}\ninputs: [a]\noutputs: [c, b]\n", true},
		{"errors", head + "tensors:\n  a: {mesh: m, shape: [0], placements: [Shard(2)]}\n" +
			"ops:\n- {op: set, in: a, out: b}\n- {op: relu, in: b, out: b}\n- {op: sett, in: a, out: d}\n", false},
	}
	text := func(f *ir.Fusion, err error) []string {
		out := append(fusionText(f), errText(err))
		if f == nil {
			return out
		}
		for _, t := range f.Tensors {
			out = append(out, fmt.Sprintf("%s at %v declared %v", t.Name, t.Pos, t.Declared))
		}
		for _, l := range [][]*ir.Tensor{f.Inputs, f.Outputs} {
			var names []string
			for _, t := range l {
				names = append(names, t.Name)
			}
			out = append(out, fmt.Sprint(names))
		}
		for _, op := range f.Ops {
			out = append(out, fmt.Sprintf("%d at %v", op.Index, op.Pos))
		}
		return out
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src, err := Read("f.yaml", []byte(tt.src), Options{Reader: StreamReader})
			if err != nil || src == nil {
				t.Fatalf("not streamed: %v", err)
			}
			if src.BuiltAsRead() != tt.asRead {
				t.Errorf("built as read: %v, want %v", src.BuiltAsRead(), tt.asRead)
			}
			got := text(src.Build(false))
			tree, err := Read("f.yaml", []byte(tt.src), Options{Reader: TreeReader})
			if err != nil || tree == nil {
				t.Fatalf("the tree: %v", err)
			}
			if tree.BuiltAsRead() {
				t.Errorf("the tree reader built as read")
			}
			want := text(tree.Build(false))
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("the streamed file differs from the tree (-tree +streamed):\n%s", d)
			}
		})
	}
}
