package difftest

import (
	"errors"
	"fmt"
	"os"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/nvcomm/nvcomm/internal/diag"
	"github.com/nvcomm/nvcomm/internal/ir"
	"github.com/nvcomm/nvcomm/internal/lower"
	"github.com/nvcomm/nvcomm/internal/plan"
	"github.com/nvcomm/nvcomm/internal/sim"
)

// outcome classifies one generated fusion.
type outcome struct {
	kind   string // "pass", "rejected", or a failure kind
	reason string // normalized rejection reason or failure detail
}

// check runs one fusion through parse, lower, validate and simulate.
func check(src string, seed uint64) outcome {
	f, err := ir.Parse("gen.yaml", []byte(src))
	if err != nil {
		return rejected("parse", err)
	}
	p, err := lower.Lower(f, lower.Options{})
	if err != nil {
		return rejected("lower", err)
	}
	if problems := plan.Validate(p); len(problems) > 0 {
		return outcome{"invalid-plan", fmt.Sprint(problems)}
	}
	if problems, unproven := lower.Certify(p); len(problems) > 0 || len(unproven) > 0 {
		return outcome{"uncertified-plan", fmt.Sprint(problems, " unproven ops ", unproven)}
	}
	res, err := sim.Run(p, sim.Options{Seed: seed, MaxBytes: 64 << 20})
	if errors.Is(err, sim.ErrTooLarge) {
		return outcome{"too-large", ""} // the memory guard refused it, as designed
	}
	if err != nil {
		return outcome{"sim-error", err.Error()}
	}
	if !res.Pass {
		return outcome{"mismatch", fmt.Sprintf("%+v", *res.Mismatch)}
	}
	return outcome{kind: "pass"}
}

var numbers = regexp.MustCompile(`-?\d+`)
var quoted = regexp.MustCompile(`"[^"]*"`)

// rejected normalizes a compiler error into a reason: the first message
// with names and numbers blanked, so reasons can be counted.
func rejected(phase string, err error) outcome {
	var dl *diag.List
	msg := err.Error()
	if errors.As(err, &dl) && len(dl.Items) > 0 {
		msg = dl.Items[0].Message
	}
	msg = quoted.ReplaceAllString(msg, "_")
	msg = numbers.ReplaceAllString(msg, "N")
	return outcome{"rejected", phase + ": " + msg}
}

// run checks n generated fusions, spread over the CPUs, and returns counts
// by outcome and reason; failures are reported through t with the fusion as
// YAML. Case i is always the same fusion, whatever the number of workers.
func run(t *testing.T, n int, seed uint64) map[string]int {
	workers := runtime.GOMAXPROCS(0)
	results := make([]map[string]int, workers)
	var mu sync.Mutex
	failures := 0
	var wg sync.WaitGroup
	for w := range workers {
		results[w] = map[string]int{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += workers {
				src := NewGenerator(seed*1_000_003 + uint64(i)).Fusion()
				o := check(src, uint64(i))
				key := o.kind
				if o.kind == "rejected" {
					key += " | " + o.reason
				}
				results[w][key]++
				if o.kind != "pass" && o.kind != "rejected" && o.kind != "too-large" {
					mu.Lock()
					failures++
					if failures <= 3 {
						t.Errorf("case %d: %s: %s\nfusion:\n%s", i, o.kind, o.reason, src)
					}
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	counts := map[string]int{}
	for _, r := range results {
		for k, v := range r {
			counts[k] += v
		}
	}
	return counts
}

// TestDifferential lowers and simulates a few thousand random fusions: each
// must be rejected with a clear error or simulate PASS.
func TestDifferential(t *testing.T) {
	n := 3000
	if testing.Short() {
		n = 300
	}
	counts := run(t, n, 1)
	if counts["pass"] < n/3 {
		t.Errorf("only %d of %d cases passed; the generator produces too few lowerable fusions:\n%s", counts["pass"], n, report(counts))
	}
}

// TestSoak runs NVCOMM_SOAK cases (make soak) and prints counts by outcome
// and rejection reason.
func TestSoak(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("NVCOMM_SOAK"))
	if n == 0 {
		t.Skip("set NVCOMM_SOAK=N to run N cases")
	}
	counts := run(t, n, 7)
	fmt.Printf("soak: %d cases\n%s", n, report(counts))
}

func report(counts map[string]int) string {
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int { return counts[b] - counts[a] })
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%9d  %s\n", counts[k], k)
	}
	return b.String()
}
