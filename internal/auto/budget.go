package auto

import "math"

// A memory budget that binds makes the programme keep, per state, every
// partial assignment not dominated in time and bytes (solve.go). On a
// training step those sets grow with every block — each block's weights
// can be held whole, split along tp, or sharded along a data axis, at a
// different price — until the tables pass maxTableBytes and the search
// stops, with nothing that fits to show for it.
//
// solveWithin avoids that in two moves. First it finds an assignment that
// fits by pricing bytes: the programme without a budget, each op's price
// raised by a price λ on the bytes of the tensors it brings in (a
// Lagrangian relaxation of the budget, Everett 1963, the bytes a device
// ever allocates standing for its peak), keeps one partial assignment a
// state, so it costs what the unbounded search costs; a larger λ holds
// fewer bytes at a higher time. A geometric search over λ finds the cheapest of these
// that fits. Then the exact programme runs again under the budget,
// bounded by that assignment's cost: a partial assignment that cannot
// finish as cheaply (its cost and the later ops' least prices) is
// dropped, which keeps the sets of the states small. When it completes,
// its answer is the optimum, proven; when it stops at its limits, the
// priced assignment is the answer, with the unbounded search's time as
// the lower bound that Gap reports.

// Priced search: λ starts at the unbounded optimum's time a byte of its
// peak (bytes then weigh about as much as time), grows by lambdaGrowth
// until an assignment fits (at most lambdaTries times, and no longer
// than it finds smaller ones: lambdaStalls), and is then
// bisected geometrically lambdaBisections times between the largest
// that did not fit and the smallest that did.
const (
	lambdaGrowth     = 4
	lambdaTries      = 24
	lambdaBisections = 6
	// lambdaStalls ends the growth when that many larger λ in a row
	// found no assignment smaller than the least so far: the price then
	// holds the fewest bytes it can, and no larger one will fit.
	lambdaStalls = 3
)

// proofShare is the share of maxTableBytes the exact programme may use
// to prove the priced assignment the fastest, or to find a faster one,
// before the priced one is the answer: where the sets of the states stay
// wide even under the bound (a training step of many blocks), the proof
// would cost minutes for a gap the priced search already bounds.
const proofShare = 16

// solveFor is the search Solve runs: solveWithin for a caller that needs
// no runner-ups; for one that does, the exact programme, whose layers the
// runner-ups read, and where under a budget it stops at its limits (so
// that it has no runner-ups to show either), solveWithin's answer when
// that is cheaper, or fits where the greedy finish did not.
func (s *solver) solveFor(runnerUps bool) (*solution, error) {
	if !runnerUps {
		return s.solveWithin()
	}
	sol, err := s.solve()
	if s.budget <= 0 || s.exact || err != nil && err != errStopped {
		return sol, err
	}
	lower := s.lower
	alt, altErr := s.solveWithin()
	switch {
	case altErr != nil && err != nil:
		return nil, altErr // errInfeasible proven, or how little the shardings tried held
	case altErr == nil && (err != nil || alt.cost < sol.cost):
		sol = alt
	default:
		s.exact = false
	}
	s.lower = max(s.lower, lower)
	if s.exact {
		s.lower = 0
	}
	return sol, nil
}

// solveWithin is solve under the budget, for a caller that needs no
// runner-ups: the layers it keeps are bounded by the priced assignment's
// cost, so a runner-up slower than that would read as none.
func (s *solver) solveWithin() (*solution, error) {
	if s.budget <= 0 {
		return s.solve()
	}
	pr, err := s.priced()
	if err != nil {
		// Nothing priced fits: the exact programme, within its share of the
		// tables, proves that nothing does or finds what does; past that it
		// says how little the shardings tried held.
		maxBytes := s.maxBytes
		s.maxBytes = maxBytes / proofShare
		defer func() { s.maxBytes = maxBytes }()
		sol, err := s.solve()
		if err == errStopped && pr.least > 0 {
			return nil, &tightError{least: pr.least}
		}
		return sol, err
	}
	// Its layers, bounded by the priced assignment's cost or none, give
	// no runner-ups.
	defer func() { s.noRunnerUps = true }()
	if pr.optimal {
		s.exact, s.lower = true, 0
		return pr.fit, nil
	}
	maxBytes := s.maxBytes
	s.bound, s.maxBytes = pr.fit.cost, maxBytes/proofShare
	defer func() { s.bound, s.maxBytes = 0, maxBytes }()
	sol, err := s.solve()
	if err == nil && s.exact {
		return sol, nil
	}
	// Stopped: the greedy finish, when it beat the priced assignment, or
	// that one. The bounded search's lower bound holds as the exact
	// one's does (what it dropped cannot beat the priced assignment), and
	// so does the unbounded optimum's time.
	lower := min(max(s.lower, pr.lower), pr.fit.cost)
	if err != nil || sol.cost >= pr.fit.cost {
		sol = pr.fit
	}
	s.exact, s.lower = false, lower
	return sol, nil
}

