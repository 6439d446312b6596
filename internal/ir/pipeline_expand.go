package ir

import (
	"fmt"
	"github.com/nvcomm/nvcomm/internal/shard"
	"slices"
	"strings"

	"github.com/nvcomm/nvcomm/internal/ops"
)

// This file writes a fusion once per micro-batch. The batch axis is
// followed through the ops by their sharding rules in factors: an op that
// reads a micro-batched tensor computes, for each micro-batch, the block
// of its output that a block split of that tensor's batch dimension cuts
// alike (Rule.ResultSplit), as a device split along the batch would, so
// the micro-batches' outputs, concatenated along the batch, are the
// whole program's. An op that sums over the batch (a weight's gradient,
// dW = dYᵀ·X, sums over the tokens) computes one partial sum per
// micro-batch, and adds accumulate them in micro-batch order: gradient
// accumulation. Any other use of the batch (a softmax or a maximum over
// it, a slice of it) would make a micro-batch's result differ from its
// block of the whole, and is an error at the op.

// expansion is one fusion being written once per micro-batch.
type expansion struct {
	p  *Source
	f  *Fusion
	pl *Pipeline
	m  int
	// batch is the batch dimension, among its value axes, of each tensor
	// that holds one block per micro-batch.
	batch map[*Tensor]int
	// summed marks the ops that sum over the batch: one partial result
	// per micro-batch, accumulated.
	summed map[*Op]bool
	// copies are the m copies of each micro-batched tensor.
	copies map[*Tensor][]*Tensor
	// summedOut is, for the output of an op that sums over the batch,
	// the tensor of its accumulated sum, which the later ops read.
	summedOut map[*Tensor]*Tensor
	// mb is the micro-batch of each op written, -1 for an op that reads
	// no micro-batched tensor; backward marks a backward's op.
	mb       map[*Op]int
	backward map[*Op]bool
	// stage is the stage each op written belongs to: its output's, or
	// for a backward's op the stage of the op it is the gradient of.
	stage map[*Op]int
}

func newExpansion(p *Source, f *Fusion, pl *Pipeline) *expansion {
	return &expansion{p: p, f: f, pl: pl, m: pl.Microbatches, batch: map[*Tensor]int{}, summed: map[*Op]bool{},
		copies: map[*Tensor][]*Tensor{}, summedOut: map[*Tensor]*Tensor{}, mb: map[*Op]int{}, backward: map[*Op]bool{},
		stage: map[*Op]int{}}
}

// trace finds the batch dimension of every tensor and the ops that sum
// over it, reporting each op that uses the batch otherwise.
func (e *expansion) trace() bool {
	for _, name := range e.pl.Inputs {
		e.batch[e.f.Tensor(name)] = e.pl.BatchAxis
	}
	before := e.p.errs.Count()
	for _, op := range e.f.Ops {
		e.traceOp(op)
		if e.p.errs.Count() > before {
			// The first op in topological order is the cause; the later
			// ones would only repeat it.
			return false
		}
	}
	return true
}

// inputsOf lists the fusion inputs that t is computed from, for a hint.
func inputsOf(t *Tensor) []string {
	var names []string
	seen := map[*Tensor]bool{}
	var walk func(t *Tensor)
	walk = func(t *Tensor) {
		if seen[t] {
			return
		}
		seen[t] = true
		if t.Producer == nil {
			names = append(names, t.Name)
			return
		}
		for _, in := range t.Producer.Inputs {
			walk(in)
		}
	}
	walk(t)
	slices.Sort(names)
	return names
}

