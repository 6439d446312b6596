package reshard

import (
	"encoding/binary"
	"math"
	"slices"

	"github.com/nvcomm/nvcomm/internal/checked"
	"github.com/nvcomm/nvcomm/internal/diag"
	"github.com/nvcomm/nvcomm/internal/ir"
	"github.com/nvcomm/nvcomm/internal/plan"
)

// Lower bounds (docs/lowering.md, "Lower bounds"). A bound holds for every
// plan the step vocabulary can express, whatever the policy and objective:
// it depends on the op's producer and consumer only, so that Certify, which
// lowers the plan's fusion again, computes the same. Each step of the
// vocabulary moves data as one algorithm does (an Allreduce as a ring, a
// Reduce by direct transfers, …), and the bounds below hold for every
// algorithm in which devices, not the network, combine values.
//
// Per device: a device must receive every element of its consumer block
// that it does not hold; of a reduction over an axis split among n > 1
// devices' terms, every element, since it holds one term at most.
//
// In all: an element of a reduction over n terms, wanted by ρ devices, takes
// at least n−1+ρ−1 transfers. Order the transfers in time and take the first
// wanting device c to hold the whole value: before it does, the terms of
// the n−1 groups of devices that do not hold c's term have each left their
// group (n−1 transfers with distinct senders: a term is first sent by one
// of its holders), and each of the ρ−1 other wanting devices receives a
// transfer after that (distinct receivers). The transfers land on the op's
// devices, so some device receives at least their average.

// aggregate is the reductions' bound in all over one set of devices:
// extra bytes beyond the per-device bounds of their consumers, which the
// devices must receive between them. The ledger keeps one aggregate per
// distinct set (the union of an op's producer and consumer meshes), so
// their number is bounded by the pairs of meshes, not by the ops.
type aggregate struct {
	devices []int // sorted, once each
	extra   int64 // saturating at int64's largest: the bound stays true
}

// aggregates are a ledger's aggregates, indexed by device set.
type aggregates struct {
	list  []aggregate
	index map[string]int // a set's key → its position in list
	key   []byte         // scratch for a set's key: ids, 8 bytes each
}

// add adds extra to the aggregate over devices, sorted and distinct.
func (a *aggregates) add(devices []int, extra int64) {
	a.key = a.key[:0]
	for _, d := range devices {
		a.key = binary.LittleEndian.AppendUint64(a.key, uint64(d))
	}
	i, ok := a.index[string(a.key)] // looked up without a copy
	if !ok {
		if a.index == nil {
			a.index = map[string]int{}
		}
		i = len(a.list)
		a.index[string(a.key)] = i
		a.list = append(a.list, aggregate{devices: devices})
	}
	a.list[i].extra = saturatingAdd(a.list[i].extra, extra)
}

// saturatingAdd is a+b, or int64's largest past it.
func saturatingAdd(a, b int64) int64 {
	if s, ok := checked.Add(a, b); ok {
		return s
	}
	return math.MaxInt64
}

// addBound adds the op's lower bound: pv is the producer's view (for a
// reduction, over the reduced axis too), cv the consumer's, on c's
// factoring, whose real blocks c.real counts.
func (c lowering) addBound(pv, cv *view) {
	real := c.real
	elem := int64(cv.dtype.Size())
	n := 1
	if c.op.Kind.IsReduction() {
		n = real.terms(onAxis(allDid(pv), c.op.Axis))
	}
	// Buffers and need count elements of one buffer: no overflow (sizes.go).
	mine := int64(0)
	for _, d := range cv.mesh.Devices {
		b := real.size(cv, d) * elem
		if n <= 1 {
			b = real.need(pv, cv, d) * elem
		}
		c.addBytes(bookBound, d, b)
		mine, _ = checked.Add(mine, b)
	}
	if n > 1 {
		c.addAggregate(pv, cv, n, mine, real)
	}
}

