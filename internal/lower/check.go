package lower

import (
	"github.com/nvcomm/nvcomm/internal/diag"
	"github.com/nvcomm/nvcomm/internal/plan"
)

// Check is what `nvcomm validate` asks of a plan: plan.Validate, then
// Certify. The two only read the plan, so Check certifies while it
// validates, on a goroutine of its own: a valid plan's check takes the
// longer of the two rather than their sum. Certify's answer counts only
// for a plan that Validate accepts; for one it rejects, Check returns
// Validate's problems at once and the certification, whose answer no one
// reads, finishes alone (Certify assumes a valid plan, so a panic it
// raises on one that is not is recovered there; on a valid plan it is
// raised again, here, as a bug).
func Check(p *plan.Plan) (problems []diag.Diagnostic, unproven []int) {
	type certified struct {
		problems []diag.Diagnostic
		unproven []int
		panicked any
	}
	done := make(chan certified, 1)
	go func() {
		var c certified
		defer func() {
			c.panicked = recover()
			done <- c
		}()
		c.problems, c.unproven = Certify(p)
	}()
	if problems := plan.Validate(p); len(problems) > 0 {
		return problems, nil
	}
	c := <-done
	if c.panicked != nil {
		panic(c.panicked)
	}
	return c.problems, c.unproven
}
