package sim

import (
	"math/rand/v2"
	"slices"

	"github.com/nvcomm/nvcomm/internal/plan"
)

// order returns the positions of p's steps in the order to run them: the
// list's for a plan of format 1, or for seed 0; otherwise a random order
// that the step graph allows, drawn from seed. Each step waits for the
// steps its After lists and for the step before it on each stream of each
// of its devices (docs/plan.md, "The step graph"). A plan whose graph
// validates computes the same in every such order; running several is
// how simulate checks that on its own, without trusting the validator.
func order(p *plan.Plan, seed uint64) []int {
	n := len(p.Steps)
	list := make([]int, n)
	for i := range list {
		list[i] = i
	}
	if !p.Graph() || seed == 0 {
		return list
	}
	waits, next := dependencies(p)
	var ready []int
	for i := range n {
		if waits[i] == 0 {
			ready = append(ready, i)
		}
	}
	r := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	out := make([]int, 0, n)
	for len(ready) > 0 {
		k := r.IntN(len(ready))
		i := ready[k]
		ready[k] = ready[len(ready)-1]
		ready = ready[:len(ready)-1]
		out = append(out, i)
		for _, j := range next[i] {
			if waits[j]--; waits[j] == 0 {
				ready = append(ready, j)
			}
		}
	}
	return out
}

// dependencies returns, per step, how many steps it waits for, and per
// step the steps that wait for it: its After, and the previous step on
// each stream of each device it runs on.
func dependencies(p *plan.Plan) (waits []int, next [][]int) {
	n := len(p.Steps)
	waits, next = make([]int, n), make([][]int, n)
	type stream struct {
		device int
		name   string
	}
	last := map[stream]int{}
	for i := range p.Steps {
		s := &p.Steps[i]
		var before []int
		for _, a := range s.After {
			if a >= 0 && a < i {
				before = append(before, a)
			}
		}
		for _, d := range stepDevices(s) {
			key := stream{d, s.StreamName()}
			if prev, ok := last[key]; ok && prev != i { // a device in two of the step's teams (a ring's SendRecv)
				before = append(before, prev)
			}
			last[key] = i
		}
		slices.Sort(before)
		for _, a := range slices.Compact(before) {
			waits[i]++
			next[a] = append(next[a], i)
		}
	}
	return waits, next
}
