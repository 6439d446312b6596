package sim

import (
	"math"
	"slices"

	"github.com/nvcomm/nvcomm/internal/plan"
)

// machine is the set of virtual devices: per buffer name, every device's
// flat buffer of that name. A buffer exists once something has written it.
type machine struct {
	// Buffers by name, then by device: a step looks up each name it
	// reads or writes once, then its devices in a small map. One map
	// keyed by (device, name) held millions of entries in a plan of 100k
	// ops, and every access missed the cache; a map per
	// device cost about 400 bytes a device, which dominated meshes of a
	// million devices.
	bufs map[string]buffers
	// flows and call are reused by every step: a map and a call a step
	// were most of what a long plan of small steps allocated besides its
	// buffers.
	flows map[int]flow
	call  call
	slab  slab
	// copied are the steps that put long chunks together but copy them
	// all the same: the memory model found that their ropes could list
	// too many pieces (listsChunks).
	copied map[*plan.Step]bool
	// reduced are the reference's reductions by the values they read
	// (world.reference).
	reduced map[string]vec
}

// buffers are one name's buffers, by device.
type buffers map[int]vec

// flow is what one device sends and receives in one step, in bytes.
type flow struct{ sent, recv int64 }

// newMachine returns a machine with room for the given number of buffer
// names: growing the map would briefly hold it twice.
func newMachine(names int) *machine {
	return &machine{bufs: make(map[string]buffers, names)}
}

// named returns the buffers called name; none is an empty map.
func (m *machine) named(name string) buffers { return m.bufs[name] }

// output returns the buffers called name for writing, with room for n
// devices when there are none yet.
func (m *machine) output(name string, n int) buffers {
	b, ok := m.bufs[name]
	if !ok {
		b = make(buffers, n)
		m.bufs[name] = b
	}
	return b
}

// exec runs one step with elements of size bytes and returns each taking
// part device's traffic, in a map the next step reuses.
func (m *machine) exec(s *plan.Step, size int64) (map[int]flow, error) {
	if err := checkOperands(s); err != nil {
		return nil, err
	}
	if f, ok := collectives[s.Type]; ok {
		if s.Kind != plan.KindCollective {
			return nil, stepError(s, "kind is %q, a %s is a %s step", s.Kind, s.Type, plan.KindCollective)
		}
		return m.collective(s, size, f)
	}
	if s.Kind != plan.KindLocal {
		return nil, stepError(s, "kind is %q, expected %s for a %s step", s.Kind, plan.KindLocal, s.Type)
	}
	return m.local(s)
}

// collective runs s team by team.
func (m *machine) collective(s *plan.Step, size int64, f func(*call) error) (map[int]flow, error) {
	if err := checkTeams(s); err != nil {
		return nil, err
	}
	flows := m.newFlows()
	in := m.named(s.Input)
	var out buffers
	for _, team := range s.Teams {
		c := m.newCall(s, team, size, in)
		if err := f(c); err != nil {
			return nil, err
		}
		if out == nil {
			out = m.output(s.Output, len(s.Teams)*len(team))
		}
		for r, d := range team {
			if c.out[r].present() {
				out[d] = c.out[r]
			}
			fl := flows[d]
			flows[d] = flow{fl.sent + c.sent[r], fl.recv + c.recv[r]}
		}
	}
	return flows, nil
}

// newCall prepares team's part of s, whose members read buffers in, in
// the machine's call: the collective has copied what it needs of the
// previous team's (its outputs, its traffic) by then.
func (m *machine) newCall(s *plan.Step, team []int, size int64, in buffers) *call {
	t := len(team)
	c := &m.call
	c.s, c.team, c.size, c.slab = s, team, size, &m.slab
	c.rope, c.reduced = m.lists(s, t), m.reduced
	c.in, c.held, c.out = resize(c.in, t), resize(c.held, t), resize(c.out, t)
	c.sent, c.recv = resize(c.sent, t), resize(c.recv, t)
	for r, d := range team {
		c.in[r], c.held[r] = in[d]
	}
	return c
}

