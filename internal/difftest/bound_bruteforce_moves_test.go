package difftest

import (
	"fmt"
	"math/bits"
	"slices"

	"github.com/nvcomm/nvcomm/internal/plan"
)

// This file is the steps of the brute-force bound test: every step a state
// can take next, what it writes in the symbolic model (docs/plan.md, "Step
// semantics"), the plan step it is, and what it makes each device receive.
// The AllToAllVs are in bound_bruteforce_exchange_test.go.

// bfMove is a step being considered, with what the search needs to judge
// it before it builds the step.
type bfMove struct {
	typ      string
	in       *bfBuf
	out      string
	countOut int
	ts       *bfTeamSet // teams of a collective or a Slice
	root     int        // the root's rank in a rooted step's team
	v        *bfView    // a Permute's or LocalReduce's view
	// outer is, for a strided Slice (dims [outer, T, count/outer/T]),
	// the outer extent; 0 for a Slice of a contiguous chunk.
	outer int
	// ex is an AllToAllV's teams and send counts, in chunks of chunk
	// elements.
	ex    *bfExchange
	chunk int
}

// local reports whether mv is a local step.
func (mv *bfMove) local() bool {
	switch mv.typ {
	case plan.Permute, plan.LocalReduce, plan.Slice, plan.Pad:
		return true
	}
	return false
}

// expand calls visit with every state one step after s: when the last
// step is a local one, only those that read its output. AllToAllVs
// (exchanges) come last.
func (w *bfWorld) expand(s *bfState, visit func(*bfState)) {
	out := fmt.Sprintf("%s/bf%d", w.op.Output, s.colls+s.locals)
	bufs := s.bufs
	if s.pending != nil {
		bufs = []*bfBuf{s.pending}
	}
	try := func(mv bfMove) { w.emit(s, &mv, visit) }
	lim := bfLimit{rem: make([]int64, len(w.devs))}
	for p, r := range s.recv {
		lim.rem[p] = w.cap - r
	}
	if s.colls+1 == w.maxColls {
		lim.need = s.unmet
	}
	for _, b := range bufs {
		if s.colls < w.maxColls {
			w.collectives(b, out, lim, try)
		}
		if s.locals < w.maxLocals {
			w.locals(b, out, try)
		}
	}
	if w.pad != nil && s.pending == nil && s.locals < w.maxLocals && !w.didPad(s) {
		x := newBfBuf(w.pad.Input, w.pad.Count.Input, len(w.devs)) // every shard, even or not
		for _, d := range w.pad.Devices {
			x.set(w.pos[d], w.x[w.pos[d]])
		}
		try(bfMove{typ: plan.Pad, in: x, out: w.pad.Output, countOut: w.pad.Count.Output})
	}
	if s.colls < w.maxColls {
		for _, b := range bufs {
			w.exchanges(s, b, out, lim, try)
		}
	}
}

// didPad reports whether s has padded the input.
func (w *bfWorld) didPad(s *bfState) bool {
	return slices.ContainsFunc(s.bufs, func(b *bfBuf) bool { return b.name == w.pad.Output })
}

// bfLimit is what a collective must do to be worth building: write every
// device of need, and make no device receive more than its room (rem, by
// position, the cap less what it has received).
type bfLimit struct {
	need uint64
	rem  []int64
}

// room returns the mask of the devices that can still receive x bytes.
func (l bfLimit) room(x int64) uint64 {
	var m uint64
	for p, r := range l.rem {
		if r >= x {
			m |= 1 << p
		}
	}
	return m
}

