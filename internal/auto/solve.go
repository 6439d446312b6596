package auto

import (
	"errors"
	"math"
	"slices"
	"time"

	"github.com/nvcomm/nvcomm/internal/checked"
)

// The solver is dynamic programming over the ops in fusion order (a path
// decomposition of the op graph). Before op i, the state is the options of
// the frontier: the tensors that ops before i read or wrote and ops from i
// on still read. Op i's time depends only on its own tensors, so the best
// way to reach a state is all that matters of the ops before it: the
// programme keeps, per state, the cheapest partial assignment (and, under
// a memory budget, every partial assignment not dominated in time and
// memory), extends each by the options of the tensors op i introduces, and
// forgets the tensors no later op reads. A chain of blocks with residual
// adds keeps two or three tensors on its frontier, so the work is linear in
// the number of ops: per op, the frontier's states times the new tensors'
// options.
//
// Memory: a device holds the layer's inputs throughout (W), each output
// from the op that produces it on (O), and each intermediate from its
// producer to its last reader (on the frontier meanwhile, so its bytes
// are known in the state). The peak is W plus the most, over ops, of O and
// the intermediates live then (R); W, O and R only grow as ops are added,
// so a partial assignment whose W + R exceeds the budget is dropped, and
// one no better in time, W, O and R than another of the same state is
// dominated.
//
// Ties: of the cheapest assignments within the budget, the solver returns
// the first in the order of a depth-first search over the decisions in
// fusion order, each tensor's candidates in order (Replicate first): the
// lexicographically smallest vector of option indexes, the choice of the
// branch and bound auto used before. Lexicographic order adds up over
// disjoint sets of tensors, so the programme can break ties state by
// state: two partial assignments of a state differ only on the tensors
// already forgotten, and the one with the smaller option at the first
// decision where they differ wins.
//
// Runs of local steps: the plan's prediction fuses a run of elementwise
// and reduction steps into one kernel (cost.Predict), and a run may
// continue from one op's last step into the next op's first, which then
// costs its latency less (cost.Ends). So the state also holds how the
// last op ended — the devices of its last step when a run may continue
// from it, none otherwise (an op of no steps passes its predecessor's
// on) — and an op's price is its table entry less the saving when its
// first step continues that run: the sum is the plan's prediction. The
// ends an op can leave are few (none, or its mesh's devices), so this at
// most doubles the states.

// solution is an option per variable and its cost.
type solution struct {
	choice []int
	cost   int64
	peak   int64
}

// errInfeasible reports that no assignment fits: every one costs maxCost
// or exceeds the memory budget.
var errInfeasible = errors.New("no assignment of shardings fits")

// errStopped reports that a search passed its time limit or its size
// limit before it could complete a single assignment.
var errStopped = errors.New("the search for the best shardings stopped at its limit before it found an assignment that fits")

// maxScope bounds one op's work: the frontier's states times the options
// of the tensors the op introduces. Past it the programme finishes
// greedily (stopped).
const maxScope = 1 << 24

// maxTableBytes bounds the memory of the programme's tables: the layers
// of partial assignments an exact search keeps for the runner-ups (a slot
// per state and each partial assignment). Past it the programme finishes
// greedily (stopped), which holds one partial assignment at a time: a
// frontier too wide to tabulate costs a stated gap, never the machine's
// memory. The runner-ups' backward pass holds about as much again.
const maxTableBytes = 1 << 30

// The bytes the programme's tables take, as maxTableBytes counts them: a
// state's slot in a layer (a slice header) and a partial assignment (an
// entry and its pointer in a state's list).
const (
	stateBytes = 24
	entryBytes = 64
)

// step is one op of the programme.
type step struct {
	fa *factor
	// front is the state before the op (variables, ascending); fresh the
	// op's variables first seen here; next the state after it (ascending):
	// the variables of front and fresh that a later op reads.
	front, fresh, next []int
	// scope is front then fresh; for each, its stride in fa's table and in
	// next's state index (0 when not in them).
	scope            []int
	tStride, nStride []int
	// inputs, tails and live are positions in scope: the fresh fusion
	// inputs (W), the fresh tensors produced and live to the end (O), and
	// the intermediates live during the op.
	inputs, tails, live []int
	// freshPos are the positions of fresh in scope.
	freshPos   []int
	minCost    int64 // the cheapest entry of fa's table, less its saving
	rest       int64 // the later steps' minCost summed: what finishing costs at least
	nextStates int
	index      int32
	// in and out are the ends of runs a state before and after the op
	// may hold (ends.tail values, 0 first); a layer's state index is the
	// frontier's index times their number plus the end's position.
	in, out []int32
}

