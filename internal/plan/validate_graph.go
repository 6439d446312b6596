package plan

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// This file checks a plan of format 2, whose steps form a graph: each runs
// on a stream of each of its devices, in list order within a stream, and
// waits for the steps its After lists. Any order of the steps that keeps
// those rules may run, so every read of a buffer on a device must be
// ordered after the step that wrote it there, and no two steps may write
// it, or write it while another reads it, unordered: a race, whose result
// depends on the order. The checks follow happens-before with vector
// clocks, one clock per stream of each device, as race detectors do
// (FastTrack): linear in the steps times the streams.

// streamName is the form of a stream's name.
var streamName = regexp.MustCompile(`^[a-z][a-z0-9_]{0,31}$`)

// checkGraphFields checks a step's Stream and After: in a plan of format 1
// neither may be set; in one of format 2 the stream is a name and After
// lists earlier steps, each once. It reports whether they are sound.
func (v *validator) checkGraphFields(i int, s *Step) bool {
	if !v.p.Graph() {
		if s.Stream != "" || len(s.After) > 0 {
			v.stepf(i, "stream and after order the steps of a plan of format %d; this plan has format %d, whose steps run one after another", FormatGraph, v.p.Format)
			return false
		}
		return true
	}
	ok := true
	if s.Stream != "" && !streamName.MatchString(s.Stream) {
		v.stepf(i, "stream %q is not a name: lower-case letters, digits and _, starting with a letter, up to 32", s.Stream)
		ok = false
	}
	for k, a := range s.After {
		switch {
		case a < 0 || a >= i:
			v.stepf(i, "after[%d] is %d, but a step waits only for earlier steps (0 to %d): the list of steps is an order the graph allows", k, a, i-1)
			ok = false
		case slices.Contains(s.After[:k], a):
			v.stepf(i, "after lists step %d twice", a)
			ok = false
		}
	}
	return ok
}

// clock is a vector clock: entry t is the last step of stream t known to
// have completed.
type clock []int32

// join raises c to u, entry by entry.
func (c clock) join(u clock) {
	for t, x := range u {
		c[t] = max(c[t], x)
	}
}

// epoch is one step's place on one stream: the stream's clock when it ran.
type epoch struct {
	stream int
	tick   int32
	step   int
}

// before reports whether e happened before a step whose clock is c.
func (e epoch) before(c clock) bool { return e.tick <= c[e.stream] }

// bufferOn is one buffer on one device.
type bufferOn struct {
	name   string
	device int
}

// access is what the race check knows of a buffer on a device: its last
// write, and the reads since.
type access struct {
	write *epoch
	reads []epoch
}

// graphChecker checks the order of a plan's steps (checkRaces).
type graphChecker struct {
	v *validator
	// streams numbers each (device, stream) pair.
	streams map[streamOn]int
	// now is each stream's clock; done the clocks of the steps that a
	// later step waits for.
	now  []clock
	done map[int]clock
	// buffers is what each buffer on each device has seen.
	buffers map[bufferOn]*access
}

// streamOn is one stream of one device.
type streamOn struct {
	device int
	stream string
}

// checkRaces checks, in a plan of format 2 whose steps are sound, that
// every read of a buffer is ordered after its write and that no two
// accesses of a buffer conflict unordered.
func (v *validator) checkRaces() {
	if !v.p.Graph() || v.probs.Count() > 0 {
		return // the graph's fields, or the steps, have problems of their own
	}
	g := &graphChecker{v: v, streams: map[streamOn]int{}, done: map[int]clock{}, buffers: map[bufferOn]*access{}}
	waited := map[int]bool{}
	for i := range v.p.Steps {
		s := &v.p.Steps[i]
		for _, d := range members(s) {
			key := streamOn{d, s.StreamName()}
			if _, ok := g.streams[key]; !ok {
				g.streams[key] = len(g.streams)
			}
		}
		for _, a := range s.After {
			waited[a] = true
		}
	}
	g.now = make([]clock, len(g.streams))
	for t := range g.now {
		g.now[t] = make(clock, len(g.streams))
	}
	for i := range v.p.Steps {
		c := g.run(i, &v.p.Steps[i])
		if waited[i] {
			g.done[i] = c
		}
	}
}

// run checks step i's accesses against the clock it starts with, then
// advances its streams' clocks past it and returns its clock.
func (g *graphChecker) run(i int, s *Step) clock {
	own := g.ownStreams(s)
	c := make(clock, len(g.now))
	for _, t := range own {
		c.join(g.now[t])
	}
	for _, a := range s.After {
		c.join(g.done[a])
	}
	g.checkReads(i, s, c)
	g.checkWrite(i, s, c)
	for _, t := range own {
		c[t]++
	}
	for _, t := range own {
		copy(g.now[t], c)
	}
	g.record(i, s, c)
	return c
}