// collectives visits every collective that reads b within lim: over every
// set of teams whose members hold what the type reads, from every root.
// Those that would make a device receive more than its room are left out
// here, before they are built (emit would leave them out too).
func (w *bfWorld) collectives(b *bfBuf, out string, lim bfLimit, try func(bfMove)) {
	n, e, teams := int64(b.count), w.elem, w.teams
	for i := range teams.equal {
		ts := &teams.equal[i]
		if ts.mask&^b.held != 0 || lim.need&^ts.mask != 0 {
			continue
		}
		t := int64(len(ts.teams[0]))
		if ts.mask&^lim.room((t-1)*n*e) == 0 {
			try(bfMove{typ: plan.Allgather, in: b, out: out, countOut: int(t * n), ts: ts})
		}
		if n%t != 0 || ts.mask&^lim.room((t-1)*n*e/t) != 0 {
			continue
		}
		try(bfMove{typ: plan.AllToAll, in: b, out: out, countOut: int(n), ts: ts})
		if w.reduceOp != nil {
			try(bfMove{typ: plan.ReduceScatter, in: b, out: out, countOut: int(n / t), ts: ts})
		}
	}
	for i := range teams.unordered {
		if ts := &teams.unordered[i]; w.reduceOp != nil && ts.mask&^b.held == 0 && lim.need&^ts.mask == 0 {
			try(bfMove{typ: plan.Allreduce, in: b, out: out, countOut: int(n), ts: ts})
		}
	}
	for i := range teams.ordered {
		if lim.need&^teams.ordered[i].mask == 0 {
			w.orderedRooted(b, out, &teams.ordered[i], lim, try)
		}
	}
	for i := range teams.sorted {
		if lim.need&^teams.sorted[i].mask == 0 {
			w.sortedRooted(b, out, &teams.sorted[i], lim, try)
		}
	}
}

// orderedRooted visits the rooted collectives over one team whose result
// or bytes depend on its order: a Scatter from every member that holds b,
// a Gather to every member when the others all hold b, and a Reduce (see
// reduceChain).
func (w *bfWorld) orderedRooted(b *bfBuf, out string, ts *bfTeamSet, lim bfLimit, try func(bfMove)) {
	n, pos := b.count, ts.pos[0]
	w.reduceChain(b, out, ts, lim, try)
	for r, p := range pos {
		bit := uint64(1) << p
		if b.held&bit != 0 && n%len(pos) == 0 && ts.mask&^bit&^lim.room(int64(n/len(pos))*w.elem) == 0 {
			try(bfMove{typ: plan.Scatter, in: b, out: out, countOut: n / len(pos), ts: ts, root: r})
		}
		others := int64(bits.OnesCount64(ts.mask & b.held &^ bit))
		if ts.mask&^(b.held|bit) == 0 && lim.room(others*int64(n)*w.elem)&bit != 0 {
			senders := bits.OnesCount64(ts.mask & b.held)
			try(bfMove{typ: plan.Gather, in: b, out: out, countOut: senders * n, ts: ts, root: r})
		}
	}
}

// reduceChain visits a Reduce over ts when every member but the root
// holds b, for every root and member order: its chain (plan.Traffic)
// makes every member but the one after the root, the chain's head,
// receive one buffer, and the root holds the result, so the root and the
// head decide all it does. Of the orders of a team, the one of each root
// and head that the search tries is [head, the others ascending, root];
// every other order of that root and head writes and books the same.
func (w *bfWorld) reduceChain(b *bfBuf, out string, ts *bfTeamSet, lim bfLimit, try func(bfMove)) {
	pos, r := ts.pos[0], len(ts.pos[0])-1
	if w.reduceOp == nil || !slices.IsSorted(pos[1:r]) {
		return
	}
	root, head := uint64(1)<<pos[r], uint64(1)<<pos[0]
	if ts.mask&^(b.held|root) == 0 && ts.mask&^head&^lim.room(int64(b.count)*w.elem) == 0 {
		try(bfMove{typ: plan.Reduce, in: b, out: out, countOut: b.count, ts: ts, root: r})
	}
}

// sortedRooted visits the rooted collectives over one team whose result
// does not depend on its order: a Broadcast from every member that holds
// b, and a SendRecv (a team of two) from a member that holds b to the
// other.
func (w *bfWorld) sortedRooted(b *bfBuf, out string, ts *bfTeamSet, lim bfLimit, try func(bfMove)) {
	pos, whole := ts.pos[0], lim.room(int64(b.count)*w.elem)
	for r, p := range pos {
		bit := uint64(1) << p
		if b.held&bit != 0 && ts.mask&^bit&^whole == 0 {
			try(bfMove{typ: plan.Broadcast, in: b, out: out, countOut: b.count, ts: ts, root: r})
		}
		if b.held&bit != 0 && len(pos) == 2 && ts.mask&^bit&^whole == 0 {
			try(bfMove{typ: plan.SendRecv, in: b, out: out, countOut: b.count, ts: ts, root: r})
		}
	}
}

