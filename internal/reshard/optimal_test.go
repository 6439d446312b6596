package reshard

import (
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestObjectiveOrder pins the two objectives' orders: time first, bytes
// breaking ties (then crossing bytes, all bytes, steps); or bytes of the
// busiest device first, then crossing bytes, time, all bytes, steps.
func TestObjectiveOrder(t *testing.T) {
	base := pathCost{busiest: 100, cross: 50, ps: 2e6, total: 400, steps: 3}
	tests := map[string]struct {
		obj    Objective
		better pathCost
		want   bool
	}{
		"time: less time beats more bytes":           {ObjectiveTime, pathCost{busiest: 999, cross: 500, ps: 1e6, total: 9999, steps: 9}, true},
		"time: same time, fewer busiest bytes":       {ObjectiveTime, pathCost{busiest: 99, cross: 500, ps: 2e6, total: 9999, steps: 9}, true},
		"time: same time and busiest, less crossing": {ObjectiveTime, pathCost{busiest: 100, cross: 49, ps: 2e6, total: 9999, steps: 9}, true},
		"time: then total bytes":                     {ObjectiveTime, pathCost{busiest: 100, cross: 50, ps: 2e6, total: 399, steps: 9}, true},
		"time: then steps":                           {ObjectiveTime, pathCost{busiest: 100, cross: 50, ps: 2e6, total: 400, steps: 2}, true},
		"time: more time loses to fewer bytes":       {ObjectiveTime, pathCost{busiest: 1, cross: 0, ps: 3e6, total: 1, steps: 1}, false},
		"time: equal is not less":                    {ObjectiveTime, base, false},
		"bytes: fewer busiest bytes beat everything": {ObjectiveBytes, pathCost{busiest: 99, cross: 500, ps: 1e9, total: 9999, steps: 9}, true},
		"bytes: fewer crossing bytes":                {ObjectiveBytes, pathCost{busiest: 100, cross: 49, ps: 1e9, total: 9999, steps: 9}, true},
		"bytes: same bytes, less time":               {ObjectiveBytes, pathCost{busiest: 100, cross: 50, ps: 1e6, total: 9999, steps: 9}, true},
		"bytes: same time, fewer total bytes":        {ObjectiveBytes, pathCost{busiest: 100, cross: 50, ps: 2e6, total: 399, steps: 9}, true},
		"bytes: fewer steps":                         {ObjectiveBytes, pathCost{busiest: 100, cross: 50, ps: 2e6, total: 400, steps: 2}, true},
		"bytes: more time loses a byte tie":          {ObjectiveBytes, pathCost{busiest: 100, cross: 50, ps: 3e6, total: 1, steps: 1}, false},
		"bytes: equal is not less":                   {ObjectiveBytes, base, false},
	}
	for name, tc := range tests {
		if got := costOrders[tc.obj].Less(tc.better, base); got != tc.want {
			t.Errorf("%s: Less = %v, want %v", name, got, tc.want)
		}
	}
}

// TestPathCostAdd checks that path costs add exactly, report a byte count
// past int64 instead of wrapping (issue 10): the search then leaves the
// path out, and saturate time, which only ranks paths.
func TestPathCostAdd(t *testing.T) {
	type result struct {
		Cost pathCost
		OK   bool
	}
	const maxI = math.MaxInt64
	a := pathCost{busiest: 1 << 62, cross: 1, total: 1 << 62, ps: 1, steps: 1}
	tests := map[string]struct {
		b    pathCost
		want result
	}{
		"fits": {pathCost{busiest: 1<<62 - 1, cross: 2, total: 1<<62 - 1, ps: 2, steps: 2},
			result{pathCost{busiest: maxI, cross: 3, total: maxI, ps: 3, steps: 3}, true}},
		"time saturates": {pathCost{ps: maxI},
			result{pathCost{busiest: 1 << 62, cross: 1, total: 1 << 62, ps: maxI, steps: 1}, true}},
		"busiest overflows": {pathCost{busiest: 1 << 62}, result{OK: false}},
		"total overflows":   {pathCost{total: 1 << 62}, result{OK: false}},
		"cross overflows":   {pathCost{cross: maxI}, result{OK: false}},
	}
	for name, tc := range tests {
		for _, obj := range Objectives {
			c, ok := costOrders[Objective(obj)].Add(a, tc.b)
			got := result{c, ok}
			if !ok {
				got = result{OK: false} // the cost is meaningless
			}
			if d := cmp.Diff(tc.want, got, cmp.AllowUnexported(pathCost{})); d != "" {
				t.Errorf("%s, %s: Add mismatch (-want +got):\n%s", name, obj, d)
			}
		}
	}
}

// TestPicoseconds checks the conversion of predicted times to the
// search's integers: rounded, never negative, saturated.
func TestPicoseconds(t *testing.T) {
	tests := map[float64]int64{0: 0, 1e-12: 1, 1.4e-12: 1, 2.5e-6: 2_500_000, -1: 0, 1e7: math.MaxInt64, math.Inf(1): math.MaxInt64, math.NaN(): math.MaxInt64}
	for in, want := range tests {
		if got := picoseconds(in); got != want {
			t.Errorf("picoseconds(%g) = %d, want %d", in, got, want)
		}
	}
}
