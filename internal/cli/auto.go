package cli

import (
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/mattn/go-isatty"

	"github.com/spf13/cobra"

	"github.com/nvcomm/nvcomm/internal/auto"
	"github.com/nvcomm/nvcomm/internal/cost"
	"github.com/nvcomm/nvcomm/internal/diag"
	"github.com/nvcomm/nvcomm/internal/explain"
	"github.com/nvcomm/nvcomm/internal/lower"
	"github.com/nvcomm/nvcomm/internal/plan"
	"github.com/nvcomm/nvcomm/internal/syntax"
)

// autoOptions are the flags of the auto-sharder (docs/auto.md).
type autoOptions struct {
	enabled   bool
	budget    sizeFlag
	emit      string
	timeLimit time.Duration
	optimizer string
	// choicesOnly leaves out the runner-ups (model --auto, which prints
	// the choices alone): the search then solves without the budget
	// first and keeps that choice when it fits, and otherwise prices
	// bytes to find shardings that fit before it proves them the fastest
	// (auto.Options.NoRunnerUps).
	choicesOnly bool
	// emitsBackward is set by a command whose --emit-fusion, without
	// --auto, writes a backward section as ops (lower).
	emitsBackward bool
}

func autoVars(cmd *cobra.Command, o *autoOptions) {
	cmd.Flags().BoolVar(&o.enabled, "auto", false, "choose the shardings of the tensors that are not given and of those with placements: auto (format 2; docs/auto.md)")
	cmd.Flags().Var(&o.budget, "memory-budget", "with --auto: the most a device may hold at once, `SIZE` (bytes, or with a unit: 64MiB, 80GB); unlimited when unset")
	cmd.Flags().StringVar(&o.emit, "emit-fusion", "", "with --auto: write the fusion with the chosen placements to `FILE` (atomically)")
	fileFlag(cmd, "emit-fusion")
	searchVars(cmd, o)
}

// searchVars declares the flags of the search itself, which a command
// with no --emit-fusion (model) shares.
func searchVars(cmd *cobra.Command, o *autoOptions) {
	cmd.Flags().StringVar(&o.optimizer, "optimizer", "none", "with --auto, for a training step: what memory counts for each weight besides it, `none|sgd|adam`: none (the forward's tensors alone), sgd (its gradient), adam (its gradient and two float32 moments)")
	cmd.Flags().DurationVar(&o.timeLimit, "time-limit", 0, "with --auto: stop the search after `DURATION` (30s, 2m) and keep the best shardings found, with how far from the fastest they may be; unlimited when unset")
}

// check refuses the auto flags without --auto.
func (o *autoOptions) check(cmd *cobra.Command) error {
	for _, name := range []string{"memory-budget", "emit-fusion", "time-limit", "optimizer"} {
		if name == "emit-fusion" && o.emitsBackward || cmd.Flags().Lookup(name) == nil {
			continue
		}
		if !o.enabled && cmd.Flags().Changed(name) {
			return usageError{fmt.Errorf("--%s needs --auto", name)}
		}
	}
	if !slices.Contains(auto.Optimizers, o.optimizer) {
		return usageError{fmt.Errorf("--optimizer %q: want one of %s", o.optimizer, strings.Join(auto.Optimizers, ", "))}
	}
	return nil
}

// compileAuto chooses the shardings of the fusion in arg, writes the
// annotated fusion where --emit-fusion says, and lowers it.
func (o *autoOptions) compileAuto(cmd *cobra.Command, arg string, opts lower.Options) (*plan.Plan, *auto.Result, error) {
	name, src, err := readInput(cmd, arg)
	if err != nil {
		return nil, nil, err
	}
	return o.compileAutoSource(cmd, name, src, opts)
}

// compileAutoSource is compileAuto of fusion source read from name.
func (o *autoOptions) compileAutoSource(cmd *cobra.Command, name string, src []byte, opts lower.Options) (*plan.Plan, *auto.Result, error) {
	if isPlan(src) {
		return nil, nil, usageError{fmt.Errorf("--auto chooses the shardings of a fusion file; %s is a plan", name)}
	}
	if os.Getenv("GOGC") == "" { // the user's GOGC, when set, rules
		defer debug.SetGCPercent(debug.SetGCPercent(auto.GCPercent))
	}
	search := opts
	search.StepGraph = false // the search prices each op's steps as a list; the plan chosen is lowered as asked
	ao := auto.Options{Lowering: search, MemoryBudget: o.budget.bytes, TimeLimit: o.timeLimit, Optimizer: o.optimizer, Progress: progressLine(cmd.ErrOrStderr()),
		NoRunnerUps: o.choicesOnly, StepGraph: opts.StepGraph}
	res, err := auto.Solve(name, src, ao)
	if err != nil {
		return nil, nil, reportIn(cmd, name, err)
	}
	if !res.Exact {
		warn(cmd, diag.Warn(name, "--auto stopped its search at its limit; the shardings are the best it found, at most %s slower than the fastest (give some tensors placements, or a longer --time-limit)", explain.Seconds(res.Gap)))
	}
	if o.emit != "" {
		if err := writeOutput(cmd, o.emit, res.Fusion); err != nil {
			return nil, nil, err
		}
	}
	p, err := lowerAnnotated(name, res, opts)
	if err != nil {
		return nil, nil, report(cmd, res.Repoint(err))
	}
	if opts.StepGraph {
		// The plan shown is a step graph: the headline is its makespan,
		// the plan's own prediction, not the search's sum of lists.
		plan.ToGraph(p)
		topo := opts.Topology
		if topo == nil {
			topo = cost.Default()
		}
		if pr, err := cost.Predict(topo, p); err == nil && pr.Total != res.Seconds {
			res.Listed, res.Seconds = res.Seconds, pr.Total
		}
	}
	return p, res, nil
}

