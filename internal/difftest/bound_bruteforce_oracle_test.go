package difftest

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"testing"

	"github.com/nvcomm/nvcomm/internal/cost"
	"github.com/nvcomm/nvcomm/internal/plan"
	"github.com/nvcomm/nvcomm/internal/sim"
)

// This file runs the brute-force bound test's search and judges what it
// finds with the oracles: plan.Validate, sim.Run, and the cost model for
// the time bound.

// bfNearMissEvery is how often a state that does not compute the output is
// finished anyway and simulated, to check that the model does not call a
// right plan wrong.
const bfNearMissEvery = 97

// bfMaxStates stops a search that grew out of hand.
const bfMaxStates = 300_000

// bfCount is what the search of one case found: the states searched, the
// plans that compute the output (exchanges of them with an AllToAllV) and
// the wrong ones simulated, the fewest bytes and least predicted time of a
// plan that passes (-1: none), of one with an AllToAllV too, and the steps
// of the first plan with each.
type bfCount struct {
	states, plans, wrong      int
	exchanges                 int
	exchangeFewest            int64
	exchangeFastest           float64
	fewest                    int64
	fastest                   float64
	fewestSteps, fastestSteps []plan.Step
}

// search visits every state from the input once, depth first, and judges
// the plans it finds.
func (w *bfWorld) search(t *testing.T) bfCount {
	n := bfCount{fewest: -1, fastest: -1, exchangeFewest: -1, exchangeFastest: -1}
	w.teams = newBfTeams(w.devs)
	w.teams.exchanges(len(w.devs))
	for _, p := range w.own {
		w.teams.addOwn(p, len(w.devs))
	}
	seen := bfSeen{}
	var visit func(s *bfState)
	visit = func(s *bfState) {
		if seen.dominated(s.key(), s.recv) {
			return
		}
		if n.states++; n.states > bfMaxStates {
			t.Fatalf("more than %d states: the case is too large to search", bfMaxStates)
		}
		if fin := w.finish(s); fin != nil {
			w.checkPlan(t, s, fin, &n)
			return // a longer plan receives at least as much
		}
		if n.states%bfNearMissEvery == 0 {
			w.checkNearMiss(t, s, &n)
		}
		w.expand(s, visit)
	}
	visit(w.initial())
	return n
}

// checkPlan validates and simulates a plan the model says computes the
// output.
func (w *bfWorld) checkPlan(t *testing.T, s *bfState, fin []plan.Step, n *bfCount) {
	p := w.planOf(s, fin)
	if err := bfOracle(p); err != nil {
		t.Errorf("the model says this plan computes the output, but %v:\n%s", err, bfDescribe(p.Steps))
		return
	}
	n.plans++
	if b := p.Summary.BytesReceivedMax; n.fewest < 0 || b < n.fewest {
		n.fewest, n.fewestSteps = b, p.Steps
	}
	secs := w.predict(t, p)
	if n.fastest < 0 || secs < n.fastest {
		n.fastest, n.fastestSteps = secs, p.Steps
	}
	if p.Summary.ByType[plan.AllToAllV] > 0 {
		n.exchanges++
		if b := p.Summary.BytesReceivedMax; n.exchangeFewest < 0 || b < n.exchangeFewest {
			n.exchangeFewest = b
		}
		if n.exchangeFastest < 0 || secs < n.exchangeFastest {
			n.exchangeFastest = secs
		}
	}
}

// predict is the time the cost model predicts for p on the built-in
// topology.
func (w *bfWorld) predict(t *testing.T, p *plan.Plan) float64 {
	pr, err := cost.Predict(w.topo, p)
	if err != nil {
		t.Fatalf("predicting %s: %v", bfDescribe(p.Steps), err)
	}
	return pr.Total
}

// checkNearMiss finishes a state the model says does not compute the
// output with its closest buffers: the plan must not PASS.
func (w *bfWorld) checkNearMiss(t *testing.T, s *bfState, n *bfCount) {
	fin := w.nearMiss(s)
	if fin == nil {
		return
	}
	p := w.planOf(s, fin)
	if bfOracle(p) == nil {
		t.Errorf("the model says this plan is wrong, but it validates and simulates PASS:\n%s", bfDescribe(p.Steps))
		return
	}
	n.wrong++
}

// bfOracle validates and simulates p: nil when it is valid and PASSes.
func bfOracle(p *plan.Plan) error {
	if probs := plan.Validate(p); len(probs) > 0 {
		return fmt.Errorf("invalid: %v", probs)
	}
	res, err := sim.Run(p, sim.Options{Seed: 7})
	if err != nil {
		return fmt.Errorf("simulation: %w", err)
	}
	if !res.Pass {
		return fmt.Errorf("simulation: %s", res.Mismatch)
	}
	return nil
}

// planOf is the plan of nvcomm's tensors and op with the steps of s and
// fin: ids, summary, and the axis Validate wants for every step.
func (w *bfWorld) planOf(s *bfState, fin []plan.Step) *plan.Plan {
	p := *w.p
	p.Steps = slices.Concat(w.steps(s), fin)
	byType := map[string]int{}
	p.Summary = plan.Summary{ByType: byType, BytesLowerBound: w.p.Summary.BytesLowerBound}
	for i := range p.Steps {
		st := &p.Steps[i]
		st.ID = i
		if st.Kind == plan.KindCollective {
			p.Summary.Collectives++
			byType[st.Type]++
		} else {
			p.Summary.LocalSteps++
		}
	}
	for _, r := range s.recv {
		p.Summary.BytesReceivedMax = max(p.Summary.BytesReceivedMax, r)
	}
	p.Summary.BytesRatio = plan.BytesRatio(p.Summary.BytesReceivedMax, p.Summary.BytesLowerBound)
	bfFixAxes(&p)
	return &p
}

// bfAxisProblem is Validate's message for a step whose axis is not the one
// it changes.
var bfAxisProblem = regexp.MustCompile(`^step (\d+) \(\w+\): axis is (\S+), but the step changes the sharding of axis (\S+)$`)

// bfFixAxes sets every step's axis to what Validate says it changes: the
// axis is a label for readers, not part of what a step does.
func bfFixAxes(p *plan.Plan) {
	for range len(p.Steps) + 1 {
		fixed := false
		for _, pr := range plan.Validate(p) {
			m := bfAxisProblem.FindStringSubmatch(pr.Text())
			if m == nil {
				continue
			}
			i, _ := strconv.Atoi(m[1])
			p.Steps[i].Axis, fixed = bfAxisOf(m[3]), true
		}
		if !fixed {
			return
		}
	}
}

// bfAxisOf reads an axis as Validate writes it: a number or null.
func bfAxisOf(s string) *int {
	a, err := strconv.Atoi(s)
	if err != nil {
		return nil
	}
	return &a
}
