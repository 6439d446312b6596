package sim

import (
	"fmt"
	"slices"

	"github.com/nvcomm/nvcomm/internal/plan"
)

// Loop-axis roles during enumeration.
const (
	roleIterate   = iota // a local axis: iterated over
	roleDevice           // device-parallel: fixed to the device's coordinate
	roleReduction        // a reduction axis: not in the value, fixed to 0
)

// sharder enumerates the shards of one tensor on its mesh.
type sharder struct {
	name string
	mesh plan.Mesh
	at   *meshIndex
	d    *domain
	// value lists the logical positions of the non-reduction axes; shape
	// their extents.
	value []int
	shape []int
	// role and meshAxis describe every loop position.
	role     []int
	meshAxis []int
	// order lists the loop positions to iterate, outermost first; sorted
	// says the buffer is in row-major logical order (no allocation).
	order  []int
	sorted bool
	// How shards are enumerated (planRuns): the loop positions iterated
	// point by point, outermost first; the position iterated along a row
	// (-1: none) with the splits from it to its logical axis and its
	// stride in the logical offset; whether the offsets must be sorted.
	outer    []int
	inner    int
	links    []link
	stride   int
	sortRuns bool
	// vals, point and coord are scratch for enumerating one device's
	// shard: a value per IterDomain, a point of the outer axes, the
	// device's coordinates.
	vals, point, coord []int
	// runs keeps each device's runs once enumerated, when the sharder
	// serves several tensors (budget is then set, see cacheRuns): a chain
	// enumerates the same few shards for every tensor it loads or checks.
	runs   map[int][]run
	budget *int
	// oneRuns is whether every device's shard is one run of consecutive
	// elements (contiguous): 0 not yet known, 1 yes, 2 no.
	oneRuns int8
}

// runBudget is how many runs the sharders of one simulation may keep
// between them (24 bytes each, 1.5 MiB in all): a bound that the memory
// model leaves to the runtime's share (RuntimeBytes).
const runBudget = 1 << 16

// maxCachedRuns is the most runs a sharder keeps for one device: a longer
// shard is enumerated again each time, as it would take most of the
// budget for one device.
const maxCachedRuns = 256

// cacheRuns lets s keep devices' runs, drawing on budget.
func (s *sharder) cacheRuns(budget *int) {
	if s.budget == nil {
		s.budget, s.runs = budget, map[int][]run{}
	}
}

// Shard returns the elements of the global tensor t that device holds, in
// the order of its buffer, as logical indices over t's non-reduction axes.
// m is t's mesh. A device outside the mesh holds nothing. The shard is
// rebuilt from t's shape, reduction axes, schedule and allocation only.
func Shard(t plan.Tensor, m plan.Mesh, device int) ([][]int, error) {
	s, err := newSharder(t, m)
	if err != nil {
		return nil, err
	}
	var idx [][]int
	var scratch []int
	s.eachRun(device, &scratch, func(r run) bool {
		for i := range r.n {
			idx = append(idx, unflatten(r.at(i), s.shape))
		}
		return true
	})
	return idx, nil
}

// newSharder builds t's domain and decides how every loop axis is
// enumerated.
func newSharder(t plan.Tensor, m plan.Mesh) (*sharder, error) {
	at, err := checkMesh(t.Mesh, m)
	if err != nil {
		return nil, err
	}
	d, err := newDomain(t)
	if err != nil {
		return nil, err
	}
	s := &sharder{name: t.Name, mesh: m, at: at, d: d}
	for k, id := range d.logical {
		if !d.ids[id].reduction {
			s.value = append(s.value, k)
			s.shape = append(s.shape, d.ids[id].extent)
		}
	}
	if err := s.assignRoles(); err != nil {
		return nil, err
	}
	if err := s.setOrder(t.Allocation); err != nil {
		return nil, err
	}
	s.planRuns()
	s.vals, s.point, s.coord = make([]int, len(s.d.ids)), make([]int, len(s.outer)), make([]int, len(m.Shape))
	return s, nil
}

// assignRoles marks every loop axis as iterated, device-parallel or
// reduction. A device type on a reduction axis does not shard.
func (s *sharder) assignRoles() error {
	used := map[string]int{}
	for pos, id := range s.d.loop {
		ax := s.d.ids[id]
		role, mAxis := roleIterate, -1
		switch {
		case ax.reduction:
			role = roleReduction
		case ax.parallel != "":
			if prev, ok := used[ax.parallel]; ok {
				return fmt.Errorf("tensor %q: loop axes %d and %d are both parallelized on %s", s.name, prev, pos, ax.parallel)
			}
			used[ax.parallel] = pos
			a, err := meshAxis(s.mesh, ax.parallel)
			if err != nil {
				return fmt.Errorf("tensor %q: loop axis %d: %w", s.name, pos, err)
			}
			role, mAxis = roleDevice, a
		}
		s.role = append(s.role, role)
		s.meshAxis = append(s.meshAxis, mAxis)
	}
	return nil
}

