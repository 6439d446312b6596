package difftest

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"slices"
	"strings"

	"github.com/nvcomm/nvcomm/internal/plan"
)

// This file is the search of the brute-force bound test: states (plan
// prefixes), what a step does to one, and the rules that leave out plans
// that cannot matter.

// Limits of the search: plans of at most bfMaxColls collectives, with at
// most bfMaxLocals local steps (Permute, Slice, LocalReduce, Pad) between
// them; the Copy or Unpad into the output is not counted.
const (
	bfMaxColls  = 3
	bfMaxLocals = 2
)

// bfBuf is a buffer: its name, its count, and what each device holds,
// by position (nil: the device does not hold it).
type bfBuf struct {
	name  string
	count int
	data  [][]bfVal
	held  uint64
	// own and poolMask, once computed (ownDone, poolDone): see ownMask
	// and poolMask.
	own, poolMask     uint64
	ownDone, poolDone bool
}

// newBfBuf is an empty buffer on n devices.
func newBfBuf(name string, count, n int) *bfBuf {
	return &bfBuf{name: name, count: count, data: make([][]bfVal, n)}
}

// set gives position p the contents v.
func (b *bfBuf) set(p int, v []bfVal) {
	b.data[p] = v
	b.held |= 1 << p
}

// bfState is a plan prefix: its buffers (the input first), what each
// device has received so far, its last step (the state before it in
// parent), and how many collectives and local steps it used.
type bfState struct {
	bufs          []*bfBuf
	recv          []int64
	parent        *bfState
	move          bfMove
	bytes         *plan.Bytes
	colls, locals int
	// read marks the buffers some step read, by index in bufs.
	read uint64
	// unmet marks the devices of the output's mesh that hold no buffer
	// from which local steps could make their output.
	unmet uint64
	// pending is the output of the last step when it is a local step:
	// the next step must read it. Every plan is such a plan with its
	// local steps moved to just before the step that reads their output
	// (a local step moves no data, and one whose output no step reads can
	// go), so only those are searched.
	pending *bfBuf
}

// initial is the state before any step: the input, on the devices whose
// shard fills the buffer a step reads (an uneven shard must be padded
// first).
func (w *bfWorld) initial() *bfState {
	x := newBfBuf(w.op.Input, w.xCount, len(w.devs))
	s := &bfState{recv: make([]int64, len(w.devs)), unmet: w.consumers}
	for p, v := range w.x {
		if v != nil && len(v) == w.xCount {
			x.set(p, v)
		}
		if v != nil && w.want[p] != nil && w.derivable(p, v) {
			s.unmet &^= 1 << p
		}
	}
	s.bufs = []*bfBuf{x}
	return s
}

// key identifies a state but for what each device has received: the
// budget used, and the buffers' counts, contents on every device, whether
// a step read them and which is pending, in no order of buffers (names
// aside: only contents matter to later steps).
func (s *bfState) key() string {
	sigs := make([]string, len(s.bufs))
	for i, b := range s.bufs {
		sig := binary.AppendUvarint(nil, uint64(b.count))
		pending := byte(0)
		if b == s.pending {
			pending = 1
		}
		sig = append(sig, byte(s.read>>i&1), pending, byte(len(b.data)))
		for p, v := range b.data {
			if b.held&(1<<p) == 0 {
				sig = append(sig, 0)
				continue
			}
			sig = binary.AppendUvarint(sig, uint64(len(v)+1))
			for _, x := range v {
				sig = binary.LittleEndian.AppendUint64(sig, uint64(x))
			}
		}
		sigs[i] = string(sig)
	}
	slices.Sort(sigs)
	return string([]byte{byte(s.colls), byte(s.locals)}) + "|" + strings.Join(sigs, "|")
}

// bfSeen records the states searched: for each key, what each device
// had received in each.
type bfSeen map[string][][]int64

// dominated reports whether a state with key k where each device has
// received recv is no better than one searched: one with the same key in
// which no device had received more. Every plan from it is then a plan
// from that one that receives as much or more. Otherwise it records it.
func (seen bfSeen) dominated(k string, recv []int64) bool {
	for _, r := range seen[k] {
		if bfLE(r, recv) {
			return true
		}
	}
	seen[k] = append(seen[k], recv)
	return false
}

// bfLE reports whether a ≤ b elementwise.
func bfLE(a, b []int64) bool {
	for i := range a {
		if a[i] > b[i] {
			return false
		}
	}
	return true
}

