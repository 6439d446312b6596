package ir

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/nvcomm/nvcomm/internal/diag"
	"github.com/nvcomm/nvcomm/internal/ops"
	"github.com/nvcomm/nvcomm/internal/shard"
)

// This file builds ops and fusions from values, as construct.go builds
// meshes and tensors: an op goes through a file's own inference and
// checks (inferOp) and its output through its declaration's (declare), so
// that a fusion built by value is the one Source.Build makes of the same
// fusion written in a file.

// OpSpec is an op given by value: its kind, operands and attributes, and
// its output's declaration.
type OpSpec struct {
	// Index is the op's position in its fusion's topological order, which
	// messages name it by (ops[Index]); NewFusion numbers the ops again.
	Index  int
	Kind   OpKind
	Inputs []*Tensor // from NewTensor, or the outputs of other ops
	// Axis is a reduction's reduced axis among its input's value axes
	// (negative counts from the end); other ops ignore it.
	Axis int
	// Axes are broadcast's new axes among its output's (negative count
	// from the end); other ops ignore them.
	Axes []int
	// Attrs are the op's other attributes (ops.Values), as its registry
	// entry lists them; in any order.
	Attrs ops.Values
	// Scalar is, for a binary elementwise op, the number it takes as one
	// of its operands; Inputs then holds the other.
	Scalar *ops.Scalar
	// Of is the composite op whose expansion the op belongs to, or nil.
	Of *Composite
	// Out declares the output as a fusion file does: its Name, Mesh (nil:
	// the first operand's), Schedule or Placements and Allocation. Its
	// DType, when given, must be the operands'; its Shape, when given, the
	// op's value shape or its logical domain, and broadcast requires it
	// (the new axes' extents come from it); its ReductionAxes, when given,
	// the op's. The op infers the rest; Propagated is not read.
	Out TensorSpec
}

// NewOp builds the op spec describes and its output, with the checks Build
// makes of a fusion file's op (the operands' ranks, extents and dtypes,
// the reduced and the new axes, a Partial operand read only by a set,
// which is then the reduction of its terms over axis 0, a Partial output
// only where the op sums partial results) and NewTensor's of the output,
// whose logical domain and dtype the op infers. The error, a *diag.List
// without positions, says what is wrong; NewOp never panics.
func NewOp(spec OpSpec) (*Op, error) {
	p := newBuilder()
	op, ok := p.newOp(spec)
	if !ok {
		return nil, p.errs.List()
	}
	return op, nil
}

func (p *Source) newOp(spec OpSpec) (*Op, bool) {
	if !p.checkOpSpec(spec) {
		return nil, false
	}
	order, ok := p.checkAttrValues(spec.Kind, spec.Attrs, func(int) diag.Pos { return diag.Pos{} }, diag.Pos{},
		spec.Index, func(string) bool { return false })
	if !ok {
		return nil, false
	}
	var attrs ops.Values
	for _, j := range order {
		attrs = append(attrs, spec.Attrs[j])
	}
	out := &Tensor{Name: spec.Out.Name, Declared: true, TensorDomain: new(TensorDomain)}
	op := &Op{Index: spec.Index, Kind: spec.Kind, Inputs: slices.Clone(spec.Inputs), Out: out, Axis: -1, Of: spec.Of}
	out.Producer = op
	r, terms := pendingOf(spec.Out)
	in := opIn{termsOut: terms && r == OpSum && !spec.Out.Combine, kind: spec.Kind, idx: spec.Index, axis: spec.Axis, axes: spec.Axes, attrs: attrs.Clone(), scalar: spec.Scalar,
		out: out.Name}
	what := func() string { return fmt.Sprintf("tensor %q", out.Name) }
	declared := func() ([]int, diag.Pos, bool) {
		if spec.Out.Shape == nil {
			p.noBroadcastShape(diag.Pos{}, spec.Index, out.Name)
			return nil, diag.Pos{}, false
		}
		return spec.Out.Shape, diag.Pos{}, p.checkExtents(spec.Out.Shape, nil, diag.Pos{}, what()+" shape")
	}
	if !p.inferOp(op, in, declared) {
		return nil, false
	}
	before := p.errs.Count()
	if out.Mesh = spec.Out.Mesh; out.Mesh == nil {
		out.Mesh = operandMesh(op)
	}
	if len(out.Mesh.Devices) == 0 {
		p.errs.Add(diag.Pos{}, "%s: no mesh", what())
		return nil, false
	}
	if spec.Out.DType != "" {
		p.matchDType(op, spec.Out.DType, diag.Pos{}, what())
	}
	if r, ok := pendingOf(spec.Out); ok && !spec.Out.Combine {
		return op, p.errs.Count() == before && p.declarePendingSpec(op, spec.Out, r)
	}
	if spec.Out.Shape != nil {
		p.matchShape(out, spec.Out.Shape, diag.Pos{}, what())
	}
	if r := spec.Out.ReductionAxes; r != nil && !slices.Equal(r, reductionAxes(out)) {
		p.errs.Add(diag.Pos{}, "%s: reduction axes %v are not the op's, %v", what(), r, reductionAxes(out))
	}
	if p.errs.Count() > before || !p.declare(out, spec.Out, op) {
		return nil, false
	}
	return op, true
}

