package auto

import (
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nvcomm/nvcomm/internal/scale"
)

// TestLocalMoves checks that without a budget the programme extends each
// state by its op's moves, not by every option of the op's fresh
// variables, on a transformer-like block on a 2×2×4 mesh (random tables):
// the three steps whose op reads a weight no later op reads have moves,
// at most one per group and end of run after the op (at most the table's
// entries that can run times the ends before it, over all groups); the
// search visits each reachable state's moves alone there, at most a ninth
// of the combinations of states and fresh options (a weight's 27
// options); and the runner-ups' pass, by the moves too, agrees with a
// solve again on a sample of decisions. Under a budget no step has moves.
// That the moves choose as every combination would is TestExactSearch's,
// TestExactSearchTies' and TestRunnerUps'.
func TestLocalMoves(t *testing.T) {
	m := unpricedModel(t, string(scale.TransformerBlocks(1, []int{2, 2, 4})))
	randomTables(m, rand.New(rand.NewPCG(7, 8)), 50)
	s := newSolver(m, 0)
	best, err := s.solve()
	if err != nil || !s.exact {
		t.Fatalf("%v (exact %v)", err, s.exact)
	}
	// work is what the search visits: per reachable state, the moves of
	// its groups or every fresh option; of the steps with moves, all
	// their combinations and their moves.
	work, all, moved, withMoves := 0, 0, 0, 0
	for i, st := range s.steps {
		fresh := 1
		for _, k := range st.fresh {
			fresh *= len(m.vars[k].options)
		}
		g := s.locals(st)
		if g == nil {
			for _, list := range s.layers[i] {
				if len(list) > 0 {
					work += fresh
				}
			}
			continue
		}
		withMoves++
		for _, list := range s.layers[i] {
			if len(list) > 0 {
				all += fresh
			}
		}
		s.eachMove(st, g, s.layers[i], func(int, []int, *move, int, int) bool {
			moved++
			return true
		})
		runs, moves := 0, 0
		for _, c := range st.fa.table {
			if c != maxCost {
				runs++
			}
		}
		for _, list := range g.moves {
			ends := map[int32]bool{}
			for _, mv := range list {
				if ends[mv.end] {
					t.Errorf("op %q: two moves of one group end alike", st.fa.op.Expr())
				}
				ends[mv.end] = true
			}
			moves += len(list)
		}
		if moves > runs*len(st.in) {
			t.Errorf("op %q: %d moves, more than its %d entries that run times %d ends before it", st.fa.op.Expr(), moves, runs, len(st.in))
		}
		if budgeted := newSolver(m, 1<<62); budgeted.locals(st) != nil {
			t.Errorf("op %q has moves under a budget", st.fa.op.Expr())
		}
	}
	if withMoves != 3 { // the three linear layers
		t.Errorf("%d steps with moves, want 3", withMoves)
	}
	if s.work != work+moved {
		t.Errorf("the search visited %d combinations, want %d (%d of them moves)", s.work, work+moved, moved)
	}
	if moved*9 > all {
		t.Errorf("the steps with moves visited %d moves, more than a ninth of their %d combinations of states and fresh options", moved, all)
	}
	got := runnerUps(s, best, &reporter{})
	for n, k := range s.decisions {
		if n%3 != 0 {
			continue // solving again is slow: a sample
		}
		want, err := runnerUp(s, k, best)
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(want, got[n]); d != "" {
			t.Errorf("tensor %s (-solved again +from the tables):\n%s", m.vars[k].t.Name, d)
		}
	}
}
