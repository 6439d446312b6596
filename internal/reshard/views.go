package reshard

import (
	"slices"

	"github.com/nvcomm/nvcomm/internal/ir"
	"github.com/nvcomm/nvcomm/internal/shard"
)

// A view describes one per-device buffer in the digit model (see
// docs/lowering.md): every logical axis is factored into mixed-radix digits
// at the union of the producer's and consumer's sharding boundaries; device
// digits are fixed by a device's coordinates, stored digits form the buffer,
// most significant first. Axes are numbered in the producer's value-axis
// space so producer, consumer and intermediates compare directly.
type view struct {
	name   string
	mesh   *ir.Mesh
	dtype  ir.DType
	did    deviceDigits // device digits per type
	stored []ir.Digit   // buffer order
	// flexible marks an intermediate buffer whose order the step that
	// writes it may choose.
	flexible bool
}

// deviceDigits are a view's device digits by parallel type (Serial's
// none): an array, copied with the view that shares them, rather than a
// map per view.
type deviceDigits [ir.DIDz + 1][]ir.Digit

// size is the number of elements per device.
func (v *view) size() int {
	n := 1
	for _, d := range v.stored {
		n *= d.Extent
	}
	return n
}

// sharded reports whether v is sharded along pt.
func (v *view) sharded(pt ir.ParallelType) bool { return len(v.did[pt]) > 0 }

// axisOf is the axis of v's digits for pt (all of them lie on one axis).
func (v *view) axisOf(pt ir.ParallelType) int { return v.did[pt][0].Axis }

// firstAxis is the axis of the first device type that shards v, or nil
// when v is replicated.
func (v *view) firstAxis() *int {
	for _, t := range ir.DeviceTypes {
		if v.sharded(t) {
			return new(v.axisOf(t))
		}
	}
	return nil
}

// factoring holds the common refinement of every axis of one op.
type factoring struct {
	extents []int   // producer value-axis extents
	cuts    [][]int // per axis: sorted strides it is cut at, 1 = b0 | b1 | ... | N
	// maps are the axis maps of the pair factor built it for.
	maps pairAxes
}

// fine returns the digits of axis a between cuts lo and hi (strides),
// most significant first.
func (f *factoring) fine(a, lo, hi int) []ir.Digit {
	return shard.DigitsBetween(a, f.cuts[a], lo, hi)
}

// appendFine appends fine's digits to dst.
func (f *factoring) appendFine(dst []ir.Digit, a, lo, hi int) []ir.Digit {
	return shard.AppendDigitsBetween(dst, a, f.cuts[a], lo, hi)
}

// valueAxes places a tensor's value axes among a factoring's axes (the
// producer's): value axis j is the whole of axis to[j], or, where at is
// not nil, the part of it from stride at[j] to at[j] times j's extent (a
// dimension an op's rule splits out of a compound one of the producer).
type valueAxes struct{ to, at []int }

// span is the range of strides [lo, hi) that value axis j of a tensor of
// extents shape covers in its factoring axis, whose extent is n.
func (m valueAxes) span(j int, shape []int, n int) (lo, hi int) {
	if m.at == nil {
		return 1, n
	}
	return m.at[j], m.at[j] * shape[j]
}

// stride is the stride of value axis j's index within its factoring axis.
func (m valueAxes) stride(j int) int {
	if m.at == nil {
		return 1
	}
	return m.at[j]
}

// newFactoring refines every axis at the boundaries of the given sharded
// tensors; places[k] places tensor k's value axes among the producer's. It
// fails when two tensors cut an axis at strides that do not divide each
// other.
func newFactoring(extents []int, tensors []*ir.Tensor, places []valueAxes) (*factoring, bool) {
	f := &factoring{extents: extents, cuts: make([][]int, len(extents))}
	for a, n := range extents {
		// Room for two tensors' cuts of the axis without growing.
		f.cuts[a] = append(make([]int, 0, 8), 1, n)
	}
	for k, t := range tensors {
		m := places[k]
		for _, s := range t.Shardings() {
			for _, d := range s.Digits {
				a, st := m.to[d.Axis], m.stride(d.Axis)
				f.cuts[a] = append(f.cuts[a], d.Stride*st, d.Span()*st)
			}
		}
		if m.at != nil {
			f.cutParts(t, m)
		}
	}
	for a := range f.cuts {
		cuts, ok := shard.Cuts(f.cuts[a])
		if !ok {
			return nil, false
		}
		f.cuts[a] = cuts
	}
	return f, true
}