// checkOpSpec checks what a file's op decoding checks: a known kind, the
// number of operands it takes, built operands, and broadcast's new axes.
func (p *Source) checkOpSpec(spec OpSpec) bool {
	what := fmt.Sprintf("ops[%d]", spec.Index)
	if spec.Kind.Entry() == nil {
		UnknownOp(p.errs, diag.Pos{}, what, string(spec.Kind))
		return false
	}
	if spec.Kind.family() == ops.Composite {
		p.errs.AddHint(diag.Pos{}, "build the primitive ops of its expansion (docs/fusion.md, \"Composite ops\"), or parse a file",
			"%s: %s is a composite op, which only the parser expands", what, spec.Kind)
		return false
	}
	n := len(spec.Inputs)
	if s := spec.Scalar; s != nil {
		if !spec.Kind.isBinary() || s.Slot < 0 || s.Slot > 1 {
			p.errs.AddHint(diag.Pos{}, scalarHint, "%s: %s takes no number as operand %d", what, spec.Kind, s.Slot)
			return false
		}
		n++
	}
	if lo, hi := spec.Kind.arity(); n < lo || n > hi {
		p.errs.Add(diag.Pos{}, "%s: %s takes %s, got %d operands", what, spec.Kind, spec.Kind.operandNames(), n)
		return false
	}
	for k, in := range spec.Inputs {
		if in == nil || in.Mesh == nil || in.Loop == nil && len(in.Logical) > 0 {
			p.errs.Add(diag.Pos{}, "%s: operand %d is not a built tensor", what, k)
			return false
		}
	}
	if spec.Kind == OpBroadcast && len(spec.Axes) == 0 {
		p.errs.AddHint(diag.Pos{}, "a broadcast without new axes is a set",
			"%s: broadcast axes: expected at least one new axis, got an empty list", what)
		return false
	}
	return true
}

// reductionAxes lists the positions of t's reduction axes.
func reductionAxes(t *Tensor) []int {
	var axes []int
	for i, id := range t.Logical {
		if id.Reduction {
			axes = append(axes, i)
		}
	}
	return axes
}

// NewFusion assembles a fusion of tensors and of ops built by NewOp over
// them, as Build finishes a file's: the ops in topological order (each
// operand is produced by an earlier op, or by none), their operands and
// outputs among tensors, no tensor produced twice. It numbers the ops in
// that order and takes as the fusion's inputs the tensors that no op
// produces and as its outputs those that no op reads, in the order of
// tensors, as Build does for a file that lists neither; its meshes are
// its tensors', sorted by name. The error, a *diag.List without
// positions, says what is wrong.
func NewFusion(name string, tensors []*Tensor, ops []*Op) (*Fusion, error) {
	p := newBuilder()
	f := &Fusion{Name: name, Tensors: slices.Clone(tensors), Ops: slices.Clone(ops)}
	member := make(map[*Tensor]bool, len(tensors))
	for _, t := range tensors {
		member[t] = true
	}
	producer := make(map[*Tensor]int, len(ops)) // by the index of its op
	for i, op := range f.Ops {
		if !p.checkOpOutput(op, i, member, producer) {
			return nil, p.errs.List()
		}
		producer[op.Out] = i
	}
	read := make(map[*Tensor]bool, len(tensors))
	for i, op := range f.Ops {
		for _, in := range op.Inputs {
			if !p.checkOperand(in, i, member, producer) {
				return nil, p.errs.List()
			}
			read[in] = true
		}
	}
	for i, op := range f.Ops {
		op.Index, op.Out.Producer = i, op
	}
	for _, t := range f.Tensors {
		if _, made := producer[t]; !made {
			f.Inputs = append(f.Inputs, t)
		}
		if !read[t] {
			f.Outputs = append(f.Outputs, t)
		}
		if !slices.Contains(f.Meshes, t.Mesh) {
			f.Meshes = append(f.Meshes, t.Mesh)
		}
	}
	slices.SortStableFunc(f.Meshes, func(a, b *Mesh) int { return cmp.Compare(a.Name, b.Name) })
	return f, nil
}