// setOrder checks the allocation and derives the iteration order. Every
// local loop axis must be allocated; device-parallel and reduction axes may
// be listed and are then fixed.
func (s *sharder) setOrder(alloc []int) error {
	if alloc == nil {
		s.order = make([]int, len(s.d.loop))
		for pos := range s.order {
			s.order[pos] = pos
		}
		s.sorted = true
		return nil
	}
	seen := make([]bool, len(s.d.loop))
	for _, pos := range alloc {
		if pos < 0 || pos >= len(s.d.loop) || seen[pos] {
			return fmt.Errorf("tensor %q: allocation %v must list distinct loop positions below %d", s.name, alloc, len(s.d.loop))
		}
		seen[pos] = true
	}
	for pos, role := range s.role {
		if role == roleIterate && !seen[pos] {
			return fmt.Errorf("tensor %q: allocation %v misses local loop axis %d", s.name, alloc, pos)
		}
	}
	s.order = slices.Clone(alloc)
	return nil
}

// A run is a piece of a device's shard: n consecutive elements of its
// buffer, holding the global tensor's elements at row-major offsets off,
// off+stride, …, off+(n−1)·stride. Most shards are a few runs of stride 1,
// moved with copy() rather than element by element.
type run struct{ off, stride, n int }

// at returns the offset of the run's element i.
func (r run) at(i int) int { return r.off + i*r.stride }

// link is one split between a loop axis and its logical axis: the split's
// input grows by step for every step of the loop axis.
type link struct{ in, step int }

// planRuns decides how shards are enumerated, once per tensor. A row is
// every value of one loop axis, inner, with the others fixed. When inner
// reaches its logical axis through splits only, a row is one run: the
// logical offset grows by stride per step, and the row's valid points (a
// split's input below its extent) are a prefix, whose length the links
// give. The other iterated axes, outer, are enumerated point by point,
// one replay a row. A merge on the way makes the offset non-affine: inner
// is then -1 and every point is a row of one element.
//
// Without an allocation the buffer is in row-major logical order. When
// every iterated axis reaches its logical axis through splits only,
// iterating them by decreasing stride gives that order (a split's outer
// part moves the offset by more than its whole inner part can), and
// sortRuns stays false; with a merge on the way, the offsets are
// enumerated and sorted.
func (s *sharder) planRuns() {
	s.inner = -1
	for _, pos := range s.order {
		if s.role[pos] == roleIterate && s.extentOf(pos) > 1 {
			s.outer = append(s.outer, pos) // extent-1 axes stay 0
		}
	}
	made := make(map[int]expr, len(s.d.exprs)) // IterDomain → the expr that made it
	for _, e := range s.d.exprs {
		for _, out := range e.out {
			made[out] = e
		}
	}
	strides := make(map[int]int, len(s.outer))
	for _, pos := range s.outer {
		_, stride, ok := s.chain(made, pos)
		if !ok && s.sorted {
			s.sortRuns = true
			return
		}
		strides[pos] = stride
	}
	if s.sorted {
		slices.SortStableFunc(s.outer, func(a, b int) int { return strides[b] - strides[a] })
	}
	if len(s.outer) == 0 {
		return
	}
	last := s.outer[len(s.outer)-1]
	if links, stride, ok := s.chain(made, last); ok {
		s.inner, s.links, s.stride = last, links, stride
		s.outer = s.outer[:len(s.outer)-1]
	}
}

// chain follows the loop axis at pos back to its logical axis through
// made, the expr that made each IterDomain. It returns the splits on the
// way and how far one step of the axis moves the row-major logical
// offset; ok is false when a merge is on the way.
func (s *sharder) chain(made map[int]expr, pos int) (links []link, stride int, ok bool) {
	id, step := s.d.loop[pos], 1
	for e, found := made[id]; found; e, found = made[id] {
		if e.kind == merge {
			return nil, 0, false
		}
		if id == e.out[0] { // the outer part: a step moves the input by the inner extent
			step *= s.d.ids[e.out[1]].extent
		}
		id = e.in[0]
		links = append(links, link{in: id, step: step})
	}
	stride = step
	for k := len(s.value) - 1; k >= 0 && s.d.logical[s.value[k]] != id; k-- {
		stride *= s.shape[k]
	}
	return links, stride, true
}

