package ir

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/nvcomm/nvcomm/internal/diag"
	"github.com/nvcomm/nvcomm/internal/ops"
	"github.com/nvcomm/nvcomm/internal/shard"
)

// build resolves names, orders the ops, infers produced tensors and replays
// every schedule. An error stops only what depends on the thing that is
// wrong: a broken tensor is not used, an op reading one is not checked and
// its output counts as broken, but every other tensor and op is checked,
// so that the file's independent errors are reported together.
func (p *Source) build(name string) *Fusion {
	if p.asRead != nil {
		// Built as read (asread.go): the front end reads a file it gives
		// up on again, into a Source that builds here.
		if !p.FinishRead() {
			p.errs.Add(diag.Pos{}, "internal error: a fusion built as read was given up")
			return nil
		}
		return p.asRead.b.finish(name)
	}
	b := p.newBuilder()
	order := p.sortOps()
	inputs, names := p.inputOrder()
	p.prepareBackward(order)
	b.tensors.left = names
	b.f.Tensors, b.f.Ops = make([]*Tensor, 0, names), make([]*Op, 0, len(order))
	// Inputs first (tensors no op produces), in file order of their first mention.
	for _, n := range inputs {
		b.makeInput(b.tensors.get(n.name, n.pos))
	}
	// Only the ops in order are read from now on: each is garbage once
	// its op is made, as is its output's declaration (tensors.made). The
	// names declared are read by the inputs' messages only.
	grads := p.gradOfProducers()
	p.ops, p.producers, p.read, p.tensorNames = nil, nil, nil, nil
	for i, ro := range order {
		order[i] = nil
		if p.lost[ro.out] {
			continue // produced twice or on a cycle, reported
		}
		if !grads.resolve(ro, b.tensors) {
			continue
		}
		b.buildOp(ro, i)
	}
	if p.back != nil && p.errs.Count() == 0 {
		back, ok := p.backwardOps(b.tensors)
		p.back.ops = back
		b.tensors.left += len(back)
		for j, ro := range back {
			if ok {
				b.buildOp(ro, len(order)+j)
			}
		}
	}
	return b.finish(name)
}

// builder builds a fusion's tensors and ops from their declarations, in
// an order where every op's operands come before it: build's, once the
// whole file is read and its ops are ordered, or buildAsRead's, as each
// op is read (asread.go).
type builder struct {
	p       *Source
	f       *Fusion
	tensors *tensorTable
	// unresolved holds the tensors made whose domains were not built
	// without error: an op reading one is skipped, its problem reported
	// already. (A rank-0 tensor has no logical axes, so Logical cannot
	// tell.) An op's output is in it from when it is made until its
	// domains are, so that a tensor left for any reason stays there. A
	// file without errors leaves none: a map of the resolved ones held
	// an entry a tensor at the parse's peak.
	unresolved map[*Tensor]bool
	alike      alikeTable // tensors alike share their domains as soon as built (alike.go)
	prop       *propagator
	// opSlab is where the next ops are made (newOp).
	opSlab []Op
}

// newOp is a new op, from a slab of slabSize: an op is 152 bytes, which
// the allocator rounds to 160 when it is made alone.
func (b *builder) newOp() *Op {
	if len(b.opSlab) == cap(b.opSlab) {
		b.opSlab = make([]Op, 0, slabSize)
	}
	b.opSlab = b.opSlab[:len(b.opSlab)+1]
	return &b.opSlab[len(b.opSlab)-1]
}

// newBuilder is a builder of p's fusion, which has no tensor yet.
func (p *Source) newBuilder() *builder {
	return &builder{p: p, f: &Fusion{File: p.file}, unresolved: map[*Tensor]bool{}, prop: newPropagator(p),
		tensors: &tensorTable{p: p, undeclared: map[string]*Tensor{}}}
}

// settle records whether t's domains were built without error.
func (b *builder) settle(t *Tensor, ok bool) bool {
	if ok {
		delete(b.unresolved, t)
	} else {
		b.unresolved[t] = true
	}
	return ok
}

// makeInput resolves t, a fusion input, from its declaration, and adds it
// to the fusion's tensors. It reports whether its domains were built
// without error.
func (b *builder) makeInput(t *Tensor) bool {
	ok := b.settle(t, b.p.resolveInput(t))
	b.tensors.made(t.Name)
	b.f.Tensors = append(b.f.Tensors, t)
	b.alike.shareBuilt(t, ok)
	return ok
}