// locals visits every local step on b: a Permute or a LocalReduce on
// every device that holds it (holding more buffers never hurts a later
// step), and a Slice, of a contiguous chunk or a strided one, over every
// set of teams that hold it.
func (w *bfWorld) locals(b *bfBuf, out string, try func(bfMove)) {
	teams := w.teams
	for _, v := range w.permutes(b.count) {
		try(bfMove{typ: plan.Permute, in: b, out: out, countOut: b.count, v: v})
	}
	for _, v := range w.reduces(b.count) {
		try(bfMove{typ: plan.LocalReduce, in: b, out: out, countOut: len(v.from), v: v})
	}
	for i := range teams.equal {
		ts := &teams.equal[i]
		size := len(ts.teams[0])
		if ts.mask&^b.held != 0 || b.count%size != 0 {
			continue
		}
		m := b.count / size
		try(bfMove{typ: plan.Slice, in: b, out: out, countOut: m, ts: ts})
		for outer := 2; outer <= m; outer++ {
			if m%outer == 0 {
				try(bfMove{typ: plan.Slice, in: b, out: out, countOut: m, ts: ts, outer: outer})
			}
		}
	}
	if m, ok := w.shortChunk(b); ok {
		for i := range teams.equal {
			ts := &teams.equal[i]
			if ts.mask&^b.held == 0 && b.count < len(ts.teams[0])*m {
				try(bfMove{typ: plan.Slice, in: b, out: out, countOut: m, ts: ts})
			}
		}
	}
}

// shortChunk is the chunk of the one Slice of a short input the search
// tries, as nvcomm lowers an uneven Replicate → Shard: of the op's input,
// into the padded buffer of nvcomm's Unpad; false without one, or for
// another buffer.
func (w *bfWorld) shortChunk(b *bfBuf) (int, bool) {
	if w.unpad == nil || b.name != w.op.Input {
		return 0, false
	}
	return w.unpad.Count.Input, true
}

// permutes returns the Permute views of n elements, computed once.
func (w *bfWorld) permutes(n int) []*bfView { return w.cachedViews(plan.Permute, n, bfPermuteViews) }

// reduces returns the LocalReduce views of n elements (none for a set),
// computed once.
func (w *bfWorld) reduces(n int) []*bfView {
	if w.reduceOp == nil {
		return nil
	}
	return w.cachedViews(plan.LocalReduce, n, bfReduceViews)
}

// cachedViews returns the views of n elements for the step type typ, which
// list makes the first time.
func (w *bfWorld) cachedViews(typ string, n int, list func(int) []bfView) []*bfView {
	key := fmt.Sprint(typ, n)
	if vs, ok := w.views[key]; ok {
		return vs
	}
	var vs []*bfView
	for _, v := range list(n) {
		vs = append(vs, &v)
	}
	w.views[key] = vs
	return vs
}

// writers returns the mask of the devices mv leaves holding its output.
func (w *bfWorld) writers(mv *bfMove) uint64 {
	switch mv.typ {
	case plan.Gather, plan.Reduce:
		return 1 << mv.ts.pos[0][mv.root]
	case plan.SendRecv:
		return 1 << mv.ts.pos[0][1-mv.root]
	case plan.Permute, plan.LocalReduce:
		return mv.in.held
	case plan.Pad:
		return w.padMask()
	}
	return mv.ts.mask
}

// padMask is the mask of the devices of nvcomm's Pad.
func (w *bfWorld) padMask() uint64 {
	var m uint64
	for _, d := range w.pad.Devices {
		m |= 1 << w.pos[d]
	}
	return m
}

// apply computes what mv writes.
func (w *bfWorld) apply(mv *bfMove) *bfBuf {
	switch mv.typ {
	case plan.Allgather, plan.AllToAll, plan.AllToAllV, plan.ReduceScatter, plan.Allreduce, plan.Slice:
		return w.perTeam(mv)
	case plan.Permute, plan.LocalReduce:
		o := newBfBuf(mv.out, mv.countOut, len(w.devs))
		for m := mv.in.held; m != 0; m &= m - 1 {
			p := bits.TrailingZeros64(m)
			o.set(p, mv.v.apply(mv.in.data[p], w.idem))
		}
		return o
	case plan.Pad:
		o := newBfBuf(mv.out, mv.countOut, len(w.devs))
		for k, d := range w.pad.Devices {
			o.set(w.pos[d], bfPadBox(w.x[w.pos[d]], w.pad.Dims, w.pad.Valid[k]))
		}
		return o
	}
	return w.rootedOutput(mv)
}

