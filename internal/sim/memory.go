package sim

import (
	"math/bits"
	"slices"

	"github.com/nvcomm/nvcomm/internal/plan"
)

// The memory model behind the guard (docs/simulate.md, "Memory"). No
// value changes once written, so values are shared wherever they are the
// same ones (vec.go), and nothing a simulation allocates is freed before
// the end: at its peak, while the last op is checked, it holds
//
//   - the reference of every op's output, a float64 an element, but for
//     a set's, which shares its input's; a fusion input's reference is its
//     stream, generated where it is read, and stored (a float64 an
//     element) only when it is small (smallInput) or an op other than a
//     set or a reduction reads it, itself or through sets (storedInputs);
//   - every device buffer the plan writes or loads, and its slot in the
//     map of its name's buffers. A fusion input stored in the reference
//     whose every shard is one run of it (sharder.contiguous) is loaded
//     as slices of the reference's values, and takes nothing more. A buffer that stores values takes a float64 an
//     element rounded up to the allocator's size class (most of at most
//     4 KiB come from a slab without rounding: the model may price them up
//     to an eighth high); the largest one per device and buffer name
//     counts. A buffer shared takes nothing more: a Broadcast's, a
//     SendRecv's and a Copy's outputs are their inputs, a Scatter's and a
//     Slice's chunks share the input's values, and an Allgather's and an
//     Allreduce's members share one output, priced once a team (an
//     Allreduce that shares the reference's own values, combinationKey,
//     is still priced: the model may be one output high). A buffer in
//     pieces (a rope: a fusion input's shard with long rows, the output
//     of a step that puts chunks of at least ropeMin elements together,
//     listsChunks) takes a rope and its pieces, at most as many as the
//     step's chunks times the pieces of its input's buffers (the model
//     follows that bound from step to step, and has a step copy instead
//     when its pieces could average fewer than ropeMin elements: copied).
//     A computing step stores the buffers in pieces it reads, on the
//     devices that read them (machine.stores), and the model prices them
//     so;
//   - the sorted offsets of the shard being enumerated (loading an input
//     or checking an output), an int an element, in one scratch buffer as
//     large as the largest shard that needs them: a tensor without
//     allocation whose schedule merges on the way to an iterated axis
//     (sharder.sortRuns). Every other shard is enumerated run by run,
//     with no buffer that grows with it (the runs kept by sharders that
//     several tensors share are bounded by runBudget, and the blocks a
//     reduction or a check reads pieces into are a few a CPU: both left
//     to RuntimeBytes);
//   - per device, its traffic total and bookkeeping; per team member of
//     the largest step, the collective's scratch; per device a step or
//     mesh lists, the plan's copy of it; per step, the plan's step and
//     its traffic line.
//
// The layer ops add nothing to this list: the reference of an elementwise
// op, a broadcast, a matmul or a linear, and the Matmul and Pointwise
// steps, allocate their output and no scratch that grows with the data (a
// Matmul accumulates in its output row; TestLayerOpsAllocateTheirOutput),
// and a step's output is its count.output, which those steps check.
//
// The per-entry, per-name, per-device and per-member costs were measured
// on linux/amd64 with meshes of up to a million devices (per entry and per
// name again when buffers became maps by name); the element
// costs are exact. TestEstimateWithinPeakRSS (internal/cli) holds the model
// within 25% of the peak resident memory of real runs.
const (
	elemBytes   = 8   // a float64 value or an int offset
	entryBytes  = 70  // one device's slot in a buffer name's map (sized to a power of two)
	nameBytes   = 100 // one buffer name: its map and its entry in the machine
	deviceBytes = 150 // one device's traffic total, report line and index
	memberBytes = 150 // one team member's scratch in the largest step
	listedBytes = 16  // one device id in the plan's meshes and steps
	stepBytes   = 500 // one step of the plan and of the result
)

// RuntimeBytes is what a simulating process holds beside the simulation:
// the Go runtime, the program and its heap before the simulation starts
// (measured: 7 to 12 MiB). The command adds it to [Estimate] when it caps
// the process's memory.
const RuntimeBytes = 12 << 20