// buildOp builds the op ro, the i-th in order, and its output, and adds
// them to the fusion; a composite op is built as its primitive ops, each
// as the file's are. It reports whether the op and its output were built
// without error: an op reading a broken tensor is not checked, and its
// output counts as broken.
func (b *builder) buildOp(ro *rawOp, i int) bool {
	p, f, tensors := b.p, b.f, b.tensors
	ins := make([]*Tensor, len(ro.ins))
	ready := true
	for k, name := range ro.ins {
		ins[k] = tensors.lookup(name)
		ready = ready && !p.lost[name] && ins[k] != nil && !b.unresolved[ins[k]]
		if ins[k] == nil && isPart(name) && !p.lost[name] {
			p.noPart(ro, k)
		}
	}
	if ready && ro.kind.family() == ops.Composite {
		// Written as primitive ops, each built as the file's are.
		if subs, ok := p.expand(ro, ins); ok {
			built := true
			for _, sub := range subs {
				built = b.buildOp(sub, i) && built
			}
			return built
		}
	}
	out := tensors.get(ro.out, ro.outAt)
	b.unresolved[out] = true
	op := b.newOp()
	*op = Op{Index: i, Kind: ro.kind, Inputs: ins, Out: out, Axis: -1, Pos: ro.pos, Of: ro.keysOf().of}
	out.Producer = op
	if !ready || ro.kind.family() == ops.Composite {
		tensors.made(out.Name)
		return false
	}
	if !p.reducePartials(f, op, ro, b.prop) {
		tensors.made(out.Name)
		return false
	}
	op.Index = len(f.Ops) // after the reductions inserted for it
	inferred, ok := p.resolveOp(op, ro)
	// An output whose declaration is wrong still has its domain, so
	// the ops reading it are checked too; one whose declaration is
	// broken does not have it.
	rt := p.decl(out.Name)
	outOK := b.settle(out, inferred && (rt == nil || !rt.broken))
	tensors.made(out.Name)
	if !ok || !b.prop.forward(op) {
		return false
	}
	f.Ops = append(f.Ops, op)
	f.Tensors = append(f.Tensors, out)
	b.alike.shareBuilt(out, outOK)
	if outOK && out.Propagated && !out.Auto && p.format == 2 {
		// Shared as soon as the forward sweep has built it: the backward
		// sweep gives a tensor it changes a domain of its own first
		// (propagator.backward). The domains of the propagated tensors
		// were a sixth of what was live at the end of parsing the mixed
		// format-2 family (docs/performance.md).
		b.alike.share(out)
	}
	return outOK
}

// finish checks the inputs and outputs lists and, in format 2, runs
// propagation's backward sweep: the fusion named name, or nil when the
// file has errors.
func (b *builder) finish(name string) *Fusion {
	p, f := b.p, b.f
	f.Name = name
	for _, n := range slices.Sorted(slices.Values(p.meshNames)) {
		f.Meshes = append(f.Meshes, p.meshes[n])
	}
	// The inputs and outputs lists are checked whatever the ops' errors;
	// propagation backward needs every op.
	f.Inputs, f.Outputs = p.endpoints(f, b.tensors)
	if p.errs.Count() > 0 {
		return nil
	}
	if p.format == 2 && b.prop.backward(f) {
		b.prop.checkMeshes(f)
	}
	if p.errs.Count() > 0 {
		return nil
	}
	return f
}

// tensorTable finds a fusion's tensors by name while build makes them: a
// declared tensor is found beside its declaration (Source.raw), the
// others in a map of their own (a map of every name cost a tenth of
// building 100k tensors). They come from slabs of slabSize, allocated as
// they are needed: one slab of every tensor, allocated before the first
// is made, sat beside every declaration.
type tensorTable struct {
	p          *Source
	undeclared map[string]*Tensor
	slab       []Tensor
	// left is how many tensors may still be made: no slab is larger.
	left int
	// byName is builtByName's map.
	byName map[string]*Tensor
}

// slabSize is the number of tensors of a tensorTable slab.
const slabSize = 1024

// lookup is the tensor named name, or nil when there is none yet.
func (tt *tensorTable) lookup(name string) *Tensor {
	if tt.p.raw == nil {
		return tt.builtByName(name) // every tensor built as read (FinishRead)
	}
	if d, ok := tt.p.raw[name]; ok {
		return d.tensor
	}
	return tt.undeclared[name]
}

