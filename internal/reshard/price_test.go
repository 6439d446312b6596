package reshard_test

import (
	"math"
	"path/filepath"
	"testing"

	"github.com/nvcomm/nvcomm/internal/cost"
	"github.com/nvcomm/nvcomm/internal/lower"
	"github.com/nvcomm/nvcomm/internal/plan"
	"github.com/nvcomm/nvcomm/internal/reshard"
)

// TestSearchPricesWhatItEmits lowers every example, conformance and
// regression fusion under both objectives and checks that each path the
// search chose costs what the steps it emitted cost: the same number of
// steps, and the time cost.Predict gives them (within a picosecond a
// step, the search's rounding). The search ranks plans by this price, so
// a step emitted but not priced (a Permute, a Copy) would make it pick
// plans by a wrong time.
func TestSearchPricesWhatItEmits(t *testing.T) {
	type found struct {
		ps      int64
		steps   int
		emitted []plan.Step
	}
	var paths []found
	debug := reshard.Debug{Searched: func(ps int64, steps int, emitted []plan.Step) { paths = append(paths, found{ps, steps, emitted}) }}
	topo := cost.Default()
	checked := 0
	defer func() {
		if checked < 100 {
			t.Errorf("%d paths checked, want the corpus's (over 100)", checked)
		}
	}()
	for file, f := range corpus(t) {
		for _, obj := range reshard.Objectives {
			paths = nil
			p, err := lower.Lower(f, lower.Options{Objective: reshard.Objective(obj), Debug: debug})
			if err != nil {
				continue
			}
			checked += len(paths)
			for _, fd := range paths {
				seconds := 0.0
				for i := range fd.emitted {
					st, err := topo.Step(p, &fd.emitted[i])
					if err != nil {
						t.Fatalf("%s: %v", file, err)
					}
					seconds += st.Seconds
				}
				if n := len(fd.emitted); n != fd.steps || math.Abs(seconds*1e12-float64(fd.ps)) > float64(n) {
					t.Errorf("%s (%s): the search priced %d steps at %d ps; it emitted %d steps that cost %.0f ps: %v",
						filepath.Base(file), obj, fd.steps, fd.ps, n, seconds*1e12, stepTypes(fd.emitted))
				}
			}
		}
	}
}

// stepTypes lists the types of steps, for messages.
func stepTypes(steps []plan.Step) []string {
	out := make([]string, len(steps))
	for i := range steps {
		out[i] = steps[i].Type
	}
	return out
}
