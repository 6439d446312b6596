package ir

import (
	"fmt"
	"slices"
	"strings"

	"github.com/nvcomm/nvcomm/internal/diag"
	"github.com/nvcomm/nvcomm/internal/ops"
)

// A fusion's backward section (docs/training.md) asks for the gradients
// of tensors wrt with respect to the seeds: the builder appends to the
// fusion's ops the vector-Jacobian products of the ops between them
// (each op's registry rule, ops.GradRule), in reverse order, summing
// with add the contributions to a tensor read more than once. The
// gradient of t is the tensor "t.grad", which the file may declare like
// any tensor; the rules' intermediates are "y.grad/NAME" (y the output
// of the op differentiated), and accumulations "t.grad/accN": no file
// name holds a dot or a slash. Every appended op records the op it is
// the gradient of (Composite with Grad set: the plan's "of"), and reads
// the forward's tensors as they are, but those the section asks to be
// made again (recompute.go).

// gradSuffix is what a gradient's name adds to its tensor's.
const gradSuffix = ".grad"

// isGradName reports whether s names a gradient: an identifier and
// ".grad".
func IsGradName(s string) bool {
	base, ok := strings.CutSuffix(s, gradSuffix)
	return ok && IsIdent(base)
}

// rawBackward is a fusion's backward section as written, and what build
// finds of it.
type rawBackward struct {
	at    diag.Pos
	seeds []SeedDecl
	wrt   []Str
	// has holds the tensors whose gradient the backward computes: those
	// on a chain of ops from a tensor of wrt to a seed.
	has map[string]bool
	// order is the fusion's ops as written (composites whole), in build's
	// order, kept for the rules.
	order []*rawOp
	// saved are the copies of operands that the rules read as the
	// forward read them, by name (saved.go).
	saved map[string]savedCopy
	// recompute, regather, reshard and reshardAt are the section's
	// recompute and regather lists and reshard_after_forward,
	// recomputed the copies the backward made of the first, by name,
	// each with the tensor it re-makes, and regathered the tensors of
	// the second whose copies it gathered again (recompute.go).
	recompute  []Str
	regather   []Str
	regathered map[string]bool
	reshard    bool
	reshardAt  diag.Pos
	recomputed map[string]*Tensor
	// ops are the backward's ops as generated, kept for a file to write
	// them (Source.WrittenBackward), and inputSeeds the input seeds
	// their provenances stand for (an input has no op to name).
	ops        []*rawOp
	inputSeeds map[*Composite]string
}

// BackwardDecl is a fusion's backward section as a file writes it: where
// it is, its seeds and the tensors (wrt) whose gradients it asks for.
type BackwardDecl struct {
	At    diag.Pos
	Seeds []SeedDecl
	Wrt   []Str
	// Recompute are the forward's tensors that the backward makes again
	// rather than reading the forward's, Regather those whose copies
	// gathered for a contraction it gathers again (recompute.go), and
	// ReshardAfterForward, written at ReshardAt, adds the gathers of the
	// weights of Wrt to them.
	Recompute           []Str
	Regather            []Str
	ReshardAfterForward bool
	ReshardAt           diag.Pos
}

// SeedDecl is one seed as a file writes it: tensor Name, written at At,
// with upstream gradient DY (a declared input of its shape), or 1 (One)
// for a rank-0 tensor; DYAt is where the gradient is written.
type SeedDecl struct {
	Name, DY string
	At, DYAt diag.Pos
	One      bool
}

// SetBackward gives the file's backward section.
func (p *Source) SetBackward(d *BackwardDecl) {
	p.back = &rawBackward{at: d.At, seeds: d.Seeds, wrt: d.Wrt, recompute: d.Recompute, regather: d.Regather, reshard: d.ReshardAfterForward, reshardAt: d.ReshardAt}
}

// readsSeed reports whether name is a seed's upstream gradient, which
// the backward reads.
func (b *rawBackward) readsSeed(name string) bool {
	return b != nil && slices.ContainsFunc(b.seeds, func(s SeedDecl) bool { return s.DY == name })
}

