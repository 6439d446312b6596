package auto

import (
	"cmp"
	"slices"

	"github.com/nvcomm/nvcomm/internal/cost"
	"github.com/nvcomm/nvcomm/internal/lower"
	"github.com/nvcomm/nvcomm/internal/syntax"
)

// This file is the search's last choice under lower --auto --step-graph
// (docs/auto.md, "Step graphs"). The tables price each op's steps as a
// list, the sum of their times; a plan lowered as a step graph takes its
// makespan instead, where one op's collective may run beside another's
// compute and a decomposed collective hides most of its transfer. An op's
// makespan depends on the ops around it, so it cannot be a column of one
// op's table. What the search can do is rank its best assignments by the
// makespan of their plans: the assignment it found and, for each of the
// MaxReranked decisions whose runner-up is the least slower, the best
// assignment that gives that decision another option (the runner-up's, a
// solve with the chosen option barred). Each is lowered as a step graph,
// and the one whose makespan is least is taken, the search's own on a
// tie.

// MaxReranked is how many runner-ups rerank lowers as step graphs beside
// the search's assignment: each costs a solve and a lowering, and those
// whose lists are much slower are unlikely to overlap back ahead.
const MaxReranked = 8

// Ranked is one assignment that lower --auto --step-graph ranks by its
// plan's makespan.
type Ranked struct {
	// Tensor and Placements name the runner-up (the decision that takes
	// another option, and which); both empty for the search's own
	// assignment.
	Tensor, Placements string
	// Listed is the search's price of the assignment (its ops' steps as
	// lists), Makespan its plan's as a step graph, both in seconds.
	Listed, Makespan float64
}

// rerank ranks the search's assignment best and its best runner-ups by
// the makespan of their plans as step graphs (the file's comment), sets
// res.Ranked, and where a runner-up is faster takes it: res.Fusion, its
// price and peak, and the decisions it changes, whose runner-up becomes
// the search's choice, slower by the makespans' difference (Decision.
// ByMakespan).
func rerank(res *Result, sv *solver, best *solution, tree *source, file string, opts Options) error {
	graph := opts.Lowering
	graph.StepGraph = true
	makespan := func(src []byte) (float64, bool) {
		f, err := syntax.Parse(file, src)
		if err != nil {
			return 0, false
		}
		p, err := lower.Lower(f, graph) // a step graph: Lower gives the steps their streams and waits
		if err != nil {
			return 0, false
		}
		pr, err := cost.Predict(graph.Topology, p)
		if err != nil {
			return 0, false
		}
		return pr.Total, true
	}
	own, ok := makespan(res.Fusion)
	if !ok {
		return nil // the caller's lowering reports why
	}
	res.Ranked = []Ranked{{Listed: float64(best.cost) / 1e12, Makespan: own}}
	// The decisions whose runner-ups are the least slower, in the order
	// of the decisions on a tie.
	var ks []int
	for i, k := range sv.decisions {
		if d := res.decision(sv.m.vars[k].t.Name); d != nil && d.RunnerUp != "" {
			ks = append(ks, i)
		}
	}
	slices.SortStableFunc(ks, func(a, b int) int {
		return cmp.Compare(res.decision(sv.m.vars[sv.decisions[a]].t.Name).Slower, res.decision(sv.m.vars[sv.decisions[b]].t.Name).Slower)
	})
	win, winSrc, winSol := -1, res.Fusion, best
	seen := map[string]bool{string(res.Fusion): true}
	for _, i := range ks[:min(len(ks), MaxReranked)] {
		k := sv.decisions[i]
		v := sv.m.vars[k]
		other := newSolver(sv.m, sv.budget)
		other.allowed[k] = make([]bool, len(v.options))
		for o := range v.options {
			other.allowed[k][o] = o != best.choice[k]
		}
		sol, err := other.solve()
		if err != nil || !other.exact {
			continue
		}
		src, err := annotateChoice(sv, tree, sol.choice)
		if err != nil {
			return err
		}
		if seen[string(src)] {
			continue // another decision's runner-up, already ranked
		}
		seen[string(src)] = true
		m, ok := makespan(src)
		if !ok {
			continue
		}
		res.Ranked = append(res.Ranked, Ranked{Tensor: v.t.Name, Placements: v.describe(sol.choice[k]), Listed: float64(sol.cost) / 1e12, Makespan: m})
		if m < res.Ranked[max(win, 0)].Makespan {
			win, winSrc, winSol = len(res.Ranked)-1, src, sol
		}
	}
	if win < 0 {
		return nil
	}
	res.Fusion, res.Seconds, res.PeakBytes = winSrc, float64(winSol.cost)/1e12, winSol.peak
	for _, k := range sv.decisions {
		v := sv.m.vars[k]
		d := res.decision(v.t.Name)
		if d == nil || winSol.choice[k] == best.choice[k] {
			continue
		}
		d.Chosen, d.RunnerUp, d.Slower, d.ByMakespan = v.describe(winSol.choice[k]), v.describe(best.choice[k]), own-res.Ranked[win].Makespan, true
	}
	return nil
}

// decision is res's decision of tensor name, nil when it has none (a
// composite's intermediate).
func (res *Result) decision(name string) *Decision {
	for i := range res.Decisions {
		if res.Decisions[i].Tensor == name {
			return &res.Decisions[i]
		}
	}
	return nil
}
