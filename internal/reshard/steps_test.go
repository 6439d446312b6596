package reshard

import (
	"testing"

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
