package ir

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"

	"go.yaml.in/yaml/v3"

	"github.com/nvcomm/nvcomm/internal/diag"
	"github.com/nvcomm/nvcomm/internal/ops"
)

// opKeys are the keys of an op: its kind, operands and output, and every
// attribute of the registry; which attributes an op takes depends on its
// kind (checkOpKeys). Made again only when an attribute was registered
// since (ops.RegisterAttr, before any parse).
func opKeys() []string {
	keys := opKeysMemo.Load()
	if keys == nil || len(*keys) != 3+ops.NumAttrs() {
		all := append([]string{"op", "in", "out"}, ops.AttrKeys()...)
		keys = &all
		opKeysMemo.Store(keys)
	}
	return *keys
}

var opKeysMemo atomic.Pointer[[]string]

// parseOps decodes the ops list. Each op's problems are reported together
// (its kind, names, keys and arity), and a broken op is left out (leaveOut).
func (p *parser) parseOps(n *yaml.Node) {
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

// opEntry reads it, the i-th op of the file.
func (p *parser) opEntry(it *yaml.Node, i int) {
	if op, ok := p.parseOp(it, i); ok {
		p.ops = append(p.ops, op)
	} else {
		p.leaveOut(op)
	}
}

// leaveOut records what an op left out for its errors (nil when it is not
// even a mapping) writes and reads: its output is lost, and its operands
// are read.
func (p *parser) leaveOut(op *rawOp) {
	if op == nil || !given(op.outAt) || len(op.ins) == 0 {
		p.opsLost = true
	}
	if op == nil {
		return
	}
	if op.out != "" {
		p.lose(op.out)
	}
	if p.lostReads == nil {
		p.lostReads = map[string]bool{}
	}
	for _, in := range op.ins {
		p.lostReads[in] = true
	}
}

// lose marks the tensor name as lost: its producer is unknown.
func (p *parser) lose(name string) {
	if p.lost == nil {
		p.lost = map[string]bool{}
	}
	p.lost[name] = true
}

// opNodes are the values of an op's keys, nil for those left out: what
// parseOp's checks read of the op's nodes, which it keeps no longer.
type opNodes struct {
	kind, in, out, axis, axes *yaml.Node
}

// parseOp decodes one op, the i-th of the file. A broken op is returned
// with what could be read of it, nil when it is not a mapping.
func (p *parser) parseOp(it *yaml.Node, i int) (*rawOp, bool) {
	what := "ops[" + strconv.Itoa(i) + "]"
	fields, ok := p.w.mapping(it, what, opKeys())
	if !ok {
		return nil, false
	}
	op := &rawOp{pos: posOf(it), fileIdx: i, axis: -1}
	var ns opNodes
	good, kindOK, insOK := true, false, false
	for _, f := range fields {
		v := f.Value
		switch f.Key {
		case "op":
			ns.kind = v
			kindOK = p.opKind(op, v, what)
			ok = kindOK
		case "in":
			ns.in = v
			ok = p.opInputs(op, v, what+" in")
			insOK = ok
		case "out":
			ns.out, op.outAt = v, posOf(v)
			op.out, ok = p.w.ident(v, what+" out")
		case "axis":
			ns.axis, op.ownKeys().axisAt = v, posOf(v)
			op.axis, ok = p.w.integer(v, what+" axis")
		case "axes":
			k := op.ownKeys()
			ns.axes, k.axesAt = v, posOf(v)
			k.axes, k.axesEach, ok = p.integers(v, what+" axes")
		default: // an attribute of the registry's (mapping knows no other key)
			ok = p.attrValue(op.ownKeys(), ops.AttrOf(f.Key), v, what)
		}
		good = good && ok
	}
	for _, req := range []struct {
		key string
		n   *yaml.Node
	}{{"op", ns.kind}, {"in", ns.in}, {"out", ns.out}} {
		if req.n == nil {
			if !misspelled(it, opKeys(), req.key) {
				p.errs.Add(op.pos, "%s: missing key %q", what, req.key)
			}
			good = false
		}
	}
	if !kindOK {
		return op, false
	}
	// The kind is known: check its keys and arity even when a name is
	// wrong, so every problem of the op is reported at once.
	keysOK := p.checkOpKeys(op, it, ns, what)
	keysOK = p.checkAttrs(op, it, what) && keysOK
	arityOK := !insOK || p.checkArity(op, posOf(ns.in), what) // a broken "in" is reported already
	return op, good && keysOK && arityOK
}

// opKind decodes the op's kind.
func (p *parser) opKind(op *rawOp, n *yaml.Node, what string) bool {
	s, ok := p.w.str(n, what+" op")
	if !ok {
		return false
	}
	if OpKind(s).Entry() == nil {
		p.errs.AddHint(posOf(n), unknownOpHint(s), "%s: unknown op %q (ops are: %s)", what, s, opFamilies())
		return false
	}
	op.kind = OpKind(s)
	return true
}

// opInputs decodes "in": one tensor name, or a list of names.
func (p *parser) opInputs(op *rawOp, n *yaml.Node, what string) bool {
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
	op.ins, op.inAt = make([]string, 0, len(items)), make([]diag.Pos, 0, len(items))
	for slot, it := range items {
		if isNumber(it) && n.Kind == yaml.SequenceNode {
			good = p.opScalar(op, it, slot, what) && good
			continue
		}
		name, ok := p.w.ident(it, what)
		good = good && ok
		op.ins = append(op.ins, name)
		op.inAt = append(op.inAt, posOf(it))
	}
	if good && len(op.ins) == 0 {
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
func (p *parser) opScalar(op *rawOp, n *yaml.Node, slot int, what string) bool {
	v, ok := p.w.number(n, what)
	if !ok {
		return false
	}
	k := op.ownKeys()
	if k.scalar != nil {
		p.errs.AddHint(posOf(n), "compute a constant's value yourself: one operand is a tensor",
			"%s: at most one operand may be a number, got a second, %s", what, n.Value)
		return false
	}
	k.scalar, k.scalarAt = &ops.Scalar{Slot: slot, Value: v}, posOf(n)
	return true
}

// attrValue decodes attribute spec's value v by its kind into k, with
// where it is written.
func (p *parser) attrValue(k *rawKeys, spec *ops.AttrSpec, v *yaml.Node, what string) bool {
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
	a := ownPart(&k.attrs)
	a.vals, a.at, a.each = append(a.vals, val), append(a.at, posOf(v)), append(a.each, each)
	return true
}

// integers decodes a list of integers, and where each is written.
func (p *parser) integers(n *yaml.Node, what string) ([]int, []diag.Pos, bool) {
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
func (p *parser) checkOpKeys(op *rawOp, it *yaml.Node, ns opNodes, what string) bool {
	e := op.kind.Entry()
	takesAxis, takesAxes := e.Takes(ops.AttrAxis), e.Takes(ops.AttrAxes)
	switch {
	case takesAxis && ns.axis == nil && ns.axes != nil:
		p.errs.AddHint(op.keysOf().axesAt, "write axis: N; reduce several axes with one op each",
			"%s: %s reduces one \"axis\", not \"axes\"", what, op.kind)
		return false
	case takesAxes && ns.axes == nil && ns.axis != nil:
		p.errs.AddHint(op.keysOf().axisAt, axesHint(op.kind, "write axes: [N], the output positions of the new axes"),
			"%s: %s takes \"axes\", a list, not \"axis\"", what, op.kind)
		return false
	}
	good := true
	switch {
	case takesAxis && ns.axis == nil:
		if !misspelled(it, opKeys(), "axis") { // else reported as an unknown key
			p.errs.Add(op.pos, "%s: %s needs an \"axis\" %s", what, op.kind, axisUse(op.kind))
		}
		good = false
	case !takesAxis && ns.axis != nil:
		p.errs.AddHint(op.keysOf().axisAt, axisHint(op.kind), "%s: %s takes no \"axis\"", what, op.kind)
		good = false
	}
	switch {
	case takesAxes && ns.axes == nil:
		if !misspelled(it, opKeys(), "axes") {
			p.errs.AddHint(op.pos, axesHint(op.kind, "axes: [0] inserts a leading axis"),
				"%s: %s needs \"axes\", %s", what, op.kind, axesWhat(op.kind))
		}
		good = false
	case takesAxes && ns.axes.Kind == yaml.SequenceNode && len(ns.axes.Content) == 0:
		p.errs.AddHint(op.keysOf().axesAt, axesHint(op.kind, "a broadcast without new axes is a set"),
			"%s: %s axes: expected at least one %s, got an empty list", what, op.kind, map[bool]string{true: "new axis", false: "axis"}[op.kind == OpBroadcast])
		good = false
	case !takesAxes && ns.axes != nil:
		p.errs.AddHint(op.keysOf().axesAt, "only broadcast inserts axes", "%s: %s takes no \"axes\"", what, op.kind)
		good = false
	}
	return good
}

// checkAttrs checks the op's attributes but axis and axes against its
// registry entry (checkAttrValues) and puts them in the entry's order.
func (p *parser) checkAttrs(op *rawOp, it *yaml.Node, what string) bool {
	k := readPart(op.keysOf().attrs)
	order, good := p.checkAttrValues(op.kind, k.vals, func(j int) diag.Pos { return k.at[j] }, op.pos, what,
		func(key string) bool { return misspelled(it, opKeys(), key) || hasKey(it, key) })
	if op.keys != nil && op.keys.attrs != nil {
		var in rawAttrs
		for _, j := range order {
			in.vals, in.at, in.each = append(in.vals, k.vals[j]), append(in.at, k.at[j]), append(in.each, k.each[j])
		}
		*op.keys.attrs = in
	}
	return good
}

// checkAttrValues checks attribute values vals of an op of kind, each
// written at at(j), the op at pos (ops.Op.CheckValues); a missing one
// that reported says was reported already (written misspelled, or with a
// value of the wrong type) is not reported again. It returns the indices
// of vals in the entry's order.
func (p *parser) checkAttrValues(kind OpKind, vals ops.Values, at func(j int) diag.Pos, pos diag.Pos, what string,
	reported func(key string) bool) ([]int, bool) {
	e := kind.Entry()
	probs := e.CheckValues(vals)
	for _, pr := range probs {
		switch pr.What {
		case ops.NotTaken:
			p.errs.AddHint(at(pr.Index), takersHint(pr.Key), "%s: %s takes no %q", what, kind, pr.Key)
		case ops.Bad:
			p.errs.AddHint(at(pr.Index), pr.Hint, "%s %s: %s", what, pr.Key, pr.Msg)
		case ops.Missing:
			if !reported(string(pr.Key)) {
				p.errs.AddHint(pos, string(pr.Key)+": "+ops.AttrOf(string(pr.Key)).Doc, "%s: %s needs %q", what, kind, pr.Key)
			}
		}
	}
	var order []int
	for _, a := range e.Attrs {
		if j := slices.IndexFunc(vals, func(v ops.Value) bool { return v.Key == a }); j >= 0 {
			order = append(order, j)
		}
	}
	return order, len(probs) == 0
}

// scalarHint says which ops take a number as an operand.
var scalarHint = "only the binary elementwise ops (" + strings.Join(ops.FamilyNames(ops.Binary), ", ") +
	") take a number as one of their operands"

// axesWhat says what an op's "axes" are: broadcast's new axes, or a
// norm's normalized ones.
func axesWhat(k OpKind) string {
	if k == OpBroadcast {
		return "the output positions of its new axes"
	}
	return "the axes it normalizes"
}

// axesHint is broadcast's hint about its "axes", or a norm's.
func axesHint(k OpKind, broadcast string) string {
	if k == OpBroadcast {
		return broadcast
	}
	return "write axes: [-1]: a norm normalizes the last axis"
}

// takersHint names the ops that take attribute a.
func takersHint(a ops.Attr) string {
	return fmt.Sprintf("%q is an attribute of %s", a, strings.Join(ops.Takers(a), ", "))
}

// axisHint says why an op other than a reduction takes no "axis". The hint
// for set is empty, as it always was.
func axisHint(k OpKind) string {
	switch {
	case k.IsElementwise():
		return fmt.Sprintf("%s is elementwise: the reductions over an axis are %s", k, strings.Join(ops.FamilyNames(ops.Reduction), ", "))
	case k == OpBroadcast:
		return "broadcast's new axes are a list, \"axes\""
	case k == OpMatmul:
		return "matmul contracts a's last axis with b's second-to-last; no axis is given"
	case k == OpLinear:
		return "linear contracts x's last axis with w's axis 1; no axis is given"
	}
	return ""
}

// axisUse says what an op of kind k does along its axis, for messages.
func axisUse(k OpKind) string {
	if k.IsReduction() {
		return "to reduce"
	}
	return "to work along"
}

// checkArity checks the number of operands the op's kind takes, written
// at in.
func (p *parser) checkArity(op *rawOp, in diag.Pos, what string) bool {
	n := len(op.ins)
	if k := op.keysOf(); k.scalar != nil {
		if !op.kind.isBinary() {
			p.errs.AddHint(k.scalarAt, scalarHint, "%s: %s takes no number as an operand", what, op.kind)
			return false
		}
		n++
	}
	e := op.kind.Entry()
	switch _, hi := op.kind.arity(); {
	case e == nil || e.TakesOperands(n):
		return true
	case hi == 1:
		p.errs.AddHint(in, "in names one tensor", "%s: %s takes 1 input, got %d", what, op.kind, n)
		return false
	}
	p.errs.AddHint(in, "write in: "+op.kind.operandNames(), "%s: %s takes %s (%s), got %d",
		what, op.kind, e.ArityText(), op.kind.operandNames(), n)
	return false
}