// builtByName is lookup once a fusion built as read has every tensor and
// its Source has dropped its declarations: a map of the tensors by name,
// made when first asked for (only a file's inputs or outputs list asks).
func (tt *tensorTable) builtByName(name string) *Tensor {
	if tt.byName == nil {
		tt.byName = map[string]*Tensor{}
		for _, t := range tt.p.asRead.b.f.Tensors {
			tt.byName[t.Name] = t
		}
	}
	return tt.byName[name]
}

// made drops the declaration of the tensor name, whose domains build has
// made: nothing reads it any more.
func (tt *tensorTable) made(name string) {
	if d := tt.p.raw[name]; d.raw != nil {
		tt.p.raw[name] = declared{tensor: d.tensor}
	}
}

// get is the tensor named name, made at pos when there is none yet.
func (tt *tensorTable) get(name string, pos diag.Pos) *Tensor {
	if t := tt.lookup(name); t != nil {
		return t
	}
	if len(tt.slab) == cap(tt.slab) {
		tt.slab = make([]Tensor, 0, max(1, min(tt.left, slabSize)))
	}
	tt.left--
	tt.slab = append(tt.slab, Tensor{Name: name, Pos: pos, TensorDomain: new(TensorDomain)})
	t := &tt.slab[len(tt.slab)-1]
	rt := tt.p.decl(name)
	if rt == nil {
		tt.undeclared[name] = t
		return t
	}
	tt.p.raw[name] = declared{raw: rt, tensor: t}
	t.Pos, t.Declared, t.Auto = rt.pos, true, rt.auto
	if rt.auto && tt.p.format != 2 && !rt.broken { // broken: said by checkAuto
		tt.p.errs.AddHint(rt.pos, "add format: 2 at the top of the file", "tensor %q: placements: auto needs format 2", name)
	}
	return t
}

// knownTensors lists the declared tensors and those produced by an op that
// does not read reader: the names reader may be a misspelling of.
func (p *Source) knownTensors(reader string) []string {
	names := slices.Clone(p.tensorNames)
	for _, op := range p.ops {
		if !op.reads(reader) {
			names = append(names, op.out)
		}
	}
	return names
}

// mention is a tensor name and where it is first named.
type mention struct {
	name string
	pos  diag.Pos
}

// inputOrder lists the fusion's inputs, the tensors no op produces, in
// the order of their first mention (declared ones in file order, then
// names only used by ops in op order), and counts every tensor name. A
// lost tensor (produced twice or on a cycle, reported) and a gradient
// (made by the backward, or reported) are no input. Only the inputs are
// listed: a list of every name was 6 of the 86 MB live at the peak of
// parsing the mixed family of 100k ops (docs/performance.md).
func (p *Source) inputOrder() (inputs []mention, names int) {
	isInput := func(n string) bool { return p.producers[n] == nil && !p.lost[n] && !IsGradName(n) && !isPart(n) }
	for _, n := range p.tensorNames {
		if isInput(n) {
			inputs = append(inputs, mention{n, p.decl(n).pos})
		}
	}
	// The declared names are counted, each once: only the others need a
	// set of their own.
	seen := map[string]bool{}
	add := func(n string, pos diag.Pos) {
		if _, decl := p.raw[n]; !decl && !seen[n] {
			seen[n] = true
			if isInput(n) {
				inputs = append(inputs, mention{n, pos})
			}
		}
	}
	for _, op := range p.ops {
		for k, in := range op.ins {
			add(in, op.inAt[k])
		}
		add(op.out, op.outAt)
	}
	return inputs, len(p.tensorNames) + len(seen)
}

