package cli

import (
	"math"
	"runtime/debug"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestPauseCollector: a pause turns the collector off under a memory
// limit of pauseFactor times the plan's size and pauseSlack; pauses that
// overlap keep the larger limit until the last resumes, which restores
// the settings as they were (each resume counts once); a limit set before
// caps the pause's; and a GOGC or GOMEMLIMIT in the environment leaves
// the settings alone.
func TestPauseCollector(t *testing.T) {
	type settings struct {
		Percent int
		Limit   int64
	}
	now := func() settings {
		p := debug.SetGCPercent(-1)
		debug.SetGCPercent(p)
		return settings{p, debug.SetMemoryLimit(-1)}
	}
	set := func(s settings) {
		debug.SetGCPercent(s.Percent)
		debug.SetMemoryLimit(s.Limit)
	}
	defer set(now())
	const mb = 1 << 20
	check := func(step string, want settings) {
		t.Helper()
		if diff := cmp.Diff(want, now()); diff != "" {
			t.Errorf("%s (-want +got):\n%s", step, diff)
		}
	}

	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "")
	before := settings{100, math.MaxInt64}
	set(before)
	small := pauseCollector(10 * mb)
	check("one pause", settings{-1, pauseFactor*10*mb + pauseSlack})
	big := pauseCollector(100 * mb)
	check("two pauses", settings{-1, pauseFactor*100*mb + pauseSlack})
	big()
	big()
	check("the second resumed, twice", settings{-1, pauseFactor*100*mb + pauseSlack})
	small()
	check("both resumed", before)

	capped := settings{50, 300 * mb}
	set(capped)
	resume := pauseCollector(100 * mb)
	check("under a limit set before", settings{-1, 300 * mb})
	resume()
	check("resumed under a limit set before", capped)

	for _, env := range []string{"GOGC", "GOMEMLIMIT"} {
		t.Run(env, func(t *testing.T) {
			t.Setenv(env, "200")
			set(before)
			resume := pauseCollector(100 * mb)
			check("a pause with "+env+" set", before)
			resume()
			check("resumed with "+env+" set", before)
		})
	}
}
