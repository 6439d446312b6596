package reshard

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/nvcomm/nvcomm/internal/plan"
)

// TestStepList adds steps across chunk boundaries, beyond the reserved
// head or within it, before and after all and a second reservation, and
// checks that at and all see every step in order, changes included.
func TestStepList(t *testing.T) {
	for _, n := range []int{0, 1, stepChunk - 1, stepChunk, stepChunk + 1, 3*stepChunk + 5} {
		for _, reserved := range []int{0, 1, n / 2, n, 2 * n} {
			var l stepList
			l.reserve(reserved)
			check := func(n int) {
				t.Helper()
				all := l.all()
				if len(all) != n || l.len() != n {
					t.Fatalf("%d steps: all has %d, len %d", n, len(all), l.len())
				}
				for i := range n {
					if all[i].ID != i || l.at(i).ID != i || all[i].Output != l.at(i).Output {
						t.Fatalf("%d steps: step %d is %d in all, %d at", n, i, all[i].ID, l.at(i).ID)
					}
				}
			}
			for i := range n {
				l.add(plan.Step{ID: i})
			}
			check(n)
			for i := range n {
				l.at(i).Output = "x"
			}
			check(n)
			l.reserve(2*n + 5)
			check(n)
			for i := n; i < n+stepChunk+2; i++ {
				l.add(plan.Step{ID: i, Output: "x"})
			}
			check(n + stepChunk + 2)
		}
	}
}

// TestStepListTruncate cuts lists of every shape (head only, head and
// chunks, at and across chunk boundaries) and adds steps again: at, all
// and len see exactly the kept steps and the new ones.
func TestStepListTruncate(t *testing.T) {
	for _, n := range []int{1, stepChunk, 2*stepChunk + 3} {
		for _, reserved := range []int{0, n / 2, n} {
			for _, keep := range []int{0, 1, n / 2, reserved, n - 1, n} {
				if keep > n {
					continue
				}
				var l stepList
				l.reserve(reserved)
				for i := range n {
					l.add(plan.Step{ID: i})
				}
				l.truncate(keep)
				if l.len() != keep {
					t.Fatalf("n %d, reserved %d: truncate(%d) leaves %d steps", n, reserved, keep, l.len())
				}
				for i := keep; i < keep+stepChunk+1; i++ {
					l.add(plan.Step{ID: i})
				}
				all := l.all()
				for i := range all {
					if all[i].ID != i || l.at(i).ID != i {
						t.Fatalf("n %d, reserved %d, keep %d: step %d is %d in all, %d at", n, reserved, keep, i, all[i].ID, l.at(i).ID)
					}
				}
				if len(all) != keep+stepChunk+1 {
					t.Fatalf("n %d, reserved %d, keep %d: %d steps after adding, want %d", n, reserved, keep, len(all), keep+stepChunk+1)
				}
			}
		}
	}
}

// TestStepListFlush adds steps in batches (ops) of every size around the
// chunk, flushing after each: flush hands out exactly the batch, in
// order, ids and len go on counting, and at, truncate and add work on
// the steps held after flushes.
func TestStepListFlush(t *testing.T) {
	for _, batches := range [][]int{{0}, {1, 1, 1}, {3, 0, 2}, {stepChunk + 1, 2, 3*stepChunk + 5, 1}} {
		var l stepList
		next := 0
		for _, n := range batches {
			for range n {
				l.add(plan.Step{ID: l.len()})
			}
			// The batch's last step is dropped and added again, as
			// fusePadSlice does, and the first renamed in place.
			if n > 0 {
				l.truncate(l.len() - 1)
				l.add(plan.Step{ID: l.len()})
				l.at(l.base).Output = "x"
			}
			var got []int
			l.flush(func(s *plan.Step) { got = append(got, s.ID) })
			want := make([]int, n)
			for i := range want {
				want[i] = next + i
			}
			if d := cmp.Diff(want, got, cmpopts.EquateEmpty()); d != "" {
				t.Fatalf("batches %v: flushed ids (-want +got):\n%s", batches, d)
			}
			next += n
			if l.len() != next || len(l.all()) != 0 {
				t.Fatalf("batches %v: len %d, holding %d after flush, want %d and 0", batches, l.len(), len(l.all()), next)
			}
		}
	}
}
