package ir

import (
	"testing"

	"github.com/google/go-cmp/cmp"

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

// TestStreamAsTree parses every fusion of ir's tests that the front end's
// streaming reader takes both ways, and requires the same diagnostics and
// the same fusion; it requires that the streaming reader takes the
// generated inputs and the files of a well-ordered frame. (The front
// end's own test holds the two to each other on every YAML file of the
// repository.)
func TestStreamAsTree(t *testing.T) {
	srcs := builderSources(t)
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

// streamAsTree parses src with the streaming reader and, when it takes
// src, with the tree, and reports any difference in their diagnostics or
// fusions.
func streamAsTree(t testing.TB, name string, src []byte) bool {
	got, gotErr, streamed := FrontEnd(name, src, true, false, 1)
	if !streamed {
		return false
	}
	want, wantErr, _ := FrontEnd(name, src, true, false, 2)
	if diff := cmp.Diff(errText(wantErr), errText(gotErr)); diff != "" {
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