// checkOpOutput checks op i's output: among the fusion's tensors
// (member), and produced by no op before it.
func (p *Source) checkOpOutput(op *Op, i int, member map[*Tensor]bool, producer map[*Tensor]int) bool {
	if !member[op.Out] {
		p.errs.Add(diag.Pos{}, "ops[%d]: output %q is not among the fusion's tensors", i, op.Out.Name)
		return false
	}
	if first, ok := producer[op.Out]; ok {
		p.errs.Add(diag.Pos{}, "tensor %q is produced twice (by ops[%d] and ops[%d])", op.Out.Name, first, i)
		return false
	}
	return true
}

// checkOperand checks an operand of op i: among the fusion's tensors
// (member), and produced by an op before op i or by none.
func (p *Source) checkOperand(in *Tensor, i int, member map[*Tensor]bool, producer map[*Tensor]int) bool {
	by, made := producer[in]
	switch {
	case !member[in]:
		p.errs.Add(diag.Pos{}, "ops[%d]: operand %q is not among the fusion's tensors", i, in.Name)
	case made && by == i:
		p.errs.Add(diag.Pos{}, "ops[%d]: reads and writes the same tensor %q", i, in.Name)
	case made && by > i:
		p.errs.AddHint(diag.Pos{}, "list the ops in topological order", "ops[%d]: operand %q is produced by a later op, ops[%d]", i, in.Name, by)
	case !made && in.Producer != nil:
		p.errs.Add(diag.Pos{}, "ops[%d]: operand %q is produced by an op not in the fusion", i, in.Name)
	default:
		return true
	}
	return false
}

// pendingOf returns the op of the terms spec declares (its Partial, or a
// Partial placement's), if it declares any.
func pendingOf(spec TensorSpec) (OpKind, bool) {
	if spec.Partial != "" {
		return spec.Partial, true
	}
	for _, pl := range spec.Placements {
		if pl.Kind == shard.Partial {
			return OpKind(pl.Op), true
		}
	}
	return "", false
}

// declarePendingSpec declares op's output, whose logical domain the op
// inferred, as the pending terms of r that spec describes: its shape, when
// given, is the terms axis and the op's value shape; without placements
// it must be given, the terms axis's extent being its first.
func (p *Source) declarePendingSpec(op *Op, spec TensorSpec, r OpKind) bool {
	out := op.Out
	what := fmt.Sprintf("tensor %q", out.Name)
	if spec.Placements != nil {
		what += " placements"
	}
	if !p.checkPendingOp(op, r, diag.Pos{}, what) {
		return false
	}
	if op.Kind.PassesSums() {
		// Its operands' terms, computed on as they are (sums.go).
		if spec.Shape != nil && !slices.Equal(spec.Shape, out.Shape()) {
			p.errs.Add(diag.Pos{}, "%s: %s of terms has its operands' shape %v, got %v", what, op.Kind, out.Shape(), spec.Shape)
			return false
		}
		spec.Partial = r
		return p.declare(out, spec, nil) && p.checkSumsOnTerms(op)
	}
	value := out.Shape()
	var terms int
	for i, pl := range spec.Placements {
		if pl.Kind == shard.Partial {
			terms = out.Mesh.Shape[min(i, out.Mesh.Rank()-1)]
		}
	}
	if len(spec.Shape) > 0 {
		terms = spec.Shape[0]
	}
	shape := append([]int{terms}, value...)
	if terms <= 0 || spec.Shape != nil && !slices.Equal(spec.Shape, shape) || len(spec.ReductionAxes) > 0 {
		p.errs.Add(diag.Pos{}, "%s: the pending terms of %s have the shape [terms, %s...] and no reduction axes, got shape %v and reduction axes %v",
			what, op.Kind, fmtShape(value), fmtShape(spec.Shape), fmtShape(spec.ReductionAxes))
		return false
	}
	out.Logical = logicalDomain(shape, -1)
	spec.Partial = r
	return p.declare(out, spec, nil) && p.combine(op)
}