// prepareBackward checks the backward section's names against the ops
// (order, which it keeps) and finds the tensors that get a gradient;
// it checks the declared gradients too, with or without a section.
func (p *Source) prepareBackward(order []*rawOp) {
	b := p.back
	if b != nil {
		b.order = slices.Clone(order)
		b.has = p.gradTensors(b, order)
	}
	for _, name := range p.tensorNames {
		base, ok := strings.CutSuffix(name, gradSuffix)
		switch {
		case isPart(name) && producerOf(p.producers, name) == nil:
			p.errs.AddHint(p.decl(name).pos, "declare the tensors ops write: a name with a slash is a part of a composite's or a gradient's",
				"tensor %q: no op writes it", name)
		case !ok:
		case b == nil && p.producers[name] != nil: // written by an op of the file (grad_of)
		case b == nil:
			p.errs.AddHint(p.decl(name).pos, "add backward: {seeds: {loss: 1}, wrt: ["+base+"]}, or rename the tensor",
				"tensor %q: a name ending in .grad is a gradient, which only a backward section computes", name)
		case !b.has[base]:
			p.errs.AddHint(p.decl(name).pos, "list "+base+" under backward wrt, on a chain of ops to a seed, or remove the declaration",
				"tensor %q: the backward computes no gradient of %q", name, base)
		}
	}
}

// known reports whether the tensor name is declared or produced by an op.
func (p *Source) known(name string) bool {
	_, decl := p.raw[name]
	return decl || p.producers[name] != nil
}

// gradTensors checks seeds and wrt and returns the tensors on a chain of
// ops from one of wrt to a seed.
func (p *Source) gradTensors(b *rawBackward, order []*rawOp) map[string]bool {
	down, up := map[string]bool{}, map[string]bool{}
	before := p.errs.Count()
	for _, w := range b.wrt {
		if !p.known(w.Value) {
			p.errs.AddHint(w.Pos, diag.Suggest(w.Value, p.knownTensors("")), "backward wrt: unknown tensor %q", w.Value)
		}
		down[w.Value] = true
	}
	for i := range b.seeds {
		s := &b.seeds[i]
		if !p.known(s.Name) {
			p.errs.AddHint(s.At, diag.Suggest(s.Name, p.knownTensors("")), "backward seeds: unknown tensor %q", s.Name)
		}
		if s.DY != "" && (p.decl(s.DY) == nil || p.producers[s.DY] != nil) {
			p.errs.AddHint(s.DYAt, "declare it under tensors with the seed's shape (and a mesh): an input of the fusion",
				"backward seeds: the upstream gradient of %q, %q, is not a declared input", s.Name, s.DY)
		}
		up[s.Name] = true
	}
	for _, ro := range order {
		// A selection's output (ops.Op.Constant) carries no gradient:
		// nothing downstream of it through it depends on wrt.
		if !ro.kind.Entry().Constant && slices.ContainsFunc(ro.ins, func(in string) bool { return down[in] }) {
			down[ro.out] = true
		}
	}
	for _, ro := range slices.Backward(order) {
		if up[ro.out] {
			for _, in := range ro.ins {
				up[in] = true
			}
		}
	}
	if p.errs.Count() > before {
		return nil // the chains of names unknown are not looked for
	}
	for _, w := range b.wrt {
		if !up[w.Value] {
			p.errs.AddHint(w.Pos, "list tensors that the seeds are computed from",
				"backward wrt: no chain of ops leads from %q to a seed (%s)", w.Value, b.seedNames())
		}
	}
	for _, s := range b.seeds {
		if !down[s.Name] {
			p.errs.AddHint(s.At, "list under wrt a tensor that the seed is computed from",
				"backward seeds: %q depends on no tensor of wrt", s.Name)
		}
	}
	has := map[string]bool{}
	for t := range down {
		if up[t] {
			has[t] = true
		}
	}
	return has
}

// seedNames lists the seeds' names, for messages.
func (b *rawBackward) seedNames() string {
	names := make([]string, len(b.seeds))
	for i, s := range b.seeds {
		names[i] = s.Name
	}
	return strings.Join(names, ", ")
}

