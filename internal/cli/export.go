package cli

import (
	"bytes"
	"errors"
	"fmt"
	"slices"

	"github.com/spf13/cobra"

	"github.com/nvcomm/nvcomm/internal/checked"
	"github.com/nvcomm/nvcomm/internal/cost"
	"github.com/nvcomm/nvcomm/internal/export"
	"github.com/nvcomm/nvcomm/internal/lower"
	"github.com/nvcomm/nvcomm/internal/plan"
	"github.com/nvcomm/nvcomm/internal/shard"
	"github.com/nvcomm/nvcomm/internal/sim"
)

// probeValues is how many of simulate's values per fusion input an
// exported program checks its own data against.
const probeValues = 16

func newExportCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "export",
		Short: "Export a plan to a program for a real distributed engine",
		Example: `  nvcomm export torch fusion.yaml -o run.py
  torchrun --nproc_per_node=4 run.py`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fmt.Fprint(cmd.ErrOrStderr(), cmd.UsageString())
			return usageError{errors.New("missing target (torch)")}
		},
	}
	cmd.AddCommand(newExportTorchCmd())
	return cmd
}

type exportOptions struct {
	output    string
	policy    *enumFlag
	objective *enumFlag
	topology  string
	seed      uint64
	dataScale int
	data      *enumFlag
}

func newExportTorchCmd() *cobra.Command {
	o := &exportOptions{data: newEnum(export.DataSets...).describe("simulate's own for the fusion's ops",
		"{-2, -1, 1, 2}", "integers in [-512, 512]", "{1, 2, 3, 4}"), policy: newEnum(lower.Policies...).describe("the best plan under --objective: by default the fastest the cost model predicts",
		"nvFuser's lowering rules exactly"), objective: newObjective()}
	cmd := &cobra.Command{
		Use:   "torch FUSION|PLAN|-",
		Short: "Write a PyTorch program that runs a plan with torch.distributed and checks it",
		Long: `torch writes a standalone Python program for torchrun: one process per device
(device d on global rank d), NCCL on GPUs or gloo on CPUs. It builds every input
shard from the same data as simulate, runs each step with the matching
torch.distributed call, checks every output shard against a float64 reference and
prints PASS or the first mismatch (exit code 1). --bench N in the program times
every step beside the time the cost model predicts. Input starting with '{' is a
plan; anything else a fusion file. See docs/export.md.`,
		Example: `  nvcomm export torch testdata/examples/gpu2_allreduce.yaml -o run.py
  torchrun --nproc_per_node=2 run.py                     # NCCL on 2 GPUs
  torchrun --nproc_per_node=2 run.py --bench 20          # also time each block
  nvcomm export torch plan.json --topology topology.yaml -o run.py
  nvcomm export torch fusion.yaml --topology none --seed 7 -o run.py`,
		Args:              exactArgs(1),
		ValidArgsFunction: fileArg(anyInputExts...),
		RunE:              func(cmd *cobra.Command, args []string) error { return o.run(cmd, args[0]) },
	}
	cmd.Flags().StringVarP(&o.output, "output", "o", "", "write the program to `FILE` (atomically) instead of standard output")
	fileFlag(cmd, "output", "py")
	enumVar(cmd, o.policy, "policy", "lowering policy for a fusion file: optimal (the best plan under --objective) or nvfuser (nvFuser's rules)")
	objectiveVar(cmd, o.objective)
	choiceOrFileVar(cmd, &o.topology, "topology", "default",
		"topology of the predicted times: default (the built-in H200 one), none (no predictions) or a FILE that calibrate --fit wrote",
		[]string{"default", "none"}, topologyExts...)
	cmd.Flags().Uint64Var(&o.seed, "seed", 0, "the default seed `N` of the program's input data")
	enumVar(cmd, o.data, "data",
		"the data set of the program's inputs: auto (simulate's: positive for a fusion with div, exp, log, sqrt, rsqrt or reciprocal, small with a prod, else wide) or small, wide, positive; a whole model's step (nvcomm model) is checkable on small (docs/export.md)")
	cmd.Flags().IntVar(&o.dataScale, "data-scale", 0,
		"multiply the program's floating-point input data by 2^-`N` (0 to 60; simulate's data is 0): a whole model's step (nvcomm model) keeps attention's scores near 1 with 4, where its check is meaningful (docs/export.md)")
	return cmd
}

func (o *exportOptions) run(cmd *cobra.Command, arg string) error {
	if o.dataScale < 0 || o.dataScale > export.MaxDataScale {
		return usageError{fmt.Errorf("--data-scale must be from 0 to %d, got %d", export.MaxDataScale, o.dataScale)}
	}
	name, p, err := loadLowered(cmd, o.policy, o.objective, o.topology, arg)
	if err != nil {
		return err
	}
	data := sim.DataOf(p)
	if o.data.value != "auto" {
		data = dataSetNamed(o.data.value)
	}
	opts := export.Options{Seed: o.seed, Probes: probes(p, o.seed, data), DataScale: o.dataScale, Data: o.data.value}
	if o.topology != "none" {
		t, err := loadTopology(cmd, o.topology)
		if err != nil {
			return err
		}
		pred, err := predictBlocks(t, p)
		if err != nil {
			return reportIn(cmd, name, fmt.Errorf("cannot price the plan on topology %s: %w", t.Name, err))
		}
		opts.Topology, opts.Predicted = t.Name, pred
		if p.Graph() {
			pr, err := cost.Predict(t, p)
			if err != nil {
				return reportIn(cmd, name, fmt.Errorf("cannot price the plan on topology %s: %w", t.Name, err))
			}
			opts.Makespan = pr.Total
		}
	}
	var b bytes.Buffer
	if err := export.Torch(&b, p, opts); err != nil {
		return err
	}
	return writeOutput(cmd, o.output, b.Bytes())
}

