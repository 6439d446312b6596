package cli

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/nvcomm/nvcomm/internal/lower"
	"github.com/nvcomm/nvcomm/internal/plan"
	"github.com/nvcomm/nvcomm/internal/sim"
)

type simulateOptions struct {
	policy   *enumFlag
	format   *enumFlag
	seed     uint64
	maxBytes int64
}

func newSimulateCmd() *cobra.Command {
	o := &simulateOptions{policy: newEnum(lower.Policies...), format: newEnum("text", "json")}
	cmd := &cobra.Command{
		Use:   "simulate FUSION|PLAN|-",
		Short: "Run a plan on virtual devices and check it against the unsharded program",
		Long: `simulate executes a plan (or lowers a fusion file, then executes its plan) on
virtual devices with deterministic integer data, checks every op's output on every
device against the unsharded reference, and reports PASS or the first mismatch,
with the bytes each step moves. Input starting with '{' is a plan; anything else a
fusion file.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return o.run(cmd, args[0]) },
	}
	cmd.Flags().Var(o.policy, "policy", "lowering policy for a fusion file: nvfuser")
	cmd.Flags().Var(o.format, "format", "report format: text or json")
	cmd.Flags().Uint64Var(&o.seed, "seed", 0, "seed of the input data")
	cmd.Flags().Int64Var(&o.maxBytes, "max-bytes", sim.DefaultMaxBytes, "refuse simulations that need more memory than this")
	return cmd
}

func (o *simulateOptions) run(cmd *cobra.Command, arg string) error {
	p, err := o.load(cmd, arg)
	if err != nil {
		return err
	}
	if o.maxBytes <= 0 {
		return usageError{fmt.Errorf("--max-bytes must be positive, got %d", o.maxBytes)}
	}
	res, err := sim.Run(p, sim.Options{Seed: o.seed, MaxBytes: o.maxBytes})
	if err != nil {
		return report(cmd, fmt.Errorf("simulate: %w", err))
	}
	if o.format.value == "json" {
		enc := json.NewEncoder(cmd.OutOrStdout())
		enc.SetIndent("", "  ")
		err = enc.Encode(res)
	} else {
		err = res.WriteText(cmd.OutOrStdout())
	}
	if err != nil {
		return err
	}
	if !res.Pass {
		return reportedError{}
	}
	return nil
}

// load returns the plan to simulate: decoded and validated when the input
// is a plan, lowered when it is a fusion file.
func (o *simulateOptions) load(cmd *cobra.Command, arg string) (*plan.Plan, error) {
	name, src, err := readInput(cmd, arg)
	if err != nil {
		return nil, err
	}
	if !bytes.HasPrefix(bytes.TrimSpace(src), []byte("{")) {
		return compileSource(cmd, name, src, lower.Policy(o.policy.value))
	}
	p, err := plan.Decode(name, src)
	if err != nil {
		return nil, report(cmd, err)
	}
	if problems := plan.Validate(p); len(problems) > 0 {
		for _, pr := range problems {
			fmt.Fprintf(cmd.ErrOrStderr(), "%s: %s\n", name, pr)
		}
		return nil, reportedError{}
	}
	return p, nil
}
