package reshard

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestLeast checks the bound of an op that a plan computes either of two
// ways: a ledger that books Least(a, b) reports a bound no larger than a
// ledger that books a, or one that books b (whichever way the plan takes,
// the bound holds), and keeps what both ways must receive.
func TestLeast(t *testing.T) {
	type agg struct {
		devices []int
		extra   int64
	}
	bounds := func(device map[int]int64, aggs ...agg) Bounds {
		b := Bounds{device: device}
		for _, a := range aggs {
			b.aggs.add(a.devices, a.extra)
		}
		return b
	}
	tests := map[string]struct {
		a, b Bounds
		want int64
	}{
		"a sum against gathers: the sum's aggregate survives": {
			a:    bounds(map[int]int64{0: 128, 1: 128, 2: 128, 3: 128}, agg{[]int{0, 1, 2, 3}, 256}),
			b:    bounds(map[int]int64{0: 576, 1: 576, 2: 576, 3: 576}),
			want: 192,
		},
		"per device the smaller, which differs by device": {
			a:    bounds(map[int]int64{0: 100, 1: 0}),
			b:    bounds(map[int]int64{0: 0, 1: 100}),
			want: 50,
		},
		"one way needs nothing": {
			a:    bounds(map[int]int64{0: 100, 1: 100}, agg{[]int{0, 1}, 50}),
			b:    bounds(map[int]int64{}),
			want: 0,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			bound := func(bs ...Bounds) int64 {
				l := NewLedger("f.yaml")
				for _, b := range bs {
					l.Book(b)
				}
				return l.LowerBound()
			}
			prior := bounds(map[int]int64{0: 10, 5: 40}) // another op's
			got := bound(prior, Least(tc.a, tc.b))
			if got > bound(prior, tc.a) || got > bound(prior, tc.b) {
				t.Errorf("bound %d, above a way's: %d, %d", got, bound(prior, tc.a), bound(prior, tc.b))
			}
			if d := cmp.Diff(tc.want, bound(Least(tc.a, tc.b))); d != "" {
				t.Errorf("bound of Least alone (-want +got):\n%s", d)
			}
		})
	}
}