// cutParts cuts the factoring's axes where the value axes of t, parts of
// them (m.at), begin and end.
func (f *factoring) cutParts(t *ir.Tensor, m valueAxes) {
	shape := t.Shape()
	for j, a := range m.to {
		lo, hi := m.span(j, shape, f.extents[a])
		f.cuts[a] = append(f.cuts[a], lo, hi)
	}
}

// cutForScatter cuts axis a, the consumer's outermost, into as many blocks
// as the devices that split the producer's reduced axis r, along each
// device type and along all of them, where the extents allow: the digits
// a ReduceScatter can scatter the partial terms onto when the consumer
// does not split that many ways itself (a ReduceScatter then a Gather to
// one device moves fewer bytes than a Reduce).
func (f *factoring) cutForScatter(producer *ir.Tensor, r, a int) {
	all := 1
	var sizes []int
	for _, s := range producer.Shardings() {
		if slices.ContainsFunc(s.Digits, func(d ir.Digit) bool { return d.Axis == r }) {
			n := producer.Mesh.Size(s.Type)
			sizes, all = append(sizes, n), all*n
		}
	}
	for _, n := range append(sizes, all) {
		if e := f.extents[a]; n > 1 && e%n == 0 {
			f.addCut(a, e/n)
		}
	}
}

// cutForReplicas cuts, for a set on one mesh, the block of a tensor that is
// replicated along a type the other tensor shards (along the first axis
// it shards, below its device digits) into as many pieces as that type's
// mesh size, where the extents allow: the digits that let its replicas
// share the work. [16, 32] (R, S(0)) → (S(0), R) on 2×4 is then a Slice
// of each replica's half, one device per device, and an Allgather (1 KiB
// at the busiest device, the bound) where, without the pieces, it took an
// AllToAll, a Slice and an Allgather (1.1 KiB).
func (f *factoring) cutForReplicas(tensors [2]*ir.Tensor, places [2]valueAxes) {
	for k, t := range tensors {
		other, m := tensors[1-k], places[k]
		shardings := t.Shardings()
		if m.at != nil || len(shardings) == 0 || !t.Mesh.Equal(other.Mesh) {
			continue
		}
		first := shardings[0].Digits
		a, low := first[0].Axis, first[0].Stride
		for _, s := range shardings {
			for _, d := range s.Digits {
				if d.Axis == a {
					low = min(low, d.Stride)
				}
			}
		}
		for _, u := range ir.DeviceTypes {
			_, mine := t.ShardingOf(u)
			_, theirs := other.ShardingOf(u)
			if n := t.Mesh.Size(u); !mine && theirs && n > 1 && low%n == 0 {
				f.addCut(m.to[a], low/n)
			}
		}
	}
}

// addCut cuts axis a at stride b when that keeps every cut dividing the
// next.
func (f *factoring) addCut(a, b int) {
	if cuts, ok := shard.Cuts(append(slices.Clone(f.cuts[a]), b)); ok {
		f.cuts[a] = cuts
	}
}

// tensorView builds the view of tensor t, whose value axes lie among the
// producer's as m places them.
func (f *factoring) tensorView(t *ir.Tensor, m valueAxes) *view {
	shardings := t.Shardings()
	v := &view{name: t.Name, mesh: t.Mesh, dtype: t.DType}
	// A tensor has a few device digits: a list beats a map, which cost a
	// tenth of lowering a chain of sets.
	var covered []ir.Digit
	for _, s := range shardings {
		var ds []ir.Digit
		for _, d := range s.Digits {
			st := m.stride(d.Axis)
			ds = f.appendFine(ds, m.to[d.Axis], d.Stride*st, d.Span()*st)
		}
		v.did[s.Type] = ds
		covered = append(covered, ds...)
	}
	// Every digit of the layout's axes, then those the devices select
	// dropped, in place.
	n := 0
	for _, a := range t.Layout() {
		n += len(f.cuts[m.to[a]]) - 1
	}
	all := make([]ir.Digit, 0, n)
	var shape []int
	if m.at != nil {
		shape = t.Shape()
	}
	for _, a := range t.Layout() {
		pa := m.to[a]
		lo, hi := m.span(a, shape, f.extents[pa])
		all = f.appendFine(all, pa, lo, hi)
	}
	stored := all[:0]
	for _, d := range all {
		if !slices.Contains(covered, d) {
			stored = append(stored, d)
		}
	}
	if len(stored) > 0 {
		v.stored = stored // else nil, as a view that stores nothing has
	}
	return v
}

