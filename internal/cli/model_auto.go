package cli

import (
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/nvcomm/nvcomm/internal/auto"
	"github.com/nvcomm/nvcomm/internal/cost"
	"github.com/nvcomm/nvcomm/internal/explain"
	"github.com/nvcomm/nvcomm/internal/lower"
	"github.com/nvcomm/nvcomm/internal/model"
	"github.com/nvcomm/nvcomm/internal/plan"
	"github.com/nvcomm/nvcomm/internal/syntax"
)

// checkAuto refuses what model --auto does not search: a pipeline (the
// search chooses the shardings within a stage's mesh, not the cut into
// stages) and FSDP's kept gathered copies (the search writes no gather).
func (o *modelOptions) checkAuto(axes []model.Axis) error {
	if !o.auto.enabled {
		for _, name := range []string{"memory-budget", "time-limit", "optimizer"} {
			if o.flagChanged(name) {
				return usageError{fmt.Errorf("--%s needs --auto", name)}
			}
		}
		return nil
	}
	if !slices.Contains(auto.Optimizers, o.auto.optimizer) {
		return usageError{fmt.Errorf("--optimizer %q: want one of %s", o.auto.optimizer, strings.Join(auto.Optimizers, ", "))}
	}
	if slices.ContainsFunc(axes, func(a model.Axis) bool { return a.Name == model.PP }) {
		return usageError{fmt.Errorf("--auto chooses the shardings within one mesh and does not cut a model into pipeline stages: leave pp out of --mesh (plan the pipeline by hand, without --auto)")}
	}
	if slices.ContainsFunc(axes, func(a model.Axis) bool { return (a.Name == model.CP || a.Name == model.EP) && a.Size > 1 }) {
		return usageError{fmt.Errorf("--auto searches meshes of dp, fsdp and tp axes: context parallelism's (cp) and expert parallelism's (ep) layouts are written by hand only, without --auto")}
	}
	if o.keep {
		return usageError{fmt.Errorf("--keep-gathered says how FSDP's gathered weights are kept; with --auto the search chooses the weights' shardings and writes no gather")}
	}
	return nil
}

// runAuto writes the fusion of the model's step with the shardings left
// to the search (model.Options.Auto), has the search of lower --auto
// choose them within the memory budget, and writes the chosen fusion,
// its plan or its summary.
func (o *modelOptions) runAuto(cmd *cobra.Command, name string, c *model.Config, p model.Parallel, mo model.Options) error {
	opts, err := lowering(cmd, o.policy, o.objective, o.topology)
	if err != nil {
		return err
	}
	t := opts.Topology
	if t == nil {
		t = cost.Default()
	}
	if !o.flagChanged("memory-budget") {
		o.auto.budget.bytes = t.DeviceMemory // 0, unlimited, where the topology does not say
	}
	am := mo
	am.Auto, am.Name = true, mo.Name+"_auto"
	fusion, err := model.Fusion(c, p, am)
	if err != nil {
		return reportIn(cmd, name, err)
	}
	pl, res, err := o.auto.compileAutoSource(cmd, am.Name+".yaml", fusion, opts)
	if err != nil {
		return err
	}
	// The mesh's own plan is a candidate too: --auto never writes a step
	// predicted slower than the one the mesh's names shard, when that one
	// fits the budget.
	hand := o.handPlan(c, p, mo, opts, t)
	kept := hand.err == nil && hand.seconds < res.Seconds && o.handFits(hand)
	out, outPlan, outOptions := res.Fusion, pl, am
	if kept {
		out, outPlan, outOptions = hand.fusion, hand.plan, mo
		if !o.summary {
			fmt.Fprintf(cmd.ErrOrStderr(), "nvcomm: model --auto: the mesh's own plan (%s), predicted %s, is faster than the search's choice, %s: writing it (docs/models.md)\n",
				meshFlagText(p), explain.Seconds(hand.seconds), explain.Seconds(res.Seconds))
		}
	}
	switch {
	case o.plan:
		return streamOutput(cmd, o.output, func(w io.Writer) error {
			return plan.Encode(&planLimitWriter{w: w, left: planLimit(cmd), cmd: cmd}, outPlan)
		})
	case !o.summary:
		return writeOutput(cmd, o.output, out)
	}
	s, err := model.Summarize(outPlan, c, p, outOptions, t)
	if err != nil {
		return err
	}
	weights, err := model.Weights(c, p, am)
	if err != nil {
		return err
	}
	return streamOutput(cmd, o.output, func(w io.Writer) error {
		fmt.Fprintf(w, "%s: %s\n\n", outOptions.Name, strings.TrimSpace(fusionHeader(out)))
		if err := o.writeChosen(w, res, p, weights, hand, kept); err != nil {
			return err
		}
		return s.WriteText(w)
	})
}

