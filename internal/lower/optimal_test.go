package lower

import "testing"

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
