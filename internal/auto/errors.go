package auto

import (
	"errors"
	"fmt"
	"slices"

	"go.yaml.in/yaml/v3"

	"github.com/nvcomm/nvcomm/internal/diag"
	"github.com/nvcomm/nvcomm/internal/lower"
)

// Errors point at the user's file: an op that no sharding lets lower is
// reported at the op, and the diagnostics of lowering the annotated
// fusion (Result.Repoint) at the nodes of the user's file that the
// annotated one copies.

// unrunnable returns the op of the first table with no entry that
// lowers, nil when every op can run under some combination.
func (m *model) unrunnable() *factor {
	for _, fa := range m.factors {
		if !slices.ContainsFunc(fa.table, func(c int64) bool { return c != maxCost }) {
			return fa
		}
	}
	return nil
}

// cannotLower is the error of op fa, which no combination of its tensors'
// shardings lets lower: at the op in the user's file, with why it does
// not lower under the first combination (the lowering's own message,
// the tensors named as in the file).
func (m *model) cannotLower(file string, fa *factor, opts lower.Options) error {
	d := diag.Diagnostic{File: file, Pos: fa.op.Pos, Message: fmt.Sprintf("op %q cannot be lowered under any sharding --auto may choose", fa.op.Expr())}
	combo := m.combination(fa, 0, nil)
	f, err := m.opFusion(fa, combo)
	if err == nil {
		for j, k := range fa.vars {
			f.Tensors[j].Name = m.vars[k].t.Name // the op's own names, for the message
		}
		_, err = lower.Lower(f, opts)
	}
	var l *diag.List
	if errors.As(err, &l) && l.Len() > 0 {
		why := l.Items[0]
		d.Message += fmt.Sprintf("; with %s: %s", m.describe(fa, combo), why.Message)
		d.Hint = why.Hint
	}
	return d
}

// describe writes each tensor of fa under combo: "x [Shard(0)], w
// [Replicate()]".
func (m *model) describe(fa *factor, combo []int) string {
	s := ""
	for j, k := range fa.vars {
		if j > 0 {
			s += ", "
		}
		s += fmt.Sprintf("%s %s", m.vars[k].t.Name, m.vars[k].options[combo[j]])
	}
	return s
}

// Repoint returns err, an error in the annotated fusion (Result.Fusion),
// as errors in the user's file: each diagnostic named by the user's file
// and moved to the node of the user's file that the annotated one's node
// copies; for a tensor that the user's file does not declare, to the op
// that writes it. Other errors are returned as they are.
func (r *Result) Repoint(err error) error {
	var l *diag.List
	var one diag.Diagnostic
	switch {
	case errors.As(err, &l):
		out := &diag.List{File: r.file, Dropped: l.Dropped}
		for _, d := range l.Items {
			out.Items, _ = diag.Keep(out.Items, r.repoint(d), -1)
		}
		return out
	case errors.As(err, &one):
		return r.repoint(one)
	}
	return err
}

// repoint is one diagnostic of Repoint.
func (r *Result) repoint(d diag.Diagnostic) diag.Diagnostic {
	d.File = r.file
	if !d.Pos.IsKnown() {
		return d
	}
	var annotated, user yaml.Node
	if yaml.Unmarshal(r.Fusion, &annotated) != nil || yaml.Unmarshal(r.src, &user) != nil {
		d.Pos = diag.Pos{}
		return d
	}
	path, ok := pathTo(&annotated, d.Pos)
	if !ok {
		d.Pos = diag.Pos{}
		return d
	}
	d.Pos = find(&user, path)
	return d
}

// pathStep is one step of a path from a YAML document's root: a
// mapping's key (index -1), or a sequence's index; atKey says the path
// ends at the key's node rather than its value.
type pathStep struct {
	key   string
	index int
	atKey bool
}

// pathTo returns the path from n to the node at pos.
func pathTo(n *yaml.Node, pos diag.Pos) ([]pathStep, bool) {
	at := func(n *yaml.Node) bool { return diag.At(n.Line, n.Column) == pos }
	if at(n) && n.Kind != yaml.DocumentNode {
		return nil, true
	}
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) > 0 {
			return pathTo(n.Content[0], pos)
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if at(k) {
				return []pathStep{{key: k.Value, index: -1, atKey: true}}, true
			}
			if rest, ok := pathTo(v, pos); ok {
				return append([]pathStep{{key: k.Value, index: -1}}, rest...), true
			}
		}
	case yaml.SequenceNode:
		for i, v := range n.Content {
			if rest, ok := pathTo(v, pos); ok {
				return append([]pathStep{{index: i}}, rest...), true
			}
		}
	}
	return nil, false
}

// find returns the position of the node at path in the document doc, or
// of the nearest node that stands for it: for a tensor the document does
// not declare, the op that writes it; else the deepest node on the path
// that the document has (no position when that is the root).
func find(doc *yaml.Node, path []pathStep) diag.Pos {
	if len(doc.Content) == 0 {
		return diag.Pos{}
	}
	n, pos := doc.Content[0], diag.Pos{}
	for i, s := range path {
		next := child(n, s)
		if next == nil {
			if i == 1 && path[0].key == "tensors" {
				if op := writer(doc.Content[0], s.key); op != nil {
					return diag.At(op.Line, op.Column)
				}
			}
			return pos
		}
		n, pos = next, diag.At(next.Line, next.Column)
	}
	return pos
}

// valueOffset is 0 for a step to a key's node, 1 to its value's.
func (s pathStep) valueOffset() int {
	if s.atKey {
		return 0
	}
	return 1
}

// child is the node s leads to from n (a key's node when s ends there),
// nil when n has none.
func child(n *yaml.Node, s pathStep) *yaml.Node {
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			if s.index < 0 && n.Content[i].Value == s.key {
				return n.Content[i+s.valueOffset()]
			}
		}
	case yaml.SequenceNode:
		if s.key == "" && s.index >= 0 && s.index < len(n.Content) {
			return n.Content[s.index]
		}
	}
	return nil
}

// writer is the op of the document's ops that writes tensor name, nil
// when none does.
func writer(root *yaml.Node, name string) *yaml.Node {
	ops := lookup(root, "ops")
	if ops == nil || ops.Kind != yaml.SequenceNode {
		return nil
	}
	for _, op := range ops.Content {
		if out := lookup(op, "out"); out != nil && out.Value == name {
			return op
		}
	}
	return nil
}