// traceOp follows the batch through op: every micro-batched operand's
// batch dimension must be one factor of the op's rule, which no operand
// read whole has, and which the result keeps (its dimension there is the
// output's batch) or sums over.
func (e *expansion) traceOp(op *Op) {
	r := op.Rule()
	factor, first, firstDim := -1, -1, -1
	for k, in := range op.Inputs {
		d, ok := e.batch[in]
		if !ok {
			continue
		}
		if k >= len(r.Operands) || d >= len(r.Operands[k]) || len(r.Operands[k][d]) == 0 {
			e.opError(op, "its operand %q has extent 1 along the batch (dim %d) and broadcasts", in.Name, d)
			return
		}
		f := r.Operands[k][d][0]
		if factor >= 0 && f != factor {
			e.opError(op, "the batch dims of %q and %q are different axes of the op", op.Inputs[first].Name, in.Name)
			return
		}
		factor, first, firstDim = f, k, d
	}
	if factor < 0 {
		return // reads no micro-batched tensor: once, shared by every micro-batch
	}
	for k, in := range op.Inputs {
		if _, ok := e.batch[in]; ok || k >= len(r.Operands) {
			continue
		}
		for d, dim := range r.Operands[k] {
			if slices.Contains(dim, factor) {
				hint := fmt.Sprintf("list %q among the pipeline's inputs", in.Name)
				if in.Producer != nil {
					hint = fmt.Sprintf("it is computed from %s: list the one that holds the batch among the pipeline's inputs",
						strings.Join(inputsOf(in), ", "))
				}
				e.p.errs.AddHint(op.Pos, hint,
					"ops[%d]: %s reads %q whole, but its dim %d is the batch axis of %q, which is cut into micro-batches",
					op.Index, op.Kind, in.Name, d, op.Inputs[first].Name)
				return
			}
		}
	}
	switch kind := r.Factors[factor].Kind; {
	case op.Out.Partial != "":
		e.opError(op, "its output %q holds pending terms (Partial), which micro-batches do not support yet", op.Out.Name)
	case kind == ops.NeedReplication:
		e.opError(op, "it needs the batch axis (dim %d of %q) whole", firstDim, op.Inputs[first].Name)
	case kind == ops.ReductionFactor && (op.Kind.IsContraction() || op.Kind == OpSum):
		e.summed[op] = true
	case kind == ops.ReductionFactor:
		e.opError(op, "it reduces over the batch axis (dim %d of %q) by %s, which micro-batches cannot accumulate", firstDim,
			op.Inputs[first].Name, op.Kind)
	default:
		j := r.ResultSplit(first, firstDim, e.m)
		if j < 0 {
			e.opError(op, "its output has no block of the batch axis (dim %d of %q) to compute per micro-batch", firstDim,
				op.Inputs[first].Name)
			return
		}
		if op.Kind == "tril" && j >= len(op.Out.Shape())-2 {
			e.opError(op, "its diagonal lies along the batch axis")
			return
		}
		e.batch[op.Out] = j
	}
}

// opError reports op as one the micro-batches cannot split.
func (e *expansion) opError(op *Op, format string, args ...any) {
	e.p.errs.AddHint(op.Pos, "a pipeline cuts the batch into micro-batches: every op must treat the batch's rows apart, or sum over them",
		"ops[%d]: %s cannot run per micro-batch: %s", op.Index, op.Kind, fmt.Sprintf(format, args...))
}

// expand writes the fusion: each micro-batched tensor as m copies of a
// block of its batch, each op that reads one as m ops, those that sum
// over the batch followed by the adds that accumulate their partial
// results; tensors and ops that no micro-batch reads are kept as they
// are. The ops are in the fusion's order, micro-batch by micro-batch;
// orderPipeline orders them per the schedule.
func (e *expansion) expand() *Fusion {
	g := &Fusion{Name: e.f.Name, File: e.f.File, Meshes: e.f.Meshes}
	for _, t := range e.f.Tensors {
		if _, ok := e.batch[t]; !ok {
			g.Tensors = append(g.Tensors, t)
			continue
		}
		cs, ok := e.copyTensor(t, e.batch[t])
		if !ok {
			return nil
		}
		e.copies[t] = cs
		g.Tensors = append(g.Tensors, cs...)
	}
	for _, op := range e.f.Ops {
		back := op.Of != nil && op.Of.Grad
		if len(e.copies[op.Out]) == 0 && !e.summed[op] && !e.readsCopies(op) {
			for i, in := range op.Inputs {
				if s := e.summedOut[in]; s != nil {
					op.Inputs[i] = s
				}
			}
			e.mb[op], e.backward[op] = -1, back
			e.hoistedOf(op)
			g.Ops = append(g.Ops, op)
			continue
		}
		var acc *Tensor
		for k := range e.m {
			c := e.copyOp(op, k)
			if c == nil {
				return nil
			}
			e.mb[c], e.backward[c], e.stage[c] = k, back, e.stageOf(op)
			if !e.summed[op] {
				g.Ops = append(g.Ops, c)
				continue
			}
			if !e.accumulate(g, op, c, k, &acc) {
				return nil
			}
		}
	}
	g.Inputs = e.mapTensors(e.f.Inputs)
	g.Outputs = e.mapTensors(e.f.Outputs)
	return g
}

