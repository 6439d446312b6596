package syntax

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.yaml.in/yaml/v3"

	"github.com/nvcomm/nvcomm/internal/ir"
	"github.com/nvcomm/nvcomm/internal/scale"
)

// TestStreamAsTree parses every YAML file of the repository (fastCorpus)
// with the streaming reader and, when it takes the file, with the tree,
// and requires the same diagnostics and the same fusion. (ir's test of
// the same name does so for the fusions of its tests.)
func TestStreamAsTree(t *testing.T) {
	for name, src := range fastCorpus(t) {
		got, gotErr := ParseWith(name, src, Options{Auto: true, Reader: StreamReader})
		if gotErr == ErrNotStreamed {
			continue
		}
		want, wantErr := ParseWith(name, src, Options{Auto: true, Reader: TreeReader})
		if diff := cmp.Diff(errText(wantErr), errText(gotErr)); diff != "" {
			t.Errorf("%s: diagnostics differ (-tree +stream):\n%s", name, diff)
		}
		if diff := cmp.Diff(fusionText(want), fusionText(got)); diff != "" {
			t.Errorf("%s: fusions differ (-tree +stream):\n%s", name, diff)
		}
	}
}

// errText is err's message, "" for none.
func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// fusionText is f's meshes, tensors with their domains and shardings
// (their alike key), and ops, one a line; nil for none.
func fusionText(f *ir.Fusion) []string {
	if f == nil {
		return nil
	}
	var out []string
	for _, m := range f.Meshes {
		out = append(out, "mesh "+m.Name)
	}
	for _, t := range f.Tensors {
		out = append(out, fmt.Sprintf("%s: shape %v schedule %v allocation %v partial %q key %q",
			t.Name, t.Shape(), t.Schedule, t.Allocation, t.Partial, t.AppendAlikeKey(nil)))
	}
	for _, op := range f.Ops {
		out = append(out, op.Expr())
	}
	return out
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
		h.coll.Content = append(h.coll.Content, deepCopy(k))
	}
	h.coll.Content = append(h.coll.Content, deepCopy(v))
	return true
}

// deepCopy is a copy of n and of its content: fastStream makes the next
// entry's nodes in the place of those it handed before.
func deepCopy(n *yaml.Node) *yaml.Node {
	c := *n
	c.Content = nil
	for _, kid := range n.Content {
		c.Content = append(c.Content, deepCopy(kid))
	}
	return &c
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

// countHandler streams every collection and counts the entries.
type countHandler struct{ entries int }

func (h *countHandler) open(k, coll *yaml.Node) (stream, ok bool) { return true, true }
func (h *countHandler) field(k, v *yaml.Node) bool                { return true }
func (h *countHandler) entry(k, v *yaml.Node) bool {
	h.entries++
	return true
}

// TestFastStreamReusesNodes requires that streaming a file allocates no
// nodes for each entry, only the strings of its names: each entry's nodes
// are made where the previous entry's were (chunks shared by entries had
// kept every entry of a file alive until its end, twice the raw entries'
// own memory).
func TestFastStreamReusesNodes(t *testing.T) {
	allocated := func(ops int) (bytes uint64, entries int) {
		src := scale.Chain(ops, scale.Mesh1D)
		var before, after runtime.MemStats
		var h countHandler
		runtime.ReadMemStats(&before)
		if !fastStream(src, &h) {
			t.Fatalf("chain of %d ops: not streamed", ops)
		}
		runtime.ReadMemStats(&after)
		return after.TotalAlloc - before.TotalAlloc, h.entries
	}
	small, smallEntries := allocated(100)
	large, largeEntries := allocated(10000)
	// A name takes 8 bytes, an entry at most two; a node 152.
	if perEntry := (large - small) / uint64(largeEntries-smallEntries); perEntry > 32 {
		t.Errorf("streaming allocates %d bytes an entry", perEntry)
	}
}
