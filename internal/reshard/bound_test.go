package reshard

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// naiveLowerBound is LowerBound as its doc comment states it, one
// aggregate per op and every set tested against every aggregate: the
// oracle for the indexed one.
func naiveLowerBound(bound map[int]int64, ops []aggregate) int64 {
	best := int64(0)
	for _, b := range bound {
		best = max(best, b)
	}
	if len(ops) == 0 {
		return best
	}
	average := func(set []int) int64 {
		total := int64(0)
		for _, d := range set {
			total = saturatingAdd(total, bound[d])
		}
		for _, a := range ops {
			if !slices.ContainsFunc(a.devices, func(d int) bool { return !slices.Contains(set, d) }) {
				total = saturatingAdd(total, a.extra)
			}
		}
		return total / int64(len(set))
	}
	var union []int
	for _, a := range ops {
		best = max(best, average(a.devices))
		union = append(union, a.devices...)
	}
	slices.Sort(union)
	return max(best, average(slices.Compact(union)))
}

// TestLowerBoundIndexed compares LowerBound with the naive bound on
// random ledgers: ops over a few device sets (subsets of one another,
// overlapping, disjoint, past 64 devices), with extras that overflow.
func TestLowerBoundIndexed(t *testing.T) {
	sets := [][]int{{0, 1, 2, 3}, {0, 1}, {2, 3}, {0, 1, 2, 3, 4, 5, 6, 7}, {4, 5, 6, 7}, {8, 9}, {3, 70, 130}, {70}}
	r := rand.New(rand.NewPCG(1, 2))
	for trial := range 200 {
		l := NewLedger("t.yaml")
		var ops []aggregate
		for d := range 140 {
			if r.IntN(3) == 0 {
				l.bound[d] = r.Int64N(1000)
			}
		}
		for range r.IntN(30) {
			set := sets[r.IntN(len(sets))]
			extra := r.Int64N(5000)
			if r.IntN(50) == 0 {
				extra = math.MaxInt64 / 2
			}
			ops = append(ops, aggregate{set, extra})
			l.aggregates.add(set, extra)
		}
		if got, want := l.LowerBound(), naiveLowerBound(l.bound, ops); got != want {
			t.Fatalf("trial %d: LowerBound = %d, want %d", trial, got, want)
		}
	}
}

// TestAggregatesByDeviceSet checks that a ledger keeps one aggregate per
// distinct device set, whatever the number of reductions: LowerBound's
// work is then the square of the sets, not of the ops (a fusion of 100k
// reductions over two meshes took 76% of its lowering in the bound).
func TestAggregatesByDeviceSet(t *testing.T) {
	var a aggregates
	for i := range 10_000 {
		a.add([]int{0, 1, 2, 3}, 1)
		a.add([]int{0, 1, 2, 3, 4, 5, 6, 7}, int64(i%2))
		a.add([]int{4, 5, 6, 7}, 2)
	}
	want := []aggregate{{[]int{0, 1, 2, 3}, 10_000}, {[]int{0, 1, 2, 3, 4, 5, 6, 7}, 5_000}, {[]int{4, 5, 6, 7}, 20_000}}
	if d := cmp.Diff(want, a.list, cmp.AllowUnexported(aggregate{})); d != "" {
		t.Errorf("aggregates (-want +got):\n%s", d)
	}
}

// BenchmarkLowerBound books 1k, 10k and 100k reductions' aggregates over
// the device sets of a 2×4 and a 1-D mesh of the same 8 devices (one mesh,
// either half of the other) and computes the bound: ns/fusion-op must not
// grow with the ops (it grew linearly when every set was tested against
// every op's aggregate).
func BenchmarkLowerBound(b *testing.B) {
	sets := [][]int{{0, 1, 2, 3, 4, 5, 6, 7}, {0, 1, 2, 3}, {4, 5, 6, 7}}
	for _, n := range []int{1_000, 10_000, 100_000} {
		b.Run(fmt.Sprintf("ops_%dk", n/1000), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				l := NewLedger("b.yaml")
				for i := range n {
					l.bound[i%8] += int64(i)
					l.aggregates.add(sets[i%len(sets)], int64(i))
				}
				l.LowerBound()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/fusion-op")
		})
	}
}