// join is the saving of entry ti of st's table when the state before
// it ends a run on devices in, and the position in st.out of how the op
// ends.
func (st *step) join(ti int, in int32) (saving int64, out int) {
	end := int32(0)
	if st.fa.ends != nil {
		e := st.fa.ends[ti]
		if in != 0 && e.head == in {
			saving = e.saving
		}
		end = e.tail
		if e.empty {
			end = in
		}
	}
	return saving, slices.Index(st.out, end)
}

// ends lists the ends of runs st's op may leave after states before it
// ending in st.in, 0 first.
func (st *step) ends() []int32 {
	out := []int32{0}
	add := func(end int32) {
		if !slices.Contains(out, end) {
			out = append(out, end)
		}
	}
	for i, c := range st.fa.table {
		switch {
		case c == maxCost || st.fa.ends == nil:
		case st.fa.ends[i].empty:
			for _, end := range st.in {
				add(end)
			}
		default:
			add(st.fa.ends[i].tail)
		}
	}
	slices.Sort(out)
	return out
}

// entry is a partial assignment: the ops up to and including step, its
// table entry combo there, and the entry of the previous step it extends.
type entry struct {
	cost    int64
	w, o, r int64
	prev    *entry
	combo   int32
	step    int32
}

type solver struct {
	m      *model
	budget int64 // 0: none
	// allowed restricts each variable's options (nil: all).
	allowed   [][]bool
	decisions []int // variable indices, in fusion order
	pos       []int // per variable, its index in decisions
	steps     []*step
	// deadline stops the search (zero: none); progress, when set, is told
	// every few thousand combinations how far it is.
	deadline time.Time
	progress func(done, total int)
	work     int
	// maxScope and maxBytes are maxScope and maxTableBytes but in tests;
	// tableBytes is what the layers of the current solve hold.
	maxScope             int
	maxBytes, tableBytes int64
	// penalty prices the bytes of every tensor an assignment holds, in
	// cost units a byte, on top of the ops' prices (0: none): budget.go's
	// priced search, which has no budget of its own.
	penalty float64
	// noRunnerUps says the last solve's layers cannot give runner-ups:
	// they were bounded by a priced assignment's cost, or there are none
	// (solveWithin).
	noRunnerUps bool
	// bound drops every partial assignment that cannot finish at a cost
	// of bound or less (0: none): an assignment known to fit costs bound.
	bound int64
	// exact is false when the last solve stopped at a limit and finished
	// greedily; lower is then a lower bound on the optimum's cost.
	exact bool
	lower int64
	// layers are the layers before each step of the last exact solve,
	// kept for the runner-ups' backward pass; layerBytes is tableBytes as
	// each layer was kept (for the tests' solving again from one).
	layers     [][][]*entry
	layerBytes []int64
}

func newSolver(m *model, budget int64) *solver {
	s := &solver{m: m, budget: budget, allowed: make([][]bool, len(m.vars)), pos: make([]int, len(m.vars)),
		maxScope: maxScope, maxBytes: maxTableBytes}
	for k, v := range m.vars {
		s.pos[k] = -1
		if v.decision {
			s.pos[k] = len(s.decisions)
			s.decisions = append(s.decisions, k)
		}
	}
	s.steps = m.steps()
	return s
}