// addAggregate records a reduction's bound in all, beyond mine, the sum of
// its consumer's per-device bounds.
func (c lowering) addAggregate(pv, cv *view, n int, mine int64, real *realBlocks) {
	wanting := len(cv.mesh.Devices) / extentOf(allDid(cv))
	all, ok := checked.Product(real.total(cv), int64(n-1+wanting-1), int64(cv.dtype.Size()))
	if !ok {
		all = math.MaxInt64 // less than the true count: still a bound
	}
	if all > mine {
		devices := slices.Concat(pv.mesh.Devices, cv.mesh.Devices)
		slices.Sort(devices)
		c.bookAggregate(slices.Compact(devices), all-mine)
	}
}

// allDid lists every device digit of a view.
func allDid(v *view) []ir.Digit {
	var out []ir.Digit
	for _, t := range ir.DeviceTypes {
		out = append(out, v.did[t]...)
	}
	return out
}

// addSizeBound adds a lower bound that needs no common factoring: a device
// must receive at least the real elements it holds of the consumer beyond
// all it may hold of the producer; of a reduction over an axis split among
// devices, all it holds of the consumer.
func (c lowering) addSizeBound(p, t *ir.Tensor) {
	elem := int64(t.DType.Size())
	split := false
	if c.op.Kind.IsReduction() {
		for _, s := range p.Shardings() {
			split = split || slices.ContainsFunc(s.Digits, func(d ir.Digit) bool { return d.Axis == c.op.Axis })
		}
	}
	for _, d := range t.Mesh.Devices {
		have := int64(0)
		if p.Mesh.Contains(d) && !split {
			have = int64(p.LocalSize())
		}
		// One tensor's bytes: no overflow (sizes.go).
		c.addBytes(bookBound, d, max(0, realLocalSize(t, d)-have)*elem)
	}
}

// LowerBound is the plan's bytes_lower_bound: the largest per-device sum
// of the ops' bounds, or, for a set S of devices (the devices of an op
// with a bound in all, or of them all), what S must receive between them
// shared evenly, whichever is more. The busiest device receives at least
// the average over any set.
//
// The sets are the distinct ones of the aggregates (k of them, at most
// the pairs of meshes) and their union, so the work is k² subset tests
// of bitsets, whatever the number of ops.
func (l *Ledger) LowerBound() int64 {
	best := int64(0)
	for _, b := range l.bound {
		best = max(best, b)
	}
	aggs := l.aggregates.list
	if len(aggs) == 0 {
		return best
	}
	var union []int
	for _, a := range aggs {
		union = append(union, a.devices...)
	}
	slices.Sort(union)
	union = slices.Compact(union)
	pos := make(map[int]int, len(union)) // device → bit
	for i, d := range union {
		pos[d] = i
	}
	bits := make([]deviceBits, len(aggs))
	for i, a := range aggs {
		bits[i] = newDeviceBits(a.devices, pos, len(union))
	}
	for i, a := range aggs {
		best = max(best, l.average(a.devices, bits[i], bits))
	}
	return max(best, l.average(union, newDeviceBits(union, pos, len(union)), bits))
}

// average is what the devices of set must receive between them — their
// per-device bounds and the extra of every aggregate within set — divided
// among them, rounded down; in is set as bits, aggs the aggregates'. A sum
// past int64 counts as int64's largest: the bound stays true.
func (l *Ledger) average(set []int, in deviceBits, aggs []deviceBits) int64 {
	total := int64(0)
	for _, d := range set {
		total = saturatingAdd(total, l.bound[d])
	}
	for i, a := range l.aggregates.list {
		if aggs[i].within(in) {
			total = saturatingAdd(total, a.extra)
		}
	}
	return total / int64(len(set))
}

// deviceBits is a set of devices as bits, numbered by a position map.
type deviceBits []uint64

// newDeviceBits is devices as bits of an n-bit set.
func newDeviceBits(devices []int, pos map[int]int, n int) deviceBits {
	b := make(deviceBits, (n+63)/64)
	for _, d := range devices {
		p := pos[d]
		b[p/64] |= 1 << (p % 64)
	}
	return b
}

// within reports whether b is a subset of of.
func (b deviceBits) within(of deviceBits) bool {
	for i, w := range b {
		if w&^of[i] != 0 {
			return false
		}
	}
	return true
}