// lists reports whether s, on a team of t members, lists the chunks it
// puts together in a rope.
func (m *machine) lists(s *plan.Step, t int) bool {
	return listsChunks(s, t) && !m.copied[s]
}

// listsChunks reports whether a step that puts chunks together into one
// output (an Allgather, a Gather, an AllToAll, an AllToAllV, a Slice of
// rows) lists them in a rope on a team of t members: when every chunk is
// at least ropeMin elements. Shorter chunks are copied. The memory model
// decides it as the steps run (footprint), from the step alone.
func listsChunks(s *plan.Step, t int) bool {
	switch s.Type {
	case plan.Allgather, plan.Gather:
		return s.Count.Input >= ropeMin
	case plan.AllToAll:
		return t > 0 && s.Count.Input/t >= ropeMin
	case plan.AllToAllV:
		least := 0
		for _, row := range s.SendCounts {
			for _, n := range row {
				if n > 0 && (least == 0 || n < least) {
					least = n
				}
			}
		}
		return least >= ropeMin
	case plan.Slice:
		return len(s.Dims) == 3 && s.Dims[2] >= ropeMin
	}
	return false
}

// resize returns s with n zero elements, reusing its array when it has
// room.
func resize[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	s = s[:n]
	clear(s)
	return s
}

// newFlows returns the machine's traffic map, emptied for the next step.
func (m *machine) newFlows() map[int]flow {
	if m.flows == nil {
		m.flows = map[int]flow{}
	}
	clear(m.flows)
	return m.flows
}

// checkTeams checks the team structure: non-empty teams, each device in at
// most one team once (a SendRecv [x, x] copies locally), and for rooted
// types one team that holds the root (a SendRecv's root is its sender; a
// SendRecv of several pairs has none).
func checkTeams(s *plan.Step) error {
	if len(s.Teams) == 0 {
		return stepError(s, "a collective needs at least one team")
	}
	seen := map[int]bool{}
	if s.Type == plan.SendRecv && len(s.Teams) > 1 {
		return checkPairs(s)
	}
	for _, team := range s.Teams {
		if len(team) == 0 {
			return stepError(s, "empty team")
		}
		members := team
		if s.Type == plan.SendRecv {
			if len(team) != 2 {
				return stepError(s, "team %v must be [sender, receiver]", team)
			}
			if team[0] == team[1] {
				members = team[:1]
			}
		}
		for _, d := range members {
			if seen[d] {
				return stepError(s, "device %d appears more than once in teams %v", d, s.Teams)
			}
			seen[d] = true
		}
	}
	return checkRoot(s)
}

// checkPairs checks a SendRecv of several pairs: each team [sender,
// receiver] of two devices, each device sending at most once and
// receiving at most once, no root, and, where a device does both, an
// output other than the input.
func checkPairs(s *plan.Step) error {
	sends, receives := map[int]bool{}, map[int]bool{}
	for _, team := range s.Teams {
		if len(team) != 2 || team[0] == team[1] {
			return stepError(s, "team %v must be [sender, receiver], two devices", team)
		}
		if sends[team[0]] {
			return stepError(s, "device %d sends more than once in teams %v", team[0], s.Teams)
		}
		if receives[team[1]] {
			return stepError(s, "device %d receives more than once in teams %v", team[1], s.Teams)
		}
		sends[team[0]], receives[team[1]] = true, true
	}
	for d := range receives {
		if sends[d] && s.Input == s.Output {
			return stepError(s, "device %d sends and receives buffer %q in one step", d, s.Input)
		}
	}
	return checkRoot(s)
}

func checkRoot(s *plan.Step) error {
	if !plan.IsRooted(s.Type) {
		return nil
	}
	if s.Type == plan.SendRecv && len(s.Teams) > 1 {
		// Several pairs at once, each team's first member sending.
		if s.Root != nil {
			return stepError(s, "a SendRecv of %d pairs has no root (each team's first device sends), got %d", len(s.Teams), *s.Root)
		}
		return nil
	}
	if len(s.Teams) != 1 {
		return stepError(s, "a rooted collective has exactly one team, got %d", len(s.Teams))
	}
	if s.Root == nil || !slices.Contains(s.Teams[0], *s.Root) {
		return stepError(s, "root must be a device of team %v", s.Teams[0])
	}
	if s.Type == plan.SendRecv && *s.Root != s.Teams[0][0] {
		return stepError(s, "root %d must be the sender, the first device of team %v", *s.Root, s.Teams[0])
	}
	return nil
}