// steps lays the ops out as the programme's steps.
func (m *model) steps() []*step {
	lastUse := make([]int, len(m.vars))
	for i, fa := range m.factors {
		for _, k := range fa.vars {
			lastUse[k] = i
		}
	}
	lastOp := max(len(m.f.Ops)-1, 0)
	seen := make([]bool, len(m.vars))
	var front []int
	var out []*step
	in := []int32{0}
	for i, fa := range m.factors {
		st := &step{fa: fa, front: front, nextStates: 1, index: int32(i), in: in}
		for _, k := range fa.vars {
			if !seen[k] {
				seen[k] = true
				st.fresh = append(st.fresh, k)
			}
		}
		st.scope = slices.Concat(front, st.fresh)
		for j := len(front); j < len(st.scope); j++ {
			st.freshPos = append(st.freshPos, j)
		}
		for j, k := range st.scope {
			if lastUse[k] > i {
				st.next = append(st.next, k)
			}
			switch v := m.vars[k]; {
			case j >= len(front) && !v.produced:
				st.inputs = append(st.inputs, j)
			case j >= len(front) && v.last == lastOp:
				st.tails = append(st.tails, j)
			case v.produced && v.last < lastOp:
				st.live = append(st.live, j)
			}
		}
		slices.Sort(st.next)
		st.tStride, st.nStride = m.strides(st.scope, fa.vars), m.strides(st.scope, st.next)
		st.out = st.ends()
		st.nextStates = len(st.out)
		for _, k := range st.next {
			st.nextStates *= len(m.vars[k].options)
		}
		st.minCost = maxCost
		for ti, c := range fa.table {
			if c != maxCost && fa.ends != nil && fa.ends[ti].head != 0 {
				c -= fa.ends[ti].saving
			}
			st.minCost = min(st.minCost, c)
		}
		front, in = st.next, st.out
		out = append(out, st)
	}
	for i := len(out) - 2; i >= 0; i-- {
		out[i].rest = satAdd(out[i+1].rest, out[i+1].minCost)
	}
	return out
}

// unread is the bytes of the fusion inputs that no op the programme
// prices reads — a training step's upstream gradient, which only the
// backward reads —, held throughout like every input.
func (m *model) unread() int64 {
	read := make([]bool, len(m.vars))
	for _, fa := range m.factors {
		for _, k := range fa.vars {
			read[k] = true
		}
	}
	total := int64(0)
	for k, v := range m.vars {
		if !read[k] && !v.produced {
			total = satAdd(total, slices.Min(v.bytes))
		}
	}
	return total
}

// strides is, for each of vars, its stride in the mixed-radix index over
// in (the first most significant), 0 for a variable not in it.
func (m *model) strides(vars, in []int) []int {
	out := make([]int, len(vars))
	stride := 1
	for j := len(in) - 1; j >= 0; j-- {
		if i := slices.Index(vars, in[j]); i >= 0 {
			out[i] = stride
		}
		stride *= len(m.vars[in[j]].options)
	}
	return out
}

// solve returns the cheapest assignment within the budget, the first of
// them in search order. Past the deadline, maxScope or maxBytes it
// completes the best partial assignment greedily and sets exact false and
// lower.
func (s *solver) solve() (*solution, error) {
	s.layers, s.layerBytes, s.tableBytes, s.noRunnerUps = nil, nil, 0, false
	return s.resume(0, [][]*entry{{{step: -1, w: s.m.unread()}}})
}

// resume runs the programme from layer, the states before step from, on.
func (s *solver) resume(from int, layer [][]*entry) (*solution, error) {
	s.exact, s.lower, s.work = true, 0, 0
	var best *entry // the greedy completion's partial assignment
	bestState := 0
	for i := from; i < len(s.steps); i++ {
		st := s.steps[i]
		if s.exact {
			s.layers, s.layerBytes = append(s.layers, layer), append(s.layerBytes, s.tableBytes)
			next, err := s.advance(st, layer, true)
			if err == nil {
				layer = next
				continue
			}
			if err != errStopped {
				return nil, err
			}
			// Finish greedily: the best partial assignment so far,
			// extended op by op by its best next step.
			s.exact, s.lower = false, s.lowerBound(i, layer)
			best, bestState = s.best(layer)
			s.layers, layer = nil, nil
		}
		if best, bestState = s.greedy(st, best, bestState); best == nil {
			return nil, errStopped
		}
	}
	if s.exact {
		best, _ = s.best(layer)
	}
	if best == nil {
		if !s.exact {
			return nil, errStopped
		}
		return nil, errInfeasible
	}
	return s.solution(best), nil
}

// solution reads the options of every variable off e's chain.
func (s *solver) solution(e *entry) *solution {
	sol := &solution{choice: make([]int, len(s.m.vars)), cost: e.cost, peak: satAdd(e.w, e.r)}
	for ; e.step >= 0; e = e.prev {
		fa := s.steps[e.step].fa
		c := int(e.combo)
		for j := len(fa.vars) - 1; j >= 0; j-- {
			n := len(s.m.vars[fa.vars[j]].options)
			sol.choice[fa.vars[j]], c = c%n, c/n
		}
	}
	return sol
}

