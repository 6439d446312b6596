package ir

import (
	"slices"
	"strings"

	"github.com/nvcomm/nvcomm/internal/diag"
	"github.com/nvcomm/nvcomm/internal/ops"
)

// A backward section's recompute list names forward tensors that the
// backward does not read as the forward left them: before the first
// gradient rule that reads one, the backward makes it again by the op
// that made it in the forward, into "y.grad/recomputed_t" (y the output
// of the op whose rule reads it first), and every later rule reads that
// copy. The forward's tensor then lives until its last forward reader.
// FSDP2's reshard_after_forward=True (ZeRO-3) is this for the gathered
// weights: their set, an Allgather, is made again before the backward
// (reshard_after_forward: true lists them all), and activation
// checkpointing is this for an elementwise op. The copy is an op of the
// fusion, not an inserted resharding, so that the optimal policy's one
// copy per (mesh, target) (internal/lower) never stands the forward's
// copy in for it: that would keep the forward's copy alive, the memory
// the list is written to give back.

// recomputedPrefix names the recomputed copy of t made for the rule of
// the op whose output is y: y.grad/recomputed_t.
const recomputedPrefix = ops.RecomputedPrefix

// recomputeList checks the section's recompute list against the forward
// and adds reshard_after_forward's sets; false after reporting a problem.
func (g *gradGen) recomputeList() bool {
	b, ok := g.b, true
	g.remake, g.remade = map[string]bool{}, map[string]string{}
	for _, r := range b.recompute {
		if g.remake[r.Value] {
			g.p.errs.AddHint(r.Pos, "list it once", "backward recompute: %q is listed twice", r.Value)
			ok = false
			continue
		}
		if !g.remakeable(r.Value, r.Pos) {
			ok = false
			continue
		}
		g.remake[r.Value] = true
	}
	if !b.reshard {
		return ok
	}
	made := map[string]bool{}
	for _, ro := range b.order {
		made[ro.out] = true
	}
	n, gathered := 0, map[string]bool{}
	for _, ro := range b.order {
		if g.gathersWeight(ro, made, gathered) {
			n++
			g.remake[ro.out], gathered[ro.out] = true, true
		}
	}
	if n == 0 {
		g.p.errs.AddHint(b.reshardAt, "write each weight's gather as a set of the weight (a tensor of wrt that no op makes) into a copy, and read the copy",
			"backward reshard_after_forward: no set gathers a weight of wrt")
		return false
	}
	return ok
}

// gathersWeight reports whether forward op ro is a set of a weight of
// wrt (a tensor of wrt that no op makes: not in made), or of a copy an
// earlier such set gathered (in gathered: a weight sharded over two mesh
// axes, gathered along one and then the other, as FSDP over dp_shard × cp
// is written), into a copy with fewer device splits, which the backward
// can make again: FSDP's gather before the weight's use.
func (g *gradGen) gathersWeight(ro *rawOp, made, gathered map[string]bool) bool {
	if ro.kind != OpSet || len(ro.ins) != 1 {
		return false
	}
	weight := !made[ro.ins[0]] && slices.ContainsFunc(g.b.wrt, func(w Str) bool { return w.Value == ro.ins[0] })
	if !weight && !gathered[ro.ins[0]] {
		return false
	}
	w, c := g.tensors.lookup(ro.ins[0]), g.tensors.lookup(ro.out)
	return w != nil && c != nil && c.Partial == "" && deviceAxes(c) < deviceAxes(w) && remakeSplitsOK(c)
}

