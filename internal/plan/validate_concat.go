package plan

import "fmt"

// checkConcat checks a Concat (docs/plan.md, "Step semantics"): dims
// [outer, N, inner] of positive extents, one window [m, start, len] per
// input with 0 <= start < start+len <= m, lens summing to N, count.input
// the first input's outer·m·inner and count.output the product of dims.
func (v *validator) checkConcat(i int, s *Step) {
	if len(s.Dims) != 3 || !positive(s.Dims) {
		v.stepf(i, "dims %v are not [outer, N, inner], three positive extents", s.Dims)
		return
	}
	if n := len(s.Operands()); len(s.Windows) != n {
		v.stepf(i, "windows has %d entries for %d inputs", len(s.Windows), n)
		return
	}
	total := 0
	for k, w := range s.Windows {
		if msg := windowProblem(w); msg != "" {
			v.stepf(i, "windows[%d] %v: %s", k, w, msg)
			return
		}
		total += w[2]
	}
	if total != s.Dims[1] {
		v.stepf(i, "the windows' lens sum to %d, but dims[1] is %d", total, s.Dims[1])
	}
	if in, ok := s.ConcatInput(0); ok && in != s.Count.Input {
		v.stepf(i, "count.input is %d, want %d (outer·m·inner of dims %v and windows[0])", s.Count.Input, in, s.Dims)
	}
	if out, ok := product(s.Dims); !ok || out != s.Count.Output {
		v.stepf(i, "count.output is %d, want the product of dims %v", s.Count.Output, s.Dims)
	}
}

// windowProblem says what is wrong with a Concat's window [m, start,
// len], "" when nothing is.
func windowProblem(w []int) string {
	switch {
	case len(w) != 3:
		return fmt.Sprintf("has %d entries, want [m, start, len]", len(w))
	case w[0] < 1 || w[1] < 0 || w[2] < 1:
		return "want m >= 1, start >= 0 and len >= 1"
	case w[1] > w[0]-w[2]:
		return "the window runs past the input's m entries"
	}
	return ""
}

// ConcatInput is the number of elements a Concat reads from input k:
// outer·m·inner of its dims and window; ok is false when they are not
// valid or overflow.
func (s *Step) ConcatInput(k int) (elems int, ok bool) {
	if s.Type != Concat || len(s.Dims) != 3 || k < 0 || k >= len(s.Windows) || windowProblem(s.Windows[k]) != "" {
		return 0, false
	}
	return product([]int{s.Dims[0], s.Windows[k][0], s.Dims[2]})
}
