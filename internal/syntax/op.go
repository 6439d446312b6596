package syntax

import (
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"

	"go.yaml.in/yaml/v3"

	"github.com/nvcomm/nvcomm/internal/diag"
	"github.com/nvcomm/nvcomm/internal/ir"
	"github.com/nvcomm/nvcomm/internal/ops"
)

// opKeys are the keys of an op: its kind, operands and output, and every
// attribute of the registry; which attributes an op takes depends on its
// kind (checkOpKeys). Made again only when an attribute was registered
// since (ops.RegisterAttr, before any parse).
func opKeys() []string {
	keys := opKeysMemo.Load()
	if keys == nil || len(*keys) != 4+ops.NumAttrs() {
		all := append([]string{"op", "in", "out", "grad_of"}, ops.AttrKeys()...)
		keys = &all
		opKeysMemo.Store(keys)
	}
	return *keys
}

var opKeysMemo atomic.Pointer[[]string]

// parseOps decodes the ops list. Each op's problems are reported together
// (its kind, names, keys and arity), and a broken op is left out.
func (p *reader) parseOps(n *yaml.Node) {
	if n == nil {
		return
	}
	items, ok := p.w.sequence(n, "ops")
	if !ok {
		p.structural = true
		return
	}
	for i, it := range items {
		p.opEntry(it, i)
	}
}

// opEntry reads it, the i-th op of the file, and hands it to the Source.
func (p *reader) opEntry(it *yaml.Node, i int) {
	p.opNode = it
	if p.parseOp(&p.op, it, i) {
		p.src.AddOp(&p.op)
	} else {
		p.src.AddOp(nil)
	}
	p.opNode = nil
}

// opNodes are the values of an op's keys, nil for those left out: what
// parseOp's checks read of the op's nodes.
type opNodes struct {
	kind, in, out, axis, axes *yaml.Node
}

// parseOp decodes one op, the i-th of the file, into d, with what could
// be read of it and whether it is broken; it reports false when the op is
// not even a mapping.
func (p *reader) parseOp(d *ir.OpDecl, it *yaml.Node, i int) bool {
	what := "ops[" + strconv.Itoa(i) + "]"
	fields, ok := p.w.mapping(it, what, opKeys())
	if !ok {
		return false
	}
	*d = ir.OpDecl{Pos: posOf(it), Index: i, Axis: -1, Written: p.written}
	var ns opNodes
	good, kindOK, insOK := true, false, false
	for _, f := range fields {
		v := f.Value
		switch f.Key {
		case "op":
			ns.kind = v
			kindOK = p.opKind(d, v, what)
			ok = kindOK
		case "in":
			ns.in, d.InList = v, posOf(v)
			ok = p.opInputs(d, v, what+" in")
			insOK = ok
		case "out":
			ns.out, d.OutAt = v, posOf(v)
			d.Out, ok = p.w.name(v, what+" out", ir.IsBackwardName)
		case "grad_of":
			d.GradOfAt = posOf(v)
			d.GradOf, ok = p.w.ident(v, what+" grad_of")
		case "axis":
			ns.axis, d.AxisAt = v, posOf(v)
			d.Axis, ok = p.w.integer(v, what+" axis")
		case "axes":
			ns.axes, d.AxesAt = v, posOf(v)
			d.Axes, d.AxesEach, ok = p.integers(v, what+" axes")
		default: // an attribute of the registry's (mapping knows no other key)
			ok = p.attrValue(d, ops.AttrOf(f.Key), v, what)
		}
		good = good && ok
	}
	for _, req := range []struct {
		key string
		n   *yaml.Node
	}{{"op", ns.kind}, {"in", ns.in}, {"out", ns.out}} {
		if req.n == nil {
			if !misspelled(it, opKeys(), req.key) {
				p.errs.Add(d.Pos, "%s: missing key %q", what, req.key)
			}
			good = false
		}
	}
	// A known kind's keys are checked even when a name is wrong, so every
	// problem of the op is reported at once; the Source checks its
	// attributes and arity (but for a broken "in", reported already).
	d.Broken = !kindOK || !p.checkOpKeys(d, it, ns, what) || !good
	d.InBroken = !insOK
	return true
}