// lowerBound is what every completion of the layer before step i costs
// at least: its cheapest partial assignment, and each later op's cheapest
// table entry.
func (s *solver) lowerBound(i int, layer [][]*entry) int64 {
	lb := int64(maxCost)
	for _, list := range layer {
		for _, e := range list {
			lb = min(lb, e.cost)
		}
	}
	for _, st := range s.steps[i:] {
		lb = satAdd(lb, st.minCost)
	}
	return lb
}

// best is the layer's best partial assignment and its state, nil when
// the layer has none.
func (s *solver) best(layer [][]*entry) (best *entry, state int) {
	for i, list := range layer {
		for _, e := range list {
			if best == nil || s.before(e, best) {
				best, state = e, i
			}
		}
	}
	return best, state
}

// greedy extends partial assignment e (nil: none), of state fs before
// st, by the options of st's fresh variables that make the best partial
// assignment after it, and returns that and its state (nil when none runs
// within the budget). It holds no layer: the states after st may be too
// many to tabulate.
func (s *solver) greedy(st *step, e *entry, fs int) (*entry, int) {
	if e == nil {
		return nil, 0
	}
	nf := len(st.front)
	vals := make([]int, len(st.scope))
	s.decode(st.front, fs/len(st.in), vals[:nf])
	in := st.in[fs%len(st.in)]
	if !s.first(st.fresh, vals[nf:]) {
		return nil, 0
	}
	var best *entry
	bestState := 0
	for {
		if x, ni := s.extension(st, vals, in, e); x != nil && (best == nil || s.before(x, best)) {
			best, bestState = x, ni
		}
		if !s.following(st.fresh, vals[nf:]) {
			return best, bestState
		}
	}
}

// advance extends every partial assignment of layer (states of st.front)
// by every option of st's fresh variables, and returns the layer of
// st.next. Limited, it returns errStopped past the deadline or past
// maxScope. It returns errInfeasible when nothing fits.
func (s *solver) advance(st *step, layer [][]*entry, limited bool) ([][]*entry, error) {
	states := 0
	for _, list := range layer {
		if len(list) > 0 {
			states++
		}
	}
	perState := 1 // the extensions of a state at most: its fresh options, or its moves
	for _, k := range st.fresh {
		perState *= len(s.m.vars[k].options)
	}
	g := s.locals(st)
	if g != nil {
		perState = min(perState, len(g.keptVals)*len(st.out))
	}
	if work, ok := checked.Mul(states, perState); limited && (!ok || work > s.maxScope || st.nextStates > s.maxScope || s.tick(st)) {
		return nil, errStopped
	}
	if s.tableBytes += int64(st.nextStates) * stateBytes; limited && s.tableBytes > s.maxBytes {
		return nil, errStopped
	}
	out := make([][]*entry, st.nextStates)
	if g != nil {
		return s.advanceMoves(st, g, layer, out, limited)
	}
	nf := len(st.front)
	vals := make([]int, len(st.scope))
	found := false
	for fs, list := range layer {
		if len(list) == 0 {
			continue
		}
		s.decode(st.front, fs/len(st.in), vals[:nf])
		in := st.in[fs%len(st.in)]
		if !s.first(st.fresh, vals[nf:]) {
			continue // a fresh variable with no allowed option
		}
		for {
			if s.work++; limited && s.work&0xfff == 0 && (s.tick(st) || s.tableBytes > s.maxBytes) {
				return nil, errStopped
			}
			if s.extend(st, vals, in, list, out) {
				found = true
			}
			if !s.following(st.fresh, vals[nf:]) {
				break
			}
		}
	}
	if !found {
		return nil, errInfeasible
	}
	return out, nil
}

// advanceMoves is advance by st's moves (g): each state extended by the
// best options of the op's gone variables alone.
func (s *solver) advanceMoves(st *step, g *locals, layer [][]*entry, out [][]*entry, limited bool) ([][]*entry, error) {
	found, stopped := false, false
	s.eachMove(st, g, layer, func(fs int, vals []int, mv *move, ni, _ int) bool {
		if s.work++; limited && s.work&0xfff == 0 && (s.tick(st) || s.tableBytes > s.maxBytes) {
			stopped = true
			return false
		}
		s.extendBy(st, vals, int(mv.ti), ni, mv.price, layer[fs], out)
		found = true
		return true
	})
	switch {
	case stopped:
		return nil, errStopped
	case !found:
		return nil, errInfeasible
	}
	return out, nil
}