// pricedResult is what the search with a price on bytes found.
type pricedResult struct {
	// fit is the cheapest assignment found within the budget.
	fit *solution
	// optimal says fit is the unbounded optimum, which fits: the optimum
	// under the budget too.
	optimal bool
	// lower is the unbounded optimum's cost, a lower bound on the
	// optimum under the budget (0 when that search stopped at a limit).
	lower int64
	// least is the smallest peak of the assignments tried.
	least int64
}

// tightError reports a budget that no assignment the search tried fits,
// and the exact programme stopped at its limit before it could say
// whether one does: least is the smallest peak of those tried, what the
// budget would need to be raised to for them.
type tightError struct{ least int64 }

func (e *tightError) Error() string { return errStopped.Error() }

// Unwrap makes a tightError errStopped to errors.Is.
func (e *tightError) Unwrap() error { return errStopped }

// priced searches with bytes priced at λ for the cheapest assignment that
// fits the budget. It returns an error when none of the prices tried made
// one fit.
func (s *solver) priced() (pricedResult, error) {
	var pr pricedResult
	free, exact, err := s.atPrice(0)
	if err != nil {
		return pr, err
	}
	pr.least = free.peak
	if exact {
		pr.lower = free.cost
	}
	if sol, err := s.evaluate(free); err == nil {
		pr.fit, pr.optimal = sol, exact
		if exact {
			return pr, nil
		}
	}
	base := float64(max(free.cost, 1)) / float64(max(free.peak, 1))
	lo, hi := 0.0, 0.0
	for i, lambda, stalled := 0, base, 0; i < lambdaTries && hi == 0 && stalled < lambdaStalls; i, lambda = i+1, lambda*lambdaGrowth {
		least := pr.least
		if sol := s.tryPrice(lambda, &pr.least); sol != nil {
			pr.fit, hi = cheaper(pr.fit, sol), lambda
		} else {
			lo = lambda
		}
		if stalled++; pr.least < least {
			stalled = 0
		}
	}
	if pr.fit == nil {
		return pr, errInfeasible
	}
	for i := 0; i < lambdaBisections && hi > 0; i++ {
		mid := hi / lambdaGrowth
		if lo > 0 {
			mid = math.Sqrt(lo * hi)
		}
		if sol := s.tryPrice(mid, &pr.least); sol != nil {
			pr.fit, hi = cheaper(pr.fit, sol), mid
		} else {
			lo = mid
		}
	}
	return pr, nil
}

// cheaper is the cheaper of a (nil: none) and b, a on a tie.
func cheaper(a, b *solution) *solution {
	if a == nil || b.cost < a.cost {
		return b
	}
	return a
}

// tryPrice is the assignment the search with bytes priced at lambda
// finds, evaluated under the budget; nil when it does not fit. It lowers
// least to the assignment's peak when that is less.
func (s *solver) tryPrice(lambda float64, least *int64) *solution {
	sol, _, err := s.atPrice(lambda)
	if err != nil {
		return nil
	}
	*least = min(*least, sol.peak)
	fit, err := s.evaluate(sol)
	if err != nil {
		return nil
	}
	return fit
}

// atPrice solves without a budget, bytes priced at lambda cost units a
// byte, and reports whether that search was exact.
func (s *solver) atPrice(lambda float64) (*solution, bool, error) {
	p := s.sibling(0)
	p.penalty = lambda
	sol, err := p.solve()
	return sol, p.exact, err
}

// evaluate is assignment sol's cost and peak as the programme prices them
// without a price on bytes, under the budget: an error when it does not
// fit.
func (s *solver) evaluate(sol *solution) (*solution, error) {
	q := s.sibling(s.budget)
	for k, v := range s.m.vars {
		q.allowed[k] = make([]bool, len(v.options))
		q.allowed[k][sol.choice[k]] = true
	}
	return q.solve()
}

// sibling is a solver of s's model, steps, allowed options and deadline
// under budget, with none of its tables.
func (s *solver) sibling(budget int64) *solver {
	allowed := make([][]bool, len(s.allowed))
	copy(allowed, s.allowed)
	return &solver{m: s.m, budget: budget, allowed: allowed, decisions: s.decisions, pos: s.pos, steps: s.steps,
		deadline: s.deadline, maxScope: s.maxScope, maxBytes: s.maxBytes}
}

// priceBytes is n bytes priced at s.penalty, in cost units.
func (s *solver) priceBytes(n int64) int64 {
	c := s.penalty * float64(n)
	if c >= math.MaxInt64/2 {
		return math.MaxInt64 / 2
	}
	return int64(c)
}