// writes reports whether the op being read (opNode) writes key,
// misspelled or not: ir.OpDecl's Written.
func (p *reader) writes(key string) bool {
	return misspelled(p.opNode, opKeys(), key) || hasKey(p.opNode, key)
}

// opKind decodes the op's kind.
func (p *reader) opKind(d *ir.OpDecl, n *yaml.Node, what string) bool {
	s, ok := p.w.str(n, what+" op")
	if !ok {
		return false
	}
	if ir.OpKind(s).Entry() == nil {
		ir.UnknownOp(p.errs, posOf(n), what, s)
		return false
	}
	d.Kind = ir.OpKind(s)
	return true
}

// opInputs decodes "in": one tensor name, or a list of names.
func (p *reader) opInputs(d *ir.OpDecl, n *yaml.Node, what string) bool {
	items := []*yaml.Node{n}
	if n.Kind == yaml.SequenceNode {
		items = n.Content
		if len(items) == 0 {
			p.errs.Add(posOf(n), "%s: expected at least one tensor name, got an empty list", what)
			return false
		}
	} else if n.Kind != yaml.ScalarNode {
		p.errs.Add(posOf(n), "%s: expected a tensor name or a list of names, got %s", what, kindName(n))
		return false
	}
	good := true
	d.In, d.InAt = make([]string, 0, len(items)), make([]diag.Pos, 0, len(items))
	for slot, it := range items {
		if isNumber(it) && n.Kind == yaml.SequenceNode {
			good = p.opScalar(d, it, slot, what) && good
			continue
		}
		name, ok := p.w.name(it, what, ir.IsTensorPath)
		good = good && ok
		d.In = append(d.In, name)
		d.InAt = append(d.InAt, posOf(it))
	}
	if good && len(d.In) == 0 {
		p.errs.AddHint(posOf(n), "a binary op takes one number and one tensor", "%s: expected a tensor name among the operands, got only numbers", what)
		good = false
	}
	return good
}

// isNumber reports whether n is a plain number, which an operand list
// may hold in place of a tensor name.
func isNumber(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && (n.Tag == "!!int" || n.Tag == "!!float")
}

// opScalar decodes number n, operand slot of the op: one per op.
func (p *reader) opScalar(d *ir.OpDecl, n *yaml.Node, slot int, what string) bool {
	v, ok := p.w.number(n, what)
	if !ok {
		return false
	}
	if d.Scalar != nil {
		p.errs.AddHint(posOf(n), "compute a constant's value yourself: one operand is a tensor",
			"%s: at most one operand may be a number, got a second, %s", what, n.Value)
		return false
	}
	d.Scalar, d.ScalarAt = &ops.Scalar{Slot: slot, Value: v}, posOf(n)
	return true
}

// attrValue decodes attribute spec's value v by its kind into d, with
// where it is written.
func (p *reader) attrValue(d *ir.OpDecl, spec *ops.AttrSpec, v *yaml.Node, what string) bool {
	what += " " + string(spec.Key)
	val, each, ok := ops.Value{Key: spec.Key}, []diag.Pos(nil), false
	switch spec.Kind {
	case ops.IntAttr:
		val.Int, ok = p.w.integer(v, what)
	case ops.IntsAttr:
		val.Ints, each, ok = p.integers(v, what)
	case ops.DTypeAttr:
		d := p.dtypeName(v, what, what)
		val.Str, ok = string(d), d != ""
	case ops.FloatAttr:
		val.Float, ok = p.w.number(v, what)
	case ops.BoolAttr:
		val.Bool, ok = p.w.boolean(v, what)
	case ops.NameAttr:
		val.Str, ok = p.w.str(v, what)
	}
	if !ok {
		return false
	}
	d.Attrs, d.AttrAt, d.AttrEach = append(d.Attrs, val), append(d.AttrAt, posOf(v)), append(d.AttrEach, each)
	return true
}

// integers decodes a list of integers, and where each is written.
func (p *reader) integers(n *yaml.Node, what string) ([]int, []diag.Pos, bool) {
	items, ok := p.w.sequence(n, what)
	if !ok {
		return nil, nil, false
	}
	xs, at := make([]int, 0, len(items)), make([]diag.Pos, 0, len(items))
	for _, it := range items {
		x, ok := p.w.integer(it, what)
		if !ok {
			return nil, nil, false
		}
		xs, at = append(xs, x), append(at, posOf(it))
	}
	return xs, at, true
}

