package lower

import (
	"encoding/binary"

	"github.com/nvcomm/nvcomm/internal/diag"
	"github.com/nvcomm/nvcomm/internal/ir"
	"github.com/nvcomm/nvcomm/internal/plan"
	"github.com/nvcomm/nvcomm/internal/reshard"
)

// alikeTensors builds a plan's tensors for Certify, each distinct spec
// once: tensors whose specs are the same but for their names (the same
// mesh, dtype, shape, reduction axes, schedule, allocation and
// propagation) are the first one built, renamed (ir.Tensor.Renamed). A
// chain of 100k tensors has a few specs, and building a tensor (its
// schedule replayed, its shardings, local shape and layout resolved) was
// a third of certifying it. The analyses Certify compares are those of
// the spec, computed once per spec too. A spec NewTensor rejects is built
// again for every tensor that has it, so each is reported under its name.
type alikeTensors struct {
	// classes are the specs built, keyed by specKey.
	classes map[string]int32
	// first is each class's tensor as NewTensor built it.
	first []*ir.Tensor
	// want is each class's analyses as the plan states them (tensorOf),
	// once computed.
	want []*plan.Tensor
	// class is each plan tensor's class; only those built are set.
	class []int32
	// key and steps are scratch: the spec key and schedule of the tensor
	// being built.
	key   []byte
	steps []ir.ScheduleStep
	// slab is memory for the tensors renamed: a tensor is a few hundred
	// bytes, and a plan may have 100k.
	slab []ir.Tensor
	// opEnds are the positions of each rebuilt op's first operand and of
	// its output, by op.
	opEnds [][2]int32
}

// tensorSlabSize is the most tensors alikeTensors allocates at once.
const tensorSlabSize = 4096

func newAlikeTensors(n int) *alikeTensors {
	return &alikeTensors{classes: map[string]int32{}, class: make([]int32, n)}
}

// tensor builds plan tensor k, t, on its mesh among meshes, or returns nil
// after adding why it cannot.
func (a *alikeTensors) tensor(k int, t *plan.Tensor, meshes map[string]*ir.Mesh, ps *diag.List) *ir.Tensor {
	spec := specOf(t, meshes[t.Mesh], a.steps)
	if spec.Schedule != nil {
		a.steps = spec.Schedule // grown, for the next tensor
	}
	a.key = appendSpecKey(a.key[:0], spec)
	if c, ok := a.classes[string(a.key)]; ok {
		a.class[k] = c
		if len(a.slab) == 0 {
			a.slab = make([]ir.Tensor, min(len(a.class)-k, tensorSlabSize))
		}
		it := &a.slab[0]
		a.slab = a.slab[1:]
		a.first[c].RenamedInto(it, t.Name)
		return it
	}
	spec.Schedule = cloneSteps(spec.Schedule) // the scratch is the next tensor's
	it, err := ir.NewTensor(spec)
	if err != nil {
		addErrors(ps, "", err)
		return nil
	}
	c := int32(len(a.first))
	a.classes[string(a.key)] = c
	a.first, a.want = append(a.first, it), append(a.want, nil)
	a.class[k] = c
	return it
}

// analyses returns the analyses of plan tensor k, built as f's tensor k.
func (a *alikeTensors) analyses(k int, built *ir.Tensor) *plan.Tensor {
	c := a.class[k]
	if a.want[c] == nil {
		pt := tensorOf(built)
		a.want[c] = &pt
	}
	return a.want[c]
}

// opsAlike lowers the sets and reductions of a rebuilt fusion alike once
// (reshard.OpMemo): ops of one kind, axis and axes whose producers are
// of one class of tensors alike, and their consumers of one, are keyed
// alike. A chain of 100k sets repeats a few such ops, and lowering them
// again was half of certifying it. Ops on tensors the lowering inserts,
// and ops with several operands, are lowered each.
type opsAlike struct {
	f       *ir.Fusion // rebuilt
	tensors *alikeTensors
	memo    *reshard.OpMemo
	// class is each tensor's class, for the ops the lowering copied
	// (renumbered after a set it inserted); built when first needed.
	class map[*ir.Tensor]int32
	key   []byte // scratch
}

// opsAlike returns the lowering alike of the ops of f, rebuilt with a's
// tensors; keep keeps the ops replayed aside (reshard.NewOpMemo).
func (a *alikeTensors) opsAlike(f *ir.Fusion, keep bool) *opsAlike {
	return &opsAlike{f: f, tensors: a, memo: reshard.NewOpMemo(keep, len(f.Ops))}
}

