package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/nvcomm/nvcomm/internal/plan"
)

func newValidateCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "validate PLAN|-",
		Short: "Check a plan's schema and meaning",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, src, err := readInput(cmd, args[0])
			if err != nil {
				return err
			}
			p, err := plan.Decode(name, src)
			if err != nil {
				return report(cmd, err)
			}
			problems := plan.Validate(p)
			if len(problems) == 0 {
				noun := "steps"
				if len(p.Steps) == 1 {
					noun = "step"
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%s: valid plan (%d %s)\n", name, len(p.Steps), noun)
				return nil
			}
			for _, pr := range problems {
				fmt.Fprintf(cmd.ErrOrStderr(), "%s: %s\n", name, pr)
			}
			return reportedError{}
		},
	}
}
