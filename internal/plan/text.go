package plan

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// WriteText writes a readable table of p's steps and its summary.
func WriteText(w io.Writer, p *Plan) error {
	ratio := "-"
	if r := p.Summary.BytesRatio; r != nil {
		ratio = fmt.Sprintf("%.3g", *r)
	}
	fmt.Fprintf(w, "plan %s (policy %s): %d collectives, %d local steps, max bytes received per device %d (lower bound %d, ratio %s)\n\n",
		p.Fusion, p.Policy, p.Summary.Collectives, p.Summary.LocalSteps, p.Summary.BytesReceivedMax, p.Summary.BytesLowerBound, ratio)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "step\top\ttype\tinput -> output\tteams / devices\troot\treduce\tcount in/out\tbytes sent/recv/bound")
	for _, s := range p.Steps {
		who := fmt.Sprint(s.Devices)
		if s.Kind == KindCollective {
			who = teamsText(s.Teams)
		}
		root, red, bytes := "-", "-", "-"
		if s.Root != nil {
			root = fmt.Sprint(*s.Root)
		}
		if s.ReduceOp != nil {
			red = *s.ReduceOp
		}
		if s.Bytes != nil {
			bytes = fmt.Sprintf("%d/%d/%d", s.Bytes.SentPerDevice, s.Bytes.ReceivedPerDevice, s.Bytes.LowerBound)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s -> %s\t%s\t%s\t%s\t%d/%d\t%s\n",
			s.ID, s.Expr, s.Type, strings.Join(s.Operands(), ", "), s.Output, who, root, red, s.Count.Input, s.Count.Output, bytes)
	}
	return tw.Flush()
}

func teamsText(teams [][]int) string {
	parts := make([]string, len(teams))
	for i, t := range teams {
		parts[i] = fmt.Sprint(t)
	}
	return strings.Join(parts, " ")
}
