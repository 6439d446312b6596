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
	// says the result is then sorted by logical index (no allocation).
	order  []int
	sorted bool
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
	offs := s.offsets(device)
	idx := make([][]int, len(offs))
	for i, off := range offs {
		idx[i] = unflatten(off, s.shape)
	}
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

// offsets returns device's elements in buffer order, as row-major offsets
// into the global tensor's non-reduction shape.
func (s *sharder) offsets(device int) []int {
	if _, ok := s.at.position(device); !ok {
		return nil
	}
	// Sized once: growing by append would briefly hold twice the shard.
	return s.appendOffsets(make([]int, 0, s.maxElements()), device)
}

// appendOffsets is offsets appended to offs: a simulation enumerates every
// device's shard into one scratch buffer, so that a million devices leave
// no garbage behind (the memory estimate counts one shard).
func (s *sharder) appendOffsets(offs []int, device int) []int {
	c, ok := s.at.coords(device)
	if !ok {
		return offs
	}
	vals := make([]int, len(s.d.ids))
	ext := make([]int, len(s.order))
	for k, pos := range s.order {
		ext[k] = s.extentOf(pos)
	}
	for pos, id := range s.d.loop {
		if s.role[pos] == roleDevice {
			vals[id] = c[s.meshAxis[pos]]
			if vals[id] >= s.d.ids[id].extent {
				return offs // the device has no index on this axis
			}
		}
	}
	start := len(offs)
	for point := range odometer(ext) {
		for k, pos := range s.order {
			if s.role[pos] == roleIterate {
				vals[s.d.loop[pos]] = point[k]
			}
		}
		if off, ok := s.logicalOffset(vals); ok {
			offs = append(offs, off)
		}
	}
	if s.sorted {
		slices.Sort(offs[start:])
	}
	return offs
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
