package auto

import (
	"math"
	"slices"
)

// Variables local to one op. A step's fresh variables that no later op
// reads (a weight its linear layer alone reads) are forgotten as soon as
// they are chosen: past the op, all that matters of their options is the
// op's price and how it ends a run of local steps. Without a budget,
// where a state keeps its best partial assignment alone, the options of
// the local variables that extend one state to one next state compete
// only among themselves, and which wins does not depend on the state: of
// two extensions of one partial assignment to one next state that differ
// only in those options, the cheaper wins, and at equal price the first
// in search order, which compares those options alone. So the programme
// picks, once per step, the winner for each combination of what the op
// reads of the frontier, the end of run before it, the options of the
// fresh variables that stay on the frontier and the end it leaves
// (a move), and extends each state by its moves alone: variable
// elimination in the sense of Dechter's bucket elimination (Artificial
// Intelligence 113, 1999), exact and with the same ties. A linear layer
// whose weight has 27 options on a 2×2×4 mesh, and its output 54, extends
// each state by 54 moves for each end it may leave, not 1,458
// combinations. Under a budget the local variables'
// bytes (a weight's shard) make the options differ in more than price,
// so every combination is extended as before.

// locals is a step's moves, and what indexes them.
type locals struct {
	// kept and gone are the positions in the step's scope of its fresh
	// variables that a later op reads, and of those no later op reads.
	kept, gone []int
	// keptVals are the allowed options of the kept variables, in search
	// order, and keptOff each one's offset in the next state's index.
	keptVals [][]int
	keptOff  []int
	// readStride is, per front position, its stride in the index of the
	// options the op reads of the front (0 for one it does not read).
	readStride []int
	reads      int   // the number of combinations of the options read
	goneVars   []int // the gone variables
	// moves are, per group — the options the op reads of the front, the
	// end of run before it (its position in the step's in) and the kept
	// variables' options, in that order of significance — the best
	// options of the gone variables for each end the op may leave.
	moves [][]move
}

// move is the best choice of a step's gone variables within a group for
// one end of run after the op.
type move struct {
	ti    int32 // the entry of the op's table
	end   int32 // the end the op leaves: its position in the step's out
	price int64 // the op's price after the saving of the run it continues
	fresh []int // the options of the step's fresh variables, in scope order
}

// locals returns st's moves under the allowed options, nil when the step
// has no gone variable with more than one option or there is a budget.
// A price on bytes (budget.go) keeps the moves exact: it is part of the
// price of the entry (solver.entry), a function of the options alone.
func (s *solver) locals(st *step) *locals {
	if s.budget != 0 {
		return nil
	}
	nf := len(st.front)
	g := &locals{}
	goneN := 1
	for j := nf; j < len(st.scope); j++ {
		if st.nStride[j] != 0 {
			g.kept = append(g.kept, j)
		} else {
			g.gone = append(g.gone, j)
			goneN *= len(s.m.vars[st.scope[j]].options)
		}
	}
	if goneN <= 1 {
		return nil
	}
	g.readStride = make([]int, nf)
	reads := 1
	for j := nf - 1; j >= 0; j-- {
		if st.tStride[j] != 0 {
			g.readStride[j] = reads
			reads *= len(s.m.vars[st.front[j]].options)
		}
	}
	keptVars, goneVars := s.varsAt(st, g.kept), s.varsAt(st, g.gone)
	u := make([]int, len(g.kept))
	for ok := s.first(keptVars, u); ok; ok = s.following(keptVars, u) {
		off := 0
		for i, j := range g.kept {
			off += u[i] * st.nStride[j]
		}
		g.keptVals, g.keptOff = append(g.keptVals, slices.Clone(u)), append(g.keptOff, off)
	}
	g.reads, g.goneVars = reads, goneVars
	g.moves = make([][]move, reads*len(st.in)*len(g.keptVals))
	g.each(s, st, func(group int, in int32, vals []int) {
		g.moves[group] = s.better(st, g.moves[group], vals, in)
	})
	return g
}

// each calls f with every combination of the options the op reads of the
// front, the end of run before it (in), and the allowed options of the
// fresh variables (vals, in scope order; the front's that the op does not
// read 0), and the index of its group.
func (g *locals) each(s *solver, st *step, f func(group int, in int32, vals []int)) {
	vals := make([]int, len(st.scope))
	l := make([]int, len(g.gone))
	for read := range g.reads {
		g.decodeRead(s, st, read, vals)
		for inPos, in := range st.in {
			for ui, u := range g.keptVals {
				scatter(vals, g.kept, u)
				group := g.group(len(st.in), read, inPos, ui)
				for ok := s.first(g.goneVars, l); ok; ok = s.following(g.goneVars, l) {
					scatter(vals, g.gone, l)
					f(group, in, vals)
				}
			}
		}
	}
}