// footprint counts what the memory model prices.
type footprint struct {
	reference int64 // elements of the global reference tensors
	buffers   int64 // bytes of the largest buffer per device and name
	transient int64 // elements of the largest shard enumerated by sorting
	entries   int64 // (device, buffer name) pairs
	names     int   // buffer names
	devices   int64 // distinct devices of every mesh and step
	members   int64 // team members and devices of the largest step
	listed    int64 // device ids listed by the plan's meshes and steps
	steps     int64
}

// bytes prices f, saturating instead of overflowing.
func (f footprint) bytes() int64 {
	n := satAdd(satMul(satAdd(f.reference, f.transient), elemBytes), f.buffers)
	n = satAdd(n, satMul(f.entries, entryBytes))
	n = satAdd(n, satMul(int64(f.names), nameBytes))
	n = satAdd(n, satMul(f.devices, deviceBytes))
	n = satAdd(n, satMul(f.members, memberBytes))
	n = satAdd(n, satMul(f.steps, stepBytes))
	return satAdd(n, satMul(f.listed, listedBytes))
}

// allocBytes is what the allocator takes for n elements: small objects
// come in size classes about an eighth apart (8000 bytes take 8192), large
// ones in 8 KiB pages.
func allocBytes(n int64) int64 {
	b := satMul(n, elemBytes)
	switch {
	case b <= 16:
		return 16
	case b > 32<<10:
		return roundUp(b, 8<<10)
	}
	return roundUp(b, int64(1)<<max(4, bits.Len64(uint64(b))-4))
}

// roundUp rounds b up to a multiple of the power of two g, saturating.
func roundUp(b, g int64) int64 {
	return satAdd(b, g-1) &^ (g - 1)
}

// Estimate returns the bytes simulating p is expected to hold at its peak
// (the memory model above), without running it; the process adds
// [RuntimeBytes]. The error says why p cannot be simulated, as [Run]'s.
func Estimate(p *plan.Plan) (int64, error) {
	w, err := newWorld(p)
	if err != nil {
		return 0, err
	}
	return w.footprint().bytes(), nil
}

// footprint counts p's tensors, buffers and devices, and decides which
// steps copy long chunks (copied). It walks every device of every mesh
// and step once, so it costs what decoding the plan did.
func (w *world) footprint() footprint {
	var f footprint
	// A name is a fusion input's or a step's output: the map is sized for
	// them all, and what is known of each name is carved from one block
	// (growing the map and allocating each record were a fifth of the
	// estimate of a long plan).
	most := len(w.p.Tensors) + len(w.p.Steps)
	names := make(map[string]*written, most)
	block := make([]written, 0, most)
	var all []*written // every record, in the order made
	name := func(n string) *written {
		wr := names[n]
		if wr == nil {
			if len(block) == cap(block) {
				block = make([]written, 0, 1024) // never, but for a miscount
			}
			block = append(block, written{})
			wr = &block[len(block)-1]
			names[n] = wr
			all = append(all, wr)
		}
		return wr
	}
	stored := w.storedInputs()
	for _, info := range w.ordered {
		t := info.t
		small := satProduct(info.shard.shape) < int64(smallInput)
		if (info.input && (stored[t.Name] || small)) || (!info.input && !w.isSetOutput(t.Name)) {
			f.reference = satAdd(f.reference, satProduct(info.shard.shape))
		}
		// Inputs are enumerated when loaded, every other tensor (an op's
		// output) when checked; only sorted enumeration holds offsets.
		if info.shard.sortRuns {
			f.transient = max(f.transient, info.shard.maxElements())
		}
		if info.input {
			n, b, pieces := info.shard.maxElements(), allocBytes(info.shard.maxElements()), int64(1)
			long := info.shard.longRows()
			switch {
			case long:
				pieces = info.shard.rowsBound()
				b = ropeBytes(pieces)
			case small && info.shard.contiguous(&w.scratch):
				b = 0 // slices of the stored reference (load)
			}
			name(t.Name).add(info.mesh.Devices, n, b, pieces, long)
		}
	}
	for _, m := range w.p.Meshes {
		f.listed += int64(len(m.Devices))
	}
	f.steps = int64(len(w.p.Steps))
	w.copied = map[*plan.Step]bool{}
	for i := range w.p.Steps {
		s := &w.p.Steps[i]
		devs := stepDevices(s)
		w.price(&f, s, devs, names, name)
		f.members = max(f.members, int64(len(devs)))
		f.listed += int64(len(devs))
	}
	seen := map[int]struct{}{}
	f.names = len(names)
	var last []int // the list of devices last marked seen
	for _, wr := range all {
		if !wr.set {
			continue
		}
		if wr.writes.byDev == nil && last != nil && slices.Equal(wr.writes.devices, last) {
			// Most names are written on the devices of the name before:
			// they are seen already.
			f.buffers = satAdd(f.buffers, satMul(wr.writes.n, int64(len(last))))
			f.entries += int64(len(last))
			continue
		}
		wr.writes.each(func(d int, b int64) {
			f.buffers = satAdd(f.buffers, b)
			f.entries++
			seen[d] = struct{}{}
		})
		if wr.writes.byDev == nil {
			last = wr.writes.devices
		}
	}
	f.devices = int64(len(seen))
	return f
}