// emit visits the state after move mv, unless a rule shows that no plan
// from it stays within the cap or computes the output: a device receives
// more than the cap, or could not receive what it lacks (affordable); the
// last collective leaves a device of the output's mesh unable to make its
// output, or no one buffer could give such a device what it needs
// (reachable); more buffers wait for a reader than steps are left
// (waiting).
func (w *bfWorld) emit(s *bfState, mv *bfMove, visit func(*bfState)) {
	local := mv.local()
	if (s.colls+1 == w.maxColls && !local || s.colls == w.maxColls) && s.unmet&^w.writers(mv) != 0 {
		return
	}

	c := &bfState{colls: s.colls, locals: s.locals, recv: s.recv, read: s.read, unmet: s.unmet}
	if i := slices.Index(s.bufs, mv.in); i >= 0 {
		c.read |= 1 << i
	}
	var recv [64]int64
	if local {
		c.locals++
	} else if c.colls++; !w.book(c, mv, &c.bytes, &recv) {
		return
	}
	o := w.apply(mv)
	if !local {
		w.checkNew(s, mv, o, &recv)
	}
	c.bufs, c.parent, c.move = append(slices.Clip(s.bufs), o), s, *mv
	if local {
		c.pending = o
	}
	c.unmet &^= w.ownMask(o)
	if c.colls == w.maxColls && c.unmet != 0 || !w.reachable(c) || w.waiting(c) > w.maxColls-c.colls+w.maxLocals-c.locals || !w.affordable(c) {
		return
	}
	visit(c)
}

// book adds what mv makes each device receive to c.recv, and returns the
// step's bytes; false when a device then receives more than the cap.
func (w *bfWorld) book(c *bfState, mv *bfMove, bytes **plan.Bytes, recv *[64]int64) bool {
	sent, most := w.traffic(mv, recv)
	w.checkTraffic(mv, recv)
	for p, r := range c.recv {
		if r+recv[p] > w.cap {
			return false
		}
	}
	c.recv = slices.Clone(c.recv)
	for p := range c.recv {
		c.recv[p] += recv[p]
	}
	*bytes = &plan.Bytes{SentPerDevice: sent, ReceivedPerDevice: most}
	return true
}

// lacking counts the elements of the output at position p that the device
// could not make from everything it holds: no values it holds combine to
// them.
func (w *bfWorld) lacking(s *bfState, p int) int { return w.missing(p, w.heldAt(s, p)) }

// heldAt returns every value device p holds in s, its input shard
// included, in a scratch buffer that the next call reuses.
func (w *bfWorld) heldAt(s *bfState, p int) []bfVal {
	w.scratch = append(w.scratch[:0], w.x[p]...)
	for _, b := range s.bufs {
		w.scratch = append(w.scratch, b.data[p]...)
	}
	return w.scratch
}

// affordable reports whether every device of the output's mesh can still
// receive, within the cap, one element for each element of its output it
// lacks. A step makes a device receive at least one element for each
// value it writes there that the device did not hold (checkNew checks it
// of every step searched), and an element of the output the device lacks
// needs at least one such value: the output's elements are disjoint sets
// of atoms. So no plan from a state that is not affordable stays within
// the cap.
func (w *bfWorld) affordable(s *bfState) bool {
	for m := w.consumers; m != 0; m &= m - 1 {
		p := bits.TrailingZeros64(m)
		if int64(w.lacking(s, p))*w.elem > w.cap-s.recv[p] {
			return false
		}
	}
	return true
}

// checkNew checks, for the collective mv that wrote o from state s, that
// each device received at least one element for each distinct value it
// did not hold before: what affordable relies on.
func (w *bfWorld) checkNew(s *bfState, mv *bfMove, o *bfBuf, recv *[64]int64) {
	for m := o.held; m != 0; m &= m - 1 {
		p := bits.TrailingZeros64(m)
		if int64(len(o.data[p]))*w.elem <= recv[p] {
			continue // it received as much as it holds now
		}
		old := w.heldAt(s, p)
		var fresh []bfVal
		for _, v := range o.data[p] {
			if !slices.Contains(old, v) && !slices.Contains(fresh, v) {
				fresh = append(fresh, v)
			}
		}
		if int64(len(fresh))*w.elem > recv[p] && len(w.trafficErrs) < 5 {
			w.trafficErrs = append(w.trafficErrs, fmt.Sprintf("a %s writes %d values that device %d did not hold, but it receives %d bytes", mv.typ, len(fresh), w.devs[p], recv[p]))
		}
	}
}

// reachable reports whether every device of the output's mesh that cannot
// make its output from what it holds could from what the devices that
// hold some one buffer hold together: every step reads one buffer, so the
// buffer a device makes its output from descends from one buffer of s
// (the input's shards, for a Pad).
func (w *bfWorld) reachable(s *bfState) bool {
	if s.unmet == 0 {
		return true
	}
	if w.maxColls-s.colls == 1 {
		// One collective is left: it reads one buffer (the pending one,
		// if any), and every such device makes its output from what it
		// writes.
		if s.pending != nil {
			return s.unmet&^w.poolMask(s.pending) == 0
		}
		return s.unmet&^w.xMask == 0 || slices.ContainsFunc(s.bufs, func(b *bfBuf) bool { return s.unmet&^w.poolMask(b) == 0 })
	}
	some := w.xMask
	for _, b := range s.bufs {
		some |= w.poolMask(b)
	}
	return s.unmet&^some == 0
}