// handFits reports whether the mesh's own plan fits the memory budget by
// its upper bound (every tensor held at once): unbounded, or within it.
func (o *modelOptions) handFits(hand handResult) bool {
	return o.auto.budget.bytes <= 0 || hand.bytes <= o.auto.budget.bytes
}

// flagChanged reports whether the model command's flag name was given.
func (o *modelOptions) flagChanged(name string) bool {
	return o.changed != nil && o.changed(name)
}

// handResult is the mesh's own plan (the axes' names as model writes
// them without --auto), for comparison with the chosen one.
type handResult struct {
	// err says why the plan could not be made; the rest is then unset.
	err error
	// seconds is its predicted time; bytes what a device holds by the
	// summary's count (every tensor at once) plus the optimizer's state
	// as --optimizer counts it.
	seconds float64
	bytes   int64
	// fusion and plan are the fusion model writes without --auto and
	// its plan, written instead of the search's when faster.
	fusion []byte
	plan   *plan.Plan
}

// handPlan lowers the fusion that model writes without --auto for the
// same mesh and step, and prices it.
func (o *modelOptions) handPlan(c *model.Config, p model.Parallel, mo model.Options, opts lower.Options, t *cost.Topology) handResult {
	fusion, err := model.Fusion(c, p, mo)
	if err != nil {
		return handResult{err: err}
	}
	f, err := syntax.Parse(mo.Name+".yaml", fusion)
	if err != nil {
		return handResult{err: err}
	}
	pl, err := lower.Lower(f, opts)
	if err != nil {
		return handResult{err: err}
	}
	s, err := model.Summarize(pl, c, p, mo, t)
	if err != nil {
		return handResult{err: err}
	}
	b := s.ParameterBytes + s.GatheredBytes + s.ActivationBytes
	switch o.auto.optimizer {
	case "sgd":
		b += s.GradientBytes
	case "adam":
		b += s.GradientBytes + 8*s.Parameters // two float32 moments, as the search counts them
	}
	return handResult{seconds: s.Time, bytes: b, fusion: fusion, plan: pl}
}

// layerPrefix is a block's prefix of a weight's name: l12_.
var layerPrefix = regexp.MustCompile(`^l[0-9]+_`)