// written is what the model knows of one buffer name: its buffers' bytes
// by device, the most elements and pieces one holds, and whether one may
// be a rope.
type written struct {
	writes writes
	set    bool // whether anything is written
	n      int64
	pieces int64 // 1: stored, or a rope of one piece
	rope   bool
}

// add books a buffer of n elements taking b bytes, of at most pieces
// pieces, on every device listed.
func (wr *written) add(devices []int, n, b, pieces int64, rope bool) {
	if !wr.set {
		wr.writes, wr.set = newWrites(devices, b), true
	} else {
		wr.writes.add(devices, b)
	}
	wr.n, wr.pieces, wr.rope = max(wr.n, n), max(wr.pieces, pieces), wr.rope || rope
}

// price books step s's output, on the devices devs it names, by the rules
// of the memory model.
func (w *world) price(f *footprint, s *plan.Step, devs []int, names map[string]*written, name func(string) *written) {
	in := names[s.Input] // nil: no buffer of that name yet
	inPieces, inRope := int64(1), false
	if in != nil {
		inPieces, inRope = in.pieces, in.rope
	}
	n := int64(max(s.Count.Output, 0))
	out := name(s.Output)
	flat := allocBytes(n)
	switch s.Type {
	case plan.Allgather, plan.Allreduce:
		// One output a team, shared by its members.
		asRope := s.Type == plan.Allgather && w.lists(s, inPieces)
		for _, team := range s.Teams {
			b, pieces := flat, int64(1)
			if asRope && listsChunks(s, len(team)) {
				pieces = satMul(int64(len(team)), inPieces)
				b = ropeBytes(pieces)
			}
			f.buffers = satAdd(f.buffers, b)
			out.add(team, n, 0, pieces, pieces > 1 || asRope)
		}
	case plan.AllToAll, plan.AllToAllV, plan.Gather:
		asRope := w.lists(s, inPieces)
		for _, team := range s.Teams {
			b, pieces := flat, int64(1)
			if asRope && listsChunks(s, len(team)) {
				pieces = satMul(int64(len(team)), inPieces)
				b = ropeBytes(pieces)
			}
			out.add(teamWriters(s, team), n, b, pieces, pieces > 1 || asRope)
		}
	case plan.Broadcast, plan.SendRecv, plan.Copy:
		out.add(writers(s, devs), n, 0, inPieces, inRope) // the input itself
	case plan.Scatter:
		out.add(devs, n, sharedBytes(inRope, inPieces), inPieces, inRope)
	case plan.Slice:
		w.priceSlice(s, out, inPieces, inRope)
	case plan.ReduceScatter, plan.Reduce:
		// Stored outputs; the inputs are read a block at a time.
		out.add(writers(s, devs), n, flat, 1, false)
	default:
		// A computation: its output stored, and its operands in pieces
		// stored too (machine.stores) on the devices that read them.
		for _, op := range s.Operands() {
			if x := names[op]; x != nil && x.rope {
				x.add(devs, x.n, allocBytes(x.n), x.pieces, true)
			}
		}
		out.add(writers(s, devs), n, flat, 1, false)
	}
}

