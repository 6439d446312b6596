package plan

// Sets of devices, as the validator follows which devices hold which
// buffers. A plan of many ops has a buffer or two per op, each held by a
// mesh's devices: a map per buffer was most of what validating such a
// plan allocated. A set here is a bitset over the devices of the plan's
// meshes, its words cut from a shared slab, with a map only for devices
// in no mesh (which a step names only with a problem).

// maxSetBits is the most devices a deviceSet holds as bits: 1 KiB a set.
// A plan of more devices keeps every set in its map, as sparse as the
// devices it holds: a bitset a buffer over a million devices, for buffers
// held by a few (SendRecv pairs), would be gigabytes.
const maxSetBits = 8192

// deviceIndex numbers the distinct devices of the plan's meshes 0..n-1:
// the bits of a deviceSet (none past maxSetBits devices).
type deviceIndex struct {
	n int
	// dense is set when the devices are exactly 0..n-1, each its own
	// number; index is nil then.
	dense bool
	index map[int]int
}

// newDeviceIndex numbers devices, the set of the plan's mesh devices.
func newDeviceIndex(devices map[int]bool) deviceIndex {
	if len(devices) > maxSetBits {
		return deviceIndex{dense: true} // no bits: every device in the map
	}
	x := deviceIndex{n: len(devices), dense: true}
	for d := range devices {
		if d >= len(devices) {
			x.dense = false
			break
		}
	}
	if x.dense {
		return x
	}
	x.index = make(map[int]int, len(devices))
	for d := range devices {
		x.index[d] = len(x.index)
	}
	return x
}

// bit returns d's number, false when d is in no mesh.
func (x *deviceIndex) bit(d int) (int, bool) {
	if x.dense {
		return d, d >= 0 && d < x.n
	}
	b, ok := x.index[d]
	return b, ok
}

// deviceSet is a set of devices: the plan's mesh devices as bits
// (deviceIndex), others in a map. unknown marks the holders of a buffer
// that a step with problems wrote.
type deviceSet struct {
	words   []uint64
	other   map[int]bool
	unknown bool
}

// has reports whether d is in s.
func (s *deviceSet) has(x *deviceIndex, d int) bool {
	if b, ok := x.bit(d); ok {
		return s.words[b/64]&(1<<(b%64)) != 0
	}
	return s.other[d]
}

// add puts d in s.
func (s *deviceSet) add(x *deviceIndex, d int) {
	if b, ok := x.bit(d); ok {
		s.words[b/64] |= 1 << (b % 64)
		return
	}
	if s.other == nil {
		s.other = map[int]bool{}
	}
	s.other[d] = true
}

// setSlabSize is how many sets, and how many sets' words, the validator
// allocates at once.
const setSlabSize = 1024

// newSet returns an empty set from the validator's slabs.
func (v *validator) newSet() *deviceSet {
	if len(v.setSlab) == cap(v.setSlab) {
		v.setSlab = make([]deviceSet, 0, setSlabSize)
	}
	v.setSlab = v.setSlab[:len(v.setSlab)+1]
	s := &v.setSlab[len(v.setSlab)-1]
	n := (v.devIndex.n + 63) / 64
	if len(v.wordSlab)+n > cap(v.wordSlab) {
		v.wordSlab = make([]uint64, 0, n*setSlabSize)
	}
	s.words = v.wordSlab[len(v.wordSlab) : len(v.wordSlab)+n : len(v.wordSlab)+n]
	v.wordSlab = v.wordSlab[:len(v.wordSlab)+n]
	return s
}

// heldSet returns the set of the devices that hold buffer name, made
// empty on first use.
func (v *validator) heldSet(name string) *deviceSet {
	e := v.entry(name)
	if e.held == nil {
		e.held = v.newSet()
	}
	return e.held
}

// deviceMarks marks devices with a value, as a map from device to value
// would, emptied by reset: per device number (deviceIndex), a value and
// the generation that set it, with a map only for devices in no mesh. The
// checks of a step's teams and devices made two maps a step.
type deviceMarks struct {
	gen   []uint32
	val   []int32
	cur   uint32
	other map[int]int32
}

// reset empties the marks, for devices numbered below n.
func (m *deviceMarks) reset(n int) {
	if len(m.gen) < n {
		m.gen, m.val = make([]uint32, n), make([]int32, n)
	}
	m.cur++
	if m.cur == 0 { // wrapped: marks of 2^32 resets ago would read as new
		clear(m.gen)
		m.cur = 1
	}
	if len(m.other) > 0 {
		clear(m.other)
	}
}

// get returns d's mark, 0 and false when d has none.
func (m *deviceMarks) get(x *deviceIndex, d int) (int32, bool) {
	if b, ok := x.bit(d); ok {
		if m.gen[b] != m.cur {
			return 0, false
		}
		return m.val[b], true
	}
	v, ok := m.other[d]
	return v, ok
}

// set marks d with v.
func (m *deviceMarks) set(x *deviceIndex, d int, v int32) {
	if b, ok := x.bit(d); ok {
		m.gen[b], m.val[b] = m.cur, v
		return
	}
	if m.other == nil {
		m.other = map[int]int32{}
	}
	m.other[d] = v
}

// inMesh reports whether d is a device of a mesh of the plan.
func (v *validator) inMesh(d int) bool {
	if _, ok := v.devIndex.bit(d); ok {
		return true
	}
	return v.devices[d]
}

// deviceBook is a book (traffic.go) of bytes per device, emptied by
// reset, laid out as deviceMarks: two maps a step, cleared and read back,
// were a sixth of validating a plan of many collectives.
type deviceBook struct {
	x     *deviceIndex
	val   []int64
	gen   []uint32
	cur   uint32
	other map[int]int64
	// touched lists the devices with bytes, in the order first booked.
	touched []int
}

// newDeviceBook returns an empty book over the devices x numbers.
func newDeviceBook(x *deviceIndex) *deviceBook {
	return &deviceBook{x: x, val: make([]int64, x.n), gen: make([]uint32, x.n), cur: 1}
}

// reset empties the book.
func (b *deviceBook) reset() {
	b.cur++
	if b.cur == 0 {
		clear(b.gen)
		b.cur = 1
	}
	if len(b.other) > 0 {
		clear(b.other)
	}
	b.touched = b.touched[:0]
}

func (b *deviceBook) get(d int) int64 {
	if k, ok := b.x.bit(d); ok {
		if b.gen[k] != b.cur {
			return 0
		}
		return b.val[k]
	}
	return b.other[d]
}

func (b *deviceBook) set(d int, n int64) {
	if k, ok := b.x.bit(d); ok {
		if b.gen[k] != b.cur {
			b.gen[k] = b.cur
			b.touched = append(b.touched, d)
		}
		b.val[k] = n
		return
	}
	if b.other == nil {
		b.other = map[int]int64{}
	}
	if _, ok := b.other[d]; !ok {
		b.touched = append(b.touched, d)
	}
	b.other[d] = n
}

// largest returns the most bytes of a device, 0 when the book is empty.
func (b *deviceBook) largest() int64 {
	var most int64
	for _, d := range b.touched {
		most = max(most, b.get(d))
	}
	return most
}
