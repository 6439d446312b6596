package explain

import (
	"bytes"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nvcomm/nvcomm/internal/cost"
	"github.com/nvcomm/nvcomm/internal/lower"
	"github.com/nvcomm/nvcomm/internal/plan"
	"github.com/nvcomm/nvcomm/internal/syntax"
)

// TestSummaryGolden summarizes the optimal plan of every example and
// compares with testdata/NAME.summary.
func TestSummaryGolden(t *testing.T) {
	forExamples(t, ".summary", func(p *plan.Plan, b *bytes.Buffer) error { return WriteSummary(b, p, All()) })
}

// TestSummaryCaps: a plan of more than SummaryOps ops lists the
// SummaryOps longest, in plan order, and one row for the others whose
// totals with theirs make the plan's; a plan of fewer lists them all.
func TestSummaryCaps(t *testing.T) {
	for _, n := range []int{SummaryOps/2 - 2, SummaryOps + 6} { // 20 ops: all listed; 60: capped
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			p := chainPlan(t, n)
			var b bytes.Buffer
			if err := WriteSummary(&b, p, All()); err != nil {
				t.Fatal(err)
			}
			ops := opSection(t, b.String())
			listed, others := 0, ""
			for _, row := range ops[1 : len(ops)-1] { // between the header and the total
				if strings.HasPrefix(strings.TrimSpace(row), "…") {
					others = row
					continue
				}
				listed++
			}
			wantListed, wantOthers := min(2*n, SummaryOps), 2*n > SummaryOps
			if listed != wantListed || (others != "") != wantOthers {
				t.Errorf("%d ops listed, others row %q; want %d listed, others row %v:\n%s", listed, others, wantListed, wantOthers, b.String())
			}
			// The Allreduces of the sums are the longest ops: every one listed is a sum.
			for _, row := range ops[1 : len(ops)-1] {
				if !strings.Contains(row, "…") && !strings.Contains(row, "= sum(") && 2*n > SummaryOps {
					t.Errorf("a short op listed before a longer one: %q", row)
				}
			}
		})
	}
}

// TestSummaryTotals: the summary's total row is the plan's step count,
// the headline's prediction, and the sum of what the busiest device of
// every collective receives.
func TestSummaryTotals(t *testing.T) {
	p := chainPlan(t, SummaryOps+6)
	var b bytes.Buffer
	if err := WriteSummary(&b, p, Options{Op: -1, Topology: cost.Default()}); err != nil {
		t.Fatal(err)
	}
	pr, err := cost.Predict(cost.Default(), p)
	if err != nil {
		t.Fatal(err)
	}
	var recv int64
	for _, s := range p.Steps {
		if s.Bytes != nil {
			recv += s.Bytes.ReceivedPerDevice
		}
	}
	ops := opSection(t, b.String())
	got := strings.Fields(ops[len(ops)-1])
	want := []string{"total", fmt.Sprint(len(p.Steps)), fmt.Sprintf("%d×", (SummaryOps + 6)), "Allreduce"}
	want = append(want, strings.Fields(plan.Size(recv))...)
	want = append(want, strings.Fields(plan.Size(recv))...)
	want = append(want, strings.Fields(Seconds(pr.Total))...)
	want = append(want, "100%")
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("total row (-want +got):\n%s\n%s", diff, b.String())
	}
}

// TestSummaryUnpriced: without a topology, times and shares are "-".
func TestSummaryUnpriced(t *testing.T) {
	var b bytes.Buffer
	if err := WriteSummary(&b, chainPlan(t, 2), Options{Op: -1}); err != nil {
		t.Fatal(err)
	}
	ops := opSection(t, b.String())
	if got := strings.Fields(ops[len(ops)-1]); !cmp.Equal(got[len(got)-2:], []string{"-", "-"}) {
		t.Errorf("unpriced total row %q, want time and share -", ops[len(ops)-1])
	}
}

// TestPercent: a part is never shown as 0% or 100%.
func TestPercent(t *testing.T) {
	for f, want := range map[float64]string{0: "0%", 0.001: "<1%", 0.005: "<1%", 0.006: "1%", 0.5: "50%", 0.996: ">99%", 1: "100%"} {
		if got := percent(f); got != want {
			t.Errorf("percent(%v) = %q, want %q", f, got, want)
		}
	}
}

// chainPlan lowers n pairs of ops on 4 devices: a sum over the sharded
// axis (an Allreduce) and a relu (local).
func chainPlan(t *testing.T, n int) *plan.Plan {
	t.Helper()
	var b strings.Builder
	b.WriteString("format: 2\nname: chain\nmeshes:\n  m: [0, 1, 2, 3]\ntensors:\n")
	for i := range n {
		fmt.Fprintf(&b, "  x%d: {mesh: m, shape: [8, 16], placements: [Shard(0)]}\n", i)
	}
	b.WriteString("ops:\n")
	for i := range n {
		fmt.Fprintf(&b, "  - {op: sum, in: x%d, axis: 0, out: s%d}\n  - {op: relu, in: s%d, out: r%d}\n", i, i, i, i)
	}
	f, err := syntax.Parse("chain.yaml", []byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	p, err := lower.Lower(f, lower.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// opSection returns the rows of a summary's Ops table, header first.
func opSection(t *testing.T, out string) []string {
	t.Helper()
	_, rest, ok := strings.Cut(out, "\nOps\n")
	if !ok {
		t.Fatalf("no Ops section:\n%s", out)
	}
	return regexp.MustCompile(`\n`).Split(strings.TrimRight(rest, "\n"), -1)
}
