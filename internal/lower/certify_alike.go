package lower

import (
	"encoding/binary"

	"github.com/nvcomm/nvcomm/internal/ir"
	"github.com/nvcomm/nvcomm/internal/plan"
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
}

// tensorSlabSize is the most tensors alikeTensors allocates at once.
const tensorSlabSize = 4096

func newAlikeTensors(n int) *alikeTensors {
	return &alikeTensors{classes: map[string]int32{}, class: make([]int32, n)}
}

// tensor builds plan tensor k, t, on its mesh among meshes, or returns nil
// after adding why it cannot.
func (a *alikeTensors) tensor(k int, t plan.Tensor, meshes map[string]*ir.Mesh, ps *plan.Problems) *ir.Tensor {
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
