package cli

import (
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/nvcomm/nvcomm/internal/auto"
	"github.com/nvcomm/nvcomm/internal/explain"
	"github.com/nvcomm/nvcomm/internal/ir"
	"github.com/nvcomm/nvcomm/internal/lower"
	"github.com/nvcomm/nvcomm/internal/plan"
	"github.com/nvcomm/nvcomm/internal/syntax"
)

type lowerOptions struct {
	output    string
	format    *enumFlag
	policy    *enumFlag
	objective *enumFlag
	topology  string
	auto      autoOptions
	graph     bool
}

func newLowerCmd() *cobra.Command {
	o := &lowerOptions{
		format: newEnum("json", "text", "dot").describe("the plan as JSON (docs/plan.md)", "the plan as tables",
			"the plan as a Graphviz graph (dot -Tsvg)"),
		policy: newEnum(lower.Policies...).describe("the best plan under --objective: by default the fastest the cost model predicts",
			"nvFuser's lowering rules exactly"),
		objective: newObjective(),
	}
	cmd := &cobra.Command{
		Use:   "lower FUSION|-",
		Short: "Compile a fusion file into a communication plan",
		Long: `lower checks a fusion file (YAML, docs/fusion.md) and compiles it into a plan: the
collectives and local steps that carry out its ops on the devices, with the bytes
each moves (JSON, docs/plan.md). Errors point at file:line:col.`,
		Example: `  nvcomm lower testdata/examples/allgather_loop_split.yaml
  nvcomm lower --format text fusion.yaml
  nvcomm lower --policy nvfuser fusion.yaml -o plan.json
  nvcomm lower --step-graph fusion.yaml -o plan.json       # communication overlapping computation
  nvcomm lower --auto --memory-budget 64MiB --emit-fusion chosen.yaml layer.yaml
  cat fusion.yaml | nvcomm lower -`,
		Args:              exactArgs(1),
		ValidArgsFunction: fileArg(fusionExts...),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.auto.check(cmd); err != nil {
				return err
			}
			opts, err := lowering(cmd, o.policy, o.objective, o.topology)
			if err != nil {
				return err
			}
			// The optimal policy decomposes collectives only in a step
			// graph (docs/overlap.md).
			opts.StepGraph = o.graph
			emit := o.auto.emit != "" && !o.auto.enabled
			if o.format.value == "json" && !o.auto.enabled && !o.graph && !emit {
				return streamPlan(cmd, args[0], o.output, opts)
			}
			var p *plan.Plan
			var chosen *auto.Result
			switch {
			case o.auto.enabled:
				p, chosen, err = o.auto.compileAuto(cmd, args[0], opts)
			case emit:
				p, err = o.compileEmitting(cmd, args[0], opts)
			default:
				p, err = compile(cmd, args[0], opts)
			}
			if err != nil {
				return err
			}
			if o.graph {
				plan.ToGraph(p)
			}
			// Streamed, not buffered: the plan of 100k ops is 100 MB of JSON.
			return streamOutput(cmd, o.output, func(w io.Writer) error {
				switch o.format.value {
				case "text":
					if chosen != nil {
						if err := writeDecisions(w, chosen); err != nil {
							return err
						}
					}
					if err := plan.WriteText(w, p); err != nil {
						return err
					}
					return writeTime(w, p, opts.Topology)
				case "dot":
					return explain.WriteDot(w, p)
				}
				return plan.Encode(&planLimitWriter{w: w, left: planLimit(cmd), cmd: cmd}, p)
			})
		},
	}
	cmd.Flags().StringVarP(&o.output, "output", "o", "", "write the plan to `FILE` (atomically) instead of standard output")
	fileFlag(cmd, "output")
	enumVar(cmd, o.format, "format", "output format: json (the plan), text (tables for reading) or dot (a Graphviz graph)")
	enumVar(cmd, o.policy, "policy", "lowering policy: optimal (the best plan under --objective) or nvfuser (nvFuser's rules)")
	objectiveVar(cmd, o.objective)
	autoVars(cmd, &o.auto)
	o.auto.emitsBackward = true
	cmd.Flags().Lookup("emit-fusion").Usage = "write the fusion to `FILE` (atomically): with --auto with the chosen placements, without it with its backward section as the ops nvcomm derives (docs/training.md)"
	cmd.Flags().BoolVar(&o.graph, "step-graph", false, "write a plan of format 2 whose steps form a graph: collectives on their own stream, each step waiting only for the steps it depends on, so that communication overlaps computation, and where the makespan says so the optimal policy decomposes an Allgather + matmul or a matmul + ReduceScatter into chunks (docs/overlap.md)")
	choiceOrFileVar(cmd, &o.topology, "topology", "default",
		"price the optimal policy's steps on a topology: default (the built-in H200 one) or a FILE that calibrate --fit wrote",
		[]string{"default"}, topologyExts...)
	return cmd
}

