package lower_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nvcomm/nvcomm/internal/diag"
	"github.com/nvcomm/nvcomm/internal/lower"
	"github.com/nvcomm/nvcomm/internal/plan"
)

// TestCheckIsValidateThenCertify holds Check, which certifies while it
// validates, to its definition, Validate and then, for a plan it accepts,
// Certify: on every golden plan, on each with a step's count wrong (which
// Validate rejects) and with its lower bound wrong (which only Certify
// does). Run with -race it also shows that the two only read the plan.
func TestCheckIsValidateThenCertify(t *testing.T) {
	mutants := map[string]func(p *plan.Plan){
		"as written":          func(*plan.Plan) {},
		"a count wrong":       func(p *plan.Plan) { p.Steps[len(p.Steps)-1].Count.Output++ },
		"a lower bound wrong": func(p *plan.Plan) { p.Summary.BytesLowerBound++ },
	}
	for _, file := range goldenPlans(t) {
		for name, mutate := range mutants {
			want, got := readPlan(t, file), readPlan(t, file)
			if len(want.Steps) == 0 {
				continue
			}
			mutate(want)
			mutate(got)
			wantProblems, wantUnproven := validateThenCertify(want)
			if name != "as written" && len(wantProblems) == 0 {
				t.Errorf("%s, %s: the mutant is accepted; it tests nothing", file, name)
			}
			gotProblems, gotUnproven := lower.Check(got)
			if d := cmp.Diff(wantProblems, gotProblems); d != "" {
				t.Errorf("%s, %s: problems (-want +got):\n%s", file, name, d)
			}
			if d := cmp.Diff(wantUnproven, gotUnproven); d != "" {
				t.Errorf("%s, %s: unproven ops (-want +got):\n%s", file, name, d)
			}
		}
	}
}

// validateThenCertify is Check's definition.
func validateThenCertify(p *plan.Plan) ([]diag.Diagnostic, []int) {
	if problems := plan.Validate(p); len(problems) > 0 {
		return problems, nil
	}
	return lower.Certify(p)
}
