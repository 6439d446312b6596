package cost

import (
	"maps"
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nvcomm/nvcomm/internal/plan"
)

// allToAllV is an AllToAllV step of teams and split sizes counts; its
// count is the first row's sum, as a valid step's.
func allToAllV(teams, counts [][]int) plan.Step {
	in := 0
	if len(counts) > 0 {
		for _, n := range counts[0] {
			in += n
		}
	}
	return plan.Step{Kind: plan.KindCollective, Type: plan.AllToAllV, Teams: teams, SendCounts: counts, Count: plan.Count{Input: in, Output: in}}
}

// TestExchangeReceived: the most bytes a member of an AllToAllV's team
// receives from the other devices: its column of the split sizes, less
// its own chunk and the chunks of members that are the same device.
func TestExchangeReceived(t *testing.T) {
	tests := map[string]struct {
		team   []int
		counts [][]int
		size   int64
		want   int64
	}{
		// Columns less the diagonal: 1048, 1048, 1048, 848 elements.
		"unequal chunks, self chunks": {
			team: []int{0, 1, 2, 3},
			counts: [][]int{
				{1000, 600, 300, 148},
				{48, 1000, 700, 300},
				{500, 148, 1000, 400},
				{500, 300, 48, 1200},
			},
			size: 4, want: 4192,
		},
		// Member 2 receives 5 + 7 from the others; its own 100 stays.
		"busiest by column": {
			team:   []int{4, 5, 6},
			counts: [][]int{{1, 2, 5}, {3, 4, 7}, {0, 0, 100}},
			size:   2, want: 24,
		},
		"every chunk kept": {
			team: []int{0, 1}, counts: [][]int{{9, 0}, {0, 9}}, size: 8, want: 0,
		},
		// Members 0 and 2 are one device: what they send each other stays
		// on it. Member 0 receives 2 (from member 1), member 2 receives 20.
		"duplicated device not counted": {
			team:   []int{0, 1, 0},
			counts: [][]int{{1, 10, 1000}, {2, 1, 20}, {3000, 30, 1}},
			size:   1, want: 40,
		},
		// Malformed split sizes, which validate reports: missing rows and
		// counts send nothing, extra ones go to nobody.
		"rows missing": {
			team: []int{0, 1, 2}, counts: [][]int{{0, 5, 6}}, size: 1, want: 6,
		},
		"rows past the team": {
			team: []int{0, 1}, counts: [][]int{{0, 1}, {2, 0}, {100, 100}}, size: 1, want: 2,
		},
		"row too short": {
			team: []int{0, 1}, counts: [][]int{{0}, {2, 0}}, size: 1, want: 2,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s := allToAllV([][]int{tc.team}, tc.counts)
			got, ok := exchangeReceived(&s, tc.team, tc.size)
			if !ok {
				t.Fatal("exchangeReceived overflowed")
			}
			if got != tc.want {
				t.Errorf("exchangeReceived = %d, want %d", got, tc.want)
			}
		})
	}
}

// TestExchangeReceivedOverflow: bytes past int64 are an overflow, the sum
// of elements and their product with the size alike.
func TestExchangeReceivedOverflow(t *testing.T) {
	const big = math.MaxInt64/2 + 1
	for name, tc := range map[string]struct {
		counts [][]int
		size   int64
		ok     bool
	}{
		"at the limit":  {[][]int{{0, 0, 0}, {math.MaxInt64 / 2, 0, 0}, {math.MaxInt64 / 2, 0, 0}}, 1, true},
		"sum":           {[][]int{{0, 0, 0}, {big, 0, 0}, {big, 0, 0}}, 1, false},
		"times size":    {[][]int{{0, 0, 0}, {big, 0, 0}, {0, 0, 0}}, 2, false},
		"kept, not sum": {[][]int{{big, 0, 0}, {big, 0, 0}, {0, 0, 0}}, 1, true},
	} {
		team := []int{0, 1, 2}
		s := allToAllV([][]int{team}, tc.counts)
		if _, ok := exchangeReceived(&s, team, tc.size); ok != tc.ok {
			t.Errorf("%s: ok = %v, want %v", name, ok, tc.ok)
		}
	}
	s := allToAllV([][]int{{0, 1}}, [][]int{{0, math.MaxInt64 / 2}, {0, 0}})
	s.ID = 7
	_, err := testTopology().Step(stepPlan(), &s)
	if want := "step 7 (AllToAllV): its bytes exceed 9223372036854775807, the most nvcomm counts (int64); price the plan without a topology (--topology none)"; err == nil || err.Error() != want {
		t.Errorf("Step of a chunk of 2^62 float32s: %v, want %q", err, want)
	}
}

// stepPlan is a plan whose op 0 writes float32 elements, for pricing a
// step on its own.
func stepPlan() *plan.Plan {
	return &plan.Plan{Tensors: []plan.Tensor{{Name: "a", DType: "float32"}, {Name: "b", DType: "float32"}},
		Ops: []plan.Op{{Input: "a", Output: "b"}}}
}