// eachRun calls yield with device's shard, run by run in buffer order,
// until yield returns false. Adjacent runs that continue one another are
// joined. scratch is reused to sort the offsets of a tensor whose
// enumeration order is not its buffer order (sortRuns). The runs come
// from the cache when s keeps them (cacheRuns).
func (s *sharder) eachRun(device int, scratch *[]int, yield func(run) bool) {
	if rs, ok := s.runs[device]; ok {
		for _, r := range rs {
			if !yield(r) {
				return
			}
		}
		return
	}
	if s.budget == nil || *s.budget <= 0 {
		s.enumerate(device, scratch, yield)
		return
	}
	var rs []run
	kept := true // every run was seen and is in rs
	s.enumerate(device, scratch, func(r run) bool {
		if kept = kept && len(rs) < maxCachedRuns; kept {
			rs = append(rs, r)
		}
		if !yield(r) {
			kept = false
			return false
		}
		return true
	})
	if kept && len(rs) <= *s.budget {
		s.runs[device] = rs
		*s.budget -= max(len(rs), 1) // a shard without runs is kept too
	}
}

// enumerate is eachRun without the cache.
func (s *sharder) enumerate(device int, scratch *[]int, yield func(run) bool) {
	vals, ok := s.deviceValues(device)
	if !ok {
		return
	}
	j := joiner{yield: yield}
	if s.sortRuns {
		offs := (*scratch)[:0]
		s.rows(vals, func(r run) bool {
			offs = append(offs, r.off) // rows of one element: inner is -1
			return true
		})
		slices.Sort(offs)
		*scratch = offs
		for _, off := range offs {
			if !j.add(run{off: off, stride: 1, n: 1}) {
				return
			}
		}
	} else if !s.rows(vals, j.add) {
		return
	}
	j.flush()
}

// longRows reports whether a device's shard is kept as the pieces of the
// tensor's values it lists (a fusion input's: load) rather than copied:
// when its rows are runs of at least ropeMin elements. It depends on the
// tensor's geometry alone, so that the memory model knows it.
func (s *sharder) longRows() bool {
	return !s.sortRuns && s.inner >= 0 && s.extentOf(s.inner) >= ropeMin
}

// rowsBound bounds the runs of a device's shard: one a row, a row for
// every point of the outer axes.
func (s *sharder) rowsBound() int64 {
	n := int64(1)
	for _, pos := range s.outer {
		n = satMul(n, int64(s.extentOf(pos)))
	}
	return n
}

// contiguous reports whether every device of the mesh holds one run of
// consecutive elements, or none: a shard of stored values is then a slice
// of them, shared rather than copied (load), and the memory model prices
// it so. It depends on the geometry alone, and is decided once.
func (s *sharder) contiguous(scratch *[]int) bool {
	if s.oneRuns == 0 {
		ok := true
		for _, d := range s.mesh.Devices {
			runs := 0
			s.eachRun(d, scratch, func(r run) bool {
				runs++
				ok = runs == 1 && (r.stride == 1 || r.n == 1)
				return ok
			})
			if !ok {
				break
			}
		}
		s.oneRuns = 2
		if ok {
			s.oneRuns = 1
		}
	}
	return s.oneRuns == 1
}

// oneRun returns device's shard of vals, the values of the whole tensor,
// as the slice of them it is: s must be contiguous.
func (s *sharder) oneRun(device int, scratch *[]int, vals []float64) []float64 {
	var r run
	s.eachRun(device, scratch, func(x run) bool {
		r = x
		return false
	})
	return vals[r.off : r.off+r.n : r.off+r.n]
}

// size returns the number of elements device holds.
func (s *sharder) size(device int, scratch *[]int) int {
	n := 0
	s.eachRun(device, scratch, func(r run) bool {
		n += r.n
		return true
	})
	return n
}

// deviceValues returns the loop values with every device-parallel axis
// fixed to device's coordinate, or false when device holds nothing: it is
// outside the mesh, or its coordinate is beyond its axis's extent.
func (s *sharder) deviceValues(device int) ([]int, bool) {
	c, ok := s.at.coordsInto(s.coord, device)
	if !ok {
		return nil, false
	}
	// Loop values other than the device axes' are set by rows, or stay 0
	// (extent-1 and reduction axes); replay sets the others.
	vals := s.vals
	for pos, id := range s.d.loop {
		if s.role[pos] == roleDevice {
			vals[id] = c[s.meshAxis[pos]]
			if vals[id] >= s.d.ids[id].extent {
				return nil, false
			}
		}
	}
	return vals, true
}