// gradGen writes the backward's ops.
type gradGen struct {
	p       *Source
	b       *rawBackward
	tensors *tensorTable
	// contrib are the contributions to each tensor's gradient so far,
	// and left how many are still to come.
	contrib map[string][]string
	left    map[string]int
	ops     []*rawOp
	// of are the provenances of the ops' gradients (gradOf), and by the
	// last one that contributed to each tensor's gradient, whose sum of
	// contributions is then its part.
	of map[*rawOp]*Composite
	by map[string]*Composite
	// remake are the tensors the backward makes again (recompute.go),
	// and remade the names of the copies made so far.
	remake map[string]bool
	remade map[string]string
}

// backwardOps writes the backward of the fusion whose forward ops build
// has made (their tensors in tensors) as raw ops, in an order build can
// make them in; false after reporting why it cannot.
func (p *Source) backwardOps(tensors *tensorTable) ([]*rawOp, bool) {
	b := p.back
	g := &gradGen{p: p, b: b, tensors: tensors, contrib: map[string][]string{}, left: map[string]int{},
		of: map[*rawOp]*Composite{}, by: map[string]*Composite{}}
	for _, ro := range b.order {
		if b.has[ro.out] {
			for _, in := range ro.ins {
				if b.has[in] {
					g.left[in]++
				}
			}
		}
	}
	ok := g.recomputeList()
	for _, s := range b.seeds {
		g.left[s.Name]++
	}
	for _, s := range b.seeds {
		ok = g.seed(s) && ok
	}
	if !ok {
		return nil, false
	}
	for _, ro := range slices.Backward(b.order) {
		if b.has[ro.out] && !g.op(ro) {
			return nil, false // the ops before it lack their gradients
		}
	}
	for _, w := range b.wrt {
		if b.has[w.Value] && p.producers[w.Value] == nil {
			g.final(w.Value, w.Pos, g.by[w.Value])
		}
	}
	return g.ops, g.recomputedAll() && g.regatheredAll()
}

// seed adds seed s's contribution: its upstream gradient, checked
// against the tensor's shape and dtype, or for 1 a tensor of ones of the
// rank-0 tensor's shape (its value times 0, plus 1).
func (g *gradGen) seed(s SeedDecl) bool {
	y := g.tensors.lookup(s.Name)
	shape := valueShape(y) // of a pending tensor, the shape of its values
	if s.DY != "" {
		dy := g.tensors.lookup(s.DY)
		if !slices.Equal(valueShape(dy), shape) || dy.DType != y.DType {
			g.p.errs.AddHint(s.DYAt, fmt.Sprintf("declare %q of shape %s and dtype %s", s.DY, fmtShape(shape), y.DType),
				"backward seeds: %q, of shape %s and dtype %s, is not of the shape and dtype of %q, %s and %s",
				s.DY, fmtShape(valueShape(dy)), dy.DType, s.Name, fmtShape(shape), y.DType)
			return false
		}
		g.give(s.Name, s.DY)
		return true
	}
	if len(shape) != 0 {
		g.p.errs.AddHint(s.DYAt, "sum it to a rank-0 loss first, or give the name of a declared input of its shape as its upstream gradient",
			"backward seeds: 1 is the upstream gradient of a rank-0 tensor, but %q has shape %s", s.Name, fmtShape(shape))
		return false
	}
	of := g.gradOf(g.producer(s.Name))
	g.b.seedOf(of, s.Name)
	one := s.Name + gradSuffix
	if !g.sole(s.Name) {
		one += "/seed"
	}
	zero := g.emit(&rawOp{kind: OpKind("mul"), ins: []string{s.Name}, out: s.Name + gradSuffix + "/zero"}, s.At, of, &ops.Scalar{Slot: 1, Value: 0})
	g.emit(&rawOp{kind: OpAdd, ins: []string{zero}, out: one}, s.At, of, &ops.Scalar{Slot: 1, Value: 1})
	g.give(s.Name, one)
	return true
}