// without returns ds minus the digits in drop, order kept.
func without(ds, drop []ir.Digit) []ir.Digit {
	var out []ir.Digit // nil when none is left, as callers compare
	for _, d := range ds {
		if !slices.Contains(drop, d) {
			if out == nil {
				out = make([]ir.Digit, 0, len(ds))
			}
			out = append(out, d)
		}
	}
	return slices.Clip(out) // no room that two callers' appends would share
}

// onAxis returns the digits of ds that lie on axis a.
func onAxis(ds []ir.Digit, a int) []ir.Digit {
	var out []ir.Digit
	for _, d := range ds {
		if d.Axis == a {
			out = append(out, d)
		}
	}
	return out
}

// concat joins digit lists into a new slice.
func concat(lists ...[]ir.Digit) []ir.Digit {
	n := 0
	for _, l := range lists {
		n += len(l)
	}
	if n == 0 {
		return nil
	}
	out := make([]ir.Digit, 0, n)
	for _, l := range lists {
		out = append(out, l...)
	}
	return out
}

// permutation expresses the reordering of digits from src to dst as a
// transpose of a row-major array: dims are src's extents, after merging
// digits that stay adjacent and in order, and perm[k] is the src dimension
// that becomes dst dimension k.
func permutation(src, dst []ir.Digit) (dims, perm []int) {
	// Group src into runs that appear contiguously, in order, in dst.
	pos := map[ir.Digit]int{}
	for i, d := range dst {
		pos[d] = i
	}
	var runs [][]ir.Digit
	for i, d := range src {
		if i > 0 && pos[d] == pos[src[i-1]]+1 {
			runs[len(runs)-1] = append(runs[len(runs)-1], d)
			continue
		}
		runs = append(runs, []ir.Digit{d})
	}
	for _, r := range runs {
		n := 1
		for _, d := range r {
			n *= d.Extent
		}
		dims = append(dims, n)
	}
	order := make([]int, len(runs))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return pos[runs[a][0]] - pos[runs[b][0]] })
	return dims, order
}

// sameOrder reports whether two digit lists are the same buffer order.
func sameOrder(a, b []ir.Digit) bool { return slices.Equal(a, b) }

// digitValue is one device digit of a view and its value on one device.
type digitValue struct {
	digit ir.Digit
	value int
}

// deviceDigits appends to buf, for device d of v's mesh, the value of every
// device digit of v: d's coordinate along each type, written in mixed radix
// over that type's digits (most significant first). It reports false when d
// is not in the mesh. need calls it for every device of a mesh, twice an
// op, so it neither searches the mesh nor allocates when buf has room.
func (v *view) deviceDigits(buf []digitValue, d int) ([]digitValue, bool) {
	i := v.mesh.Index(d)
	if i < 0 {
		return buf, false
	}
	// By type rather than ranging over the map, whose iterator cost more
	// than the rest: the order of the values does not matter.
	for _, t := range ir.DeviceTypes {
		ds := v.did[t]
		if len(ds) == 0 {
			continue
		}
		c := v.mesh.Coord(i, t)
		for k := len(ds) - 1; k >= 0; k-- {
			buf = append(buf, digitValue{ds[k], c % ds[k].Extent})
			c /= ds[k].Extent
		}
	}
	return buf, true
}

// valueOf finds digit g among vals; lists hold a few digits, so a scan
// beats a map.
func valueOf(vals []digitValue, g ir.Digit) (int, bool) {
	for _, x := range vals {
		if x.digit == g {
			return x.value, true
		}
	}
	return 0, false
}

// digitValues is deviceDigits as a map.
func (v *view) digitValues(d int) (map[ir.Digit]int, bool) {
	list, ok := v.deviceDigits(nil, d)
	if !ok {
		return nil, false
	}
	vals := make(map[ir.Digit]int, len(list))
	for _, x := range list {
		vals[x.digit] = x.value
	}
	return vals, true
}

// need counts the elements device d holds in out but not in in: what it
// must receive, whatever the collective. Both views factor the same axes.
func need(in, out *view, d int) int64 {
	var outBuf, inBuf [8]digitValue
	outVals, ok := out.deviceDigits(outBuf[:0], d)
	if !ok {
		return 0
	}
	total := int64(out.size())
	inVals, ok := in.deviceDigits(inBuf[:0], d)
	if !ok {
		return total
	}
	common := int64(1)
	for _, g := range out.stored {
		if _, fixed := valueOf(inVals, g); !fixed {
			common *= int64(g.Extent)
		}
	}
	for _, x := range outVals {
		if pv, fixed := valueOf(inVals, x.digit); fixed && pv != x.value {
			return total
		}
	}
	return total - common
}
