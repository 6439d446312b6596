package auto

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/dustin/go-humanize"
	"github.com/google/go-cmp/cmp"
)

// TestSolveWithinMatchesExact checks that the search that prices bytes
// before it proves its answer (solveWithin) returns what the exact
// programme returns, the same assignment on a tie, when the proof
// completes: on the exact-search layers, priced and with random tables
// full of ties, under no budget, a budget just above the smallest peak
// and one midway; and the same error when nothing fits.
func TestSolveWithinMatchesExact(t *testing.T) {
	for name, src := range exactLayers(t) {
		t.Run(name, func(t *testing.T) {
			m := buildModel(t, src)
			checkWithin(t, m)
			rng := rand.New(rand.NewPCG(3, 4))
			for range 4 {
				randomTables(m, rng, 3)
				checkWithin(t, m)
			}
		})
	}
}

// checkWithin compares solveWithin with solve on m under three budgets.
func checkWithin(t *testing.T, m *model) {
	t.Helper()
	lo, hi := minPeak(m), maxPeak(m)
	for _, budget := range []int64{0, lo + 1, (lo + hi) / 2, lo - 1} {
		want, wantErr := newSolver(m, budget).solve()
		s := newSolver(m, budget)
		got, err := s.solveWithin()
		if err != wantErr {
			t.Fatalf("budget %d: %v, want %v", budget, err, wantErr)
		}
		if err != nil {
			continue
		}
		if !s.exact || s.bound != 0 {
			t.Errorf("budget %d: exact %v, bound %d left set", budget, s.exact, s.bound)
		}
		if d := cmp.Diff(want, got, cmp.AllowUnexported(solution{})); d != "" {
			t.Errorf("budget %d (-solve +solveWithin):\n%s", budget, d)
		}
	}
}

// TestSolveWithinPastLimit checks the search under a budget that binds
// when the exact programme's tables pass their limit: plain solve
// finishes greedily from the cheapest partial assignment, which under a
// budget may not fit; solveWithin prices bytes and returns shardings
// that fit, no faster than the optimum and with a lower bound no higher
// than it.
func TestSolveWithinPastLimit(t *testing.T) {
	stopped := 0
	for name, src := range exactLayers(t) {
		t.Run(name, func(t *testing.T) {
			m := buildModel(t, src)
			lo, hi := minPeak(m), maxPeak(m)
			for _, budget := range []int64{lo + 1, (lo + hi) / 2} {
				opt, err := newSolver(m, budget).solve()
				if err != nil {
					continue // nothing fits: TestSolveWithinMatchesExact checks the error
				}
				free := newSolver(m, 0)
				if _, err := free.solve(); err != nil {
					t.Fatal(err)
				}
				s := newSolver(m, budget)
				// Room for the unbounded programme's tables, and a sixteenth of
				// that for the bounded proof: a Pareto set a state passes it.
				s.maxBytes = free.tableBytes + 1
				got, err := s.solveWithin()
				if err != nil {
					t.Fatalf("budget %d: %v", budget, err)
				}
				if got.peak > budget || got.cost < opt.cost || s.lower > opt.cost {
					t.Errorf("budget %d: peak %d, cost %d, lower bound %d; optimum %d", budget, got.peak, got.cost, s.lower, opt.cost)
				}
				if !s.exact {
					stopped++
				} else if d := cmp.Diff(opt, got, cmp.AllowUnexported(solution{})); d != "" {
					t.Errorf("budget %d: exact, but not the optimum (-want +got):\n%s", budget, d)
				}
			}
		})
	}
	if stopped == 0 {
		t.Error("no layer's proof stopped at the limit: the test checks nothing of the priced search")
	}
}

// TestTightBudget checks the error of a budget below every assignment's
// peak when the exact programme stops at its limit before it can prove
// that nothing fits: it says how little the shardings tried held, a
// peak some assignment has (no less than the smallest) and over the
// budget; and the message the user reads names both.
func TestTightBudget(t *testing.T) {
	m := buildModel(t, layers["2-D mesh"])
	lo := minPeak(m)
	s := newSolver(m, lo-1)
	s.maxBytes = 1
	_, err := s.solveWithin()
	var tight *tightError
	if !errors.As(err, &tight) || !errors.Is(err, errStopped) {
		t.Fatalf("solveWithin: %v, want a tightError", err)
	}
	if tight.least < lo {
		t.Errorf("the least peak tried %d, below the smallest peak of any assignment %d", tight.least, lo)
	}
	got := budgetHint(lo-1, err)
	want := fmt.Sprintf(" within a memory budget of %s per device; the shardings it tried hold %s a device at the least", humanize.IBytes(uint64(lo-1)), humanize.IBytes(uint64(tight.least)))
	if !strings.HasPrefix(got, want) {
		t.Errorf("hint %q, want it to begin %q", got, want)
	}
}
