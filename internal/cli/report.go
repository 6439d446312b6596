package cli

import (
	"bytes"

	"github.com/spf13/cobra"

	"github.com/nvcomm/nvcomm/internal/auto"
	"github.com/nvcomm/nvcomm/internal/cost"
	"github.com/nvcomm/nvcomm/internal/lower"
	"github.com/nvcomm/nvcomm/internal/plan"
	htmlreport "github.com/nvcomm/nvcomm/internal/report"
)

// planInput is the input of the commands that show a plan to a person
// (explain, report): a fusion file lowered under --policy and --objective,
// or a plan checked as validate checks it, its steps priced on --topology
// (default, none or a FILE).
type planInput struct {
	policy, objective *enumFlag
	topology          string
	auto              autoOptions
	// chosen is what --auto chose, once load has run with it.
	chosen *auto.Result
}

func newPlanInput() *planInput {
	return &planInput{
		policy: newEnum(lower.Policies...).describe("the best plan under --objective: by default the fastest the cost model predicts",
			"nvFuser's lowering rules exactly"),
		objective: newObjective(),
	}
}

// define adds the flags of the input to cmd.
func (in *planInput) define(cmd *cobra.Command) {
	enumVar(cmd, in.policy, "policy", "lowering policy for a fusion file: optimal (the best plan under --objective) or nvfuser (nvFuser's rules)")
	objectiveVar(cmd, in.objective)
	choiceOrFileVar(cmd, &in.topology, "topology", "default",
		"predict step times on a topology: default (the built-in H200 one), none (no predictions) or a FILE that calibrate --fit wrote",
		[]string{"default", "none"}, topologyExts...)
	autoVars(cmd, &in.auto)
}

// load lowers or reads the plan that arg names (loadNamedPlan), or, with
// --auto, chooses the shardings of the fusion it names and lowers it,
// reporting bad input.
func (in *planInput) load(cmd *cobra.Command, arg string) (*plan.Plan, error) {
	if err := in.auto.check(cmd); err != nil {
		return nil, err
	}
	lo, err := lowering(cmd, in.policy, in.objective, in.topology)
	if err != nil {
		return nil, err
	}
	if !in.auto.enabled {
		_, p, err := loadNamedPlan(cmd, arg, lo)
		return p, err
	}
	name, src, err := readInput(cmd, arg)
	if err != nil {
		return nil, err
	}
	p, chosen, err := in.auto.compileAutoSource(cmd, name, src, lo)
	in.chosen = chosen
	return p, err
}

// pricing is the --topology to price the steps on: nil for none.
func (in *planInput) pricing(cmd *cobra.Command) (*cost.Topology, error) {
	if in.topology == "none" {
		return nil, nil
	}
	t, err := loadTopology(cmd, in.topology)
	if err != nil {
		return nil, report(cmd, err)
	}
	return t, nil
}

type reportOptions struct {
	input  *planInput
	output string
}

func newReportCmd() *cobra.Command {
	o := &reportOptions{input: newPlanInput()}
	cmd := &cobra.Command{
		Use:   "report FUSION|PLAN|-",
		Short: "Write a plan as one self-contained HTML page: sharding pictures, steps, timeline",
		Long: `report lowers a fusion file (or reads a plan) and writes one HTML page that any
browser opens offline: every tensor's sharding with a picture of which devices
hold which block, every op's steps with their bytes, predicted time and why they
are there, and the predicted timeline, one row per device. The page has its CSS
and SVG inline, no script, and refers to nothing outside itself. Input starting
with '{' is a plan; anything else a fusion file.`,
		Example: `  nvcomm report testdata/examples/megatron_mlp.yaml -o megatron.html
  nvcomm report plan.json -o plan.html --topology topology.yaml
  nvcomm report fusion.yaml --policy nvfuser --topology none > report.html`,
		Args:              exactArgs(1),
		ValidArgsFunction: fileArg(anyInputExts...),
		RunE:              func(cmd *cobra.Command, args []string) error { return o.run(cmd, args[0]) },
	}
	o.input.define(cmd)
	cmd.Flags().StringVarP(&o.output, "output", "o", "", "write the page to `FILE` (atomically) instead of standard output")
	fileFlag(cmd, "output", "html")
	return cmd
}

func (o *reportOptions) run(cmd *cobra.Command, arg string) error {
	p, err := o.input.load(cmd, arg)
	if err != nil {
		return err
	}
	t, err := o.input.pricing(cmd)
	if err != nil {
		return err
	}
	var b bytes.Buffer
	if err := htmlreport.Write(&b, p, htmlreport.Options{Topology: t}); err != nil {
		return err
	}
	return writeOutput(cmd, o.output, b.Bytes())
}
