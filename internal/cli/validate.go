package cli

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/nvcomm/nvcomm/internal/diag"
	"github.com/nvcomm/nvcomm/internal/lower"
	"github.com/nvcomm/nvcomm/internal/plan"
	"github.com/nvcomm/nvcomm/internal/sim"
)

func newValidateCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "validate PLAN|-",
		Short: "Check a plan's schema and meaning",
		Long: `validate checks a plan against the contract of docs/plan.md: every field's schema,
the schedules and allocations replayed on the shapes, the steps' buffers, counts and
bytes, and the summary. It then certifies the plan: the analyses (sharding,
local_shape, padded_shape, layout) and lower bounds it states must be the ones
nvcomm computes for its fusion. At most 10 problems are printed, then how many more
there were.`,
		Example: `  nvcomm lower fusion.yaml -o plan.json && nvcomm validate plan.json
  nvcomm lower fusion.yaml | nvcomm validate -`,
		Args:              exactArgs(1),
		ValidArgsFunction: fileArg(planExts...),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, src, err := readPlanOrFusion(cmd, args[0])
			if err != nil {
				return err
			}
			if d, ok := notPlan(name, args[0], src); ok {
				return report(cmd, d)
			}
			p, err := decodePlan(name, src)
			if err != nil {
				return report(cmd, err)
			}
			if err := checkPlan(cmd, name, p); err != nil {
				return err
			}
			noun := "steps"
			if len(p.Steps) == 1 {
				noun = "step"
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: valid plan (%d %s)\n", name, len(p.Steps), noun)
			return nil
		},
	}
}

// checkPlan validates a decoded plan and, when its structure is sound,
// certifies it (lower.Certify) and proves by simulation the ops it lowers
// otherwise than nvcomm would, printing the problems found: every command
// that reads a plan runs it, so none acts on a plan nvcomm cannot vouch
// for.
func checkPlan(cmd *cobra.Command, name string, p *plan.Plan) error {
	problems, unproven := lower.Check(p)
	if len(problems) == 0 && len(unproven) > 0 {
		problems = prove(p, unproven)
	}
	if len(problems) == 0 {
		return nil
	}
	for _, d := range problems {
		d.File = name
		fmt.Fprintln(cmd.ErrOrStderr(), d.Error())
	}
	return reportedError{}
}

// notPlan recognizes a fusion file given where a plan is expected (a plan
// is a JSON object; anything else that is not empty is taken for YAML) and
// returns the diagnostic that says what to run instead.
func notPlan(name, arg string, src []byte) (diag.Diagnostic, bool) {
	trimmed := bytes.TrimLeft(src, " \t\r\n")
	if len(trimmed) == 0 || trimmed[0] == '{' || trimmed[0] == '[' {
		return diag.Diagnostic{}, false // plan.Decode words these errors
	}
	before := src[:len(src)-len(trimmed)]
	pos := diag.At(1+bytes.Count(before, []byte("\n")), 1+len(before)-(bytes.LastIndexByte(before, '\n')+1))
	return diag.Diagnostic{
		File:    name,
		Pos:     pos,
		Message: "not a plan: a plan is JSON, an object starting with '{', and this looks like a fusion file (YAML)",
		Hint:    fmt.Sprintf("lower it first: nvcomm lower %s | nvcomm validate - (simulate and export torch take fusion files as they are)", arg),
	}, true
}

// prove simulates a plan whose ops are lowered otherwise than nvcomm would
// lower them: nothing else can vouch that their steps compute the ops.
// It returns why the plan is not proven, or nil.
func prove(p *plan.Plan, ops []int) []diag.Diagnostic {
	what := fmt.Sprintf("op %d is lowered otherwise than nvcomm lowers it", ops[0])
	if len(ops) > 1 {
		list := strings.ReplaceAll(strings.Trim(fmt.Sprint(ops), "[]"), " ", ", ")
		what = fmt.Sprintf("ops %s are lowered otherwise than nvcomm lowers them", list)
	}
	what += ", which only a simulation proves"
	res, err := sim.Run(p, sim.Options{})
	switch {
	case errors.Is(err, sim.ErrTooLarge):
		return []diag.Diagnostic{{Message: fmt.Sprintf("%s, and the plan is %v", what, err)}}
	case err != nil:
		return []diag.Diagnostic{{Message: fmt.Sprintf("%s, and simulating the plan fails: %v", what, err)}}
	case !res.Pass:
		return []diag.Diagnostic{{Message: fmt.Sprintf("%s, and the simulation finds wrong data: %v", what, res.Mismatch)}}
	}
	return nil
}

// decodePlan is plan.Decode, with the collector paused while the plan is
// read (plan.DecodeUncollected) unless the user set GOGC, whose setting
// then rules.
func decodePlan(name string, src []byte) (*plan.Plan, error) {
	if os.Getenv("GOGC") != "" {
		return plan.Decode(name, src)
	}
	return plan.DecodeUncollected(name, src)
}