// remakeable reports whether t, listed at pos, can be made again by the
// backward: a tensor an op of the forward makes, a set or an elementwise
// op (no composite, whose intermediates it would need too), not a sum
// left pending; it reports why not.
func (g *gradGen) remakeable(t string, pos diag.Pos) bool {
	ro := g.producer(t)
	x := g.tensors.lookup(t)
	switch {
	case ro == nil && x == nil:
		g.p.errs.AddHint(pos, diag.Suggest(t, g.forwardNames()), "backward recompute: unknown tensor %q", t)
	case ro == nil:
		g.p.errs.AddHint(pos, "list tensors that an op of the forward makes; an input is held for the whole step",
			"backward recompute: %q is an input of the fusion, which no op makes", t)
	case ro.kind != OpSet && !ro.kind.family().Elementwise():
		g.p.errs.AddHint(pos, "list the output of a set (a gather) or of an elementwise op: "+strings.Join(remakeableOps(), ", "),
			"backward recompute: %q is made by %s, which the backward does not make again", t, ro.kind)
	case x.Partial != "" || !remakeSplitsOK(x):
		g.p.errs.AddHint(pos, "recompute a tensor of complete values, split evenly",
			"backward recompute: %q is sharded in a way its copy cannot repeat (a pending sum, or an uneven split)", t)
	default:
		return true
	}
	return false
}

// remakeableOps lists the ops whose outputs the backward can make again.
func remakeableOps() []string {
	return append([]string{string(OpSet)}, append(ops.FamilyNames(ops.Unary), ops.FamilyNames(ops.Binary)...)...)
}

// forwardNames are the tensors the forward's ops read and write, for
// suggestions.
func (g *gradGen) forwardNames() []string {
	var names []string
	for _, ro := range g.b.order {
		for _, n := range append(slices.Clone(ro.ins), ro.out) {
			if !slices.Contains(names, n) {
				names = append(names, n)
			}
		}
	}
	return names
}

// reading returns the name by which the rule of forward op ro (of its
// gradient of) reads forward tensor t: t itself, or for a tensor to be
// made again its copy, made here the first time, after the copies of its
// own operands that are to be made again.
func (g *gradGen) reading(t string, ro *rawOp, of *Composite) string {
	if !g.remake[t] {
		return t
	}
	if name, ok := g.remade[t]; ok {
		return name
	}
	src := g.producer(t)
	ins := make([]string, len(src.ins))
	for i, in := range src.ins {
		ins[i] = g.reading(in, ro, of)
	}
	name := ro.out + gradSuffix + "/" + recomputedPrefix + t
	cp := &rawOp{kind: src.kind, ins: ins, out: name}
	g.emit(cp, src.pos, of, nil)
	if src.keys != nil {
		*cp.keys = *src.keys // its attributes and number, where the forward's op writes them
		cp.keys.of = of
	}
	cp.axis, cp.fileIdx = src.axis, src.fileIdx
	g.remade[t] = name
	if g.b.recomputed == nil {
		g.b.recomputed = map[string]*Tensor{}
	}
	g.b.recomputed[name] = g.tensors.lookup(t)
	return name
}

// recomputedAll reports whether every tensor of the recompute list was
// made again: one that no rule reads is an error, since listing it
// changes nothing (reshard_after_forward's sets are left out silently:
// a weight whose input gradient no one asks for is not read again).
func (g *gradGen) recomputedAll() bool {
	ok := true
	for _, r := range g.b.recompute {
		if g.remake[r.Value] && g.remade[r.Value] == "" {
			g.p.errs.AddHint(r.Pos, "leave it out of recompute: the forward's tensor is not kept for the backward anyway",
				"backward recompute: no gradient rule reads %q", r.Value)
			ok = false
		}
	}
	return ok
}

// recomputedShards gives out, a copy the backward makes again
// (recompute), the mesh and device splits of the tensor it stands for,
// and builds it. It is no longer propagated: the backward sweep leaves it
// as the forward made its tensor.
func (pr *propagator) recomputedShards(op *Op) (handled, ok bool) {
	b := pr.p.back
	if b == nil || b.recomputed == nil {
		return false, false
	}
	t, found := b.recomputed[op.Out.Name]
	if !found {
		return false, false
	}
	out := op.Out
	out.Mesh = t.Mesh
	splits, _ := remakeSplits(t) // checked when listed (remakeable)
	for _, d := range splits {
		d.at = op.Pos
		pr.splits[out] = append(pr.splits[out], d)
	}
	ok = pr.build(out)
	out.Propagated = false
	return true, ok
}