// checkOpKeys checks the keys that depend on the op's kind, as its registry
// entry lists them: reductions need "axis", broadcast needs "axes", and
// no other op takes either.
func (p *reader) checkOpKeys(d *ir.OpDecl, it *yaml.Node, ns opNodes, what string) bool {
	e := d.Kind.Entry()
	takesAxis, takesAxes := e.Takes(ops.AttrAxis), e.Takes(ops.AttrAxes)
	switch {
	case takesAxis && ns.axis == nil && ns.axes != nil:
		p.errs.AddHint(d.AxesAt, "write axis: N; reduce several axes with one op each",
			"%s: %s reduces one \"axis\", not \"axes\"", what, d.Kind)
		return false
	case takesAxes && ns.axes == nil && ns.axis != nil:
		p.errs.AddHint(d.AxisAt, axesHint(d.Kind, "write axes: [N], the output positions of the new axes"),
			"%s: %s takes \"axes\", a list, not \"axis\"", what, d.Kind)
		return false
	}
	good := true
	switch {
	case takesAxis && ns.axis == nil:
		if !misspelled(it, opKeys(), "axis") { // else reported as an unknown key
			p.errs.Add(d.Pos, "%s: %s needs an \"axis\" %s", what, d.Kind, axisUse(d.Kind))
		}
		good = false
	case !takesAxis && ns.axis != nil:
		p.errs.AddHint(d.AxisAt, axisHint(d.Kind), "%s: %s takes no \"axis\"", what, d.Kind)
		good = false
	}
	switch {
	case takesAxes && ns.axes == nil:
		if !misspelled(it, opKeys(), "axes") {
			p.errs.AddHint(d.Pos, axesHint(d.Kind, "axes: [0] inserts a leading axis"),
				"%s: %s needs \"axes\", %s", what, d.Kind, axesWhat(d.Kind))
		}
		good = false
	case takesAxes && ns.axes.Kind == yaml.SequenceNode && len(ns.axes.Content) == 0:
		p.errs.AddHint(d.AxesAt, axesHint(d.Kind, "a broadcast without new axes is a set"),
			"%s: %s axes: expected at least one %s, got an empty list", what, d.Kind, map[bool]string{true: "new axis", false: "axis"}[d.Kind == ir.OpBroadcast])
		good = false
	case !takesAxes && ns.axes != nil:
		p.errs.AddHint(d.AxesAt, "only broadcast inserts axes", "%s: %s takes no \"axes\"", what, d.Kind)
		good = false
	}
	return good
}

// axesWhat says what an op's "axes" are: broadcast's new axes, or a
// norm's normalized ones.
func axesWhat(k ir.OpKind) string {
	if k == ir.OpBroadcast {
		return "the output positions of its new axes"
	}
	return "the axes it normalizes"
}

// axesHint is broadcast's hint about its "axes", or a norm's.
func axesHint(k ir.OpKind, broadcast string) string {
	if k == ir.OpBroadcast {
		return broadcast
	}
	return "write axes: [-1]: a norm normalizes the last axis"
}

// axisHint says why an op other than a reduction takes no "axis". The hint
// for set is empty, as it always was.
func axisHint(k ir.OpKind) string {
	switch {
	case k.IsElementwise():
		return fmt.Sprintf("%s is elementwise: the reductions over an axis are %s", k, strings.Join(ops.FamilyNames(ops.Reduction), ", "))
	case k == ir.OpBroadcast:
		return "broadcast's new axes are a list, \"axes\""
	case k == ir.OpMatmul:
		return "matmul contracts a's last axis with b's second-to-last; no axis is given"
	case k == ir.OpLinear:
		return "linear contracts x's last axis with w's axis 1; no axis is given"
	}
	return ""
}

// axisUse says what an op of kind k does along its axis, for messages.
func axisUse(k ir.OpKind) string {
	if k.IsReduction() {
		return "to reduce"
	}
	return "to work along"
}