// extend adds to out the extensions of list (a state whose last op
// ended a run on devices in) by the options vals of st's scope, and
// reports whether the op can run under them.
func (s *solver) extend(st *step, vals []int, in int32, list []*entry, out [][]*entry) bool {
	ti, ni, c := s.entry(st, vals, in)
	if c == maxCost {
		return false
	}
	s.extendBy(st, vals, ti, ni, c, list, out)
	return true
}

// extendBy adds to out the extensions of list by entry ti of st's table
// (the options vals of its scope, the op's price c), which reach state ni.
func (s *solver) extendBy(st *step, vals []int, ti, ni int, c int64, list []*entry, out [][]*entry) {
	var dw, do, l int64
	sized := false
	for _, e := range list {
		if s.budget == 0 && len(out[ni]) > 0 && satAdd(e.cost, c) > out[ni][0].cost {
			continue // slower than the state's best, which alone it could replace (insert)
		}
		if !sized {
			dw, do, l = s.bytes(st, st.inputs, vals), s.bytes(st, st.tails, vals), s.bytes(st, st.live, vals)
			sized = true
		}
		if x := s.extended(st, e, ti, c, dw, do, l); x != nil {
			n := len(out[ni])
			out[ni] = s.insert(out[ni], x)
			s.tableBytes += int64(len(out[ni])-n) * entryBytes
		}
	}
}

// extension is e extended by the options vals of st's scope after a
// state whose last op ended a run on devices in, and the index of the
// state after it; nil when the op cannot run so or it passes the budget.
func (s *solver) extension(st *step, vals []int, in int32, e *entry) (*entry, int) {
	ti, ni, c := s.entry(st, vals, in)
	if c == maxCost {
		return nil, 0
	}
	dw, do, l := s.bytes(st, st.inputs, vals), s.bytes(st, st.tails, vals), s.bytes(st, st.live, vals)
	return s.extended(st, e, ti, c, dw, do, l), ni
}

// extended is e extended by entry ti of st's table, of price c, adding
// dw bytes of inputs and do of outputs with l of intermediates live; nil
// when the sum overflows or passes the budget.
func (s *solver) extended(st *step, e *entry, ti int, c, dw, do, l int64) *entry {
	cost, ok := checked.Add(e.cost, c)
	if !ok || cost == maxCost || s.bound > 0 && satAdd(cost, st.rest) > s.bound {
		return nil
	}
	x := &entry{cost: cost, w: satAdd(e.w, dw), o: satAdd(e.o, do), prev: e, combo: int32(ti), step: st.index}
	x.r = max(e.r, satAdd(x.o, l))
	if s.budget > 0 && satAdd(x.w, x.r) > s.budget {
		return nil
	}
	return x
}

// entry is the index in st's table of the options vals of its scope, the
// index of the state after it and the op's price there, after a state
// whose last op ended a run on devices in.
func (s *solver) entry(st *step, vals []int, in int32) (ti, ni int, c int64) {
	for j, o := range vals {
		ti += o * st.tStride[j]
		ni += o * st.nStride[j]
	}
	c = st.fa.table[ti]
	saving, end := st.join(ti, in)
	if c != maxCost {
		c -= saving
		if s.penalty > 0 {
			c = satAdd(c, s.priceBytes(s.bytes(st, st.freshPos, vals)))
		}
	}
	return ti, ni*len(st.out) + end, c
}

// bytes is what one device holds of the scope's variables at positions
// under the options vals.
func (s *solver) bytes(st *step, positions, vals []int) int64 {
	n := int64(0)
	for _, j := range positions {
		n = satAdd(n, s.m.vars[st.scope[j]].bytes[vals[j]])
	}
	return n
}

// insert adds x to a state's partial assignments: without a budget the
// state keeps the best alone; with one, every one that no other
// dominates.
func (s *solver) insert(list []*entry, x *entry) []*entry {
	if s.budget == 0 {
		if len(list) == 0 {
			return append(list, x)
		}
		if s.before(x, list[0]) {
			list[0] = x
		}
		return list
	}
	if slices.ContainsFunc(list, func(y *entry) bool { return s.dominates(y, x) }) {
		return list
	}
	list = slices.DeleteFunc(list, func(y *entry) bool { return s.dominates(x, y) })
	return append(list, x)
}

// dominates reports whether every completion of y is at least as good as
// the same completion of x: no slower, no larger, and first in search
// order when as fast.
func (s *solver) dominates(y, x *entry) bool {
	return y.cost <= x.cost && y.w <= x.w && y.o <= x.o && y.r <= x.r && (y.cost < x.cost || !s.lexLess(x, y))
}