// local runs a local step on each of its devices.
func (m *machine) local(s *plan.Step) (map[int]flow, error) {
	switch s.Type {
	case plan.Slice:
		return m.slice(s)
	case plan.Pad, plan.Unpad:
		return m.pad(s)
	case plan.Copy:
		return m.copyLocal(s)
	}
	c, err := localStep(s, &m.slab)
	if err != nil {
		return nil, err
	}
	if len(s.Devices) == 0 {
		return nil, stepError(s, "a local step needs at least one device")
	}
	names := s.Operands()
	srcs := make([]buffers, len(names))
	for k, name := range names {
		srcs[k] = m.named(name)
	}
	out := m.output(s.Output, len(s.Devices))
	flows := m.newFlows()
	flat := make([][]float64, len(names)) // every device's, in turn
	ins := make([]vec, len(names))
	for k, d := range s.Devices {
		if _, dup := flows[d]; dup {
			return nil, stepError(s, "device %d is listed twice", d)
		}
		flows[d] = flow{}
		ins, err := inputs(ins, s, d, names, srcs, c.sizes)
		if err != nil {
			return nil, err
		}
		for k, in := range ins {
			flat[k] = stores(srcs[k], d, in)
		}
		out[d] = stored(c.f(k, flat))
	}
	return flows, nil
}

// stores returns the values of in, device d's buffer of bufs, stored: a
// computation reads its inputs in an order of its own. A buffer in pieces
// is copied out of them once and replaced by the copy (the same values),
// so that the next computation that reads it reads the copy (the memory
// model prices it so).
func stores(bufs buffers, d int, in vec) []float64 {
	if in.rope == nil {
		return in.vals
	}
	vals := in.flat()
	bufs[d] = stored(vals)
	return vals
}

// copyLocal runs a Copy: each device's output is its input, shared (the
// values never change).
func (m *machine) copyLocal(s *plan.Step) (map[int]flow, error) {
	if s.Count.Output != s.Count.Input {
		return nil, stepError(s, "count.output %d must equal count.input %d", s.Count.Output, s.Count.Input)
	}
	if len(s.Devices) == 0 {
		return nil, stepError(s, "a local step needs at least one device")
	}
	src, out := m.named(s.Input), m.output(s.Output, len(s.Devices))
	flows := m.newFlows()
	names, srcs, sizes, ins := []string{s.Input}, []buffers{src}, []inputSize{counted(s)}, make([]vec, 1)
	for _, d := range s.Devices {
		if _, dup := flows[d]; dup {
			return nil, stepError(s, "device %d is listed twice", d)
		}
		flows[d] = flow{}
		ins, err := inputs(ins, s, d, names, srcs, sizes)
		if err != nil {
			return nil, err
		}
		out[d] = ins[0]
	}
	return flows, nil
}

// inputs returns device d's buffers of s's operands names, found in srcs,
// in order, in ins (as long as names, reused for every device), each
// checked against its size: a device must hold every input of a local
// step.
func inputs(ins []vec, s *plan.Step, d int, names []string, srcs []buffers, sizes []inputSize) ([]vec, error) {
	for k, name := range names {
		in, ok := srcs[k][d]
		if !ok {
			return nil, stepError(s, "device %d has no buffer %q", d, name)
		}
		if in.len() != sizes[k].n {
			return nil, stepError(s, "buffer %q on device %d has %d elements, %s", name, d, in.len(), sizes[k].describe())
		}
		ins[k] = in
	}
	return ins, nil
}

