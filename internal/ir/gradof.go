package ir

import (
	"cmp"
	"fmt"
	"strings"

	"github.com/nvcomm/nvcomm/internal/diag"
	"github.com/nvcomm/nvcomm/internal/ops"
	"github.com/nvcomm/nvcomm/internal/shard"
)

// A fusion may write a backward's ops itself, as `lower --emit-fusion`
// writes the one nvcomm derives from a backward section (docs/training.md,
// "The backward as ops"): an op with grad_of: y is part of the gradient
// of the op that writes y (its provenance, the plan's "of"; an input y
// for the ops of an input seed), exactly as the derived op it stands
// for, and may write the backward's names, t.grad and t.grad/NAME, which
// no other op writes. Any op may read those, and the intermediates of a
// composite op, y/NAME (its expansion's names, docs/fusion.md). So the
// file a backward section is written out as lowers to the plan of the
// section itself.

// isPart reports whether name is a part of a tensor: a composite's
// intermediate or a gradient's (y/NAME, t.grad/NAME), which an op makes
// and no file declares as an input.
func isPart(name string) bool { return strings.Contains(name, "/") }

// IsTensorPath reports whether s names a tensor a file's op may read: an
// identifier, a gradient (t.grad), or a part of a composite's or a
// gradient's (y/NAME, t.grad/NAME, NAME/NAME...), each NAME an
// identifier.
func IsTensorPath(s string) bool {
	first, rest, more := strings.Cut(s, "/")
	if !IsIdent(first) && !IsGradName(first) {
		return false
	}
	for more {
		var seg string
		seg, rest, more = strings.Cut(rest, "/")
		if !IsIdent(seg) {
			return false
		}
	}
	return true
}

// IsBackwardName reports whether s is a name of the backward's, which an
// op with grad_of may write: t.grad, or a part of it (t.grad/NAME).
func IsBackwardName(s string) bool {
	first, _, _ := strings.Cut(s, "/")
	return IsGradName(first) && IsTensorPath(s)
}

// producerOf is the op of producer (by output) that makes tensor name: its
// own, or for a part of a composite's, the composite's (y/NAME is made by
// the op writing y); nil for none.
func producerOf(producer map[string]*rawOp, name string) *rawOp {
	for {
		if ro, ok := producer[name]; ok {
			return ro
		}
		i := strings.LastIndexByte(name, '/')
		if i < 0 {
			return nil
		}
		name = name[:i]
	}
}

// noPart reports operand k of ro, a part of a tensor (y/NAME) that the
// op writing the tensor does not make.
func (p *Source) noPart(ro *rawOp, k int) {
	name := ro.ins[k]
	p.errs.AddHint(ro.inAt[k], "read an intermediate the composite's expansion names (docs/fusion.md, \"Composite ops\"), or a tensor an op writes",
		"ops[%d] in: no op makes %q", ro.fileIdx, name)
	p.lose(ro.out)
}

// gradOfs resolves the grad_of of a file's ops: the forward ops by the
// tensors they write, and the provenances made so far, one per op.
type gradOfs struct {
	p        *Source
	producer map[string]*rawOp
	made     map[string]*Composite
}

// gradOfProducers checks the file's names of the backward against its
// grad_of keys and keeps what resolving grad_of needs; build calls it
// with the ops sorted, before it lets go of their producers.
func (p *Source) gradOfProducers() *gradOfs {
	g := &gradOfs{p: p}
	for _, ro := range p.ops {
		k := ro.keysOf()
		switch {
		case k.gradOf != "":
			g.producer = p.producers
		case IsBackwardName(ro.out):
			p.errs.AddHint(ro.outAt, "add grad_of: the tensor whose op this op is part of the gradient of, or rename the tensor",
				"ops[%d] out: %q is a name of the backward, which only an op with grad_of writes", ro.fileIdx, ro.out)
			p.lose(ro.out)
		case isPart(ro.out):
			p.errs.AddHint(ro.outAt, "name it with an identifier: a name with a slash is a composite's intermediate (y/NAME) or a gradient's (t.grad/NAME)",
				"ops[%d] out: %q is no name an op may write", ro.fileIdx, ro.out)
			p.lose(ro.out)
		}
		for k, in := range ro.ins {
			if isPart(in) && producerOf(p.producers, in) == nil && !p.lost[in] {
				p.errs.AddHint(ro.inAt[k], "a name with a slash is a part of the tensor before the slash, which an op of the file must write",
					"ops[%d] in: no op makes %q", ro.fileIdx, in)
				p.lose(ro.out)
			}
		}
	}
	return g
}

