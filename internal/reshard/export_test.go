package reshard

// SetSearched makes the search tell f, for a test, the cost (picoseconds
// and steps) of every path it finds and the steps [first, end) that its
// emission appended; nil stops it.
func SetSearched(f func(ps int64, steps, first, end int)) {
	if f == nil {
		searched = nil
		return
	}
	searched = func(c pathCost, first, end int) { f(c.ps, c.steps, first, end) }
}

// SetReplay turns the replay of recorded emissions (replay.go) on or off.
func SetReplay(on bool) { replayTemplates = on }
