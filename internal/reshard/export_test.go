package reshard

import "github.com/nvcomm/nvcomm/internal/plan"

// SetSearched makes the search tell f, for a test, the cost (picoseconds
// and steps) of every path it finds and the steps that its emission
// appended; nil stops it.
func SetSearched(f func(ps int64, steps int, emitted []plan.Step)) {
	if f == nil {
		searched = nil
		return
	}
	searched = func(c pathCost, emitted []plan.Step) { f(c.ps, c.steps, emitted) }
}

// SetReplay turns the replay of recorded emissions (replay.go) on or off.
func SetReplay(on bool) { replayTemplates = on }