// accumulate adds c, op's copy for micro-batch k, to g with the add that
// accumulates its partial sum into acc, the sum of the micro-batches
// before it. c's output keeps op's summed (reduction) axis, over its
// micro-batch's block of the batch; the adds read the values alone, and
// the last writes op's output, under its name, as a tensor of values.
func (e *expansion) accumulate(g *Fusion, op, c *Op, k int, acc **Tensor) bool {
	if e.m == 1 {
		g.Ops = append(g.Ops, c)
		return true
	}
	if pls, ok := e.termsPlacements(op); ok {
		return e.accumulateTerms(g, op, c, k, acc, pls)
	}
	part, ok := e.partial(op.Out, k)
	if !ok {
		return false
	}
	c.Out, part.Producer = part, c
	g.Tensors = append(g.Tensors, part)
	g.Ops = append(g.Ops, c)
	if k == 0 {
		*acc = part
		return true
	}
	name := op.Out.Name
	if k < e.m-1 {
		name = fmt.Sprintf("%s@acc%d", op.Out.Name, k)
	}
	out, ok := e.values(op.Out, name)
	if !ok {
		return false
	}
	g.Tensors = append(g.Tensors, out)
	if k == e.m-1 {
		e.summedOut[op.Out] = out
	}
	add := &Op{Kind: OpKind("add"), Inputs: []*Tensor{*acc, part}, Out: out, Axis: -1, Pos: op.Pos, Of: c.Of}
	out.Producer = add
	e.mb[add], e.backward[add], e.stage[add] = k, e.backward[c], e.stage[c]
	g.Ops = append(g.Ops, add)
	*acc = out
	return true
}

// termsPlacements are the placements of the pending terms of op, which
// sums over the batch, when devices split the batch it sums: its output's
// values' placements, and Partial(sum) along the mesh axis that splits
// the batch of its micro-batched operand (the terms then hold whole
// values along that axis, which the sum after the last micro-batch
// scatters where the output is sharded along it). False when no device
// splits the batch, or a split is no placement.
func (e *expansion) termsPlacements(op *Op) ([]shard.Placement, bool) {
	if pls, _, ok := combinedPlacements(op.Out); ok {
		return pls, true
	}
	pls, ok := valuePlacements(op.Out)
	if !ok {
		return nil, false
	}
	for _, in := range op.Inputs {
		d, batched := e.batch[in]
		if !batched || in.Mesh == nil || !in.Mesh.Equal(op.Out.Mesh) {
			continue
		}
		for _, sh := range in.Shardings() {
			if i := in.Mesh.Axis(sh.Type); sh.Kind == Block && len(sh.Digits) == 1 && sh.Axis() == d && i >= 0 {
				pls[i] = shard.Placement{Kind: shard.Partial, Op: string(OpSum)}
				return pls, true
			}
		}
	}
	return nil, false
}