// poolMask returns the devices of the output's mesh that could make their
// output from what the devices that hold b hold together, computed once.
func (w *bfWorld) poolMask(b *bfBuf) uint64 {
	if !b.poolDone {
		b.poolMask, b.poolDone = w.deriveMask(slices.Concat(b.data...)), true
	}
	return b.poolMask
}

// deriveMask returns the devices of the output's mesh that could make their
// output from the elements of v.
func (w *bfWorld) deriveMask(v []bfVal) uint64 {
	var mask uint64
	for m := w.consumers; m != 0; m &= m - 1 {
		if p := bits.TrailingZeros64(m); w.derivable(p, v) {
			mask |= 1 << p
		}
	}
	return mask
}

// waiting counts the buffers that steps wrote, that no step read, and
// from which no device of the output's mesh could make its output: a later
// step must read each, or the step that wrote it could go.
func (w *bfWorld) waiting(s *bfState) int {
	n := 0
	for i, b := range s.bufs[1:] {
		if s.read&(1<<(i+1)) == 0 && w.ownMask(b) == 0 {
			n++
		}
	}
	return n
}

// ownMask returns the devices of the output's mesh that could make their
// output from what they hold of b, computed once.
func (w *bfWorld) ownMask(b *bfBuf) uint64 {
	if !b.ownDone {
		for m := b.held & w.consumers; m != 0; m &= m - 1 {
			if p := bits.TrailingZeros64(m); w.derivable(p, b.data[p]) {
				b.own |= 1 << p
			}
		}
		b.ownDone = true
	}
	return b.own
}

// steps returns the steps of s, in order.
func (w *bfWorld) steps(s *bfState) []plan.Step {
	if s.parent == nil {
		return nil
	}
	st := w.build(&s.move)
	st.Bytes = s.bytes
	return append(w.steps(s.parent), st)
}

// finish returns the local steps that write the output from s: on every
// device of the output's mesh, a Copy (or nvcomm's Unpad, when the output
// is uneven) of a buffer that holds what the output must (the pending
// buffer where it does); nil when some device holds none, or the pending
// buffer is not read.
func (w *bfWorld) finish(s *bfState) []plan.Step {
	from := map[*bfBuf][]int{}
	for m := w.consumers; m != 0; m &= m - 1 {
		p := bits.TrailingZeros64(m)
		b := w.holding(s, p)
		if b == nil {
			return nil
		}
		from[b] = append(from[b], w.devs[p])
	}
	if s.pending != nil && from[s.pending] == nil {
		return nil // the same plan without its last step is searched
	}
	return w.finishSteps(s, from)
}

// holding returns a buffer of s that holds at position p what the output
// must (the pending one if it does, else the first), or nil.
func (w *bfWorld) holding(s *bfState, p int) *bfBuf {
	for _, b := range append([]*bfBuf{s.pending}, s.bufs...) {
		if b != nil && b.data[p] != nil && w.matches(p, b.data[p]) {
			return b
		}
	}
	return nil
}

// finishSteps writes the output from the buffers in from, each on its
// devices, in the order of s's buffers.
func (w *bfWorld) finishSteps(s *bfState, from map[*bfBuf][]int) []plan.Step {
	var out []plan.Step
	for _, b := range s.bufs {
		if devs := from[b]; devs != nil {
			out = append(out, w.finishStep(b, devs))
		}
	}
	return out
}

// finishStep writes the output from in on devs: a Copy, or an Unpad with
// nvcomm's dims and each device's box.
func (w *bfWorld) finishStep(in *bfBuf, devs []int) plan.Step {
	st := plan.Step{Expr: w.expr, Kind: plan.KindLocal, Type: plan.Copy, Devices: devs, Input: in.name, Output: w.op.Output,
		Count: plan.Count{Input: in.count, Output: in.count}}
	if w.unpad == nil {
		return st
	}
	st.Type, st.Count.Output, st.Dims = plan.Unpad, w.unpad.Count.Output, w.unpad.Dims
	for _, d := range devs {
		st.Valid = append(st.Valid, w.unpad.Valid[slices.Index(w.unpad.Devices, d)])
	}
	return st
}

// nearMiss returns the steps that write the output from the buffers of s
// closest to it (most elements right), for a plan the model calls wrong;
// nil when some device of the output's mesh holds no buffer of the
// output's count.
func (w *bfWorld) nearMiss(s *bfState) []plan.Step {
	from := map[*bfBuf][]int{}
	for m := w.consumers; m != 0; m &= m - 1 {
		p := bits.TrailingZeros64(m)
		best, score := (*bfBuf)(nil), -1
		for _, b := range s.bufs {
			if v := b.data[p]; v != nil && b.count == w.finCount && w.score(p, v) > score {
				best, score = b, w.score(p, v)
			}
		}
		if best == nil {
			return nil
		}
		from[best] = append(from[best], w.devs[p])
	}
	return w.finishSteps(s, from)
}

// score counts the elements of v that are what the output at position p
// needs.
func (w *bfWorld) score(p int, v []bfVal) int {
	n := 0
	for i := range v {
		if !w.care[p][i] || v[i] == w.want[p][i] {
			n++
		}
	}
	return n
}
