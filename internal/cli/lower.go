package cli

import (
	"bytes"

	"github.com/spf13/cobra"

	"github.com/nvcomm/nvcomm/internal/ir"
	"github.com/nvcomm/nvcomm/internal/lower"
	"github.com/nvcomm/nvcomm/internal/plan"
)

type lowerOptions struct {
	output string
	format *enumFlag
	policy *enumFlag
}

func newLowerCmd() *cobra.Command {
	o := &lowerOptions{format: newEnum("json", "text"), policy: newEnum(lower.Policies...)}
	cmd := &cobra.Command{
		Use:   "lower FUSION|-",
		Short: "Compile a fusion file into a communication plan",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := compile(cmd, args[0], lower.Policy(o.policy.value))
			if err != nil {
				return err
			}
			var b bytes.Buffer
			if o.format.value == "text" {
				err = plan.WriteText(&b, p)
			} else {
				err = plan.Encode(&b, p)
			}
			if err != nil {
				return err
			}
			return writeOutput(cmd, o.output, b.Bytes())
		},
	}
	cmd.Flags().StringVarP(&o.output, "output", "o", "", "write the plan to `FILE` (atomically) instead of standard output")
	cmd.Flags().Var(o.format, "format", "output format: json or text")
	cmd.Flags().Var(o.policy, "policy", "lowering policy: nvfuser")
	return cmd
}

// compile parses and lowers a fusion file, reporting diagnostics.
func compile(cmd *cobra.Command, arg string, policy lower.Policy) (*plan.Plan, error) {
	name, src, err := readInput(cmd, arg)
	if err != nil {
		return nil, err
	}
	return compileSource(cmd, name, src, policy)
}

// compileSource parses and lowers fusion source, reporting diagnostics.
func compileSource(cmd *cobra.Command, name string, src []byte, policy lower.Policy) (*plan.Plan, error) {
	f, err := ir.Parse(name, src)
	if err != nil {
		return nil, report(cmd, err)
	}
	p, err := lower.Lower(f, lower.Options{Policy: policy})
	if err != nil {
		return nil, report(cmd, err)
	}
	return p, nil
}