// lists decides whether step s, which may put chunks together from inputs
// of at most inPieces pieces, lists them in a rope: when its chunks are
// long (listsChunks, on its largest team) and its output's pieces, at
// most the chunks times inPieces, average at least ropeMin elements. A
// step whose chunks are long but whose pieces could be short is copied.
func (w *world) lists(s *plan.Step, inPieces int64) bool {
	if !slices.ContainsFunc(s.Teams, func(team []int) bool { return listsChunks(s, len(team)) }) {
		return false
	}
	chunks := int64(0)
	for _, team := range s.Teams {
		chunks = max(chunks, int64(len(team)))
	}
	if s.Type == plan.Slice {
		chunks = int64(s.Dims[0]) // rows: listsChunks has checked the dims
	}
	if satMul(satMul(chunks, inPieces), int64(ropeMin)) > int64(max(s.Count.Output, 0)) {
		w.copied[s] = true
		return false
	}
	return true
}

// priceSlice books a Slice's output: rows listed or copied (dims [a, T,
// b]), or each member's chunk, shared with its input when the input holds
// it whole and copied with zeros after it when the input is short.
func (w *world) priceSlice(s *plan.Step, out *written, inPieces int64, inRope bool) {
	n := int64(max(s.Count.Output, 0))
	if len(s.Dims) == 3 {
		asRope := w.lists(s, inPieces)
		for _, team := range s.Teams {
			b, pieces := allocBytes(n), int64(1)
			if asRope && listsChunks(s, len(team)) {
				pieces = satMul(int64(max(s.Dims[0], 0)), inPieces)
				b = ropeBytes(pieces)
			}
			out.add(team, n, b, pieces, pieces > 1 || asRope)
		}
		return
	}
	for _, team := range s.Teams {
		// The first members' chunks are whole in the input: shared.
		whole := len(team)
		if n > 0 {
			whole = int(min(int64(len(team)), int64(max(s.Count.Input, 0))/n))
		}
		if whole > 0 {
			out.add(team[:whole], n, sharedBytes(inRope, inPieces), inPieces, inRope)
		}
		if whole < len(team) {
			out.add(team[whole:], n, allocBytes(n), 1, false)
		}
	}
}

// teamWriters returns the members of team that step s gives an output
// buffer, as writers does for the whole step.
func teamWriters(s *plan.Step, team []int) []int {
	switch {
	case (s.Type == plan.Gather || s.Type == plan.Reduce) && s.Root != nil:
		if slices.Contains(team, *s.Root) {
			return []int{*s.Root}
		}
		return nil
	case s.Type == plan.AllToAllV && s.Count.Output != 0:
		return receivers(&plan.Step{SendCounts: s.SendCounts, Teams: [][]int{team}}, team)
	}
	return team
}

// sharedBytes is what a buffer that shares part of its input's values
// takes: nothing of a stored input's, a rope of at most its pieces of a
// rope's.
func sharedBytes(inRope bool, inPieces int64) int64 {
	if inRope {
		return ropeBytes(inPieces)
	}
	return 0
}

// ropeBytes is what a rope of at most pieces pieces takes: the rope and
// its pieces, 64 bytes each, whose slice grew by doubling.
func ropeBytes(pieces int64) int64 {
	const ropeHeader, pieceBytes = 32, 64
	capacity := int64(1)
	for capacity < pieces && capacity < 1<<40 {
		capacity *= 2
	}
	return satAdd(ropeHeader, allocBytes(satMul(capacity, pieceBytes/elemBytes)))
}

