package plan

import (
	"fmt"

	"github.com/nvcomm/nvcomm/internal/diag"
)

// MaxProblems is how many problems Validate and lower.Certify return at
// most, as many as a diag.List keeps of a fusion's errors: a plan with a
// team of millions of strangers must not print millions of lines.
const MaxProblems = diag.MaxErrors

// NewProblems returns an empty list for the problems of a plan: errors at
// no position, kept in the order found, the first MaxProblems of them, and
// then counted as "too many problems (N more)" by its All.
func NewProblems() *diag.List { return &diag.List{Noun: "problems", InOrder: true} }

// StepSubject names step i of type typ as a problem's subject: "step 3
// (Allgather)", or "step 3" when the step has no type.
func StepSubject(i int, typ string) string {
	if typ == "" {
		return fmt.Sprintf("step %d", i)
	}
	return fmt.Sprintf("step %d (%s)", i, typ)
}

// AddStep records in ps a problem of step i of type typ, naming the step
// only when ps keeps it.
func AddStep(ps *diag.List, i int, typ, format string, args ...any) {
	subject := ""
	if !ps.Full() {
		subject = StepSubject(i, typ)
	}
	ps.AddAbout(subject, format, args...)
}