// perTeam is the output of a step whose teams each compute their members'
// buffers from their inputs.
func (w *bfWorld) perTeam(mv *bfMove) *bfBuf {
	o := newBfBuf(mv.out, mv.countOut, len(w.devs))
	for _, team := range mv.ts.pos {
		in := make([][]bfVal, len(team))
		for r, p := range team {
			in[r] = mv.in.data[p]
		}
		for r, v := range w.teamOutput(mv, in) {
			if mv.typ == plan.AllToAllV && mv.ex.receivers&(1<<team[r]) == 0 {
				continue // receives nothing, writes no output
			}
			o.set(team[r], v)
		}
	}
	return o
}

// teamOutput is what each member of one team of a non-rooted step gets,
// from its members' inputs in rank order.
func (w *bfWorld) teamOutput(mv *bfMove, in [][]bfVal) [][]bfVal {
	typ, t, m := mv.typ, len(in), len(in[0])/len(in)
	if typ == plan.AllToAllV {
		return bfExchangeOutput(mv.ex, mv.chunk, in)
	}
	out := make([][]bfVal, t)
	for r := range out {
		if typ == plan.Slice && mv.outer > 0 {
			out[r] = bfStrided(in[r], mv.outer, t, r)
			continue
		}
		switch typ {
		case plan.Allgather:
			out[r] = slices.Concat(in...)
		case plan.Allreduce:
			out[r] = w.sum(in)
		case plan.Slice: // of a short input, the rest of the chunk then zeros (holes)
			out[r] = make([]bfVal, mv.countOut)
			if lo := r * mv.countOut; lo < len(in[r]) {
				copy(out[r], in[r][lo:min(lo+mv.countOut, len(in[r]))])
			}
		case plan.AllToAll, plan.ReduceScatter:
			parts := make([][]bfVal, t)
			for i, v := range in {
				parts[i] = v[r*m : (r+1)*m]
			}
			out[r] = slices.Concat(parts...)
			if typ == plan.ReduceScatter {
				out[r] = w.sum(parts)
			}
		}
	}
	return out
}

// bfStrided is what rank r of a team of t keeps of v in a strided Slice:
// v viewed as [outer, t, inner], its index r of the middle dim.
func bfStrided(v []bfVal, outer, t, r int) []bfVal {
	inner := len(v) / outer / t
	var out []bfVal
	for o := range outer {
		start := (o*t + r) * inner
		out = append(out, v[start:start+inner]...)
	}
	return out
}

// rootedOutput is what a rooted step writes.
func (w *bfWorld) rootedOutput(mv *bfMove) *bfBuf {
	o := newBfBuf(mv.out, mv.countOut, len(w.devs))
	pos := mv.ts.pos[0]
	root := mv.in.data[pos[mv.root]]
	switch mv.typ {
	case plan.Broadcast:
		for _, p := range pos {
			o.set(p, root)
		}
	case plan.SendRecv:
		o.set(pos[1-mv.root], root)
	case plan.Scatter:
		for r, p := range pos {
			o.set(p, root[r*mv.countOut:(r+1)*mv.countOut])
		}
	case plan.Gather:
		o.set(pos[mv.root], slices.Concat(bfHeld(mv.in, pos)...))
	case plan.Reduce:
		o.set(pos[mv.root], w.sum(bfHeld(mv.in, pos)))
	}
	return o
}

// bfHeld returns the contents of b at the positions that hold it, in order.
func bfHeld(b *bfBuf, pos []int) [][]bfVal {
	var parts [][]bfVal
	for _, p := range pos {
		if b.data[p] != nil {
			parts = append(parts, b.data[p])
		}
	}
	return parts
}

// sum combines equal buffers elementwise.
func (w *bfWorld) sum(parts [][]bfVal) []bfVal {
	out := make([]bfVal, len(parts[0]))
	for _, p := range parts {
		for i, x := range p {
			out[i] = bfCombine(out[i], x, w.idem)
		}
	}
	return out
}

