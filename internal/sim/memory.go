package sim

import (
	"math/bits"
	"slices"

	"github.com/nvcomm/nvcomm/internal/plan"
)

// The memory model behind the guard (docs/simulate.md, "Memory guard").
// Nothing a simulation allocates is freed before the end: at its peak,
// while the last op is checked, it holds
//
//   - the global reference of every tensor, a float64 an element, but for
//     the output of a set, which shares its input's;
//   - every device buffer the plan writes (input shards and step outputs),
//     the largest one per device and buffer name, a float64 an element
//     rounded up to the allocator's size class, and its slot in the map
//     of its name's buffers (most outputs of collectives, and those of
//     Permutes and Slices, of at most 4 KiB come from a slab without
//     rounding: the model may price them up to an eighth high);
//   - the sorted offsets of the shard being enumerated (loading an input
//     or checking an output), an int an element, in one scratch buffer as
//     large as the largest shard that needs them: a tensor without
//     allocation whose schedule merges on the way to an iterated axis
//     (sharder.sortRuns). Every other shard is enumerated run by run,
//     with no buffer that grows with it (the runs kept by sharders that
//     several tensors share are bounded by runBudget, left to
//     RuntimeBytes);
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

// footprint counts p's tensors, buffers and devices. It walks every device
// of every mesh and step once, so it costs what decoding the plan did.
func (w *world) footprint() footprint {
	var f footprint
	written := map[string]*writes{} // by buffer name
	write := func(name string, devices []int, n int64) {
		if wr := written[name]; wr != nil {
			wr.add(devices, n)
		} else {
			written[name] = newWrites(devices, n)
		}
	}
	for _, info := range w.ordered {
		t := info.t
		if !w.isSetOutput(t.Name) { // a set's output shares its input's reference
			f.reference = satAdd(f.reference, satProduct(info.shard.shape))
		}
		// Inputs are enumerated when loaded, every other tensor (an op's
		// output) when checked; only sorted enumeration holds offsets.
		if info.shard.sortRuns {
			f.transient = max(f.transient, info.shard.maxElements())
		}
		if w.isInput(t.Name) {
			write(t.Name, info.mesh.Devices, info.shard.maxElements())
		}
	}
	for _, m := range w.p.Meshes {
		f.listed += int64(len(m.Devices))
	}
	f.steps = int64(len(w.p.Steps))
	for i := range w.p.Steps {
		s := &w.p.Steps[i]
		devs := stepDevices(s)
		write(s.Output, writers(s, devs), int64(max(s.Count.Output, 0)))
		f.members = max(f.members, int64(len(devs)))
		f.listed += int64(len(devs))
	}
	seen := map[int]struct{}{}
	f.names = len(written)
	for _, wr := range written {
		wr.each(func(d int, n int64) {
			f.buffers = satAdd(f.buffers, allocBytes(n))
			f.entries++
			seen[d] = struct{}{}
		})
	}
	f.devices = int64(len(seen))
	return f
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
func newWrites(devices []int, n int64) *writes {
	if increasing(devices) {
		return &writes{devices: devices, n: n}
	}
	wr := &writes{byDev: make(map[int]int64, len(devices))}
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
