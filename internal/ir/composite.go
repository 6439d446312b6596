package ir

import (
	"slices"
	"strings"

	"github.com/nvcomm/nvcomm/internal/diag"
	"github.com/nvcomm/nvcomm/internal/ops"
)

// Composite is an op of the fusion of a composite kind (softmax, mean,
// rms_norm, layer_norm: ops.Composite), as written, which the builder
// expands into primitive ops (docs/fusion.md, "Composite ops"): every
// op of its expansion points at it, so that the plan, explain and the
// simulator know which op of the user's each one comes from.
type Composite struct {
	Kind   OpKind
	Inputs []string
	Output string
	// Axis is softmax's and mean's axis, counted from the start; -1 for
	// the norms.
	Axis int
	// Axes are the norms' normalized axes, counted from the start.
	Axes []int
	// Attrs are its other attributes (eps).
	Attrs ops.Values
	// Grad marks the provenance of a backward's op (backward.go): the op
	// is part of the gradient of this op of the fusion, of any kind, whose
	// operands' gradients it computes.
	Grad bool
	// mesh is where its intermediates lie: its output's declared mesh,
	// else its first operand's, where the composite itself would lie (nil
	// when that is still to be propagated, format 2).
	mesh *Mesh
}

// intermediate reports whether ro is an op of a composite's expansion
// but its last, whose output is the composite's own: its output is an
// intermediate tensor y/NAME, which no file declares and which takes its
// sharding from its operands (propagate.go's forward sweep, in any
// format), as format 2's undeclared tensors do.
func (ro *rawOp) intermediate() bool {
	of := ro.keysOf().of
	return of != nil && of.internal(ro.out)
}

// internal reports whether the tensor name, written by an op of c's, is
// an intermediate: for a composite every tensor but its output, for a
// gradient those named with a slash (t.grad/NAME), not t.grad itself.
func (c *Composite) internal(name string) bool {
	if c.Grad {
		return strings.Contains(name, "/")
	}
	return name != c.Output
}

// extentOne is shape with an axis of extent 1 inserted at each of axes
// (increasing positions in the result): what an expansion's broadcast
// makes, for the binary ops to repeat.
func extentOne(shape, axes []int) []int {
	out := make([]int, 0, len(shape)+len(axes))
	for k, next := 0, 0; k < len(shape)+len(axes); k++ {
		if slices.Contains(axes, k) {
			out = append(out, 1)
			continue
		}
		out = append(out, shape[next])
		next++
	}
	return out
}

// expand writes composite op ro, whose operands ins are built, as the
// primitive ops of its registry entry's Expand, each a raw op of the
// composite's position: intermediates y/NAME, the last writing y. An
// expansion that fails (an axis out of range, a norm of an axis other
// than the last) is reported where the value at fault is written.
func (p *Source) expand(ro *rawOp, ins []*Tensor) ([]*rawOp, bool) {
	e, k := ro.kind.Entry(), ro.keysOf()
	if e.Indexed != nil && !p.indexDTypes(&Op{Kind: ro.kind, Inputs: ins}, opIn{kind: ro.kind, idx: ro.fileIdx, src: ro}) {
		return nil, false // cross_entropy's labels: integer class indices
	}
	shapes := make([][]int, len(ins))
	for i, t := range ins {
		shapes[i] = t.Shape()
		if t.Partial != "" {
			// Its values: the reduction of its terms, which the builder
			// inserts before each op of the expansion that reads it.
			shapes[i] = shapes[i][1:]
		}
	}
	attrs := readPart(k.attrs).vals
	steps, err := e.Expand(shapes, ops.Attrs{Axis: ro.axis, Axes: k.axes, Values: attrs})
	if err != nil {
		p.errs.AddHint(expandErrPos(ro, err), err.Hint, "ops[%d]: %s of %q: %s", ro.fileIdx, ro.kind, ro.ins[0], err.Msg)
		return nil, false
	}
	of := &Composite{Kind: ro.kind, Inputs: slices.Clone(ro.ins), Output: ro.out, Axis: -1, Attrs: attrs.Clone(), mesh: ins[0].Mesh}
	if rt := p.decl(ro.out); rt != nil && !rt.broken && given(rt.meshAt) {
		of.mesh = rt.mesh
	}
	rank := len(shapes[0])
	switch {
	case e.Takes(ops.AttrAxis):
		of.Axis = (ro.axis + rank) % max(rank, 1)
	case e.Takes(ops.AttrAxes):
		of.Axes = []int{rank - 1}
	}
	names := make([]string, len(steps))
	subs := make([]*rawOp, len(steps))
	for j, s := range steps {
		names[j] = ro.out
		if s.Name != "" {
			names[j] = ro.out + "/" + s.Name
		}
		ins := make([]string, len(s.In))
		for i, r := range s.In {
			if k, ok := r.Operand(); ok {
				ins[i] = ro.ins[k]
			} else {
				ins[i] = names[r.Step()]
			}
		}
		subs[j] = stepOp(ro, s, names[j], ins, of)
	}
	return subs, true
}