// build is the plan step of mv, without its id, axis and bytes.
func (w *bfWorld) build(mv *bfMove) plan.Step {
	if mv.typ == plan.Pad {
		st := *w.pad
		st.Axis = nil
		return st
	}
	st := plan.Step{Expr: w.expr, Kind: plan.KindCollective, Type: mv.typ, Input: mv.in.name, Output: mv.out,
		Count: plan.Count{Input: mv.in.count, Output: mv.countOut}}
	if plan.IsReduction(mv.typ) {
		st.ReduceOp = w.reduceOp
	}
	switch {
	case mv.typ == plan.Permute || mv.typ == plan.LocalReduce:
		st.Kind, st.Devices, st.Dims = plan.KindLocal, w.ids(mv.in.held), mv.v.dims
		st.Perm, st.ReduceDims = mv.v.perm, mv.v.reduce
	case mv.typ == plan.SendRecv:
		team := mv.ts.teams[0]
		st.Teams, st.Root = [][]int{{team[mv.root], team[1-mv.root]}}, &team[mv.root]
	case plan.IsRooted(mv.typ):
		st.Teams, st.Root = mv.ts.teams, &mv.ts.teams[0][mv.root]
	default:
		st.Teams = mv.ts.teams
	}
	if mv.typ == plan.Slice {
		st.Kind = plan.KindLocal
	}
	if mv.outer > 0 {
		st.Dims = []int{mv.outer, len(mv.ts.teams[0]), mv.countOut / mv.outer}
	}
	if mv.ex != nil {
		st.SendCounts = mv.ex.counts(mv.chunk)
	}
	return st
}

// ids returns the devices of a mask, ascending.
func (w *bfWorld) ids(mask uint64) []int {
	var out []int
	for m := mask; m != 0; m &= m - 1 {
		out = append(out, w.devs[bits.TrailingZeros64(m)])
	}
	return out
}

// traffic computes what a collective makes each device receive, by
// position, as plan.Traffic counts it (docs/plan.md, "Bytes"), and the
// most a device sends and receives.
func (w *bfWorld) traffic(mv *bfMove, recv *[64]int64) (sent, most int64) {
	if mv.typ == plan.AllToAllV {
		return bfExchangeTraffic(mv, w.elem, recv)
	}
	in, out := int64(mv.in.count)*w.elem, int64(mv.countOut)*w.elem
	add := func(p int, r, s int64) {
		recv[p] += r
		most, sent = max(most, recv[p]), max(sent, s)
	}
	for _, team := range mv.ts.pos {
		t := int64(len(team))
		for r, p := range team {
			isRoot := r == mv.root
			switch mv.typ {
			case plan.Allgather:
				add(p, (t-1)*in, (t-1)*in)
			case plan.ReduceScatter, plan.AllToAll:
				add(p, (t-1)*in/t, (t-1)*in/t)
			case plan.Allreduce:
				add(p, 2*(t-1)*in/t, 2*(t-1)*in/t)
			case plan.Broadcast, plan.Scatter:
				if isRoot {
					add(p, 0, (t-1)*out)
				} else {
					add(p, out, 0)
				}
			case plan.Reduce:
				if !isRoot && t > 1 {
					add(team[(r+1)%len(team)], in, in)
				}
			case plan.Gather:
				if !isRoot && mv.in.held&(1<<p) != 0 {
					add(team[mv.root], in, in)
				}
			case plan.SendRecv:
				if !isRoot {
					add(p, in, in)
				}
			}
		}
	}
	return sent, most
}

// checkTraffic compares traffic with plan.Traffic, the project's
// accounting, on one move in bfTrafficCheckEvery: the search prunes by
// the bytes it books, so they must be those.
func (w *bfWorld) checkTraffic(mv *bfMove, recv *[64]int64) {
	n := &w.moves
	if mv.ex != nil {
		n = &w.exchangeMoves // as often, however few they are
	}
	if *n++; *n%bfTrafficCheckEvery != 0 {
		return
	}
	st := w.build(mv)
	_, want, _ := plan.Traffic(&st, w.elem, func(d int) bool { return mv.in.held&(1<<w.pos[d]) != 0 })
	for p, d := range w.devs {
		if want[d] != recv[p] && len(w.trafficErrs) < 5 {
			w.trafficErrs = append(w.trafficErrs, fmt.Sprintf("%s %v root %v send_counts %v: device %d receives %d, plan.Traffic says %d", st.Type, st.Teams, st.Root, st.SendCounts, d, recv[p], want[d]))
		}
	}
}

// bfTrafficCheckEvery is how often traffic is compared with plan.Traffic.
const bfTrafficCheckEvery = 31
