package syntax

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/nvcomm/nvcomm/internal/diag"
	"github.com/nvcomm/nvcomm/internal/ir"
	"github.com/nvcomm/nvcomm/internal/ops"
)

// WriteBackward returns fusion file src, read from file, with its backward
// section written out as the ops nvcomm derives for it (`lower
// --emit-fusion`, docs/training.md): the section is removed, the ops are
// appended to the file's, each with grad_of naming the op whose gradient
// it is part of, and the tensors of the backward whose shape or sharding
// no op infers are declared. The file's own keys, order and comments are
// kept, and the result lowers to the plan of src. A file without a
// backward section comes back as it is; one with a pipeline section is
// an error, since its micro-batches and schedule are no ops.
func WriteBackward(file string, src []byte) ([]byte, error) {
	decls, err := Read(file, src, Options{Reader: TreeReader})
	if decls == nil {
		return nil, err
	}
	f, err := decls.Build(false)
	if err != nil {
		return nil, err
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(src, &doc); err != nil || len(doc.Content) == 0 {
		return nil, fmt.Errorf("%s: %v", file, err) // Read has decoded it already
	}
	root := doc.Content[0]
	bw, err := decls.WrittenBackward(f)
	if err != nil {
		return nil, diag.Diagnostic{File: file, Message: err.Error()}
	}
	if bw == nil {
		return src, nil
	}
	section := removeKey(root, "backward")
	appendOps(root, bw.Ops, section)
	declareTensors(root, bw.Tensors)
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// mappingEntry returns key's key and value nodes in mapping m, nil when
// it has none.
func mappingEntry(m *yaml.Node, key string) (k, v *yaml.Node) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i], m.Content[i+1]
		}
	}
	return nil, nil
}

// removeKey removes key from mapping m and returns its value, as flow
// YAML on one line, for a comment.
func removeKey(m *yaml.Node, key string) string {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value != key {
			continue
		}
		v := m.Content[i+1]
		m.Content = append(m.Content[:i], m.Content[i+2:]...)
		return flowText(v)
	}
	return ""
}

// flowText writes n as flow YAML on one line.
func flowText(n *yaml.Node) string {
	c := *n
	setFlow(&c)
	out, err := yaml.Marshal(&c)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

// setFlow makes n and its collections flow style, comments dropped.
func setFlow(n *yaml.Node) {
	n.HeadComment, n.LineComment, n.FootComment = "", "", ""
	if n.Kind == yaml.MappingNode || n.Kind == yaml.SequenceNode {
		n.Style = yaml.FlowStyle
		for i, c := range n.Content {
			cp := *c
			n.Content[i] = &cp
			setFlow(&cp)
		}
	}
}

// appendOps appends the backward's ops to the file's ops list, the first
// under a comment saying what section they stand for.
func appendOps(root *yaml.Node, written []ir.WrittenOp, section string) {
	_, list := mappingEntry(root, "ops")
	if list == nil || list.Kind != yaml.SequenceNode {
		list = &yaml.Node{Kind: yaml.SequenceNode}
		root.Content = append(root.Content, str("ops"), list)
	}
	for i, op := range written {
		n := opNode(op)
		if i == 0 {
			n.HeadComment = "The backward " + section + ", as nvcomm derives it: each op's grad_of names the\n" +
				"forward op (by its output) whose gradient it is part of."
		}
		list.Content = append(list.Content, n)
	}
}

// opNode is op as a flow mapping: op, in (a number in its operand's
// slot), out, its attributes, grad_of.
func opNode(op ir.WrittenOp) *yaml.Node {
	ins := &yaml.Node{Kind: yaml.SequenceNode, Style: yaml.FlowStyle}
	for _, name := range op.In {
		if op.Scalar != nil && len(ins.Content) == op.Scalar.Slot {
			ins.Content = append(ins.Content, number(op.Scalar.Value))
		}
		ins.Content = append(ins.Content, str(name))
	}
	if op.Scalar != nil && len(ins.Content) == op.Scalar.Slot {
		ins.Content = append(ins.Content, number(op.Scalar.Value))
	}
	var in *yaml.Node = ins
	if len(ins.Content) == 1 {
		in = ins.Content[0]
	}
	n := &yaml.Node{Kind: yaml.MappingNode, Style: yaml.FlowStyle}
	n.Content = append(n.Content, str("op"), str(string(op.Kind)), str("in"), in, str("out"), str(op.Out))
	if op.Axis >= 0 {
		n.Content = append(n.Content, str("axis"), integer(op.Axis))
	}
	if op.Axes != nil {
		n.Content = append(n.Content, str("axes"), integers(op.Axes))
	}
	for _, v := range op.Attrs {
		n.Content = append(n.Content, str(string(v.Key)), attrNode(v))
	}
	if op.GradOf != "" {
		n.Content = append(n.Content, str("grad_of"), str(op.GradOf))
	}
	return n
}

// attrNode is attribute v's value by its kind.
func attrNode(v ops.Value) *yaml.Node {
	spec := ops.AttrOf(string(v.Key))
	if spec == nil {
		return str(v.Str)
	}
	switch spec.Kind {
	case ops.IntAttr:
		return integer(v.Int)
	case ops.IntsAttr:
		return integers(v.Ints)
	case ops.FloatAttr:
		return number(v.Float)
	case ops.BoolAttr:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: strconv.FormatBool(v.Bool)}
	}
	return str(v.Str)
}

// declareTensors declares the backward's tensors whose shape or sharding
// no op infers, after the file's own.
func declareTensors(root *yaml.Node, ts []ir.WrittenTensor) {
	if len(ts) == 0 {
		return
	}
	_, m := mappingEntry(root, "tensors")
	if m == nil || m.Kind != yaml.MappingNode {
		m = &yaml.Node{Kind: yaml.MappingNode}
		root.Content = append(root.Content, str("tensors"), m)
	}
	for _, t := range ts {
		d := &yaml.Node{Kind: yaml.MappingNode, Style: yaml.FlowStyle}
		if t.Mesh != "" {
			d.Content = append(d.Content, str("mesh"), str(t.Mesh))
		}
		if t.Shape != nil {
			d.Content = append(d.Content, str("shape"), integers(t.Shape))
		}
		if t.Placements != nil {
			pls := &yaml.Node{Kind: yaml.SequenceNode, Style: yaml.FlowStyle}
			for _, p := range t.Placements {
				pls.Content = append(pls.Content, str(p.String()))
			}
			d.Content = append(d.Content, str("placements"), pls)
		}
		m.Content = append(m.Content, str(t.Name), d)
	}
}

func str(s string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s} }

func integer(x int) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!int", Value: strconv.Itoa(x)}
}

func number(x float64) *yaml.Node {
	s := strconv.FormatFloat(x, 'g', -1, 64)
	if !strings.ContainsAny(s, ".eEn") { // 2 → 2.0: a float, as read back
		s += ".0"
	}
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!float", Value: s}
}

func integers(xs []int) *yaml.Node {
	n := &yaml.Node{Kind: yaml.SequenceNode, Style: yaml.FlowStyle}
	for _, x := range xs {
		n.Content = append(n.Content, integer(x))
	}
	return n
}