// replays returns the ops of n replayed aside, by index (nil where none).
func (o *opsAlike) replays(n int) []*reshard.Replay {
	by := make([]*reshard.Replay, n)
	if o == nil {
		return by
	}
	rs := o.memo.Replays()
	for k := range rs {
		if op := rs[k].Op; op >= 0 && op < n {
			by[op] = &rs[k]
		}
	}
	return by
}

// classes returns the classes of op's producer and consumer, or false when
// either is not a tensor of the rebuilt fusion. A rebuilt op is looked up
// by its position, which the lowering keeps unless it inserts sets.
func (o *opsAlike) classes(op *ir.Op) (in, out int32, ok bool) {
	if i := op.Index; i >= 0 && i < len(o.f.Ops) && o.f.Ops[i] == op {
		at := o.tensors.opEnds[i]
		if op.In() == o.f.Tensors[at[0]] && op.Out == o.f.Tensors[at[1]] {
			return o.tensors.class[at[0]], o.tensors.class[at[1]], true
		}
	}
	if o.class == nil {
		o.class = make(map[*ir.Tensor]int32, len(o.f.Tensors))
		for k, t := range o.f.Tensors {
			o.class[t] = o.tensors.class[k]
		}
	}
	in, inOK := o.class[op.In()]
	out, outOK := o.class[op.Out]
	return in, out, inOK && outOK
}

// lower lowers op, a set or a reduction, with job.
func (o *opsAlike) lower(job *reshard.Job, op *ir.Op) {
	if len(op.Inputs) != 1 || op.Inserted != nil {
		job.Lower()
		return
	}
	in, out, ok := o.classes(op)
	if !ok {
		job.Lower()
		return
	}
	o.key = ir.AppendKeyString(o.key[:0], string(op.Kind))
	o.key = binary.AppendVarint(o.key, int64(op.Axis))
	o.key = ir.AppendKeyInts(o.key, op.Axes)
	o.key = ir.AppendKeyString(o.key, op.Attrs.Key())
	o.key = binary.AppendVarint(binary.AppendVarint(o.key, int64(in)), int64(out))
	job.LowerAlike(o.memo, o.key)
}

// cloneSteps copies steps, nil when there are none.
func cloneSteps(steps []ir.ScheduleStep) []ir.ScheduleStep {
	if len(steps) == 0 {
		return nil
	}
	out := make([]ir.ScheduleStep, len(steps))
	copy(out, steps)
	return out
}

// appendSpecKey appends to b a key for spec but for its name: two specs
// have the same key exactly when every other field is the same, a list's
// nil apart from its empty (TestSpecKeyFields keeps it to the fields
// TensorSpec has).
func appendSpecKey(b []byte, spec ir.TensorSpec) []byte {
	if spec.Mesh == nil {
		b = binary.AppendVarint(b, -1)
	} else {
		b = ir.AppendKeyString(b, spec.Mesh.Name) // Certify's meshes have distinct names
	}
	b = ir.AppendKeyString(b, string(spec.DType))
	b = ir.AppendKeyInts(b, spec.Shape)
	b = ir.AppendKeyInts(b, spec.ReductionAxes)
	b = ir.AppendKeyInts(b, spec.Allocation)
	b = ir.AppendKeyLen(b, spec.Placements == nil, len(spec.Placements))
	for _, pl := range spec.Placements {
		b = ir.AppendKeyString(b, string(pl.Kind))
		b = binary.AppendVarint(b, int64(pl.Dim))
		b = ir.AppendKeyString(b, pl.Op)
	}
	b = ir.AppendKeyString(b, string(spec.Partial))
	b = ir.AppendKeyBool(b, spec.Propagated)
	b = ir.AppendKeyBool(b, spec.Combine)
	b = ir.AppendKeyLen(b, spec.Schedule == nil, len(spec.Schedule))
	for _, s := range spec.Schedule {
		b = ir.AppendKeyString(b, string(s.Kind))
		b = binary.AppendVarint(b, int64(s.Axis))
		b = binary.AppendVarint(b, int64(s.Factor))
		b = ir.AppendKeyInts(b, s.Order)
		b = binary.AppendVarint(b, int64(s.Type))
		b = binary.AppendVarint(b, int64(s.Pos.Line))
		b = binary.AppendVarint(b, int64(s.Pos.Col))
	}
	return b
}