// predictBlocks predicts every block of the exported function: a block
// that moves memory (a local step, or local steps fused into one pass) at
// the memory rate of its pass, any other as its plan step on its own (the
// last of the block: a Permute fused into a Matmul moves nothing), a
// kernel of its own, as the program runs it eagerly.
func predictBlocks(t *cost.Topology, p *plan.Plan) ([]float64, error) {
	if _, err := cost.Predict(t, p); err != nil {
		return nil, err
	}
	blocks, err := export.Blocks(p)
	if err != nil {
		return nil, err
	}
	out := make([]float64, len(blocks))
	for i, b := range blocks {
		last := b.Steps[len(b.Steps)-1]
		if b.Pass == "" {
			st, err := t.Step(p, &p.Steps[last])
			if err != nil {
				return nil, err
			}
			out[i] = st.Seconds
			continue
		}
		size := int64(shard.DTypeSize(stepDType(p, last)))
		out[i] = t.Pass(b.Pass, b.Elements*size, b.Kernels)
	}
	return out, nil
}

// stepDType is the dtype of the buffers of step i: its op's output's.
func stepDType(p *plan.Plan, i int) string {
	op := p.Steps[i].Op
	for _, t := range p.Tensors {
		if op >= 0 && op < len(p.Ops) && t.Name == p.Ops[op].Output {
			return t.DType
		}
	}
	return ""
}

// dataSetNamed is simulate's data set called name (small, wide or
// positive: export.DataSets but auto).
func dataSetNamed(name string) sim.DataSet {
	switch name {
	case "small":
		return sim.Small
	case "positive":
		return sim.Positive
	}
	return sim.Wide
}

// probes returns the first values simulate's generator fills every fusion
// input with from data set data.
func probes(p *plan.Plan, seed uint64, data sim.DataSet) map[string][]float64 {
	produced := map[string]bool{}
	for _, op := range p.Ops {
		produced[op.Output] = true
	}
	out, bounds := map[string][]float64{}, sim.IndexBounds(p)
	for i, t := range p.Tensors {
		if produced[t.Name] {
			continue
		}
		out[t.Name] = sim.InputValues(seed, i, probeCount(t), data, bounds[t.Name])
	}
	return out
}

// probeCount is how many values of a fusion input an exported program
// checks: probeValues, or every value of a smaller tensor. Only that many
// are ever made, however large the tensor; an element count past int64 is
// more than probeValues.
func probeCount(t plan.Tensor) int {
	var shape []int
	for k, e := range t.Shape {
		if !slices.Contains(t.ReductionAxes, k) {
			shape = append(shape, e)
		}
	}
	n, ok := checked.Product(shape...)
	if !ok {
		return probeValues
	}
	return max(0, min(n, probeValues)) // validate rejects negative extents
}

// loadTopology reads a topology file; "default" is the built-in one.
func loadTopology(cmd *cobra.Command, arg string) (*cost.Topology, error) {
	if arg == "default" {
		return cost.Default(), nil
	}
	src, err := readFile(cmd, arg)
	if err != nil {
		return nil, err
	}
	t, err := cost.ParseTopology(arg, src)
	if err != nil {
		return nil, reportIn(cmd, arg, err)
	}
	return t, nil
}

// loadNamedPlan returns a plan — decoded, validated and certified
// (readPlan) when the input is a plan, lowered when it is a fusion file —
// and the input's name for diagnostics (<stdin> for "-").
func loadNamedPlan(cmd *cobra.Command, arg string, opts lower.Options) (string, *plan.Plan, error) {
	name, src, err := readPlanOrFusion(cmd, arg)
	if err != nil {
		return name, nil, err
	}
	return loadNamedSource(cmd, name, src, opts)
}

// loadNamedSource is loadNamedPlan of the plan or fusion src, read.
func loadNamedSource(cmd *cobra.Command, name string, src []byte, opts lower.Options) (string, *plan.Plan, error) {
	if !isPlan(src) {
		p, err := compileSource(cmd, name, src, opts)
		return name, p, err
	}
	p, err := readPlan(cmd, name, src)
	return name, p, err
}

// isPlan tells a plan (JSON: an object) from a fusion file (YAML).
func isPlan(src []byte) bool { return bytes.HasPrefix(bytes.TrimSpace(src), []byte("{")) }

// noArgs is cobra.NoArgs with a usage error, so an unknown subcommand
// exits 2.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usageError{fmt.Errorf("unknown command %q for %q", args[0], cmd.CommandPath())}
	}
	return nil
}