// sole reports whether the next contribution to t's gradient is its
// only one: it is then named t.grad itself.
func (g *gradGen) sole(t string) bool { return g.left[t] == 1 && len(g.contrib[t]) == 0 }

// producer is the forward op that writes t, nil for an input.
func (g *gradGen) producer(t string) *rawOp {
	if i := slices.IndexFunc(g.b.order, func(ro *rawOp) bool { return ro.out == t }); i >= 0 {
		return g.b.order[i]
	}
	return nil
}

// gradOf is the provenance of the ops of the gradient of forward op ro
// (for nil, an input seed: its own copy), made once per op.
func (g *gradGen) gradOf(ro *rawOp) *Composite {
	if of := g.of[ro]; of != nil {
		return of
	}
	of := gradComposite(ro, g.tensors)
	if ro != nil {
		g.of[ro] = of
	}
	return of
}

// gradComposite is the provenance of the ops of the gradient of forward
// op ro, whose tensors are built (for nil, an input seed: its own copy).
func gradComposite(ro *rawOp, tensors *tensorTable) *Composite {
	if ro == nil {
		ro = &rawOp{kind: OpSet, axis: -1}
	}
	of := &Composite{Kind: ro.kind, Inputs: slices.Clone(ro.ins), Output: ro.out, Axis: -1, Grad: true}
	if y := tensors.lookup(ro.out); y != nil {
		of.mesh = y.Mesh
	}
	if ro.kind.Entry().Takes(ops.AttrAxis) && len(ro.ins) > 0 {
		of.Axis = gradIn(ro, tensors.lookup(ro.out), nil, tensors).Attrs.Axis
	}
	return of
}

// give adds contribution c to t's gradient.
func (g *gradGen) give(t, c string) {
	g.contrib[t] = append(g.contrib[t], c)
	g.left[t]--
}

// emit appends ro, at pos, of the gradient of op of, with number sc,
// and returns its output.
func (g *gradGen) emit(ro *rawOp, pos diag.Pos, of *Composite, sc *ops.Scalar) string {
	ro.pos, ro.outAt, ro.axis, ro.fileIdx = pos, pos, -1, -1
	ro.inAt = slices.Repeat([]diag.Pos{pos}, len(ro.ins))
	k := ro.ownKeys()
	k.of, k.scalar, k.scalarAt = of, sc, pos
	g.ops = append(g.ops, ro)
	return ro.out
}

// final sums the contributions to t's gradient into t.grad, ops of the
// gradient of op of, and returns its name.
func (g *gradGen) final(t string, pos diag.Pos, of *Composite) string {
	want, cs := t+gradSuffix, g.contrib[t]
	switch {
	case len(cs) == 0: // none: an op before failed, reported
	case len(cs) == 1 && cs[0] == want:
	case len(cs) == 1:
		g.emit(&rawOp{kind: OpSet, ins: cs, out: want}, pos, of, nil)
	default:
		acc := cs[0]
		for i, c := range cs[1:] {
			out := want
			if i < len(cs)-2 {
				out = fmt.Sprintf("%s/acc%d", want, i+1)
			}
			acc = g.emit(&rawOp{kind: OpAdd, ins: []string{acc, c}, out: out}, pos, of, nil)
		}
	}
	g.contrib[t] = nil
	return want
}