// ownStreams numbers the streams step s runs on, one per device.
func (g *graphChecker) ownStreams(s *Step) []int {
	devs := members(s)
	own := make([]int, len(devs))
	for k, d := range devs {
		own[k] = g.streams[streamOn{d, s.StreamName()}]
	}
	return own
}

// checkReads checks that every device that reads a step's operands does
// so after they were written there.
func (g *graphChecker) checkReads(i int, s *Step, c clock) {
	var found races
	for _, name := range s.Operands() {
		for _, d := range graphReaders(s) {
			if a := g.buffers[bufferOn{name, d}]; a != nil && a.write != nil && !a.write.before(c) {
				found.add(raceRead, name, a.write.step, d)
			}
		}
	}
	found.report(g.v, i)
}

// checkWrite checks that every device that writes the step's output does
// so after the buffer's last write and every read since.
func (g *graphChecker) checkWrite(i int, s *Step, c clock) {
	var found races
	for _, d := range writers(s) {
		a := g.buffers[bufferOn{s.Output, d}]
		if a == nil {
			continue
		}
		if a.write != nil && !a.write.before(c) {
			found.add(raceWrite, s.Output, a.write.step, d)
		}
		for _, r := range a.reads {
			if !r.before(c) && r.step != i {
				found.add(raceReadWrite, s.Output, r.step, d)
			}
		}
	}
	found.report(g.v, i)
}

// The kinds of race of one step with an earlier one.
const (
	raceRead      = iota // it reads what the other writes
	raceWrite            // both write
	raceReadWrite        // it writes what the other reads
)

// race is one kind of race of a step with an earlier one over a buffer,
// on some devices.
type race struct {
	kind    int
	buffer  string
	other   int
	devices []int
}

// races are a step's races, in the order found, one per kind, buffer and
// other step.
type races []race

// add notes a race on device d.
func (rs *races) add(kind int, buffer string, other, d int) {
	for k := range *rs {
		if r := &(*rs)[k]; r.kind == kind && r.buffer == buffer && r.other == other {
			r.devices = append(r.devices, d)
			return
		}
	}
	*rs = append(*rs, race{kind, buffer, other, []int{d}})
}

// report adds one problem of step i per race.
func (rs races) report(v *validator, i int) {
	for _, r := range rs {
		who, s := fmt.Sprintf("device %d", r.devices[0]), "s" // the verb's ending
		if len(r.devices) > 1 {
			who, s = "devices "+joinInts(r.devices), ""
		}
		switch r.kind {
		case raceRead:
			v.stepf(i, "%s read%s %q, which step %d writes there, but nothing orders the two: the read may come first (add %d to after)", who, s, r.buffer, r.other, r.other)
		case raceWrite:
			v.stepf(i, "%s write%s %q, which step %d also writes there, and nothing orders the two: a race (add %d to after)", who, s, r.buffer, r.other, r.other)
		default:
			v.stepf(i, "%s write%s %q, which step %d reads there, and nothing orders the two: the read may see either value (add %d to after)", who, s, r.buffer, r.other, r.other)
		}
	}
}

// record notes step i's reads and write at its clock c.
func (g *graphChecker) record(i int, s *Step, c clock) {
	at := func(d int) epoch {
		t := g.streams[streamOn{d, s.StreamName()}]
		return epoch{stream: t, tick: c[t], step: i}
	}
	for _, name := range s.Operands() {
		for _, d := range graphReaders(s) {
			a := g.accessOf(bufferOn{name, d})
			a.reads = append(a.reads, at(d))
		}
	}
	for _, d := range writers(s) {
		a := g.accessOf(bufferOn{s.Output, d})
		e := at(d)
		a.write, a.reads = &e, nil
	}
}

// graphReaders are the devices that may read a step's operands: those
// that must (readers), and for a Gather or Reduce every member, each of
// which contributes its input where it holds one.
func graphReaders(s *Step) []int {
	if s.Type == Gather || s.Type == Reduce {
		return members(s)
	}
	return readers(s)
}

// accessOf returns the record of buffer b, made on first use.
func (g *graphChecker) accessOf(b bufferOn) *access {
	a := g.buffers[b]
	if a == nil {
		a = &access{}
		g.buffers[b] = a
	}
	return a
}

// joinInts renders ds as "0, 1 and 3".
func joinInts(ds []int) string {
	parts := make([]string, len(ds))
	for k, d := range ds {
		parts[k] = strconv.Itoa(d)
	}
	if len(parts) == 1 {
		return parts[0]
	}
	return strings.Join(parts[:len(parts)-1], ", ") + " and " + parts[len(parts)-1]
}