// accumulateTerms is accumulate for an op whose sum over the batch
// devices split (data parallelism inside a stage): each micro-batch's op
// leaves its terms pending (its partial sums, one per device, pls's
// Partial placement), the adds accumulate each device's own, and after
// the last micro-batch one sum of the terms writes op's output — one
// Allreduce (a ReduceScatter into a sharded output) a step, as DDP's
// no_sync and Megatron-LM's gradient accumulation reduce, not one a
// micro-batch.
func (e *expansion) accumulateTerms(g *Fusion, op, c *Op, k int, acc **Tensor, pls []shard.Placement) bool {
	t := op.Out
	terms := func(name string) (*Tensor, bool) {
		n := 0
		for i, p := range pls {
			if p.Kind == shard.Partial {
				n = t.Mesh.Shape[i]
			}
		}
		return e.made(t, TensorSpec{Name: name, Mesh: t.Mesh, DType: t.DType, Shape: append([]int{n}, t.Shape()...), Placements: pls})
	}
	part, ok := terms(MicrobatchName(t.Name, k))
	if !ok {
		return false
	}
	c.Out, part.Producer = part, c
	if err := c.Pend(); err != nil {
		e.p.errs.Add(t.Pos, "tensor %q: its micro-batches' sums cannot be left pending: %v", t.Name, err)
		return false
	}
	g.Tensors = append(g.Tensors, part)
	g.Ops = append(g.Ops, c)
	if k > 0 {
		name := fmt.Sprintf("%s@acc%d", t.Name, k)
		if k == e.m-1 {
			name = t.Name + "/terms"
		}
		out, ok := terms(name)
		if !ok {
			return false
		}
		add := &Op{Kind: OpKind("add"), Inputs: []*Tensor{*acc, part}, Out: out, Axis: -1, Pos: op.Pos, Of: c.Of}
		out.Producer = add
		if err := add.Pend(); err != nil {
			e.p.errs.Add(t.Pos, "tensor %q: its micro-batches' pending sums cannot be added: %v", t.Name, err)
			return false
		}
		e.mb[add], e.backward[add], e.stage[add] = k, e.backward[c], e.stage[c]
		g.Tensors, g.Ops = append(g.Tensors, out), append(g.Ops, add)
		part = out
	}
	*acc = part
	if k < e.m-1 {
		return true
	}
	r, ok := reducedInto(t, part)
	if !ok {
		e.p.errs.Add(t.Pos, "tensor %q: the sum of its micro-batches' terms cannot be written as its values", t.Name)
		return false
	}
	sum := &Op{Kind: OpSum, Inputs: []*Tensor{part}, Out: r, Axis: 0, Pos: op.Pos, Of: c.Of}
	r.Producer = sum
	e.mb[sum], e.backward[sum], e.stage[sum] = k, e.backward[c], e.stage[c]
	g.Tensors, g.Ops = append(g.Tensors, r), append(g.Ops, sum)
	e.summedOut[t] = r
	return true
}

// partial is micro-batch k's partial result of t, the output of an op
// that sums over the batch: t with its one reduction axis, the summed
// batch, cut to a micro-batch's block.
func (e *expansion) partial(t *Tensor, k int) (*Tensor, bool) {
	spec := specLike(t)
	spec.Name = MicrobatchName(t.Name, k)
	if len(spec.ReductionAxes) != 1 {
		e.p.errs.Add(t.Pos, "tensor %q: its op sums over the batch but it has %d reduction axes, expected 1", t.Name, len(spec.ReductionAxes))
		return nil, false
	}
	spec.Shape[spec.ReductionAxes[0]] /= e.m
	if !scheduleKept(t) {
		// Its sharding as placements: the values' splits, and Partial
		// where devices split the summed batch (the op sums each
		// micro-batch's partial results over them).
		pls, _, ok := combinedPlacements(t)
		if !ok {
			pls, ok = valuePlacements(t)
		}
		if !ok {
			e.p.errs.Add(t.Pos, "tensor %q: its op sums over the batch, but its sharding is no placements (a block split of one axis each)", t.Name)
			return nil, false
		}
		spec.Schedule, spec.Allocation, spec.Placements = nil, nil, pls
	}
	return e.made(t, spec)
}

