package cli

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/nvcomm/nvcomm/internal/cost"
	"github.com/nvcomm/nvcomm/internal/explain"
	"github.com/nvcomm/nvcomm/internal/lower"
	"github.com/nvcomm/nvcomm/internal/plan"
)

type traceOptions struct {
	policy    *enumFlag
	objective *enumFlag
	output    string
	run       string
	topology  string
}

func newTraceCmd() *cobra.Command {
	o := &traceOptions{policy: newEnum(lower.Policies...).describe("the best plan under --objective: by default the fastest the cost model predicts",
		"nvFuser's lowering rules exactly"), objective: newObjective()}
	cmd := &cobra.Command{
		Use:   "trace FUSION|PLAN|-",
		Short: "Write a plan's timeline as Chrome trace events, for ui.perfetto.dev",
		Long: `trace lowers a fusion file (or reads a plan), predicts every step's time on a
topology, and writes the timeline in Chrome's Trace Event format, which
ui.perfetto.dev and chrome://tracing open: one process per node, one track per
device, each step a complete event on the tracks of the devices that run it, with
its type, team, bytes and op. With --run, the measured times of a run of the
program that export torch wrote (its --json result, run with --bench) are a
second set of tracks.`,
		Example: `  nvcomm trace testdata/examples/megatron_mlp.yaml -o megatron.trace.json
  nvcomm trace plan.json --run result.json -o trace.json    # predicted and measured`,
		Args:              exactArgs(1),
		ValidArgsFunction: fileArg(anyInputExts...),
		RunE:              func(cmd *cobra.Command, args []string) error { return o.runTrace(cmd, args[0]) },
	}
	enumVar(cmd, o.policy, "policy", "lowering policy for a fusion file: optimal (the best plan under --objective) or nvfuser (nvFuser's rules)")
	objectiveVar(cmd, o.objective)
	cmd.Flags().StringVarP(&o.output, "output", "o", "", "write the trace to `FILE` (atomically) instead of standard output")
	cmd.Flags().StringVar(&o.run, "run", "", "add the measured times of a run: the `RESULT.json` that the exported program's --json wrote")
	choiceOrFileVar(cmd, &o.topology, "topology", "default",
		"predict step times on a topology: default (the built-in H200 one) or a FILE that calibrate --fit wrote",
		[]string{"default"}, topologyExts...)
	return cmd
}

func (o *traceOptions) runTrace(cmd *cobra.Command, arg string) error {
	if o.topology == "" || o.topology == "none" {
		return usageError{errors.New("--topology: trace needs a topology to predict times")}
	}
	_, p, err := loadLowered(cmd, o.policy, o.objective, o.topology, arg)
	if err != nil {
		return err
	}
	t, err := loadTopology(cmd, o.topology)
	if err != nil {
		return report(cmd, err)
	}
	var measured explain.Measured
	if o.run != "" {
		src, err := readFile(cmd, o.run)
		if err != nil {
			return report(cmd, err)
		}
		if measured, err = explain.ReadMeasured(src, p.Fusion); err != nil {
			return report(cmd, fmt.Errorf("%s: %w", o.run, err))
		}
	}
	data, err := predictedTrace(cmd, p, t, measured)
	if err != nil {
		return err
	}
	return writeOutput(cmd, o.output, data)
}

// predictedTrace prices p on topology t and returns its timeline as
// Chrome trace events, with the measured times of a run when measured is
// not nil: what trace writes, and simulate --trace.
func predictedTrace(cmd *cobra.Command, p *plan.Plan, t *cost.Topology, measured explain.Measured) ([]byte, error) {
	pr, err := cost.Predict(t, p)
	if err != nil {
		return nil, report(cmd, fmt.Errorf("cannot price the plan on topology %s: %w", t.Name, err))
	}
	tr, err := explain.NewTrace(p, pr, t, measured)
	if err != nil {
		return nil, report(cmd, err)
	}
	var b bytes.Buffer
	if err := tr.Write(&b); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
