package cli

import (
	"bytes"
	"errors"

	"github.com/spf13/cobra"

	"github.com/nvcomm/nvcomm/internal/cost"
	"github.com/nvcomm/nvcomm/internal/explain"
	"github.com/nvcomm/nvcomm/internal/lower"
	"github.com/nvcomm/nvcomm/internal/plan"
)

type explainOptions struct {
	input   *planInput
	color   *enumFlag
	tensor  string
	op      int
	summary bool
}

func newExplainCmd() *cobra.Command {
	o := &explainOptions{
		input: newPlanInput(),
		color: newEnum("auto", "always", "never").describe("on a terminal, unless NO_COLOR is set", "always", "never"),
	}
	cmd := &cobra.Command{
		Use:   "explain FUSION|PLAN|-",
		Short: "Show a plan: every tensor's sharding as a picture, every op's steps and why",
		Long: `explain lowers a fusion file (or reads a plan) and shows, for every tensor, its
mesh, its sharding in DTensor's notation (nvcomm's where DTensor has none: strided,
nested, merged) and a picture of which devices hold which block; for every op, the
shardings it goes between, its steps and why each was chosen, the bytes they move,
their predicted time on a topology, and the lower bounds of both. --summary shows
the totals only, per collective type and per op. Input starting with '{' is a plan;
anything else a fusion file.`,
		Example: `  nvcomm explain testdata/examples/megatron_mlp.yaml
  nvcomm explain plan.json --tensor y
  nvcomm explain fusion.yaml --op 2 --policy nvfuser
  nvcomm explain fusion.yaml --topology none --color never
  nvcomm explain --summary plan.json
  nvcomm explain --auto --memory-budget 64MiB layer.yaml`,
		Args:              exactArgs(1),
		ValidArgsFunction: fileArg(anyInputExts...),
		RunE:              func(cmd *cobra.Command, args []string) error { return o.run(cmd, args[0]) },
	}
	o.input.define(cmd)
	enumVar(cmd, o.color, "color", "colour the output: auto (on a terminal without NO_COLOR), always or never")
	cmd.Flags().StringVar(&o.tensor, "tensor", "", "explain only the tensor `NAME`")
	cmd.Flags().IntVar(&o.op, "op", -1, "explain only op `N` (0 is the first)")
	cmd.Flags().BoolVar(&o.summary, "summary", false, "show totals only: per collective type and per op (the longest 24), to fit a screen")
	return cmd
}

func (o *explainOptions) run(cmd *cobra.Command, arg string) error {
	if o.op < -1 {
		return usageError{errors.New("--op: must be an op's index (0 or more)")}
	}
	if o.summary && (o.tensor != "" || o.op >= 0) {
		return usageError{errors.New("--summary shows the totals of every op: leave out --tensor and --op")}
	}
	p, err := o.input.load(cmd, arg)
	if err != nil {
		return err
	}
	opts := explain.Options{Tensor: o.tensor, Op: o.op}
	if err := opts.Check(p); err != nil {
		return usageError{err}
	}
	if opts.Topology, err = o.input.pricing(cmd); err != nil {
		return err
	}
	if opts.Forms, err = forms(p, opts.Topology); err != nil {
		return report(cmd, err)
	}
	if opts.Overlaps, err = overlaps(p, opts.Topology); err != nil {
		return report(cmd, err)
	}
	out := cmd.OutOrStdout()
	opts.Color = o.color.value == "always" || (o.color.value == "auto" && explain.ColorAuto(out))
	var b bytes.Buffer
	if o.input.chosen != nil {
		if err := writeDecisions(&b, o.input.chosen); err != nil {
			return err
		}
	}
	write := explain.Write
	if o.summary {
		write = explain.WriteSummary
	}
	if err := write(&b, p, opts); err != nil {
		return report(cmd, err)
	}
	_, err = out.Write(b.Bytes())
	return err
}

// forms are the prices of the forms of p's sdpas that the lowering chose
// between (lower.Forms), for explain to show.
func forms(p *plan.Plan, topo *cost.Topology) ([]explain.Form, error) {
	fs, err := lower.Forms(p, topo)
	if err != nil {
		return nil, err
	}
	var out []explain.Form
	for _, f := range fs {
		out = append(out, explain.Form{Op: f.Op, Ring: f.Ring, Gather: f.Gather, Expansion: f.Expansion, Bytes: f.Bytes, Chosen: f.Chosen})
	}
	return out, nil
}

// overlaps are the prices of the forms of p's decomposed collectives that
// the lowering chose between (lower.Overlaps), for explain to show.
func overlaps(p *plan.Plan, topo *cost.Topology) ([]explain.Overlap, error) {
	os, err := lower.Overlaps(p, topo)
	if err != nil {
		return nil, err
	}
	var out []explain.Overlap
	for _, o := range os {
		x := explain.Overlap{Op: o.Op, Kind: o.Kind, Bytes: o.Bytes,
			Chosen: explain.OverlapPrice{Form: o.Chosen.Form, Chunks: o.Chosen.Chunks, Price: o.Chosen.Price}}
		for _, p := range o.Prices {
			x.Prices = append(x.Prices, explain.OverlapPrice{Form: p.Form, Chunks: p.Chunks, Price: p.Price})
		}
		out = append(out, x)
	}
	return out, nil
}