// streamPlan parses a fusion file and writes its plan as JSON to output
// (standard output when "" or "-") as it is lowered, op by op, never
// holding the plan whole: the plan of 100k ops is 100 MB of JSON and was
// more memory than the fusion. A file is replaced only once the whole
// plan is written; standard output receives it only then too (spooled),
// so that a lowering error leaves no part of a plan anywhere.
func streamPlan(cmd *cobra.Command, arg, output string, opts lower.Options) error {
	name, src, err := readInput(cmd, arg)
	if err != nil {
		return err
	}
	return streamPlanSource(cmd, name, src, output, opts)
}

// streamPlanSource is streamPlan of fusion source already read.
func streamPlanSource(cmd *cobra.Command, name string, src []byte, output string, opts lower.Options) error {
	f, err := parseGivingBack(cmd, name, src)
	if err != nil {
		return report(cmd, err)
	}
	var lowerErr error
	write := func(w io.Writer) error {
		err := lower.Stream(f, opts, plan.NewWriter(&planLimitWriter{w: w, left: planLimit(cmd), cmd: cmd}))
		if _, ok := err.(io.WriterTo); ok {
			lowerErr = err // diagnostics, not a failure to write
		}
		return err
	}
	if output == "" || output == "-" {
		write = spooled(write)
	}
	err = streamOutput(cmd, output, write)
	if lowerErr != nil {
		return report(cmd, lowerErr)
	}
	return err
}

// parseGivingBack is syntax.Parse of a fusion file that is read once: it
// gives the file's pages back as they are read and once the file is read
// (dropInputPages), so that they do not sit under the peak of building
// and lowering the fusion (docs/performance.md, "Ops built as read").
// Returning the parse's free memory too (debug.FreeOSMemory) was measured
// and left out: a few percent off the peak, a tenth more wall time.
func parseGivingBack(cmd *cobra.Command, name string, src []byte) (*ir.Fusion, error) {
	consumed := func(n int) { dropInputPages(cmd.Context(), src[:n&^(os.Getpagesize()-1)]) }
	decls, err := syntax.Read(name, src, syntax.Options{Consumed: consumed})
	if decls == nil {
		return nil, err
	}
	dropInputPages(cmd.Context(), src)
	return decls.Build(false)
}

// compileEmitting is compile that also writes the fusion with its
// backward section as ops (--emit-fusion without --auto).
func (o *lowerOptions) compileEmitting(cmd *cobra.Command, arg string, opts lower.Options) (*plan.Plan, error) {
	name, src, err := readInput(cmd, arg)
	if err != nil {
		return nil, err
	}
	if err := o.auto.emitBackward(cmd, name, src); err != nil {
		return nil, err
	}
	return compileSource(cmd, name, src, opts)
}

// compile parses and lowers a fusion file, reporting diagnostics.
func compile(cmd *cobra.Command, arg string, opts lower.Options) (*plan.Plan, error) {
	name, src, err := readInput(cmd, arg)
	if err != nil {
		return nil, err
	}
	return compileSource(cmd, name, src, opts)
}

// compileSource parses and lowers fusion source, reporting diagnostics.
func compileSource(cmd *cobra.Command, name string, src []byte, opts lower.Options) (*plan.Plan, error) {
	f, err := syntax.Parse(name, src)
	if err != nil {
		return nil, report(cmd, err)
	}
	p, err := lower.Lower(f, opts)
	if err != nil {
		return nil, report(cmd, err)
	}
	return p, nil
}