// remakeSplits returns t's device splits as propagation builds them
// (propagator.build): each device axis of t's loop a logical axis
// parallelized, or the outer part of one split in blocks by the mesh's
// size along it, evenly or not (a split of an extent the devices do not
// divide is the same block split, its last blocks short). ok is false
// for any other schedule (a strided or nested split, a merge), which the
// copy could not repeat.
func remakeSplits(t *Tensor) (splits []deviceSplit, ok bool) {
	for _, id := range t.Loop {
		if !id.Parallel.IsDevice() {
			continue
		}
		if id.Reduction {
			return nil, false
		}
		tr := id.Def
		switch {
		case tr == nil:
			splits = append(splits, deviceSplit{pos: id.Logical, typ: id.Parallel})
		case tr.Kind == Split && tr.Out[0] == id && tr.In[0].Def == nil && t.Mesh != nil && id.Extent == t.Mesh.Size(id.Parallel):
			splits = append(splits, deviceSplit{pos: tr.In[0].Logical, typ: id.Parallel, split: true})
		default:
			return nil, false
		}
	}
	return splits, true
}

// remakeSplitsOK reports whether remakeSplits can repeat t's splits.
func remakeSplitsOK(t *Tensor) bool {
	_, ok := remakeSplits(t)
	return ok
}

// IsRecomputed reports whether name is a copy that the backward makes
// again of a forward tensor (y.grad/recomputed_t).
func IsRecomputed(name string) bool {
	t, regathered := Remade(name)
	return t != "" && !regathered
}

// Remade returns the forward tensor that name, a copy the backward makes
// again, stands for (ops.Remade).
func Remade(name string) (t string, regathered bool) { return ops.Remade(name) }

// A backward section's regather list names tensors that a contraction of
// the forward reads gathered (saved.go): the backward's copy of such an
// operand, "y.grad/regathered_x", is its own set, which the optimal
// policy does not stand the forward's gathered copy in for: the gathered
// copy lives until the forward op that reads it, and the backward gathers
// x again, Megatron-LM's sequence parallelism's way (the column-parallel
// linears' saved inputs). Without the list the optimal policy keeps the
// forward's copy for the backward (internal/lower).

// regatheredPrefix names the copy of operand x gathered again for the
// rule of the op whose output is y: y.grad/regathered_x.
const regatheredPrefix = ops.RegatheredPrefix

// regathers reports whether the backward gathers x's saved copies again,
// and records that it did.
func (g *gradGen) regathers(x string) bool {
	if !slices.ContainsFunc(g.b.regather, func(r Str) bool { return r.Value == x }) {
		return false
	}
	if g.b.regathered == nil {
		g.b.regathered = map[string]bool{}
	}
	g.b.regathered[x] = true
	return true
}

// regatheredAll reports whether every tensor of the regather list had a
// copy gathered again: one that no contraction reads gathered is an
// error, since listing it changes nothing.
func (g *gradGen) regatheredAll() bool {
	ok := true
	for i, r := range g.b.regather {
		switch {
		case slices.ContainsFunc(g.b.regather[:i], func(o Str) bool { return o.Value == r.Value }):
			g.p.errs.AddHint(r.Pos, "list it once", "backward regather: %q is listed twice", r.Value)
		case g.tensors.lookup(r.Value) == nil && g.producer(r.Value) == nil:
			g.p.errs.AddHint(r.Pos, diag.Suggest(r.Value, g.forwardNames()), "backward regather: unknown tensor %q", r.Value)
		case !g.b.regathered[r.Value]:
			g.p.errs.AddHint(r.Pos, "list an operand that a linear or matmul of the forward reads gathered (split where the operand is not), and whose gradient rule reads it",
				"backward regather: no gradient rule reads a gathered copy of %q", r.Value)
		default:
			continue
		}
		ok = false
	}
	return ok
}
