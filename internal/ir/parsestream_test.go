package ir

import (
	"maps"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.yaml.in/yaml/v3"

	"github.com/nvcomm/nvcomm/internal/scale"
)

// streamFrames are files whose frames stream takes or leaves to the tree
// way, each with errors in its entries or without.
var streamFrames = map[string]string{
	"ordered":           "format: 2\nname: x\nmeshes:\n  m: [0, 1]\ntensors:\n  a: {mesh: m, shape: [4]}\n  b: {mesh: m}\nops:\n- {op: set, in: a, out: b}\ninputs: [a]\noutputs: [b]\n",
	"tensors first":     "tensors:\n  a: {mesh: m, shape: [4]}\nmeshes:\n  m: [0, 1]\nops:\n- {op: set, in: a, out: b}\n",
	"ops first":         "meshes:\n  m: [0, 1]\nops:\n- {op: set, in: a, out: b}\ntensors:\n  a: {mesh: m, shape: [4]}\n",
	"ops, no tensors":   "meshes:\n  m: [0, 1]\nops:\n- {op: set, in: a, out: b}\n",
	"no meshes":         "tensors:\n  a: {shape: [4]}\n",
	"misspelled meshes": "meshs:\n  m: [0, 1]\ntensors:\n  a: {shape: [4]}\n",
	"twice":             "meshes:\n  m: [0, 1]\nmeshes:\n  n: [0]\n",
	"tensor twice":      "meshes:\n  m: [0, 1]\ntensors:\n  a: {mesh: m, shape: [4]}\n  a: {mesh: m, shape: [4]}\n",
	"tensor not a name": "meshes:\n  m: [0, 1]\ntensors:\n  1a: {mesh: m, shape: [4]}\n  1a: {mesh: m}\n",
	"tensors a list":    "meshes:\n  m: [0, 1]\ntensors:\n- a\nops:\n  a: b\n",
	"flow":              "meshes: {m: [0, 1]}\ntensors: {a: {mesh: m, shape: [4]}, b: {mesh: n}}\nops: [{op: set, in: a, out: b}]\n",
	"bad entries":       "format: 3\nmeshes:\n  m: [0, 1]\ntensors:\n  a: {mesh: m, shape: [0], placements: [Shard(2)]}\n  b: {mesh: k, dtype: f, schedule: [{split: {axis: x}}]}\n  c: {mesh: m, schedule: 1, allocation: [0, q]}\nops:\n- {op: sett, in: a, out: b}\n- {op: sum, in: [a, c], out: d}\n- {op: broadcast, in: a, out: e, axis: 1}\n- 1\ninputs: x\n",
	"a list":            "- meshes\n",
}

// TestStreamAsTree parses every fusion that stream takes both ways, and
// requires the same diagnostics and the same fusion; it requires that
// stream takes the generated inputs and the files of a well-ordered frame.
func TestStreamAsTree(t *testing.T) {
	srcs := builderSources(t)
	maps.Copy(srcs, fastCorpus(t))
	for name, src := range streamFrames {
		srcs[name] = []byte(src)
	}
	for _, tt := range invalidTests {
		srcs[tt.name] = []byte(tt.src)
	}
	for _, tt := range append(validTests, layerTests...) {
		srcs[tt.name] = []byte(tt.src)
	}
	for _, tt := range propagateTests {
		srcs[tt.name] = []byte(tt.src)
	}
	srcs["chain1d 1k"] = scale.Chain(1000, scale.Mesh1D)
	for name, src := range srcs {
		streamed := streamAsTree(t, name, src)
		if must := name == "chain1d 1k" || name == "ordered" || name == "bad entries" || name == "flow"; must && !streamed {
			t.Errorf("%s: stream did not take it", name)
		}
	}
}

// streamAsTree parses src with stream and, when stream takes it, with the
// tree way, and reports any difference in their diagnostics or fusions.
func streamAsTree(t testing.TB, name string, src []byte) bool {
	sp := newParser(name, true)
	got, streamed := sp.stream(src)
	if !streamed {
		return false
	}
	tp := newParser(name, true)
	want := tp.parse(src)
	if diff := cmp.Diff(errText(tp.errs.Err()), errText(sp.errs.Err())); diff != "" {
		t.Errorf("%s: diagnostics differ (-tree +stream):\n%s", name, diff)
	}
	if (got == nil) != (want == nil) {
		t.Errorf("%s: stream's fusion is %v, the tree's %v", name, got, want)
	} else if got != nil {
		if diff := cmp.Diff(summaryOf(want), summaryOf(got)); diff != "" {
			t.Errorf("%s: fusions differ (-tree +stream):\n%s", name, diff)
		}
	}
	return true
}

// errText is err's message, "" for none.
func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// treeHandler rebuilds the root mapping from what fastStream hands it,
// streaming every collection it is offered.
type treeHandler struct {
	root, coll *yaml.Node
}

func (h *treeHandler) open(k, coll *yaml.Node) (stream, ok bool) {
	h.root.Content = append(h.root.Content, k, coll)
	h.coll = coll
	return true, true
}

func (h *treeHandler) field(k, v *yaml.Node) bool {
	h.root.Content = append(h.root.Content, k, v)
	return true
}

func (h *treeHandler) entry(k, v *yaml.Node) bool {
	if k != nil {
		h.coll.Content = append(h.coll.Content, k)
	}
	h.coll.Content = append(h.coll.Content, v)
	return true
}

// TestFastStream checks that what fastStream hands a handler makes the
// tree fastDecode builds, for every file of a mapping that fastDecode
// reads.
func TestFastStream(t *testing.T) {
	for name, src := range fastCorpus(t) {
		doc, ok := fastDecode(src)
		want := doc
		if ok {
			want = doc.Content[0]
		}
		h := &treeHandler{root: &yaml.Node{}}
		if ok && want.Kind == yaml.MappingNode {
			h.root.Kind, h.root.Tag, h.root.Line, h.root.Column = want.Kind, want.Tag, want.Line, want.Column
		}
		streamed := fastStream(src, h)
		if streamed != (ok && want.Kind == yaml.MappingNode) {
			t.Errorf("%s: fastStream read it: %v, fastDecode read a mapping: %v", name, streamed, ok)
			continue
		}
		if !streamed {
			continue
		}
		if d := nodeDiff(h.root, want, ""); d != "" {
			t.Errorf("%s: fastStream's entries differ from fastDecode's tree at %s", name, d)
		}
	}
}