// rows calls yield with every row's run, rows in the order of the outer
// axes, and reports whether yield always returned true. Every row replays
// its first point; a hole there is a hole at every point of the row (a
// split's input only grows along it).
func (s *sharder) rows(vals []int, yield func(run) bool) bool {
	inner, n := -1, 1
	if s.inner >= 0 {
		inner, n = s.d.loop[s.inner], s.extentOf(s.inner)
	}
	point := s.point
	clear(point)
	for {
		for k, pos := range s.outer {
			vals[s.d.loop[pos]] = point[k]
		}
		if inner >= 0 {
			vals[inner] = 0
		}
		if off, ok := s.logicalOffset(vals); ok {
			r := run{off: off, stride: max(s.stride, 1), n: n}
			for _, l := range s.links {
				r.n = min(r.n, ceilDiv(s.d.ids[l.in].extent-vals[l.in], l.step))
			}
			if !yield(r) {
				return false
			}
		}
		if !s.nextPoint(point) {
			return true
		}
	}
}

// nextPoint advances point to the next point of the outer axes in
// row-major order, and reports false after the last.
func (s *sharder) nextPoint(point []int) bool {
	for k := len(point) - 1; k >= 0; k-- {
		point[k]++
		if point[k] < s.extentOf(s.outer[k]) {
			return true
		}
		point[k] = 0
	}
	return false
}

// joiner joins runs that continue one another before passing them on.
type joiner struct {
	yield   func(run) bool
	pending run // none while n is 0
}

// add takes the next run and reports whether to go on.
func (j *joiner) add(r run) bool {
	p := &j.pending
	switch {
	case p.n == 0:
		*p = r
		return true
	case p.n == 1 && r.n == 1: // two elements make a run of any stride
		p.stride, p.n = r.off-p.off, 2
		return true
	case r.off == p.at(p.n) && (r.n == 1 || r.stride == p.stride):
		p.n += r.n
		return true
	}
	ok := j.yield(*p)
	*p = r
	return ok
}

// flush passes on the last run.
func (j *joiner) flush() {
	if j.pending.n > 0 {
		j.yield(j.pending)
	}
}

// extentOf is how many values enumeration visits on a loop axis: its
// extent when local, one when fixed.
func (s *sharder) extentOf(pos int) int {
	if s.role[pos] != roleIterate {
		return 1
	}
	return s.d.ids[s.d.loop[pos]].extent
}

// logicalOffset replays the loop values in vals back to the logical domain
// and returns the row-major offset of the logical index, or false for a
// hole.
func (s *sharder) logicalOffset(vals []int) (int, bool) {
	if !s.d.replay(vals) {
		return 0, false
	}
	off := 0
	for k, pos := range s.value {
		off = off*s.shape[k] + vals[s.d.logical[pos]]
	}
	return off, true
}

// maxElements bounds the number of elements a device of the mesh holds.
func (s *sharder) maxElements() int64 {
	n := int64(1)
	for pos := range s.d.loop {
		n = satMul(n, int64(s.extentOf(pos)))
	}
	return n
}

// odometer yields every multi-index below ext in row-major order, reusing
// one slice. No extents yields one empty index.
func odometer(ext []int) func(yield func([]int) bool) {
	return func(yield func([]int) bool) {
		for _, e := range ext {
			if e == 0 {
				return
			}
		}
		idx := make([]int, len(ext))
		for {
			if !yield(idx) {
				return
			}
			k := len(ext) - 1
			for ; k >= 0; k-- {
				idx[k]++
				if idx[k] < ext[k] {
					break
				}
				idx[k] = 0
			}
			if k < 0 {
				return
			}
		}
	}
}

// unflatten turns a row-major offset into a multi-index.
func unflatten(off int, shape []int) []int {
	idx := make([]int, len(shape))
	for k := len(shape) - 1; k >= 0; k-- {
		idx[k] = off % shape[k]
		off /= shape[k]
	}
	return idx
}

// satMul multiplies non-negative numbers, saturating instead of
// overflowing.
func satMul(a, b int64) int64 {
	const limit = int64(^uint64(0) >> 1)
	if a != 0 && b > limit/a {
		return limit
	}
	return a * b
}
