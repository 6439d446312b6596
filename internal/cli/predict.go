package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/nvcomm/nvcomm/internal/cost"
	"github.com/nvcomm/nvcomm/internal/explain"
	"github.com/nvcomm/nvcomm/internal/plan"
	"github.com/nvcomm/nvcomm/internal/sim"
)

// predict prices p, read from the input name, with the --topology of
// simulate; nil without one.
func (o *simulateOptions) predict(cmd *cobra.Command, name string, p *plan.Plan) (*cost.Prediction, error) {
	if o.topology == "" {
		return nil, nil
	}
	t, err := loadTopology(cmd, o.topology)
	if err != nil {
		return nil, err
	}
	pr, err := cost.Predict(t, p)
	if err != nil {
		return nil, reportIn(cmd, name, fmt.Errorf("cannot price the plan on topology %s: %w", t.Name, err))
	}
	return pr, nil
}

// simulation is simulate's JSON report: sim.Result's fields, and the
// prediction when --topology is given.
type simulation struct {
	*sim.Result
	Prediction *cost.Prediction `json:"prediction,omitempty"`
}

// writeSimulation prints the simulation report and the prediction, if any.
func writeSimulation(cmd *cobra.Command, format string, res *sim.Result, pred *cost.Prediction) error {
	w := cmd.OutOrStdout()
	if format == "json" {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(simulation{Result: res, Prediction: pred})
	}
	if err := res.WriteText(w); err != nil {
		return err
	}
	if pred == nil {
		return nil
	}
	fmt.Fprintln(w)
	return writePrediction(w, pred)
}

// writePrediction prints every step's predicted time and the total.
func writePrediction(w io.Writer, pr *cost.Prediction) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "step\ttype\tlink\tsize\tpredicted\n")
	for _, s := range pr.Steps {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\n", s.Step, s.Type, s.Link, plan.Size(s.Bytes), explain.Seconds(s.Seconds))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "predicted total: %s (topology %s; %s)\n", explain.Seconds(pr.Total), pr.Topology, timeBound(pr))
	return err
}

// timeBound writes a prediction's lower bound and the ratio to it.
func timeBound(pr *cost.Prediction) string {
	if pr.LowerBound <= 0 {
		return "lower bound 0 s"
	}
	return fmt.Sprintf("lower bound %s, ratio %.3g", explain.Seconds(pr.LowerBound), pr.Ratio)
}

// writeTime ends a text plan with its predicted time on topology t (nil:
// the built-in one) and the time bound.
func writeTime(w io.Writer, p *plan.Plan, t *cost.Topology) error {
	if t == nil {
		t = cost.Default()
	}
	pr, err := cost.Predict(t, p)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "\npredicted %s on topology %s (%s)\n", explain.Seconds(pr.Total), pr.Topology, timeBound(pr))
	if b := explain.BubbleOf(p, pr); b != nil && err == nil {
		_, err = io.WriteString(w, b.Text())
	}
	return err
}