// writeChosen writes the search's headline, what it chose for each kind
// of weight (the blocks' weights of one name together) and the mesh's
// own plan beside it, and which of the two the summary below is of
// (kept: the mesh's own, predicted faster and within the budget).
func (o *modelOptions) writeChosen(w io.Writer, res *auto.Result, p model.Parallel, weights []string, hand handResult, kept bool) error {
	ew := &errWriter{w: w}
	budget := "no memory budget"
	if o.auto.budget.bytes > 0 {
		budget = "within " + plan.Size(o.auto.budget.bytes) + " a device"
	}
	fmt.Fprintf(ew, "auto: predicted %s, at most %s per device (%s, optimizer %s)\n", explain.Seconds(res.Seconds), plan.Size(res.PeakBytes), budget, o.auto.optimizer)
	if !res.Exact {
		fmt.Fprintf(ew, "auto: not proven the fastest: the fastest is at most %s faster\n", explain.Seconds(res.Gap))
	}
	chosen := map[string]string{}
	for _, d := range res.Decisions {
		chosen[d.Tensor] = d.Chosen
	}
	type kind struct {
		name    string
		choices []string
	}
	var kinds []*kind
	for _, wt := range weights {
		k := layerPrefix.ReplaceAllString(wt, "")
		i := slices.IndexFunc(kinds, func(x *kind) bool { return x.name == k })
		if i < 0 {
			kinds = append(kinds, &kind{name: k})
			i = len(kinds) - 1
		}
		if ch, ok := chosen[wt]; ok && !slices.Contains(kinds[i].choices, ch) {
			kinds[i].choices = append(kinds[i].choices, ch)
		}
	}
	fmt.Fprintf(ew, "\nchosen, per weight (a block's weights by their name in every block):\n")
	tw := tabwriter.NewWriter(ew, 0, 4, 2, ' ', 0)
	for _, k := range kinds {
		var what []string
		for _, ch := range k.choices {
			what = append(what, ch+" "+describePlacements(ch, p))
		}
		fmt.Fprintf(tw, "  %s\t%s\n", k.name, strings.Join(what, "; "))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(ew)
	mesh := meshFlagText(p)
	switch {
	case hand.err != nil:
		fmt.Fprintf(ew, "the mesh's own plan (%s): cannot be written: %v\n\n", mesh, hand.err)
	default:
		fits := "within the budget"
		if !o.handFits(hand) {
			fits = "over the budget: may not fit"
		}
		tw := tabwriter.NewWriter(ew, 0, 4, 2, ' ', 0)
		fmt.Fprintf(tw, "plan\tpredicted\tper device\n")
		fmt.Fprintf(tw, "chosen by --auto\t%s\t%s (the search's peak)\n", explain.Seconds(res.Seconds), plan.Size(res.PeakBytes))
		fmt.Fprintf(tw, "the mesh's own (%s)\t%s\t%s (every tensor held at once, an upper bound: %s)\n", mesh, explain.Seconds(hand.seconds), plan.Size(hand.bytes), fits)
		if err := tw.Flush(); err != nil {
			return err
		}
		why := ""
		switch {
		case hand.seconds >= res.Seconds:
		case res.BackwardOps > 0:
			// The search minimises each op's forward and gradient priced
			// alone, not the step's plan (docs/auto.md, "Training steps").
			why = fmt.Sprintf("the search minimised the sum of its ops' forward and gradient prices, %s, not the step's time", explain.Seconds(res.Searched))
		default:
			// Attention is given as the plan says, and the search
			// prices the rest exactly: the plan's own choices were
			// not among the search's (an FSDP gather, say).
			why = "it shards as --auto's candidates do not"
		}
		switch {
		case kept:
			fmt.Fprintf(ew, "the mesh's own plan is predicted faster (%s) and fits: it is written, and summarized below\n", why)
		case why != "":
			fmt.Fprintf(ew, "the mesh's own plan is predicted faster (%s), but may not fit the budget: the search's choice is written\n", why)
		}
		fmt.Fprintln(ew)
	}
	return ew.err
}

// describePlacements names a weight's placements on the mesh as the
// parallelisms they are: Megatron-LM's column or row split along a tp
// axis, an FSDP (ZeRO-3) shard along an axis that splits the batch or
// the sequence, replicated where nothing splits it.
func describePlacements(pl string, p model.Parallel) string {
	parts := strings.Split(strings.Trim(pl, "[]"), ", ")
	var what []string
	for i, part := range parts {
		if i >= len(p.Mesh) || !strings.HasPrefix(part, "Shard(") {
			continue
		}
		a := p.Mesh[i].Name
		switch {
		case a == model.TP && part == "Shard(0)":
			what = append(what, "column along tp")
		case a == model.TP && part == "Shard(1)":
			what = append(what, "row along tp")
		case a == model.TP:
			what = append(what, "split along tp")
		default:
			what = append(what, "FSDP along "+a)
		}
	}
	if len(what) == 0 {
		return "(replicated)"
	}
	return "(" + strings.Join(what, ", ") + ")"
}

// meshFlagText writes the plan's mesh as --mesh does, with --sp.
func meshFlagText(p model.Parallel) string {
	s := make([]string, len(p.Mesh))
	for i, a := range p.Mesh {
		s[i] = fmt.Sprintf("%s=%d", a.Name, a.Size)
	}
	m := strings.Join(s, ",")
	if p.SP {
		m += " --sp"
	}
	return m
}