// Bounds are lower bounds booked apart from a ledger's: per device, and
// in all over sets of devices. Lowering books the bound of the way it
// computes an op; where the vocabulary computes an op two ways whose
// bounds differ (a contraction split along its summed axis: gather the
// operands, or sum the partial products), the fusion's bound may count
// only what either way must receive (Least), or a plan that takes the
// other way could receive less than the bound says.
type Bounds struct {
	device map[int]int64
	aggs   aggregates
}

// CaptureBounds runs fn and returns the bounds it booked, which the
// ledger does not keep; its steps, bytes received and errors the ledger
// keeps.
func (l *Ledger) CaptureBounds(fn func()) Bounds {
	bound, aggs := l.bound, l.aggregates
	l.bound, l.aggregates = map[int]int64{}, aggregates{}
	fn()
	got := Bounds{device: l.bound, aggs: l.aggregates}
	l.bound, l.aggregates = bound, aggs
	return got
}

// Trial runs fn on a ledger kept for trials and returns the bounds it
// booked and the cost of the steps it wrote, priced by p; false when it
// reported an error or a price does not fit. fn calls priced(elem) after
// writing steps of elem-byte elements, which prices the steps written
// since its previous call: the sets of a trial may move tensors of
// different dtypes (a cast's input, a lookup's indices). The ledger then
// forgets everything fn wrote but its searches, which later trials reuse;
// its searches are not reported to Debug.Searched, whose steps are a
// plan's.
func (l *Ledger) Trial(p *Planner, fn func(priced func(elem int64))) (Bounds, Cost, bool) {
	var c pathCost
	ok := true
	priced := func(elem int64) {
		l.steps.flush(func(s *plan.Step) {
			if !ok {
				return
			}
			sc, fits := p.stepCost(s, elem)
			c, ok = p.costOrder.Add(c, sc)
			ok = ok && fits
		})
	}
	l.trial = true
	b := l.CaptureBounds(func() { fn(priced) })
	l.trial = false
	ok = ok && l.errs.Len() == 0 && l.steps.held() == 0
	l.steps.flush(func(*plan.Step) {})
	l.errs = &diag.List{File: l.errs.File}
	l.received = map[int]int64{}
	return b, Cost{c}, ok
}

// DeviceBounds are bounds of what each device must receive, in bytes,
// and nothing over sets of devices.
func DeviceBounds(device map[int]int64) Bounds { return Bounds{device: device} }

// Book adds b to the ledger's bounds.
func (l *Ledger) Book(b Bounds) {
	for d, n := range b.device {
		l.bound[d] = saturatingAdd(l.bound[d], n)
	}
	for _, a := range b.aggs.list {
		l.aggregates.add(a.devices, a.extra)
	}
}

// Least returns what a plan must receive whichever of two ways, of
// bounds a and b, it computes an op by: per device the smaller bound, and
// over the union U of their devices the rest of the smaller total. For a
// set S of devices that holds U, the sum of the per-device minima over S
// plus that rest is at most either way's total over S (each way's
// per-device bounds outside U are at least the minima, and its total over
// U at least the smaller total); a set that does not hold U counts the
// minima only. So the busiest device's average over any set stays a
// bound for both ways; what is lost is the aggregates over proper subsets
// of U.
func Least(a, b Bounds) Bounds {
	var union []int
	for _, x := range []Bounds{a, b} {
		for d := range x.device {
			union = append(union, d)
		}
		for _, g := range x.aggs.list {
			union = append(union, g.devices...)
		}
	}
	slices.Sort(union)
	union = slices.Compact(union)
	least := Bounds{device: map[int]int64{}}
	var mins int64
	for _, d := range union {
		least.device[d] = min(a.device[d], b.device[d])
		mins = saturatingAdd(mins, least.device[d])
	}
	if rest := min(a.total(), b.total()) - mins; rest > 0 && len(union) > 0 {
		least.aggs.add(union, rest)
	}
	return least
}

// total is what the devices of b must receive between them.
func (b Bounds) total() int64 {
	t := int64(0)
	for _, n := range b.device {
		t = saturatingAdd(t, n)
	}
	for _, a := range b.aggs.list {
		t = saturatingAdd(t, a.extra)
	}
	return t
}
