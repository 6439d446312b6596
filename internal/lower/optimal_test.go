package lower

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestPathCostOrder pins the optimal policy's order: busiest-device bytes,
// then bytes crossing meshes, then predicted time (byte ties are broken by
// time), then total bytes, then steps.
func TestPathCostOrder(t *testing.T) {
	base := pathCost{busiest: 100, cross: 50, seconds: 2e-6, total: 400, steps: 3}
	tests := map[string]struct {
		better pathCost
		want   bool
	}{
		"fewer busiest bytes beat everything": {pathCost{busiest: 99, cross: 500, seconds: 1, total: 9999, steps: 9}, true},
		"fewer crossing bytes":                {pathCost{busiest: 100, cross: 49, seconds: 1, total: 9999, steps: 9}, true},
		"same bytes, less time":               {pathCost{busiest: 100, cross: 50, seconds: 1e-6, total: 9999, steps: 9}, true},
		"same time, fewer total bytes":        {pathCost{busiest: 100, cross: 50, seconds: 2e-6, total: 399, steps: 9}, true},
		"fewer steps":                         {pathCost{busiest: 100, cross: 50, seconds: 2e-6, total: 400, steps: 2}, true},
		"equal is not less":                   {base, false},
		"more time loses a byte tie":          {pathCost{busiest: 100, cross: 50, seconds: 3e-6, total: 1, steps: 1}, false},
	}
	for name, tc := range tests {
		if got := tc.better.less(base); got != tc.want {
			t.Errorf("%s: less = %v, want %v", name, got, tc.want)
		}
	}
}

// TestPathCostPlus checks that path costs add exactly, and report a byte
// count past int64 instead of wrapping (issue 10): the search then leaves
// the path out.
func TestPathCostPlus(t *testing.T) {
	type result struct {
		Cost pathCost
		OK   bool
	}
	const maxI = 1<<63 - 1
	a := pathCost{busiest: 1 << 62, cross: 1, total: 1 << 62, seconds: 1, steps: 1}
	tests := map[string]struct {
		b    pathCost
		want result
	}{
		"fits": {pathCost{busiest: 1<<62 - 1, cross: 2, total: 1<<62 - 1, seconds: 2, steps: 2},
			result{pathCost{busiest: maxI, cross: 3, total: maxI, seconds: 3, steps: 3}, true}},
		"busiest overflows": {pathCost{busiest: 1 << 62}, result{OK: false}},
		"total overflows":   {pathCost{total: 1 << 62}, result{OK: false}},
		"cross overflows":   {pathCost{cross: maxI}, result{OK: false}},
	}
	for name, tc := range tests {
		c, ok := a.plus(tc.b)
		got := result{c, ok}
		if !ok {
			got = result{OK: false} // the cost is meaningless
		}
		if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(pathCost{})); diff != "" {
			t.Errorf("%s: plus mismatch (-want +got):\n%s", name, diff)
		}
	}
}
