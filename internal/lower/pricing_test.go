package lower_test

import (
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nvcomm/nvcomm/internal/lower"
	"github.com/nvcomm/nvcomm/internal/plan"
	"github.com/nvcomm/nvcomm/internal/syntax"
)

// TestPricingOptions lowers every example with the options internal/auto
// prices with, and checks the plans against the plain lowering's: with
// SkipBounds the same plan but for the bound, which it leaves 0 (and so no
// ratio); with Searches shared by two lowerings of the same fusion at once
// (the second finds the first's searches, on its own goroutine: go test
// -race checks the store) and a third after them, each the same plan.
func TestPricingOptions(t *testing.T) {
	files, err := filepath.Glob("../../testdata/examples/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples (%v)", err)
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			src, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			f, err := syntax.Parse(filepath.Base(file), src)
			if err != nil {
				t.Skip("not a plan:", err)
			}
			want, err := lower.Lower(f, lower.Options{})
			if err != nil {
				t.Skip("not a plan:", err)
			}
			got, err := lower.Lower(f, lower.Options{SkipBounds: true})
			if err != nil {
				t.Fatalf("SkipBounds: %v", err)
			}
			unbound := *want
			unbound.Summary.BytesLowerBound = 0
			unbound.Summary.BytesRatio = plan.BytesRatio(want.Summary.BytesReceivedMax, 0)
			if diff := cmp.Diff(&unbound, got); diff != "" {
				t.Errorf("SkipBounds: plan differs from the plain lowering's but for its bound (-want +got):\n%s", diff)
			}
			shared := lower.Options{Searches: lower.NewSearches()}
			plans := make([]*plan.Plan, 3)
			errs := make([]error, 3)
			var wg sync.WaitGroup
			for i := range 2 {
				wg.Go(func() { plans[i], errs[i] = lower.Lower(f, shared) })
			}
			wg.Wait()
			plans[2], errs[2] = lower.Lower(f, shared)
			for i, p := range plans {
				if errs[i] != nil {
					t.Fatalf("lowering %d with shared searches: %v", i, errs[i])
				}
				if diff := cmp.Diff(want, p); diff != "" {
					t.Errorf("lowering %d with shared searches differs from the plain lowering (-want +got):\n%s", i, diff)
				}
			}
		})
	}
}
