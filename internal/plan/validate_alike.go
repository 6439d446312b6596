package plan

import "encoding/binary"

// Tensors alike. What checkTensor finds depends on a tensor's fields and
// the plan's meshes alone, not on its name, and a plan of many ops repeats
// a few tensors but for their names (a chain of 100k sets has three): a
// tensor whose fields but its name are those of a tensor checked before
// without a problem has none either, and the same facts for the steps'
// checks. Checking every tensor was a fifth of validating such a plan.

// checkTensorOnce is checkTensor, which it skips for a tensor alike one
// checked before without a problem.
func (v *validator) checkTensorOnce(what tensorRef, t *Tensor) *tensorInfo {
	if !v.alike {
		return v.checkTensor(what, t)
	}
	v.tensorKey = appendTensorKey(v.tensorKey[:0], t)
	if first, ok := v.cleanTensors[string(v.tensorKey)]; ok {
		info := v.newTensorInfo()
		*info = *first
		info.t = t
		return info
	}
	before := v.probs.Count()
	info := v.checkTensor(what, t)
	if v.probs.Count() == before {
		if v.cleanTensors == nil {
			v.cleanTensors = map[string]*tensorInfo{}
		}
		v.cleanTensors[string(v.tensorKey)] = info
	}
	return info
}

// tensorInfoSlabSize is how many tensorInfos the validator allocates at
// once.
const tensorInfoSlabSize = 1024

// newTensorInfo returns a zero tensorInfo from the validator's slab.
func (v *validator) newTensorInfo() *tensorInfo {
	if len(v.infoSlab) == cap(v.infoSlab) {
		v.infoSlab = make([]tensorInfo, 0, tensorInfoSlabSize)
	}
	v.infoSlab = v.infoSlab[:len(v.infoSlab)+1]
	return &v.infoSlab[len(v.infoSlab)-1]
}

// appendTensorKey appends to b a key of every field of t but its name:
// two tensors have the same key exactly when those fields are the same, a
// nil list apart from an empty one and an absent pointer from a present
// one (TestTensorKeyFields keeps it to the fields Tensor has).
func appendTensorKey(b []byte, t *Tensor) []byte {
	b = appendKeyString(b, t.DType)
	b = appendKeyString(b, t.Mesh)
	b = appendKeyInts(b, t.Shape)
	b = appendKeyInts(b, t.ReductionAxes)
	b = appendKeyLen(b, t.Schedule == nil, len(t.Schedule))
	for _, s := range t.Schedule {
		b = appendKeySplit(b, s.Split)
		b = appendKeySplit(b, s.OuterSplit)
		if s.Merge == nil {
			b = append(b, 0)
		} else {
			b = binary.AppendVarint(append(b, 1), int64(s.Merge.Axis))
		}
		b = appendKeyInts(b, s.Reorder)
		if s.Parallelize == nil {
			b = append(b, 0)
		} else {
			b = binary.AppendVarint(append(b, 1), int64(s.Parallelize.Axis))
			b = appendKeyString(b, s.Parallelize.Type)
		}
	}
	b = appendKeyInts(b, t.Allocation)
	b = appendKeyLen(b, t.Sharding == nil, len(t.Sharding))
	for _, s := range t.Sharding {
		b = appendKeyString(b, s.Type)
		b = binary.AppendVarint(b, int64(s.LogicalAxis))
		if s.ShapeAxis == nil {
			b = append(b, 0)
		} else {
			b = binary.AppendVarint(append(b, 1), int64(*s.ShapeAxis))
		}
		b = appendKeyString(b, s.Kind)
		b = appendKeyInts(b, s.LogicalAxes)
	}
	b = appendKeyInts(b, t.LocalShape)
	b = appendKeyInts(b, t.PaddedShape)
	b = appendKeyInts(b, t.Layout)
	b = appendKeyString(b, t.Partial)
	if t.Propagated {
		return append(b, 1)
	}
	return append(b, 0)
}

func appendKeySplit(b []byte, a *SplitArgs) []byte {
	if a == nil {
		return append(b, 0)
	}
	b = binary.AppendVarint(append(b, 1), int64(a.Axis))
	return binary.AppendVarint(b, int64(a.Factor))
}

func appendKeyString(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

// appendKeyLen appends a list's length, or -1 when it is nil.
func appendKeyLen(b []byte, isNil bool, n int) []byte {
	if isNil {
		return binary.AppendVarint(b, -1)
	}
	return binary.AppendVarint(b, int64(n))
}

func appendKeyInts(b []byte, xs []int) []byte {
	b = appendKeyLen(b, xs == nil, len(xs))
	for _, x := range xs {
		b = binary.AppendVarint(b, int64(x))
	}
	return b
}
