package cli

import (
	"github.com/spf13/cobra"

	"github.com/nvcomm/nvcomm/internal/lower"
	"github.com/nvcomm/nvcomm/internal/plan"
)

// --objective: what policy optimal minimizes (docs/lowering.md, "The
// objective"), for the commands that lower a fusion file.

// newObjective is an --objective flag's value, the default first.
func newObjective() *enumFlag {
	return newEnum(lower.Objectives...).describe("the plan the cost model predicts fastest on --topology, fewest bytes breaking ties",
		"the plan that moves the fewest bytes to the busiest device, time breaking ties")
}

// objectiveVar defines --objective on cmd, completed with its values.
func objectiveVar(cmd *cobra.Command, e *enumFlag) {
	enumVar(cmd, e, "objective", "what policy optimal minimizes for a fusion file: time (predicted on --topology, the built-in one unless a FILE) or bytes (received by the busiest device)")
}

// lowering is how a command lowers a fusion file: its policy and
// objective, steps priced on the topology FILE it names (the built-in one
// for "", "default" and "none").
func lowering(cmd *cobra.Command, policy, objective *enumFlag, topology string) (lower.Options, error) {
	opts := lower.Options{Policy: lower.Policy(policy.value), Objective: lower.Objective(objective.value)}
	if topology == "" || topology == "default" || topology == "none" {
		return opts, nil
	}
	t, err := loadTopology(cmd, topology)
	if err != nil {
		return opts, err
	}
	opts.Topology = t
	return opts, nil
}

// loadLowered reads the plan that arg names, or lowers the fusion file it
// names under the lowering flags (loadNamedPlan); it returns the input's
// name for diagnostics.
func loadLowered(cmd *cobra.Command, policy, objective *enumFlag, topology, arg string) (string, *plan.Plan, error) {
	lo, err := lowering(cmd, policy, objective, topology)
	if err != nil {
		return "", nil, err
	}
	return loadNamedPlan(cmd, arg, lo)
}