// before orders partial assignments of a state: cheaper first, then first
// in search order.
func (s *solver) before(a, b *entry) bool {
	return a.cost < b.cost || a.cost == b.cost && s.lexLess(a, b)
}

// lexLess reports whether a comes before b in search order: whether, at
// the first decision (in fusion order) where their options differ, a's is
// the smaller. a and b are partial assignments of the same steps.
func (s *solver) lexLess(a, b *entry) bool {
	_, less := s.entryDiff(a, b, math.MaxInt, false)
	return less
}

// entryDiff is, of partial assignments a and b of the same steps, the
// first decision (its index in fusion order) where their options differ
// and whether a's is the smaller there, or first and less when that
// decision comes no earlier than first.
func (s *solver) entryDiff(a, b *entry, first int, less bool) (int, bool) {
	for a != b {
		if a.combo != b.combo {
			first, less = s.comboDiff(a.step, a.combo, b.combo, first, less)
		}
		a, b = a.prev, b.prev
	}
	return first, less
}

// comboDiff is entryDiff over entries ca and cb of step i's table.
func (s *solver) comboDiff(i, ca, cb int32, first int, less bool) (int, bool) {
	fa := s.steps[i].fa
	a, b := int(ca), int(cb)
	for j := len(fa.vars) - 1; j >= 0; j-- {
		n := len(s.m.vars[fa.vars[j]].options)
		if va, vb := a%n, b%n; va != vb && s.pos[fa.vars[j]] < first {
			first, less = s.pos[fa.vars[j]], va < vb
		}
		a, b = a/n, b/n
	}
	return first, less
}

// decode writes the options of vars in state index i.
func (s *solver) decode(vars []int, i int, out []int) {
	for j := len(vars) - 1; j >= 0; j-- {
		n := len(s.m.vars[vars[j]].options)
		out[j], i = i%n, i/n
	}
}

// first sets vals to the first allowed option of each of vars; false
// when one has none.
func (s *solver) first(vars []int, vals []int) bool {
	for j, k := range vars {
		vals[j] = -1
		if !s.nextAllowed(k, &vals[j]) {
			return false
		}
	}
	return true
}

// following steps vals to the next combination of allowed options of
// vars (the last fastest); false after the last.
func (s *solver) following(vars []int, vals []int) bool {
	for j := len(vars) - 1; j >= 0; j-- {
		if s.nextAllowed(vars[j], &vals[j]) {
			return true
		}
		vals[j] = -1
		s.nextAllowed(vars[j], &vals[j])
	}
	return false
}

// nextAllowed moves *o to variable k's next allowed option; false when
// there is none.
func (s *solver) nextAllowed(k int, o *int) bool {
	for *o++; *o < len(s.m.vars[k].options); *o++ {
		if s.allowed[k] == nil || s.allowed[k][*o] {
			return true
		}
	}
	return false
}

// tick reports progress and whether the deadline passed.
func (s *solver) tick(st *step) bool {
	if s.progress != nil {
		s.progress(int(st.index), len(s.steps))
	}
	return !s.deadline.IsZero() && time.Now().After(s.deadline)
}

// satAdd adds byte counts or costs, maxCost past the range.
func satAdd(a, b int64) int64 {
	if c, ok := checked.Add(a, b); ok {
		return c
	}
	return maxCost
}