// scheduleKept reports whether the micro-batches' sums of t, the output
// of an op that sums over the batch, take t's schedule as it is: its one
// reduction axis is its last and no device splits it. Otherwise they are
// made from t's placements.
func scheduleKept(t *Tensor) bool {
	r := reductionAxes(t)
	if len(r) != 1 || r[0] != len(t.Logical)-1 {
		return false
	}
	for _, id := range t.Loop {
		if id.Reduction && id.Parallel.IsDevice() {
			return false
		}
	}
	return true
}

// values is a tensor called name that holds t's values: t's domain
// without its reduction axis, sharded as t's values are. The axis must be
// t's last, unsharded: t's schedule then applies as it is.
func (e *expansion) values(t *Tensor, name string) (*Tensor, bool) {
	spec := specLike(t)
	spec.Name = name
	if scheduleKept(t) {
		r := spec.ReductionAxes
		spec.Shape, spec.ReductionAxes = spec.Shape[:r[0]], nil
		return e.made(t, spec)
	}
	pls, ok := valuePlacements(t)
	if r := spec.ReductionAxes; !ok || len(r) != 1 {
		e.p.errs.Add(t.Pos, "tensor %q: its op sums over the batch, but its values' sharding is no placements (a block split of one axis each)", t.Name)
		return nil, false
	} else {
		spec.Shape = slices.Delete(spec.Shape, r[0], r[0]+1)
	}
	spec.ReductionAxes, spec.Schedule, spec.Allocation, spec.Placements = nil, nil, nil, pls
	return e.made(t, spec)
}

// made builds spec, a tensor made for t, reporting at t what fails.
func (e *expansion) made(t *Tensor, spec TensorSpec) (*Tensor, bool) {
	c, err := NewTensor(spec)
	if err != nil {
		e.p.errs.AddHint(t.Pos, "a sum over the batch accumulates its micro-batches' partial sums: it must not be sharded along the batch yet",
			"tensor %q: its sums per micro-batch cannot be made as %q: %v", t.Name, spec.Name, err)
		return nil, false
	}
	c.Pos = t.Pos
	return c, true
}

// stageOf is the stage op's copies belong to: its output's, or for a
// backward's op the stage of the forward op it is the gradient of (the
// backward places some gradients on the mesh of the op's output, which
// for a transfer between stages is the next stage's): the backward of a
// stage is the gradients of that stage's ops, as Megatron-LM's is.
func (e *expansion) stageOf(op *Op) int {
	if of := op.Of; of != nil && of.Grad {
		if t := e.f.Tensor(of.Output); t != nil {
			if s := e.pl.Stage(t.Mesh); s >= 0 {
				return s
			}
		}
	}
	return e.pl.Stage(op.Out.Mesh)
}

// readsCopies reports whether op reads a micro-batched tensor.
func (e *expansion) readsCopies(op *Op) bool {
	return slices.ContainsFunc(op.Inputs, func(t *Tensor) bool { return len(e.copies[t]) > 0 })
}

// mapTensors is ts with each micro-batched tensor replaced by its copies
// and each sum over the batch by its accumulated sum.
func (e *expansion) mapTensors(ts []*Tensor) []*Tensor {
	var out []*Tensor
	for _, t := range ts {
		if cs := e.copies[t]; len(cs) > 0 {
			out = append(out, cs...)
		} else if s := e.summedOut[t]; s != nil {
			out = append(out, s)
		} else {
			out = append(out, t)
		}
	}
	return out
}