// checkOperands checks how s names the buffers it reads: inputs only for a
// step that may read several (Matmul, Pointwise, Concat), and never beside
// input.
// Every other step reads input alone and would silently ignore inputs.
func checkOperands(s *plan.Step) error {
	switch {
	case len(s.Inputs) == 0:
		return nil
	case s.Input != "":
		return stepError(s, "input %q and inputs %q are both set; a step names what it reads in one of them", s.Input, s.Inputs)
	case s.Type != plan.Matmul && s.Type != plan.Pointwise && s.Type != plan.Lookup && s.Type != plan.ScatterAdd && s.Type != plan.Concat:
		return stepError(s, "reads one buffer, named by input, not inputs %q", s.Inputs)
	}
	return nil
}

// slice runs a Slice: each member of a team of T keeps chunk rank of its own
// input split into T equal chunks (with dims [a, T, b], index rank of the
// middle dim of its input viewed so); nothing moves between devices.
func (m *machine) slice(s *plan.Step) (map[int]flow, error) {
	if len(s.Teams) == 0 || len(s.Devices) > 0 {
		return nil, stepError(s, "a Slice takes teams, not devices")
	}
	if err := checkTeams(s); err != nil {
		return nil, err
	}
	flows := m.newFlows()
	src, out := m.named(s.Input), m.output(s.Output, len(s.Teams)*len(s.Teams[0]))
	for _, team := range s.Teams {
		n := len(team)
		if err := sliceCount(s, n); err != nil {
			return nil, err
		}
		if len(s.Dims) > 0 && (len(s.Dims) != 3 || s.Dims[0] < 1 || s.Dims[2] < 1 || s.Dims[1] != n || s.Count.Output%s.Dims[2] != 0 || s.Count.Output/s.Dims[2] != s.Dims[0]) {
			return nil, stepError(s, "dims %v are not [outer, %d, inner] with outer·inner = count.output %d", s.Dims, n, s.Count.Output)
		}
		for r, d := range team {
			flows[d] = flow{}
			in, ok := src[d]
			if !ok {
				return nil, stepError(s, "device %d has no buffer %q", d, s.Input)
			}
			if in.len() != s.Count.Input {
				return nil, stepError(s, "buffer %q on device %d has %d elements, count.input is %d", s.Input, d, in.len(), s.Count.Input)
			}
			out[d] = keep(in, r, n, s, &m.slab, m.lists(s, n))
		}
	}
	return flows, nil
}

// sliceCount checks a Slice's counts for a team of n: a strided Slice reads
// exactly n chunks of count.output elements, a plain one 1 to n of them,
// the last short or missing (docs/plan.md).
func sliceCount(s *plan.Step, n int) error {
	in, m := s.Count.Input, s.Count.Output
	if len(s.Dims) > 0 && in != n*m {
		return stepError(s, "count.input %d must be the team size %d times count.output %d", in, n, m)
	}
	if len(s.Dims) == 0 && (in < 1 || in > n*m) {
		return stepError(s, "count.input %d must be 1 to the team size %d times count.output %d", in, n, m)
	}
	return nil
}

