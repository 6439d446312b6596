package lower_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.yaml.in/yaml/v3"

	"github.com/nvcomm/nvcomm/internal/lower"
	"github.com/nvcomm/nvcomm/internal/plan"
	"github.com/nvcomm/nvcomm/internal/syntax"
)

// TestBackwardWrittenAsOps writes every golden fusion with a backward
// section as an ordinary fusion (`lower --emit-fusion`) and requires the
// file written to lower to the very plan of the section, byte for byte,
// under both policies: the ops it writes, their grad_of and the copies
// it declares are the backward nvcomm derives. The file written has no
// backward section, every op it adds names grad_of, and writing it again
// changes nothing.
func TestBackwardWrittenAsOps(t *testing.T) {
	n := 0
	for _, dir := range goldenDirs {
		files, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
		for _, file := range files {
			src, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Contains(src, []byte("\nbackward:")) {
				continue
			}
			n++
			t.Run(filepath.Base(file), func(t *testing.T) { checkWrittenBackward(t, file, src) })
		}
	}
	if n < 20 {
		t.Fatalf("only %d fusions with a backward section: the examples moved?", n)
	}
}

func checkWrittenBackward(t *testing.T, file string, src []byte) {
	base := filepath.Base(file)
	written, err := syntax.WriteBackward(base, src)
	if err != nil {
		if _, perr := syntax.Parse(base, src); perr == nil {
			t.Fatalf("WriteBackward failed on a fusion that parses: %v", err)
		}
		return // the fusion's own errors (its .err golden)
	}
	checkWrittenShape(t, src, written)
	again, err := syntax.WriteBackward(base, written)
	if err != nil || !bytes.Equal(again, written) {
		t.Errorf("writing the written fusion again changed it (err %v)", err)
	}
	for _, policy := range lower.Policies {
		want, wok := lowerNamed(t, base, src, lower.Policy(policy))
		got, gok := lowerNamed(t, base, written, lower.Policy(policy))
		if wok != gok {
			t.Errorf("policy %s: the section lowers: %v, the written fusion: %v (%s)", policy, wok, gok, got)
			continue
		}
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("policy %s: the written fusion's plan differs (-section +written):\n%s", policy, d)
		}
	}
}

// checkWrittenShape checks the written file: no backward section, the
// file's ops first and as they were, each op after them with grad_of.
func checkWrittenShape(t *testing.T, src, written []byte) {
	t.Helper()
	var before, after struct {
		Backward any              `yaml:"backward"`
		Ops      []map[string]any `yaml:"ops"`
	}
	if err := yaml.Unmarshal(src, &before); err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(written, &after); err != nil {
		t.Fatalf("the written fusion is no YAML: %v", err)
	}
	if after.Backward != nil {
		t.Errorf("the written fusion keeps its backward section")
	}
	if len(after.Ops) <= len(before.Ops) {
		t.Fatalf("the written fusion has %d ops, the section's %d", len(after.Ops), len(before.Ops))
	}
	if d := cmp.Diff(before.Ops, after.Ops[:len(before.Ops)]); d != "" {
		t.Errorf("the file's own ops changed (-before +after):\n%s", d)
	}
	for i, op := range after.Ops[len(before.Ops):] {
		if op["grad_of"] == nil {
			t.Errorf("written op %d has no grad_of: %v", i, op)
		}
	}
}

// lowerNamed lowers fusion source named name: the plan JSON and true, or
// the diagnostics and false.
func lowerNamed(t *testing.T, name string, src []byte, policy lower.Policy) (string, bool) {
	t.Helper()
	f, err := syntax.Parse(name, src)
	if err != nil {
		return err.Error(), false
	}
	p, err := lower.Lower(f, lower.Options{Policy: policy})
	if err != nil {
		return err.Error(), false
	}
	b, err := plan.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b), true
}

// TestBackwardWrittenNames: an ordinary fusion may read a composite's
// intermediates and write a backward's names only as the rules say.
func TestBackwardWrittenNames(t *testing.T) {
	base := "format: 2\nmeshes:\n  tp: [0, 1]\ntensors:\n  x: {mesh: tp, shape: [4, 4]}\n  g: {mesh: tp, shape: [4, 4]}\n%sops:\n  - {op: softmax, in: x, out: y, axis: 1}\n  - %s\n"
	tests := []struct {
		name, decl, op, want string
	}{
		{"reads an intermediate, grad_of", "", "{op: mul, in: [y/exp, g], out: x.grad, grad_of: y}", ""},
		{"backward name without grad_of", "", "{op: mul, in: [y, g], out: x.grad}",
			`f.yaml:9:32: error: ops[1] out: "x.grad" is a name of the backward, which only an op with grad_of writes; add grad_of: the tensor whose op this op is part of the gradient of, or rename the tensor`},
		{"grad_of no tensor", "", "{op: mul, in: [y, g], out: x.grad, grad_of: nope}",
			`f.yaml:9:49: error: ops[1] grad_of: "nope" is no tensor of the forward; name the output of the forward op whose gradient this op is part of (an input, for a seed's own ops)`},
		{"no such intermediate", "", "{op: mul, in: [y/nope, g], out: z}",
			`f.yaml:9:20: error: ops[1] in: no op makes "y/nope"; read an intermediate the composite's expansion names (docs/fusion.md, "Composite ops"), or a tensor an op writes`},
		{"part of no op's", "", "{op: mul, in: [q/exp, g], out: z}",
			`f.yaml:9:20: error: ops[1] in: no op makes "q/exp"; a name with a slash is a part of the tensor before the slash, which an op of the file must write`},
		{"writes a composite's part", "", "{op: mul, in: [y/exp, g], out: y/mine}",
			`f.yaml:9:36: error: ops[1] out: "y/mine" is not a valid name (expected letters, digits and _, not starting with a digit)`},
		{"declares a part no op writes", "  y.grad/foo: {shape: [4, 4]}\n", "{op: mul, in: [y, g], out: z}",
			`f.yaml:7:3: error: tensor "y.grad/foo": no op writes it; declare the tensors ops write: a name with a slash is a part of a composite's or a gradient's`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := strings.Replace(strings.Replace(base, "%s", tt.decl, 1), "%s", tt.op, 1)
			got, ok := lowerNamed(t, "f.yaml", []byte(src), lower.PolicyOptimal)
			if ok {
				got = ""
			}
			if d := cmp.Diff(tt.want, strings.TrimSpace(got)); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
}