// better adds to list, the best move per end so far, the options vals of
// st's scope after a run ending on devices in, when the op can run so and
// it is the first cheapest of its end.
func (s *solver) better(st *step, list []move, vals []int, in int32) []move {
	ti, ni, c := s.entry(st, vals, in)
	if c == maxCost {
		return list
	}
	end := int32(ni % len(st.out))
	mv := move{ti: int32(ti), end: end, price: c}
	i := slices.IndexFunc(list, func(m move) bool { return m.end == end })
	if i < 0 {
		mv.fresh = slices.Clone(vals[len(st.front):])
		return append(list, mv)
	}
	old := &list[i]
	if c < old.price || c == old.price && s.comboLess(st.index, mv.ti, old.ti) {
		mv.fresh = append(old.fresh[:0], vals[len(st.front):]...)
		*old = mv
	}
	return list
}

// comboLess reports whether entry ca of step i's table comes before entry
// cb in search order.
func (s *solver) comboLess(i, ca, cb int32) bool {
	_, less := s.comboDiff(i, ca, cb, math.MaxInt, false)
	return less
}

// decodeRead writes into vals the options of the front variables the op
// reads under index read.
func (g *locals) decodeRead(s *solver, st *step, read int, vals []int) {
	for j := len(g.readStride) - 1; j >= 0; j-- {
		if g.readStride[j] != 0 {
			n := len(s.m.vars[st.front[j]].options)
			vals[j], read = read%n, read/n
		}
	}
}

// group is the index in moves of the options read of the front, the end
// of run before the op and the kept variables' options.
func (g *locals) group(ins, read, inPos, kept int) int {
	return (read*ins+inPos)*len(g.keptVals) + kept
}

// varsAt is the variables at positions of st's scope.
func (s *solver) varsAt(st *step, positions []int) []int {
	out := make([]int, len(positions))
	for i, j := range positions {
		out[i] = st.scope[j]
	}
	return out
}

// scatter writes vals[i] at position positions[i] of into.
func scatter(into, positions, vals []int) {
	for i, j := range positions {
		into[j] = vals[i]
	}
}

// eachMove calls f with every move of every reachable state of layer
// (index fs): vals holds the state's options and the move's fresh ones,
// ni is the index of the state after it, and group the move's group.
func (s *solver) eachMove(st *step, g *locals, layer [][]*entry, f func(fs int, vals []int, mv *move, ni, group int) bool) bool {
	nf := len(st.front)
	vals := make([]int, len(st.scope))
	for fs, list := range layer {
		if len(list) == 0 {
			continue
		}
		s.decode(st.front, fs/len(st.in), vals[:nf])
		read, base := 0, 0
		for j := range nf {
			read += vals[j] * g.readStride[j]
			base += vals[j] * st.nStride[j]
		}
		inPos := fs % len(st.in)
		for ui, off := range g.keptOff {
			group := g.group(len(st.in), read, inPos, ui)
			for i := range g.moves[group] {
				mv := &g.moves[group][i]
				copy(vals[nf:], mv.fresh)
				if !f(fs, vals, mv, (base+off)*len(st.out)+int(mv.end), group) {
					return false
				}
			}
		}
	}
	return true
}

// backwardMoves is the backward pass's step st by its moves (g): per
// state before the op its best way to finish (before, its first list in
// slots), and the marginals of the op's fresh variables. A kept
// variable's come from the moves; a gone variable's from every option of
// the op's table, through the cheapest way to reach and leave its group
// at the end it leaves (what the moves of the group share but the op's
// price).
func (s *solver) backwardMoves(st *step, g *locals, layer [][]*entry, after, before [][]*tail, slots []*tail, marg [][]int64) {
	through := make([]int64, len(g.moves)*len(st.out))
	for i := range through {
		through[i] = maxCost
	}
	s.eachMove(st, g, layer, func(fs int, vals []int, mv *move, ni, group int) bool {
		if len(after[ni]) == 0 {
			return true
		}
		next := after[ni][0] // without a budget, the state's one way on
		cost := satAdd(mv.price, next.cost)
		if before[fs] == nil {
			before[fs] = slots[fs : fs : fs+1]
		}
		before[fs] = s.keepTail(before[fs], tail{cost: cost, next: next, combo: mv.ti, step: st.index})
		best, t := int64(maxCost), &through[group*len(st.out)+int(mv.end)]
		for _, e := range layer[fs] { // without a budget, each fits
			best = min(best, satAdd(e.cost, cost))
			*t = min(*t, satAdd(e.cost, next.cost))
		}
		for _, j := range g.kept {
			m := marg[st.scope[j]]
			m[vals[j]] = min(m[vals[j]], best)
		}
		return true
	})
	g.each(s, st, func(group int, in int32, vals []int) {
		_, ni, c := s.entry(st, vals, in)
		if c == maxCost {
			return
		}
		best := satAdd(through[group*len(st.out)+ni%len(st.out)], c)
		for _, j := range g.gone {
			m := marg[st.scope[j]]
			m[vals[j]] = min(m[vals[j]], best)
		}
	})
}
