package plan

import (
	"fmt"

	"github.com/nvcomm/nvcomm/internal/diag"
)

// MaxProblems is how many problems a [Problems] keeps, as many as a
// diag.List keeps of a fusion's errors: a plan with a team of millions of
// strangers must not print millions of lines.
const MaxProblems = diag.MaxErrors

// Problems collects the problems of a plan, keeping the first MaxProblems
// and counting the rest. The zero value is ready to use.
type Problems struct {
	list    []Problem
	omitted int
}

// Add records p, or counts it when the list is full.
func (ps *Problems) Add(p Problem) {
	if ps.Full() {
		ps.omitted++
		return
	}
	ps.list = append(ps.list, p)
}

// Addf records a problem of step (-1: outside the steps) of type typ, or
// only counts it when the list is full, without formatting the message.
func (ps *Problems) Addf(step int, typ, format string, args ...any) {
	if ps.Full() {
		ps.omitted++
		return
	}
	ps.list = append(ps.list, Problem{Step: step, Type: typ, Msg: fmt.Sprintf(format, args...)})
}

// Full reports whether the list keeps no more problems.
func (ps *Problems) Full() bool { return len(ps.list) >= MaxProblems }

// Count is the number of problems recorded, kept or not.
func (ps *Problems) Count() int { return len(ps.list) + ps.omitted }

// List returns the kept problems, nil when there are none, followed by one
// that says how many more there were when some were omitted.
func (ps *Problems) List() []Problem {
	if ps.omitted == 0 {
		return ps.list
	}
	return append(ps.list, Problem{Step: -1, Msg: fmt.Sprintf("too many problems (%d more)", ps.omitted)})
}
