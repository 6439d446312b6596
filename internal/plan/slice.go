package plan

// ShortSlice reports whether s is a Slice of a short input: a plain Slice
// (no dims) whose input holds fewer than T·count.output elements, T its
// team size, so that the last ranks' chunks are cut short or missing and
// the rest of their output is zeros (docs/plan.md, "Step semantics").
func (s *Step) ShortSlice() bool {
	if s.Type != Slice || len(s.Dims) > 0 || len(s.Teams) == 0 {
		return false
	}
	full, ok := mul(len(s.Teams[0]), s.Count.Output)
	return ok && s.Count.Input < full
}