// TestStepAllToAllV prices AllToAllV steps: on the AllToAll line of the
// slowest team's link, at x = the bytes its busiest member receives, which
// is the StepTime's Bytes.
func TestStepAllToAllV(t *testing.T) {
	tp := testTopology()
	tp.NVLink.Collectives[plan.AllToAll] = Params{Bandwidth: 80, Latency: 8}
	line := func(link string, x int64) float64 {
		l := tp.NVLink
		if link == LinkNetwork {
			l = tp.Network
		}
		return l.For(plan.AllToAll).Seconds(float64(x))
	}
	skewed := [][]int{{10, 20, 30, 40}, {40, 10, 30, 20}, {25, 25, 25, 25}, {25, 45, 15, 15}}
	tests := map[string]struct {
		step plan.Step
		link string
		x    int64
	}{
		// Column 1 less its 10: 90 float32s.
		"nvlink": {allToAllV([][]int{{0, 1, 2, 3}}, skewed), LinkNVLink, 360},
		// Team [4 5 6 7] is one node too; team [0 1 2 3] reads the same.
		"two teams on their nodes": {allToAllV([][]int{{0, 1, 2, 3}, {4, 5, 6, 7}}, skewed), LinkNVLink, 360},
		// The team across nodes is the slowest, however equal its bytes.
		"slowest team crosses nodes": {allToAllV([][]int{{0, 1, 2, 3}, {6, 7, 8, 9}}, skewed), LinkNetwork, 360},
		"every chunk kept":           {allToAllV([][]int{{0, 1}}, [][]int{{1000, 0}, {0, 1000}}), LinkNVLink, 0},
		"large":                      {allToAllV([][]int{{0, 1}}, [][]int{{1 << 20, 3 << 20}, {3 << 20, 1 << 20}}), LinkNVLink, 12 << 20},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := tp.Step(stepPlan(), &tc.step)
			if err != nil {
				t.Fatal(err)
			}
			want := StepTime{Type: plan.AllToAllV, Link: tc.link, Bytes: tc.x, Seconds: line(tc.link, tc.x)}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Step mismatch (-want +got):\n%s", diff)
			}
			if s := tp.ExchangeSeconds(tc.link, tc.x); s != want.Seconds {
				t.Errorf("ExchangeSeconds(%s, %d) = %g, want %g", tc.link, tc.x, s, want.Seconds)
			}
		})
	}
	// A team of one device copies its input, as every collective's does.
	one := allToAllV([][]int{{3}}, [][]int{{500}})
	got, err := tp.Step(stepPlan(), &one)
	if want := (StepTime{Type: plan.AllToAllV, Link: LinkMemory, Bytes: 4000, Seconds: tp.Local(4000)}); err != nil || got != want {
		t.Errorf("Step of a team of one = %+v, %v; want %+v", got, err, want)
	}
}

// TestAllToAllVPricedAsAllToAll: an AllToAllV whose chunks are all
// count.input / n is priced as the AllToAll of those counts, to the bit,
// on every link, team size and size of message; only Bytes differs, S for
// the AllToAll and S·(n−1)/n, what each member receives, for the
// AllToAllV.
func TestAllToAllVPricedAsAllToAll(t *testing.T) {
	for _, tp := range []*Topology{testTopology(), Default()} {
		for n := 2; n <= 16; n++ {
			for _, chunk := range []int{1, 3, 1000, 12345, 1 << 20, 7 << 22} {
				for _, first := range []int{0, 6} { // on one node of the test topology, or across
					team := make([]int, n)
					counts := make([][]int, n)
					for k := range team {
						team[k] = first + k
						counts[k] = make([]int, n)
						for r := range counts[k] {
							counts[k][r] = chunk
						}
					}
					v := allToAllV([][]int{team}, counts)
					a := v
					a.Type, a.SendCounts = plan.AllToAll, nil
					gv, err := tp.Step(stepPlan(), &v)
					if err != nil {
						t.Fatal(err)
					}
					ga, err := tp.Step(stepPlan(), &a)
					if err != nil {
						t.Fatal(err)
					}
					if gv.Seconds != ga.Seconds || gv.Link != ga.Link {
						t.Errorf("%s, n %d, chunk %d, team from %d: AllToAllV %g s on %s, AllToAll %g s on %s (x %d and %g)",
							tp.Name, n, chunk, first, gv.Seconds, gv.Link, ga.Seconds, ga.Link, gv.Bytes, float64(ga.Bytes)*BusFactor(plan.AllToAll, n))
					}
					if want := ga.Bytes / int64(n) * int64(n-1); gv.Bytes != want {
						t.Errorf("%s, n %d, chunk %d: AllToAllV bytes %d, want S·(n−1)/n = %d", tp.Name, n, chunk, gv.Bytes, want)
					}
				}
			}
		}
	}
}

// TestExchangeSecondsOwnLine checks that a topology's own AllToAllV line,
// where it has one, prices an AllToAllV rather than the AllToAll line.
func TestExchangeSecondsOwnLine(t *testing.T) {
	tp := Default()
	own := Params{Bandwidth: 1, Latency: 1000}
	tp.NVLink.Collectives = maps.Clone(tp.NVLink.Collectives)
	if tp.NVLink.Collectives == nil {
		tp.NVLink.Collectives = map[string]Params{}
	}
	shared := tp.ExchangeSeconds(LinkNVLink, 1<<20)
	if want := tp.NVLink.For(plan.AllToAll).Seconds(1 << 20); shared != want {
		t.Fatalf("without its own line: %g s, want the AllToAll line's %g s", shared, want)
	}
	tp.NVLink.Collectives[plan.AllToAllV] = own
	if got, want := tp.ExchangeSeconds(LinkNVLink, 1<<20), own.Seconds(1<<20); got != want {
		t.Errorf("with its own line: %g s, want %g s", got, want)
	}
}
