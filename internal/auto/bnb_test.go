package auto

import (
	"errors"
	"slices"

	"github.com/nvcomm/nvcomm/internal/checked"
)

// bnb is the solver auto had before the dynamic programme of solve.go, kept
// as a reference the tests compare the new one with: an exact branch and bound over the decisions in fusion
// order (inputs, then each op's output: a topological order). A node
// fixes the options of a prefix of the decisions; its bound is, per op,
// the cheapest entry of the op's table that agrees with what is fixed —
// every completion pays at least that for each op, so the bound never
// exceeds the best completion's cost and no better assignment is pruned.
// Memory: the peak over ops of the bytes live on a device, with each
// unfixed decision at its smallest option, is at most any completion's
// peak; a node over the budget is pruned. Options are tried in candidate
// order (Replicate first) and only a strictly cheaper assignment replaces
// the best, so equal costs resolve the same way on every run.

// maxNodes bounds the reference search: past it, it stops and keeps the
// best assignment found so far.
const maxNodes = 2_000_000

// errTooLarge stops a search past maxNodes.
var errTooLarge = errors.New("the search for the best shardings visited more than 2,000,000 assignments")

type bnb struct {
	m      *model
	budget int64 // 0: none
	// allowed restricts each variable's options (nil: all).
	allowed   [][]bool
	decisions []int // variable indices, in search order
	choice    []int // -1: not fixed
	best      *solution
	nodes     int
	// maxNodes is maxNodes but in tests.
	maxNodes int
}

func newBnB(m *model, budget int64) *bnb {
	s := &bnb{m: m, budget: budget, allowed: make([][]bool, len(m.vars)), choice: make([]int, len(m.vars)), maxNodes: maxNodes}
	for k, v := range m.vars {
		s.choice[k] = -1
		if !v.decision {
			s.choice[k] = 0
			continue
		}
		s.decisions = append(s.decisions, k)
	}
	return s
}

// solve returns the cheapest assignment within the budget, and whether
// the search finished: false when it stopped at maxNodes with the best
// assignment it had found.
func (s *bnb) solve() (*solution, bool, error) {
	s.best, s.nodes = nil, 0
	for _, k := range s.decisions {
		s.choice[k] = -1
	}
	err := s.search(0)
	switch {
	case err != nil && s.best == nil:
		return nil, false, err
	case s.best == nil:
		return nil, true, errInfeasible
	}
	return s.best, err == nil, nil
}

func (s *bnb) search(depth int) error {
	s.nodes++
	if s.nodes > s.maxNodes {
		return errTooLarge
	}
	bound, ok := s.bound()
	if !ok || s.best != nil && bound >= s.best.cost {
		return nil
	}
	peak := s.peak()
	if s.budget > 0 && peak > s.budget {
		return nil
	}
	if depth == len(s.decisions) {
		if cost := bound + s.m.joinedRuns(s.choice); s.best == nil || cost < s.best.cost {
			s.best = &solution{choice: slices.Clone(s.choice), cost: cost, peak: peak}
		}
		return nil
	}
	k := s.decisions[depth]
	for o := range s.m.vars[k].options {
		if s.allowed[k] != nil && !s.allowed[k][o] {
			continue
		}
		s.choice[k] = o
		if err := s.search(depth + 1); err != nil {
			return err
		}
	}
	s.choice[k] = -1
	return nil
}

// bound is the sum over ops of the cheapest table entry that agrees with
// the fixed options, less the saving of its first step continuing a run
// (cost.Ends), which it may; false when some op has none (or the sum
// overflows). With every decision fixed, adding joinedRuns makes it the
// assignment's cost.
func (s *bnb) bound() (int64, bool) {
	total := int64(0)
	var combo []int
	for _, fa := range s.m.factors {
		best := int64(maxCost)
		for i, c := range fa.table {
			if c != maxCost && fa.ends != nil && fa.ends[i].head != 0 {
				c -= fa.ends[i].saving
			}
			if c >= best {
				continue
			}
			combo = s.m.combination(fa, i, combo)
			if s.agrees(fa, combo) {
				best = c
			}
		}
		var ok bool
		if total, ok = checked.Add(total, best); !ok || best == maxCost {
			return 0, false
		}
	}
	return total, true
}

// agrees reports whether combo (options of fa's vars) keeps every fixed
// option and every restriction.
func (s *bnb) agrees(fa *factor, combo []int) bool {
	for j, k := range fa.vars {
		if c := s.choice[k]; c >= 0 && c != combo[j] || s.allowed[k] != nil && !s.allowed[k][combo[j]] {
			return false
		}
	}
	return true
}

// peak is the most bytes a device holds during any op, unfixed decisions
// at their smallest option.
func (s *bnb) peak() int64 {
	most := int64(0)
	for i := range max(len(s.m.f.Ops), 1) {
		live, ok := int64(0), true
		for k, v := range s.m.vars {
			if v.first > i || v.last < i {
				continue
			}
			b := slices.Min(v.bytes)
			if c := s.choice[k]; c >= 0 {
				b = v.bytes[c]
			}
			if live, ok = checked.Add(live, b); !ok {
				return maxCost // more than any budget
			}
		}
		most = max(most, live)
	}
	return most
}

// joinedRuns is, for a complete assignment, the savings bound subtracts
// for a first step continuing a run that it does not continue: bound plus
// it is the sum of the ops' prices, each less its saving where its first
// step continues the run its predecessor (or the op before an op of no
// steps) ends.
func (m *model) joinedRuns(choice []int) int64 {
	total, in := int64(0), int32(0)
	var combo []int
	for _, fa := range m.factors {
		if fa.ends == nil {
			in = 0
			continue
		}
		combo = combo[:0]
		for _, k := range fa.vars {
			combo = append(combo, choice[k])
		}
		e := fa.ends[tableEntry(m, fa, combo)]
		if e.head != 0 && e.head != in {
			total += e.saving
		}
		if !e.empty {
			in = e.tail
		}
	}
	return total
}