// backward is the runner-ups' pass over the layers of the last exact
// solve: per variable and option, the cost of the cheapest assignment
// within the budget that gives the variable that option (maxCost when
// none can: marg), and per decision its runner-up given the chosen
// options (other, -1 when none): the option of the first in search order
// of the cheapest assignments giving it any other. Going back from the
// last op, it keeps per state the ways to finish from it (tails): without
// a budget the first cheapest in search order; with one, every way that
// no other beats in time, in the bytes of the inputs it adds, in its own
// peak of outputs and intermediates and, at equal time, in search order.
// For a variable first seen at op t, every assignment is a partial
// assignment reaching a state before t (the forward pass's), joined with
// an entry of op t and a way to finish from the state after it; the
// join checks the whole assignment's peak. The first in search order of
// the cheapest assignments giving a variable some options is such a join
// of a kept partial assignment and a kept tail (a dropped one is
// dominated by a kept one that is no slower, no larger and, at equal
// time, first in search order, and swapping it in changes nothing else),
// so a runner-up is read off the tables as solving again with the choice
// barred finds it (TestRunnerUps). It needs an exact solve; progress,
// when set, is told how many ops it has passed.
func (s *solver) backward(chosen []int, progress func(done, total int)) (marg [][]int64, other []int) {
	marg, other = make([][]int64, len(s.m.vars)), make([]int, len(s.m.vars))
	for k, v := range s.m.vars {
		marg[k], other[k] = make([]int64, len(v.options)), -1
		for o := range marg[k] {
			marg[k][o] = maxCost
		}
	}
	n := len(s.steps)
	var after [][]*tail // the ways to finish from each state after the step
	if n > 0 {
		root := &tail{step: int32(n)}
		for range s.steps[n-1].nextStates {
			after = append(after, []*tail{root})
		}
	}
	for i := n - 1; i >= 0; i-- {
		if progress != nil {
			progress(n-1-i, n)
		}
		st, layer := s.steps[i], s.layers[i]
		before := make([][]*tail, len(layer))
		slots := make([]*tail, len(layer)) // each state's first list, without a budget its only one
		if g := s.locals(st); g != nil {
			s.backwardMoves(st, g, layer, after, before, slots, marg)
		} else {
			s.backwardAll(st, layer, after, before, slots, marg)
		}
		for _, k := range st.fresh {
			if s.pos[k] >= 0 {
				other[k] = s.runnerUpOption(i, k, chosen[k], marg[k], after)
			}
		}
		after = before
	}
	return marg, other
}

// backwardAll is the backward pass's step st by every combination of
// its front's states and fresh variables' options: per state before the
// op its ways to finish (before, its first list in slots), and the
// marginals of the op's fresh variables.
func (s *solver) backwardAll(st *step, layer [][]*entry, after, before [][]*tail, slots []*tail, marg [][]int64) {
	s.combinations(st, layer, func(fs int, vals []int, ti int, c int64, ni int) {
		best := int64(maxCost)
		s.joins(st, vals, c, after[ni], func(cost, w, r int64, next *tail) {
			if before[fs] == nil {
				before[fs] = slots[fs : fs : fs+1]
			}
			before[fs] = s.keepTail(before[fs], tail{cost: cost, w: w, r: r, next: next, combo: int32(ti), step: st.index})
			for _, e := range layer[fs] {
				if s.fits(e, w, r) {
					best = min(best, satAdd(e.cost, cost))
				}
			}
		})
		for j := len(st.front); j < len(vals); j++ {
			m := marg[st.scope[j]]
			m[vals[j]] = min(m[vals[j]], best)
		}
	})
}

// tail is a way to finish from a state before step: the entry combo of
// its table and the way on from the state after it (next), their cost,
// the bytes of the fusion inputs they first read (w), and the most, over
// their ops, of the outputs and intermediates live then, counted from the
// outputs before step (r). The ways from the states of one layer end at
// one root, so two are compared by walking both to where they meet.
type tail struct {
	cost, w, r int64
	next       *tail
	combo      int32
	step       int32
}

// joins calls f with each way to finish from the state before st that
// takes options vals of its scope (the op's price c) and then one of
// list, the ways to finish from the state after it, within the budget:
// its cost, w, r and the way on (w and r 0 without a budget).
func (s *solver) joins(st *step, vals []int, c int64, list []*tail, f func(cost, w, r int64, next *tail)) {
	if s.budget == 0 { // bytes do not count
		if len(list) > 0 {
			f(satAdd(c, list[0].cost), 0, 0, list[0])
		}
		return
	}
	dw, do, l := s.bytes(st, st.inputs, vals), s.bytes(st, st.tails, vals), s.bytes(st, st.live, vals)
	for _, b := range list {
		if cost, w, r := satAdd(c, b.cost), satAdd(dw, b.w), satAdd(do, max(l, b.r)); satAdd(w, r) <= s.budget {
			f(cost, w, r, b)
		}
	}
}

// fits reports whether partial assignment e finished by a way of w and r
// keeps within the budget.
func (s *solver) fits(e *entry, w, r int64) bool {
	return s.budget == 0 || satAdd(satAdd(e.w, w), max(e.r, satAdd(e.o, r))) <= s.budget
}

// keepTail adds x to a state's ways to finish: without a budget the first
// cheapest in search order alone (allocated once per state, and
// overwritten by a better one: no way of an earlier state refers to it
// yet); with one, every one that no other dominates.
func (s *solver) keepTail(list []*tail, x tail) []*tail {
	if s.budget == 0 {
		switch {
		case len(list) == 0:
			kept := x
			return append(list, &kept)
		case x.cost < list[0].cost || x.cost == list[0].cost && s.tailLess(&x, list[0]):
			*list[0] = x
		}
		return list
	}
	kept := x // x alone would move to the heap on every call
	return s.keepPareto(list, &kept)
}