// sortOps checks that every tensor is produced at most once and that the ops
// form no cycle, and returns them in topological order (ties in file order).
// A tensor produced twice, by an op that reads it, or on a cycle is lost,
// as are the outputs of the ops that lead to a cycle: the ops reading them
// are not checked.
func (p *Source) sortOps() []*rawOp {
	producer := make(map[string]*rawOp, len(p.ops))
	p.producers = producer
	for _, op := range p.ops {
		if prev, ok := producer[op.out]; ok {
			p.errs.Add(op.outAt, "tensor %q is produced twice (first by the op at %s)", op.out, prev.pos)
			p.lose(op.out)
			continue
		}
		producer[op.out] = op
		if op.reads(op.out) {
			p.errs.Add(op.outAt, "op reads and writes the same tensor %q", op.out)
			p.lose(op.out)
		}
	}
	order := make([]*rawOp, 0, len(p.ops))
	// visit orders op after its operands' producers, and reports false
	// when op is on a cycle or depends on one, whose tensors it loses.
	var visit func(op *rawOp) bool
	visit = func(op *rawOp) bool {
		switch op.visit {
		case visiting:
			p.errs.AddHint(op.pos, "every tensor must be computable from the fusion inputs", "ops form a cycle through tensor %q", op.out)
			return false
		case visited:
			return true
		}
		op.visit = visiting
		for _, in := range op.ins {
			if p.lost[in] {
				continue // its readers are not checked
			}
			if dep := producerOf(producer, in); dep != nil && !visit(dep) {
				op.visit = visited
				p.lose(op.out)
				return false
			}
		}
		op.visit = visited
		order = append(order, op)
		return true
	}
	for _, op := range p.ops {
		visit(op)
	}
	return order
}

// resolveInput fills a fusion input from its declaration: mesh and shape are
// required. It reports whether the input's domain was built without error,
// so that the ops reading it can be checked.
func (p *Source) resolveInput(t *Tensor) bool {
	before := p.errs.Count()
	rt := p.decl(t.Name)
	if rt == nil {
		if p.opsLost {
			return false // perhaps the output of an op left out
		}
		hint := diag.Suggest(t.Name, p.knownTensors(t.Name))
		switch {
		case hint != "":
		case p.format == 2:
			hint = "declare it under tensors with a shape (and a mesh, or its consumer's is propagated to it)"
		default:
			hint = "declare it under tensors with a mesh and a shape"
		}
		p.errs.AddHint(t.Pos, hint, "tensor %q is read by an op but neither declared nor produced", t.Name)
		return false
	}
	if rt.broken {
		return false // its errors are reported
	}
	what := rt.what()
	if (!given(rt.meshAt) || !given(rt.rest().shapeAt)) && !p.isRead(t.Name) {
		if p.opsLost {
			return false // perhaps read by an op left out
		}
		// Not "needs a mesh" (or, in format 2, "has no mesh"): what is
		// wrong is that no op uses it.
		p.errs.AddHint(rt.pos, "remove it or use it in an op; to keep it as an input that no op reads, give it a mesh and a shape",
			"%s is declared but never used: no op reads or writes it", what)
		return false
	}
	// A propagated input takes its consumer's mesh after the ops are
	// resolved (propagate.go), and no device split: it is replicated.
	t.Propagated = p.propagates(t.Name)
	t.Mesh = rt.mesh
	if !given(rt.meshAt) && !t.Propagated {
		p.errs.Add(rt.pos, "%s: an input needs a \"mesh\"", what)
	}
	t.DType = cmp.Or(rt.rest().dtype, "float32")
	if !given(rt.rest().shapeAt) {
		p.errs.Add(rt.pos, "%s: an input needs a \"shape\"", what)
		return false
	}
	shape := rt.rest().shape
	if t.Mesh == nil && !t.Propagated {
		return false
	}
	var pls []placement
	note := ""
	if given(rt.plsAt) {
		var ok bool
		if pls, ok = p.placementsOf(rt, t.Mesh, what+" placements"); !ok {
			return false
		}
		if pl, i, ok := partialOf(pls); ok {
			t.Partial = pl.op()
			shape = append([]int{t.Mesh.Shape[i]}, shape...)
			note = " (with its Partial terms axis)"
		}
	}
	if !p.checkBytes(shape, t.DType, rt.rest().shapeAt, what+" shape", note) {
		return false
	}
	t.Logical = logicalDomain(shape, -1)
	p.scheduleWith(t, rt, pls)
	return p.errs.Count() == before
}

// in is the op as inferOp checks it.
func (ro *rawOp) in() opIn {
	k := ro.keysOf()
	return opIn{kind: ro.kind, idx: ro.fileIdx, axis: ro.axis, axes: k.axes, attrs: readPart(k.attrs).vals, scalar: k.scalar,
		out: ro.out, pos: ro.pos, src: ro}
}

// isRead reports whether an op reads the tensor name, one left out for its
// errors included.
func (p *Source) isRead(name string) bool {
	if p.read == nil {
		p.read = map[string]bool{}
		for _, op := range p.ops {
			for _, in := range op.ins {
				p.read[in] = true
			}
		}
	}
	if p.asRead != nil {
		return p.asRead.reading // an op reads the input made now (asread.go)
	}
	return p.read[name] || p.lostReads[name] || p.back.readsSeed(name)
}