// emitBackward writes, where --emit-fusion says, fusion source src (read
// from name) with its backward section written as the ops nvcomm derives
// for it (syntax.WriteBackward).
func (o *autoOptions) emitBackward(cmd *cobra.Command, name string, src []byte) error {
	out, err := syntax.WriteBackward(name, src)
	if err != nil {
		return report(cmd, err)
	}
	return writeOutput(cmd, o.emit, out)
}

// lowerAnnotated lowers the fusion --auto annotated; its errors are the
// annotated file's, which Repoint moves to the user's.
func lowerAnnotated(name string, res *auto.Result, opts lower.Options) (*plan.Plan, error) {
	f, err := syntax.Parse(name, res.Fusion)
	if err != nil {
		return nil, err
	}
	return lower.Lower(f, opts)
}

// writeDecisions prints what --auto chose for each tensor, the best other
// sharding and how much slower the layer would be with it.
func writeDecisions(w io.Writer, res *auto.Result) error {
	ew := &errWriter{w: w}
	if len(res.Decisions) == 0 {
		fmt.Fprintf(ew, "auto: nothing to choose: every tensor is given\n\n")
		return ew.err
	}
	fmt.Fprintf(ew, "auto: predicted %s, at most %s per device\n", explain.Seconds(res.Seconds), plan.Size(res.PeakBytes))
	if !res.Exact {
		fmt.Fprintf(ew, "auto: not proven the fastest: the fastest is at most %s faster; runner-ups not searched\n", explain.Seconds(res.Gap))
	}
	if res.Listed > 0 {
		fmt.Fprintf(ew, "auto: the search priced each op's steps as a list (%s); the plan's step graph overlaps them, and \"slower by\" is the lists'\n",
			explain.Seconds(res.Listed))
	}
	if len(res.Ranked) > 1 {
		fmt.Fprintf(ew, "auto: %s\n", rankedLine(res.Ranked))
	}
	if res.BackwardOps > 0 {
		fmt.Fprintf(ew, "auto: the search priced each op with its gradient (%s); the backward's %d ops follow propagation from its shardings, and \"slower by\" is the search's\n",
			explain.Seconds(res.Searched), res.BackwardOps)
	}
	tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "tensor\tchosen\trunner-up\tslower by")
	for _, d := range res.Decisions {
		runnerUp, slower := d.RunnerUp, "+"+explain.Seconds(d.Slower)
		switch {
		case !res.Exact:
			runnerUp, slower = "-", ""
		case runnerUp == "":
			runnerUp, slower = "none within the budget", ""
		}
		if d.ByMakespan {
			runnerUp += " (the search's)"
			slower += " (makespan)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", d.Tensor, d.Chosen, runnerUp, slower)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(ew)
	return ew.err
}

// rankedLine says how the search's assignment and its best runner-ups
// rank by their plans' makespans (auto.Ranked, the search's first), and
// which the plan takes: the least, the search's on a tie.
func rankedLine(ranked []auto.Ranked) string {
	var parts []string
	win := 0
	for i, r := range ranked {
		name := "the search's choice"
		if r.Tensor != "" {
			name = r.Tensor + " " + r.Placements
		}
		parts = append(parts, fmt.Sprintf("%s %s (lists %s)", name, explain.Seconds(r.Makespan), explain.Seconds(r.Listed)))
		if r.Makespan < ranked[win].Makespan {
			win = i
		}
	}
	taken := "the search's choice kept"
	if win > 0 {
		taken = ranked[win].Tensor + " " + ranked[win].Placements + " taken"
	}
	return fmt.Sprintf("the search's choice and its %d best runner-ups ranked by their plans' makespans: %s; %s",
		len(ranked)-1, strings.Join(parts, ", "), taken)
}

// progressLine is Solve's progress callback: a line on w about once a
// second when w is a terminal, nil (no progress) otherwise.
func progressLine(w io.Writer) func(auto.Progress) {
	f, ok := w.(*os.File)
	if !ok || !isatty.IsTerminal(f.Fd()) && !isatty.IsCygwinTerminal(f.Fd()) {
		return nil
	}
	start := time.Now()
	return func(p auto.Progress) {
		fmt.Fprintf(w, "auto: %s: %d of %d (%.0f s)\n", p.Stage, p.Done, p.Total, time.Since(start).Seconds())
	}
}
