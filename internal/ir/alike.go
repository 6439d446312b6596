package ir

import (
	"encoding/binary"
	"slices"
)

// ShareAlike makes the fusion's tensors that are alike share one
// TensorDomain: each tensor whose mesh, dtype, logical domain, schedule,
// allocation and Propagated, Auto and Partial are those of an earlier
// tensor takes that tensor's, keeping its own name, position, producer,
// Combined and Declared. A parsed fusion builds every tensor's domains
// anew although a chain of 100k tensors has a few distinct ones: sharing
// them leaves a tensor its own 64 bytes (docs/performance.md).
//
// Call it on a fusion that parsed without error, before lowering it.
// Nothing changes a tensor's domains once it is built, so sharing them is
// invisible but for the source positions inside the domains (where a
// schedule step, split or parallelize was written), which become the
// first tensor's: only the parser's checks read those, and lowering's
// errors are positioned at ops.
func (f *Fusion) ShareAlike() {
	var tab alikeTable
	for _, t := range f.Tensors {
		tab.share(t)
	}
}

// alikeTable finds, for a tensor, the first tensor alike it: ShareAlike
// over a whole fusion, or a builder that shares each tensor as soon as its
// domains and analyses are final, so that the copies never pile up.
type alikeTable struct {
	first map[string]*Tensor
	key   []byte
}

// shareBuilt is share for build, as soon as it has made t: only a tensor
// resolved without error and given in the file (neither propagated nor
// auto), whose domains nothing changes after, not even propagation's
// backward sweep. The others are shared, when at all, with the whole
// fusion (ShareAlike).
func (tab *alikeTable) shareBuilt(t *Tensor, resolved bool) {
	if resolved && !t.Propagated && !t.Auto {
		tab.share(t)
	}
}

// share makes t share the domains of the first tensor alike it that the
// table has seen, or remembers t as the first of its kind.
func (tab *alikeTable) share(t *Tensor) {
	if t.Mesh == nil {
		return // none after a parse without error; nothing to key on
	}
	if tab.first == nil {
		tab.first = make(map[string]*Tensor)
	}
	tab.key = t.AppendAlikeKey(tab.key[:0])
	u, ok := tab.first[string(tab.key)]
	if !ok {
		tab.first[string(tab.key)] = t
		return
	}
	if u == t {
		return
	}
	// The name, position, producer, Declared and what an op computes
	// into pending terms (Combined: two ops may leave alike terms
	// computing different things) stay t's own.
	t.TensorDomain = u.TensorDomain
}

// AppendAlikeKey appends to b what ShareAlike compares: everything that
// determines t's domains and analyses, positions and name left out. The
// lowering keys what it memoizes per op by it.
func (t *Tensor) AppendAlikeKey(b []byte) []byte {
	b = AppendKeyString(b, t.Mesh.Name)
	b = AppendKeyString(b, string(t.DType))
	b = AppendKeyString(b, string(t.Partial))
	b = AppendKeyBool(b, t.Propagated)
	b = AppendKeyBool(b, t.Auto)
	b = AppendKeyLen(b, false, len(t.Logical))
	for _, id := range t.Logical {
		b = binary.AppendVarint(b, int64(id.Extent))
		b = AppendKeyBool(b, id.Reduction)
	}
	b = AppendKeyLen(b, false, len(t.Schedule))
	for _, s := range t.Schedule {
		b = AppendKeyString(b, string(s.Kind))
		b = binary.AppendVarint(b, int64(s.Axis))
		b = binary.AppendVarint(b, int64(s.Factor))
		b = binary.AppendVarint(b, int64(s.Type))
		b = AppendKeyInts(b, s.Order)
	}
	return AppendKeyInts(b, t.Allocation)
}

// The writers of keys that tell specs apart byte for byte
// (ShareAlike's, and lower.Certify's of the tensors it builds): each
// value is written so that no two different lists of values write the
// same bytes.

// AppendKeyString appends s, its length first.
func AppendKeyString(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

// AppendKeyLen appends a list's length, or -1 when it is nil: a nil list
// is not an empty one.
func AppendKeyLen(b []byte, isNil bool, n int) []byte {
	if isNil {
		return binary.AppendVarint(b, -1)
	}
	return binary.AppendVarint(b, int64(n))
}

// AppendKeyInts appends xs's length, or -1 when nil, then its elements.
func AppendKeyInts(b []byte, xs []int) []byte {
	b = AppendKeyLen(b, xs == nil, len(xs))
	for _, x := range xs {
		b = binary.AppendVarint(b, int64(x))
	}
	return b
}

// AppendKeyBool appends v as a byte.
func AppendKeyBool(b []byte, v bool) []byte {
	if v {
		return append(b, 1)
	}
	return append(b, 0)
}

// ownDomain gives t a TensorDomain of its own, a copy of the one it may
// share, for its schedule to be replayed anew: the copy has logical axes
// of its own (a schedule step parallelizes a loop axis in place, which may
// be a logical one) and no loop domain, schedule or analysis until the
// replay makes them.
func (t *Tensor) ownDomain() {
	d := *t.TensorDomain
	ids := make([]IterDomain, len(d.Logical))
	d.Logical = make([]*IterDomain, len(ids))
	for k, id := range t.Logical {
		ids[k] = *id
		d.Logical[k] = &ids[k]
	}
	d.Loop, d.Schedule, d.Allocation, d.an = nil, nil, slices.Clone(d.Allocation), nil
	t.TensorDomain = &d
}