// op writes the vector-Jacobian product of forward op ro, whose output
// has a gradient, by its registry rule.
func (g *gradGen) op(ro *rawOp) bool {
	of := g.gradOf(ro)
	dy := g.final(ro.out, ro.pos, of)
	e := ro.kind.Entry()
	need := make([]bool, len(ro.ins))
	for k, in := range ro.ins {
		need[k] = g.b.has[in]
	}
	if e.Grad == nil {
		g.p.errs.AddHint(ro.pos, "ops with a gradient rule: "+strings.Join(GradOps(), ", ")+"; keep this op off the chains from wrt to the seeds",
			"ops[%d]: %s has no gradient rule, and the backward needs the gradient of its operand %q", ro.fileIdx, ro.kind, ro.ins[slices.Index(need, true)])
		return false
	}
	in := g.gradIn(ro, g.tensors.lookup(ro.out), need)
	steps, grads, err := e.Grad(in)
	if err != nil {
		g.p.errs.AddHint(ro.pos, err.Hint, "ops[%d]: the gradient of %s: %s", ro.fileIdx, ro.kind, err.Msg)
		return false
	}
	names := make([]string, len(steps))
	for j, s := range steps {
		names[j] = ro.out + gradSuffix + "/" + s.Name
	}
	// A step whose output is an operand's only contribution is named as
	// that operand's gradient.
	named := map[int]bool{}
	for k, r := range grads {
		if _, operand := r.Operand(); r != ops.NoGrad && !operand && !named[r.Step()] && g.sole(ro.ins[k]) {
			named[r.Step()], names[r.Step()] = true, ro.ins[k]+gradSuffix
		}
	}
	made := map[int]string{}
	ref := func(r ops.Ref) string {
		switch k, operand := r.Operand(); {
		case !operand:
			return names[r.Step()]
		case k < len(ro.ins):
			return g.reading(ro.ins[k], ro, of)
		case r == in.Y():
			return g.reading(ro.out, ro, of)
		case r == in.DY():
			return dy
		}
		return ro.out + "/" + in.Saved[int(r)-len(ro.ins)-2]
	}
	for j, s := range steps {
		ins := make([]string, len(s.In))
		for i, r := range s.In {
			if k, operand := r.Operand(); operand && k < len(ro.ins) {
				ins[i] = g.savedOperand(ro, k, of, made) // a saved activation
				continue
			}
			ins[i] = ref(r)
		}
		g.ops = append(g.ops, stepOp(ro, s, names[j], ins, of))
	}
	for k, r := range grads {
		if r != ops.NoGrad {
			g.give(ro.ins[k], ref(r))
			g.by[ro.ins[k]] = of
		}
	}
	return true
}

// gradIn is forward op ro, output y, as its gradient rule reads it:
// shapes and dtypes, its attributes counted from the start (the built
// op's, or for a composite its axis normalized as its expansion does).
func (g *gradGen) gradIn(ro *rawOp, y *Tensor, need []bool) *ops.GradIn {
	return gradIn(ro, y, need, g.tensors)
}

// gradIn is gradGen.gradIn of tensors built in tensors.
func gradIn(ro *rawOp, y *Tensor, need []bool, tensors *tensorTable) *ops.GradIn {
	in := &ops.GradIn{Out: valueShape(y), Need: need, Scalar: ro.keysOf().scalar}
	for _, name := range ro.ins {
		t := tensors.lookup(name)
		in.In, in.DTypes = append(in.In, valueShape(t)), append(in.DTypes, string(t.DType))
	}
	if op := y.Producer; op != nil && op.Of == nil {
		in.Attrs = ops.Attrs{Axis: op.Axis, Axes: op.Axes, Values: op.Attrs}
		return in
	}
	rank := len(in.In[0])
	in.Attrs = ops.Attrs{Axis: (ro.axis + rank) % max(rank, 1), Axes: ro.keysOf().axes, Values: readPart(ro.keysOf().attrs).vals}
	if e := ro.kind.Entry(); e.Expand != nil {
		// The names of its intermediates, which the forward built.
		steps, _ := e.Expand(in.In, ops.Attrs{Axis: ro.axis, Axes: ro.keysOf().axes, Values: in.Attrs.Values})
		for _, s := range steps {
			if s.Name != "" {
				in.Saved = append(in.Saved, s.Name)
			}
		}
	}
	return in
}

// valueShape is t's shape, without the terms axis of a Partial tensor:
// the shape of its values.
func valueShape(t *Tensor) []int {
	if t.Partial != "" {
		return t.Shape()[1:]
	}
	return t.Shape()
}

// GradOps lists the ops that have a gradient rule, in documentation
// order.
func GradOps() []string {
	var names []string
	for _, o := range ops.Default.All() {
		if o.Grad != nil {
			names = append(names, o.Name)
		}
	}
	return names
}