// pad runs a Pad or an Unpad: each device's real box (its entry of Valid)
// sits at the low corner of a row-major array of shape Dims; a Pad writes
// Fill into the rest, an Unpad drops it.
func (m *machine) pad(s *plan.Step) (map[int]flow, error) {
	fill, err := padFill(s)
	if err != nil {
		return nil, err
	}
	if len(s.Valid) != len(s.Devices) || len(s.Devices) == 0 {
		return nil, stepError(s, "valid has %d boxes for %d devices", len(s.Valid), len(s.Devices))
	}
	full := 1
	for _, d := range s.Dims {
		if d < 0 {
			return nil, stepError(s, "dims %v are negative", s.Dims)
		}
		full *= d
	}
	padded, real := s.Count.Output, s.Count.Input // a Pad's count; an Unpad's is the other way
	if s.Type == plan.Unpad {
		padded, real = real, padded
	}
	if padded != full {
		return nil, stepError(s, "the padded count %d must be the product %d of dims %v", padded, full, s.Dims)
	}
	hull := make([]int, len(s.Dims))
	flows := m.newFlows()
	src, out := m.named(s.Input), m.output(s.Output, len(s.Devices))
	for k, d := range s.Devices {
		box := s.Valid[k]
		if len(box) != len(s.Dims) {
			return nil, stepError(s, "valid box %v of device %d does not match dims %v", box, d, s.Dims)
		}
		inBox := 1
		for i, v := range box {
			if v < 0 || v > s.Dims[i] {
				return nil, stepError(s, "valid box %v of device %d exceeds dims %v", box, d, s.Dims)
			}
			inBox *= v
		}
		for i, v := range box {
			hull[i] = max(hull[i], v)
		}
		in, ok := src[d]
		if !ok {
			return nil, stepError(s, "device %d has no buffer %q", d, s.Input)
		}
		want := full
		if s.Type == plan.Pad {
			want = inBox
		}
		if in.len() != want {
			return nil, stepError(s, "buffer %q on device %d has %d elements, want %d", s.Input, d, in.len(), want)
		}
		flows[d] = flow{}
		out[d] = stored(padBox(stores(src, d, in), s.Dims, box, s.Type == plan.Pad, fill))
	}
	if most := product(hull); real != most {
		return nil, stepError(s, "the unpadded count %d must be %d, the box that holds every device's real box", real, most)
	}
	return flows, nil
}

// padFill decodes a Pad's fill (an Unpad has none).
func padFill(s *plan.Step) (float64, error) {
	if s.Type == plan.Unpad {
		if s.Fill != nil {
			return 0, stepError(s, "an Unpad takes no fill")
		}
		return 0, nil
	}
	if s.Fill == nil {
		return 0, stepError(s, "a Pad needs a fill")
	}
	switch *s.Fill {
	case "0":
		return 0, nil
	case "1":
		return 1, nil
	case "-inf":
		return math.Inf(-1), nil
	case "inf":
		return math.Inf(1), nil
	}
	return 0, stepError(s, "fill %q is not 0, 1, -inf or inf", *s.Fill)
}

// padBox copies between a box at the low corner of a dims array and a
// compact box array: into the padded array (pad) or out of it.
func padBox(in []float64, dims, box []int, pad bool, fill float64) []float64 {
	size := func(shape []int) int {
		n := 1
		for _, e := range shape {
			n *= e
		}
		return n
	}
	var out []float64
	if pad {
		out = make([]float64, size(dims))
		for i := range out {
			out[i] = fill
		}
	} else {
		out = make([]float64, size(box))
	}
	idx := make([]int, len(box))
	for j := range size(box) {
		r, flat := j, 0
		for k := len(box) - 1; k >= 0; k-- {
			idx[k] = r % box[k]
			r /= box[k]
		}
		for k := range dims {
			flat = flat*dims[k] + idx[k]
		}
		if pad {
			out[flat] = in[j]
		} else {
			out[j] = in[flat]
		}
	}
	return out
}

// keep is the part of in that rank r of a team of n keeps in Slice s:
// its chunk shared with the input when the input holds it whole, its rows
// listed in a rope when asRope, else copied into a buffer of slab.
func keep(in vec, r, n int, s *plan.Step, slab *slab, asRope bool) vec {
	if len(s.Dims) != 3 {
		m, lo := s.Count.Output, r*s.Count.Output
		if lo+m <= in.len() {
			return in.slice(lo, lo+m)
		}
		// A short input: the rank's chunk is what is left of it, then zeros.
		out := slab.make(m)
		if lo < in.len() {
			in.read(lo, out[:in.len()-lo])
		}
		return stored(out)
	}
	a, b := s.Dims[0], s.Dims[2]
	if asRope || in.rope != nil {
		rows := make([]span, a)
		for i := range rows {
			lo := (i*n + r) * b
			rows[i] = span{in, lo, lo + b}
		}
		return join(rows, asRope, slab)
	}
	out := slab.make(a * b)[:0]
	for i := range a {
		out = appendRow(out, in.vals, (i*n+r)*b, b, 1)
	}
	return stored(out)
}