// keepPareto adds x to a state's ways to finish under a budget unless
// another dominates it, and drops those it dominates: no slower, no
// larger in w and r and, at equal time, first in search order.
func (s *solver) keepPareto(list []*tail, x *tail) []*tail {
	dominates := func(y, x *tail) bool {
		return y.cost <= x.cost && y.w <= x.w && y.r <= x.r && (y.cost < x.cost || !s.tailLess(x, y))
	}
	if slices.ContainsFunc(list, func(y *tail) bool { return dominates(y, x) }) {
		return list
	}
	return append(slices.DeleteFunc(list, func(y *tail) bool { return dominates(x, y) }), x)
}

// tailLess reports whether way a comes before way b, of the same state,
// in search order.
func (s *solver) tailLess(a, b *tail) bool {
	_, less := s.tailDiff(a, b, math.MaxInt, false)
	return less
}

// runnerUpOption is the runner-up of decision k, first seen at step i,
// given its chosen option and its marginals marg: the option of the first
// in search order of the cheapest assignments giving it any other, -1
// when none runs within the budget. When one other option has the least
// marginal, that one; when several tie, each join of a partial assignment
// before step i, an entry of its op giving k one of them and a way to
// finish from after (the states after it) that costs that least is an
// assignment with that option, and the first in search order of those
// decides.
func (s *solver) runnerUpOption(i, k, chosen int, marg []int64, after [][]*tail) int {
	o, ties := otherBest([][]int64{marg}, 0, chosen)
	if ties <= 1 {
		if ties == 0 {
			return -1
		}
		return o
	}
	st, layer := s.steps[i], s.layers[i]
	j := slices.Index(st.scope, k)
	target := marg[o]
	among := tied([][]int64{marg}, 0, o, chosen)
	s.allowed[k] = among
	defer func() { s.allowed[k] = nil }()
	var (
		bestE *entry
		bestT tail // its combo and next
	)
	s.combinations(st, layer, func(fs int, vals []int, ti int, c int64, ni int) {
		s.joins(st, vals, c, after[ni], func(cost, w, r int64, next *tail) {
			for _, e := range layer[fs] {
				if satAdd(e.cost, cost) != target || !s.fits(e, w, r) {
					continue
				}
				x := tail{combo: int32(ti), next: next, step: st.index}
				if bestE == nil || s.joinLess(e, &x, bestE, &bestT) {
					bestE, bestT, o = e, x, vals[j]
				}
			}
		})
	})
	return o
}

// joinLess reports whether the assignment of partial assignment ea and
// way ta (a way to finish from the state it reaches) comes before that of
// eb and tb in search order.
func (s *solver) joinLess(ea *entry, ta *tail, eb *entry, tb *tail) bool {
	first, less := s.entryDiff(ea, eb, math.MaxInt, false)
	_, less = s.tailDiff(ta, tb, first, less)
	return less
}

// tailDiff is entryDiff over ways to finish of one layer.
func (s *solver) tailDiff(a, b *tail, first int, less bool) (int, bool) {
	for a != b {
		if a.combo != b.combo {
			first, less = s.comboDiff(a.step, a.combo, b.combo, first, less)
		}
		a, b = a.next, b.next
	}
	return first, less
}

// combinations calls f with every combination of a reachable state of
// st's front (index fs) and allowed options of its fresh variables (vals,
// in scope order) under which the op can run, its entry ti in the op's
// table, its cost c and the index ni of the state after it.
func (s *solver) combinations(st *step, layer [][]*entry, f func(fs int, vals []int, ti int, c int64, ni int)) {
	nf := len(st.front)
	vals := make([]int, len(st.scope))
	for fs, list := range layer {
		if len(list) == 0 {
			continue
		}
		s.decode(st.front, fs/len(st.in), vals[:nf])
		in := st.in[fs%len(st.in)]
		if !s.first(st.fresh, vals[nf:]) {
			continue
		}
		for {
			if ti, ni, c := s.entry(st, vals, in); c != maxCost {
				f(fs, vals, ti, c, ni)
			}
			if !s.following(st.fresh, vals[nf:]) {
				break
			}
		}
	}
}
