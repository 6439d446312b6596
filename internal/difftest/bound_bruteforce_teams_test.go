package difftest

import "slices"

// This file lists the teams of the brute-force bound test's steps: every
// set of teams, in every member order where the order matters.

// bfTeams lists the teams a step can take on a case's devices, each with
// the set of its members as a bit mask over the devices' positions.
type bfTeams struct {
	pos map[int]int // device → its bit
	// ordered are single teams of two or more devices, in every order;
	// sorted the same teams in ascending order only (for steps whose
	// result does not depend on it).
	ordered, sorted []bfTeamSet
	// equal are sets of one or more disjoint ordered teams of one size
	// (Allgather, AllToAll, ReduceScatter, Slice); unordered sets of
	// disjoint ascending teams of any sizes (Allreduce).
	equal, unordered []bfTeamSet
	// exch are the AllToAllVs over each set of equal, by its index
	// (exchanges); routes their routes.
	exch   [][]*bfExchange
	routes map[string]bool
}

// bfTeamSet is the teams of one step (device ids), the same as
// positions, and the mask of their members.
type bfTeamSet struct {
	teams, pos [][]int
	mask       uint64
}

// newBfTeams lists the teams on devs.
func newBfTeams(devs []int) *bfTeams {
	t := &bfTeams{pos: map[int]int{}}
	for i, d := range devs {
		t.pos[d] = i
	}
	for _, team := range bfSubsets(devs) {
		if len(team) < 2 {
			continue
		}
		t.sorted = append(t.sorted, t.set([][]int{team}))
		for _, o := range bfOrders(team) {
			t.ordered = append(t.ordered, t.set([][]int{o}))
		}
	}
	t.unordered = t.partitions(devs, 0, 0, nil, false)
	for size := 2; size <= len(devs); size++ {
		t.equal = append(t.equal, t.partitions(devs, size, 0, nil, true)...)
	}
	return t
}

// set is teams with their mask.
func (t *bfTeams) set(teams [][]int) bfTeamSet {
	s := bfTeamSet{teams: teams}
	for _, team := range teams {
		var pos []int
		for _, d := range team {
			pos = append(pos, t.pos[d])
		}
		s.pos = append(s.pos, pos)
		s.mask |= t.mask(team)
	}
	return s
}

// mask is the bit mask of devs.
func (t *bfTeams) mask(devs []int) uint64 {
	var m uint64
	for _, d := range devs {
		m |= 1 << t.pos[d]
	}
	return m
}

// partitions lists the sets of one or more disjoint teams over devs[from:]
// that extend cur (teams of size ≥ 2, of size size when it is not 0),
// each team's first device the smallest of those left, in every order of
// its members when ordered.
func (t *bfTeams) partitions(devs []int, size, from int, cur [][]int, ordered bool) []bfTeamSet {
	var out []bfTeamSet
	for i := from; i < len(devs); i++ {
		if len(bfUnused(devs[i:i+1], cur)) == 0 {
			continue // in a team already
		}
		for _, rest := range bfSubsets(bfUnused(devs[i+1:], cur)) {
			if len(rest) < 1 || (size > 0 && len(rest) != size-1) {
				continue
			}
			team := append([]int{devs[i]}, rest...)
			variants := [][]int{team}
			if ordered {
				variants = bfOrders(team)
			}
			for _, v := range variants {
				next := append(slices.Clip(cur), v)
				out = append(out, t.set(next))
				out = append(out, t.partitions(devs, size, i+1, next, ordered)...)
			}
		}
	}
	return out
}

// bfUnused is devs without the members of teams.
func bfUnused(devs []int, teams [][]int) []int {
	var out []int
	for _, d := range devs {
		if !slices.ContainsFunc(teams, func(team []int) bool { return slices.Contains(team, d) }) {
			out = append(out, d)
		}
	}
	return out
}

// bfSubsets lists the subsets of devs, each ascending.
func bfSubsets(devs []int) [][]int {
	var out [][]int
	for m := range 1 << len(devs) {
		var s []int
		for i, d := range devs {
			if m&(1<<i) != 0 {
				s = append(s, d)
			}
		}
		out = append(out, s)
	}
	return out
}

// bfOrders lists every order of team.
func bfOrders(team []int) [][]int {
	out := [][]int{slices.Clone(team)}
	for _, p := range bfPermutations(len(team)) {
		o := make([]int, len(team))
		for k, i := range p {
			o[k] = team[i]
		}
		out = append(out, o)
	}
	return out
}