// resolve gives ro, about to be built, the provenance its grad_of names;
// false after reporting a name that no tensor has.
func (g *gradOfs) resolve(ro *rawOp, tensors *tensorTable) bool {
	k := ro.keysOf()
	if k.gradOf == "" {
		return true
	}
	if of := g.made[k.gradOf]; of != nil {
		ro.ownKeys().of = of
		return true
	}
	fwd := g.producer[k.gradOf]
	if fwd == nil && (g.p.decl(k.gradOf) == nil || IsBackwardName(k.gradOf)) {
		hint := cmp.Or(diag.Suggest(k.gradOf, g.p.knownTensors("")), "name the output of the forward op whose gradient this op is part of (an input, for a seed's own ops)")
		g.p.errs.AddHint(k.gradOfAt, hint, "ops[%d] grad_of: %q is no tensor of the forward", ro.fileIdx, k.gradOf)
		g.p.lose(ro.out)
		return false
	}
	of := gradComposite(fwd, tensors)
	if g.made == nil {
		g.made = map[string]*Composite{}
	}
	g.made[k.gradOf] = of
	ro.ownKeys().of = of
	return true
}

// WrittenBackward is the backward of a fusion with a backward section as
// a file writes it without one: its ops, each with grad_of, and the
// tensors of its own whose declarations say what no op infers.
type WrittenBackward struct {
	Ops     []WrittenOp
	Tensors []WrittenTensor
}

// WrittenOp is an op of the backward as a file writes it.
type WrittenOp struct {
	Kind OpKind
	// In are the operands' names; Scalar the number one of them is, nil
	// for none.
	In     []string
	Scalar *ops.Scalar
	Out    string
	// Axis is the op's axis, -1 for an op that takes none; Axes its
	// axes, Attrs its other attributes, in the registry's order.
	Axis  int
	Axes  []int
	Attrs ops.Values
	// GradOf is the tensor whose op the op is part of the gradient of.
	GradOf string
}

// WrittenTensor is a tensor of the backward that a file declares: its
// shape, where its op does not infer it (a gradient rule's broadcast back
// over a reduced axis), and its mesh and placements, where propagation
// would not give them (a copy of a forward tensor that the backward reads
// as the forward had it: a saved, recomputed or regathered copy).
type WrittenTensor struct {
	Name       string
	Shape      []int
	Mesh       string
	Placements []shard.Placement
}

// WrittenBackward returns the backward of f, which p built, as a file
// writes it; nil when the fusion has no backward section. An error says
// why a copy's sharding cannot be written as placements.
func (p *Source) WrittenBackward(f *Fusion) (*WrittenBackward, error) {
	b := p.back
	if b == nil {
		return nil, nil
	}
	built := map[string]*Tensor{}
	for _, t := range f.Tensors {
		built[t.Name] = t
	}
	w := &WrittenBackward{}
	for _, ro := range b.ops {
		k := ro.keysOf()
		op := WrittenOp{Kind: ro.kind, In: ro.ins, Scalar: k.scalar, Out: ro.out, Axis: -1, Axes: k.axes,
			Attrs: readPart(k.attrs).vals, GradOf: b.gradOfName(k.of)}
		if ro.kind.Entry().Takes(ops.AttrAxis) {
			op.Axis = ro.axis
		}
		w.Ops = append(w.Ops, op)
		_, saved := b.saved[ro.out]
		_, remade := b.recomputed[ro.out]
		if k.outShape == nil && !saved && !remade || p.decl(ro.out) != nil {
			continue
		}
		t := WrittenTensor{Name: ro.out, Shape: k.outShape}
		if saved || remade {
			out := built[ro.out]
			if out == nil || out.Mesh == nil {
				return nil, fmt.Errorf("tensor %q: the backward did not build it", ro.out)
			}
			pls, ok := valuePlacements(out)
			if !ok {
				return nil, fmt.Errorf("tensor %q: its sharding is no placements (a split that is not one block split of an axis), which a file could not give the copy", ro.out)
			}
			t.Mesh, t.Placements = out.Mesh.Name, pls
		}
		w.Tensors = append(w.Tensors, t)
	}
	return w, nil
}

// seedOf records that of is the provenance of the ops of seed name, an
// input: the name a file's grad_of gives them.
func (b *rawBackward) seedOf(of *Composite, name string) {
	if of.Output != "" {
		return
	}
	if b.inputSeeds == nil {
		b.inputSeeds = map[*Composite]string{}
	}
	b.inputSeeds[of] = name
}

// gradOfName is the tensor a file's grad_of names for provenance of.
func (b *rawBackward) gradOfName(of *Composite) string {
	if of == nil {
		return ""
	}
	if of.Output != "" {
		return of.Output
	}
	return b.inputSeeds[of]
}