// copyTensor makes the m copies of t, each a block of its batch dim
// (dim, a value axis), sharded as t is.
func (e *expansion) copyTensor(t *Tensor, dim int) ([]*Tensor, bool) {
	spec := specLike(t)
	pos := logicalPos(t, dim)
	if spec.Shape[pos]%e.m != 0 {
		e.p.errs.AddHint(t.Pos, "micro-batches are equal blocks of the batch", "tensor %q: %d micro-batches do not divide its batch dim %d, of extent %d",
			t.Name, e.m, dim, spec.Shape[pos])
		return nil, false
	}
	spec.Shape[pos] /= e.m
	cs := make([]*Tensor, e.m)
	for k := range cs {
		spec.Name = MicrobatchName(t.Name, k)
		c, err := NewTensor(spec)
		if err != nil {
			e.p.errs.AddHint(t.Pos, "micro-batches are blocks of the batch, sharded as the tensor is",
				"tensor %q: its micro-batch of shape %s cannot be sharded as the tensor is: %v", t.Name, fmtShape(spec.Shape), err)
			return nil, false
		}
		c.Pos = t.Pos
		cs[k] = c
	}
	return cs, true
}

// specLike is t as NewTensor takes it: its logical domain, schedule and
// allocation.
func specLike(t *Tensor) TensorSpec {
	return TensorSpec{Name: t.Name, Mesh: t.Mesh, DType: t.DType, Shape: t.LogicalExtents(), ReductionAxes: reductionAxes(t),
		Schedule: slices.Clone(t.Schedule), Allocation: slices.Clone(t.Allocation), Propagated: t.Propagated}
}

// copyOp is op of micro-batch k: its micro-batched operands and output
// replaced by their copies, names in its provenance too, and a reshape's
// shape cut along the batch.
func (e *expansion) copyOp(op *Op, k int) *Op {
	c := &Op{Kind: op.Kind, Out: op.Out, Axis: op.Axis, Axes: slices.Clone(op.Axes), Attrs: op.Attrs.Clone(),
		Scalar: op.Scalar.Clone(), Pos: op.Pos}
	c.Inputs = make([]*Tensor, len(op.Inputs))
	for i, in := range op.Inputs {
		c.Inputs[i] = in
		if cs := e.copies[in]; len(cs) > 0 {
			c.Inputs[i] = cs[k]
		} else if s := e.summedOut[in]; s != nil {
			c.Inputs[i] = s
		}
	}
	if cs := e.copies[op.Out]; len(cs) > 0 {
		c.Out = cs[k]
		c.Out.Producer = c
		if j := e.batch[op.Out]; op.Kind == OpKind("reshape") {
			for i := range c.Attrs {
				if v := &c.Attrs[i]; v.Key == "shape" && j < len(v.Ints) && v.Ints[j] > 0 {
					v.Ints[j] /= e.m
				}
			}
		}
	}
	if of := op.Of; of != nil {
		cp := *of
		cp.Inputs = make([]string, len(of.Inputs))
		for i, name := range of.Inputs {
			cp.Inputs[i] = e.nameIn(name, k)
		}
		cp.Output = e.nameIn(of.Output, k)
		c.Of = &cp
	}
	return c
}

// hoistedOf names, in the provenance of op, an op of a composite (or of
// a gradient) that reads no micro-batched tensor and so runs once — a
// norm's weight broadcast over the leading axes — the tensors of the
// composite's first micro-batch: its tensors are micro-batched, and the
// plan names only their copies. The op is the first micro-batch's step,
// which the later micro-batches' steps read.
func (e *expansion) hoistedOf(op *Op) {
	of := op.Of
	if of == nil {
		return
	}
	renamed := e.nameIn(of.Output, 0) != of.Output || slices.ContainsFunc(of.Inputs, func(n string) bool { return e.nameIn(n, 0) != n })
	if !renamed {
		return
	}
	cp := *of
	cp.Inputs = make([]string, len(of.Inputs))
	for i, name := range of.Inputs {
		cp.Inputs[i] = e.nameIn(name, 0)
	}
	cp.Output = e.nameIn(of.Output, 0)
	op.Of = &cp
}

// nameIn is the name of tensor name in micro-batch k: its copy's, when
// it is micro-batched.
func (e *expansion) nameIn(name string, k int) string {
	if t := e.f.Tensor(name); t != nil && len(e.copies[t]) > 0 {
		return MicrobatchName(name, k)
	}
	return name
}