// logicalDomain is a logical domain of the given extents, axis reduction
// (-1: none) a reduction axis. Its axes come from one allocation, as do
// the pointers to them: a fusion of 100k tensors builds as many domains.
func logicalDomain(shape []int, reduction int) []*IterDomain {
	ids := make([]IterDomain, len(shape))
	out := make([]*IterDomain, len(shape))
	for k, e := range shape {
		ids[k] = IterDomain{Extent: e, Logical: k, Reduction: k == reduction}
		out[k] = &ids[k]
	}
	return out
}

// matchShape compares a declared shape of a produced tensor, written at
// pos, with the inferred one. Either the value shape or the full logical
// shape (reduction axes included) is accepted.
func (p *Source) matchShape(t *Tensor, shape []int, pos diag.Pos, what string) {
	if slices.Equal(shape, t.Shape()) || slices.Equal(shape, t.LogicalExtents()) {
		return
	}
	p.errs.Add(pos, "%s: shape %s does not match the shape %s inferred from the op that produces it", what, fmtShape(shape), fmtShape(t.Shape()))
}

// fmtShape renders a shape as YAML writes it: [8, 4].
func fmtShape(shape []int) string {
	s := "["
	for i, e := range shape {
		if i > 0 {
			s += ", "
		}
		s += fmt.Sprint(e)
	}
	return s + "]"
}

func joinNames(names []string) string {
	s := ""
	for i, n := range names {
		if i > 0 {
			s += ", "
		}
		s += n
	}
	return s
}

// checkRank reports a shape of more than MaxRank extents, written at pos.
func (p *Source) checkRank(n int, pos diag.Pos, what string) bool {
	return CheckRank(p.errs, n, pos, what)
}

// CheckRank reports into errs a shape of n extents, written at pos, when
// n is more than MaxRank.
func CheckRank(errs *diag.Collector, n int, pos diag.Pos, what string) bool {
	if n <= MaxRank {
		return true
	}
	errs.AddHint(pos, "real tensors have a handful of axes; merge axes that are never sharded apart",
		"%s: %d extents, more than %d", what, n, MaxRank)
	return false
}

// checkExtents checks a shape given as values as extents checks a file's:
// at most MaxRank extents, each an integer >= 1 (pos: where each is
// written, at: the list). It reports every bad extent.
func (p *Source) checkExtents(shape []int, pos []diag.Pos, at diag.Pos, what string) bool {
	if !p.checkRank(len(shape), at, what) {
		return false
	}
	good := true
	for i, e := range shape {
		if !isPositive(e) {
			CheckPositive(p.errs, e, posAt(pos, i), what+" extent")
			good = false
		}
	}
	return good
}

// endpoints resolves inputs/outputs, defaulting to the tensors no op produces
// and the tensors no op consumes.
func (p *Source) endpoints(f *Fusion, tensors *tensorTable) (ins, outs []*Tensor) {
	// The tensors an op reads are marked (Tensor.read) while the lists
	// are made: a map of them was a tenth of what was live at the end of
	// parsing a file of 100k ops.
	for _, op := range f.Ops {
		for _, in := range op.Inputs {
			in.read = true
		}
	}
	defer func() {
		for _, op := range f.Ops {
			for _, in := range op.Inputs {
				in.read = false
			}
		}
	}()
	// names are the fusion's tensors' names, for the suggestion of an
	// unknown one: made when one is.
	names := func() []string {
		out := make([]string, 0, len(f.Tensors))
		for _, t := range f.Tensors {
			out = append(out, t.Name)
		}
		return out
	}
	list := func(l *StrList, what string, def func(*Tensor) bool, must func(*Tensor) string) []*Tensor {
		if l == nil {
			var out []*Tensor
			for _, t := range f.Tensors {
				if def(t) {
					out = append(out, t)
				}
			}
			return out
		}
		items, ok := l.Entries(p.errs, what)
		if !ok {
			return nil
		}
		var out []*Tensor
		for _, it := range items {
			name, ok := p.tensorIn(it, what)
			if !ok {
				continue
			}
			t := tensors.lookup(name)
			if t == nil {
				if !p.opsLost && !p.lost[name] { // else perhaps an op's left out
					p.errs.AddHint(it.Pos, diag.Suggest(name, names()), "%s: unknown tensor %q", what, name)
				}
				continue
			}
			if msg := must(t); msg != "" {
				p.errs.Add(it.Pos, "%s: tensor %q %s", what, name, msg)
				continue
			}
			if slices.Contains(out, t) {
				p.errs.Add(it.Pos, "%s: tensor %q is listed twice", what, name)
				continue
			}
			out = append(out, t)
		}
		return out
	}
	ins = list(p.inputs, "inputs", func(t *Tensor) bool { return t.Producer == nil }, func(t *Tensor) string {
		if t.Producer != nil {
			return "is produced by an op, so it cannot be an input"
		}
		return ""
	})
	if p.inputs != nil && !p.opsLost { // an op left out may produce one
		for _, t := range f.Tensors {
			if t.Producer == nil && !slices.Contains(ins, t) {
				p.errs.Add(p.inputs.At, "inputs: tensor %q is not produced by any op, so it must be listed as an input", t.Name)
			}
		}
	}
	outs = list(p.outputs, "outputs", func(t *Tensor) bool { return !t.read }, func(*Tensor) string { return "" })
	return ins, outs
}