// storedInputs returns the fusion inputs whose reference is stored: those
// that an op other than a set or a reduction reads, itself or through sets
// (world.reference generates the others where they are read).
func (w *world) storedInputs() map[string]bool {
	root := map[string]string{} // a tensor that shares a fusion input's reference → the input
	out := map[string]bool{}
	for _, info := range w.ordered {
		if info.input {
			root[info.t.Name] = info.t.Name
		}
	}
	for _, op := range w.p.Ops {
		names := op.Operands()
		switch {
		case op.Op == "set":
			if r, ok := root[names[0]]; ok {
				root[op.Output] = r
			}
		case isReduceOp(op.Op):
		default:
			for _, name := range names {
				if r, ok := root[name]; ok {
					out[r] = true
				}
			}
		}
	}
	return out
}

// isSetOutput reports whether a set produces the tensor.
func (w *world) isSetOutput(name string) bool {
	i, ok := w.producer[name]
	return ok && w.p.Ops[i].Op == "set"
}

// writes are the largest count written to one buffer name on each device.
// Most names are written once, by one step whose devices are listed in
// increasing order: those keep the step's list and count, and only a name
// written again, or by a list that may repeat a device, gets a map (a map
// a name was most of what the estimate of a long plan allocated).
type writes struct {
	devices []int
	n       int64
	byDev   map[int]int64 // device → largest count; nil while devices holds them
}

// newWrites is a name's first write: n elements on every device listed.
func newWrites(devices []int, n int64) writes {
	if increasing(devices) {
		return writes{devices: devices, n: n}
	}
	wr := writes{byDev: make(map[int]int64, len(devices))}
	wr.add(devices, n)
	return wr
}

// add books n elements on every device listed.
func (wr *writes) add(devices []int, n int64) {
	if wr.byDev == nil {
		wr.byDev = make(map[int]int64, len(wr.devices)+len(devices))
		for _, d := range wr.devices {
			wr.byDev[d] = wr.n
		}
		wr.devices = nil
	}
	for _, d := range devices {
		wr.byDev[d] = max(wr.byDev[d], n)
	}
}

// each calls f with every device written and its largest count.
func (wr *writes) each(f func(d int, n int64)) {
	if wr.byDev == nil {
		for _, d := range wr.devices {
			f(d, wr.n)
		}
		return
	}
	for d, n := range wr.byDev {
		f(d, n)
	}
}

// increasing reports whether ids are strictly increasing (so distinct).
func increasing(ids []int) bool {
	for i := 1; i < len(ids); i++ {
		if ids[i] <= ids[i-1] {
			return false
		}
	}
	return true
}

// stepDevices lists every device a step names, in teams or devices: the
// plan's own list when it has one (not to be written into), a new one
// otherwise.
func stepDevices(s *plan.Step) []int {
	switch {
	case len(s.Teams) == 0:
		return s.Devices
	case len(s.Teams) == 1 && len(s.Devices) == 0:
		return s.Teams[0]
	}
	return slices.Concat(slices.Concat(s.Teams...), s.Devices)
}

// writers returns the devices of devs, s's devices, that s gives an output
// buffer: the root of a Gather or Reduce, the receiver of a SendRecv, the
// members of an AllToAllV that receive a chunk, every device otherwise.
// Counting every member would overestimate a Gather to one of T devices T
// times.
func writers(s *plan.Step, devs []int) []int {
	switch {
	case (s.Type == plan.Gather || s.Type == plan.Reduce) && s.Root != nil:
		return []int{*s.Root}
	case s.Type == plan.AllToAllV && s.Count.Output != 0:
		return receivers(s, devs)
	case s.Type == plan.SendRecv:
		var out []int
		for _, team := range s.Teams {
			if len(team) == 2 {
				out = append(out, team[1])
			}
		}
		return out
	}
	return devs
}

// receivers returns the members of AllToAllV s whose column of send_counts
// has a chunk: the others get no output buffer. On send_counts that do not
// fit the teams (the step fails when run) it returns devs.
func receivers(s *plan.Step, devs []int) []int {
	var out []int
	for _, team := range s.Teams {
		if len(s.SendCounts) != len(team) {
			return devs
		}
		for r, d := range team {
			for _, row := range s.SendCounts {
				if len(row) != len(team) {
					return devs
				}
				if row[r] != 0 {
					out = append(out, d)
					break
				}
			}
		}
	}
	return out
}