// stepOp is expansion step s of op ro (a composite's, or a gradient
// rule's), writing out from the tensors ins, a raw op of ro's position
// whose keys say which op of the file it comes from (of).
func stepOp(ro *rawOp, s ops.ExpandStep, out string, ins []string, of *Composite) *rawOp {
	sub := &rawOp{kind: OpKind(s.Op), ins: ins, inAt: slices.Repeat([]diag.Pos{ro.pos}, len(ins)), out: out, outAt: ro.outAt,
		axis: s.Axis, pos: ro.pos, fileIdx: ro.fileIdx}
	for i, r := range s.In {
		if k, ok := r.Operand(); ok && k < len(ro.inAt) && ins[i] == ro.ins[k] {
			sub.inAt[i] = ro.inAt[k]
		}
	}
	sk := sub.ownKeys()
	sk.of, sk.scalar, sk.scalarAt, sk.outShape = of, s.Scalar.Clone(), ro.pos, s.Shape
	if s.Axes != nil {
		sk.axes, sk.axesAt, sk.axesEach = s.Axes, ro.pos, slices.Repeat([]diag.Pos{ro.pos}, len(s.Axes))
	}
	if len(s.Values) > 0 {
		sk.attrs = stepAttrs(s.Values, ro.pos)
	}
	return sub
}

// stepAttrs are an expansion step's attributes (a permute's dims), each
// written where the composite is.
func stepAttrs(vals ops.Values, pos diag.Pos) *rawAttrs {
	a := &rawAttrs{vals: vals.Clone()}
	for _, v := range vals {
		a.at, a.each = append(a.at, pos), append(a.each, slices.Repeat([]diag.Pos{pos}, len(v.Ints)))
	}
	return a
}

// expandErrPos is where the value an expansion error names is written.
func expandErrPos(ro *rawOp, err *ops.ExpandError) diag.Pos {
	k := ro.keysOf()
	switch {
	case err.Attr == ops.AttrAxis && given(k.axisAt):
		return k.axisAt
	case err.Attr == ops.AttrAxes && given(k.axesAt):
		return k.axesAt
	case err.Attr == "" && err.Index >= 0 && err.Index < len(ro.inAt):
		return ro.inAt[err.Index]
	case err.Attr != "" && given(k.attrPos(err.Attr, err.Index)):
		return k.attrPos(err.Attr, err.Index) // another attribute (sdpa's cp)
	}
	return ro.pos
}

// compositeMesh is the mesh of the intermediates of the composite op ro
// belongs to, so that the whole expansion runs where the composite's
// output lies: the output's declared mesh, else the first operand's.
func (p *Source) compositeMesh(ro *rawOp) *Mesh { return ro.keysOf().of.mesh }

// Intermediate reports whether t is an intermediate of a composite op's
// expansion (y/max, y/exp, ...): no file declares one, and its sharding
// is propagated from its operands.
func (t *Tensor) Intermediate() bool {
	op := t.Producer
	return op != nil && op.Of != nil && op.Of.internal(t.Name)
}