// reducePartials inserts before op, an op other than set, the reduction of
// the terms of every Partial tensor it reads (docs/fusion.md,
// "placements"): a set from the tensor, which is that reduction, into a
// tensor "name/reduced" that op reads instead, marked inserted for op's
// slots that read it. Its sharding is that of an undeclared output (in
// format 2, propagated); the lowering gives it the one op needs. It
// returns false after reporting why a reduction cannot be made.
func (p *Source) reducePartials(f *Fusion, op *Op, ro *rawOp, prop *propagator) bool {
	if ro.kind == OpSet || op.Kind.PassesSums() && readsTerms(op) && p.declaresSumTerms(ro.out) && ro.keysOf().scalar == nil {
		// A set reduces them itself; an op that passes sums into
		// declared terms of a sum computes on them (sums.go).
		return true
	}
	for k, in := range op.Inputs {
		if in.Partial == "" {
			continue
		}
		if j := slices.IndexFunc(op.Inputs[:k], func(t *Tensor) bool {
			return t.Producer != nil && t.Producer.Inserted != nil && t.Producer.In() == in
		}); j >= 0 {
			op.Inputs[k] = op.Inputs[j] // one reduction serves every slot
			op.Inputs[j].Producer.Inserted.Operands = append(op.Inputs[j].Producer.Inserted.Operands, k)
			continue
		}
		r := &Tensor{Name: p.reducedName(in.Name), Pos: ro.pos, TensorDomain: new(TensorDomain)}
		red := &Op{Index: len(f.Ops), Kind: OpSet, Inputs: []*Tensor{in}, Out: r, Axis: -1, Pos: ro.pos,
			Inserted: &Insertion{For: op, Operands: []int{k}}}
		r.Producer = red
		raw := &rawOp{kind: OpSet, ins: []string{in.Name}, inAt: []diag.Pos{ro.pos}, out: r.Name, outAt: ro.pos, pos: ro.pos, fileIdx: ro.fileIdx}
		if inferred, ok := p.resolveOp(red, raw); !inferred || !ok || !p.heldAsTerms(r, in) || !prop.forward(red) {
			return false
		}
		f.Ops = append(f.Ops, red)
		f.Tensors = append(f.Tensors, r)
		op.Inputs[k] = r
	}
	return true
}

// heldAsTerms shards r, the reduction of in's terms, as in's values are
// (DTensor's Partial → Replicate along the terms' mesh axis alone), unless
// propagation shards it (format 2).
func (p *Source) heldAsTerms(r, in *Tensor) bool {
	pls, ok := pendingPlacements(in)
	if r.Propagated || !ok {
		return true // propagated, or left unsharded where in's splits are not blocks
	}
	for i := range pls {
		if pls[i].Kind == shard.Partial {
			pls[i].Placement = shard.Placement{Kind: shard.Replicate}
		}
	}
	r.Schedule = nil
	return p.placeSchedule(r, pls, nil)
}

// reducedName names the reduction of the terms of tensor name that build
// inserts: "name/reduced", then "name/reduced.1" and on. A fusion's names
// are identifiers, so none is taken.
func (p *Source) reducedName(name string) string {
	if p.reducedNames == nil {
		p.reducedNames = map[string]int{}
	}
	n := p.reducedNames[name]
	p.reducedNames[name]++
	if n == 0 {
		return name + "/reduced"
	}
	return fmt.Sprintf("%s/reduced.%d", name, n)
}
