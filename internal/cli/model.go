package cli

import (
	"fmt"
	"io"
	"math"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/nvcomm/nvcomm/internal/cost"
	"github.com/nvcomm/nvcomm/internal/model"
)

type modelOptions struct {
	mesh      string
	sp        bool
	batch     int
	seq       int
	dtype     *enumFlag
	layers    int
	backward  bool
	keep      bool // --keep-gathered
	capacity  float64
	scaleDown bool
	micro     int
	schedule  *enumFlag
	virtual   int
	first     int
	last      int
	// scheduleSet is whether --schedule was given: without a pp axis it
	// is an error, with one its default is 1f1b.
	scheduleSet bool
	plan        bool
	summary     bool
	output      string
	policy      *enumFlag
	objective   *enumFlag
	topology    string
	// auto leaves the shardings to the search of lower --auto.
	auto autoOptions
	// changed reports whether a flag was given.
	changed func(name string) bool
}

func newModelCmd() *cobra.Command {
	o := &modelOptions{
		policy:    newEnum("optimal", "nvfuser").describe("the best plan under --objective", "nvFuser's lowering rules exactly"),
		objective: newObjective(),
		dtype: newEnum("bfloat16", "float16", "float32", "float64").describe("brain float: 2 bytes, as models train",
			"IEEE half: 2 bytes", "4 bytes", "8 bytes"),
		schedule: newEnum("1f1b", "gpipe", "interleaved").describe("one forward, one backward in turn (PipeDream-Flush, Megatron-LM's)",
			"every forward, then every backward", "1F1B over several stages a device group (Megatron-LM's virtual pipeline)"),
	}
	cmd := &cobra.Command{
		Use:   "model CONFIG.json",
		Short: "Write the fusion of a model's training step from its configuration",
		Long: `model reads a model's configuration (a Hugging Face config.json of model_type llama,
gpt2 or mixtral) and writes the fusion (YAML, docs/fusion.md) of a training step's forward:
the embedding, the transformer blocks, the final norm, the LM head and the loss,
sharded over the mesh as Megatron-LM (tp, --sp), PyTorch FSDP2 (fsdp; with dp, HSDP),
Llama 3's context parallelism (cp) and expert parallelism (ep: a mixture of experts'
experts split, the tokens sent to them and back by AllToAll) shard it (docs/models.md).
--plan lowers it at once and writes the plan; --summary writes what the step costs each
device.`,
		Example: `  nvcomm model testdata/models/llama3_8b/config.json --mesh dp=2,tp=4 --seq 8192 -o llama.yaml
  nvcomm model config.json --mesh dp=8,tp=8 --sp --batch 8 --seq 8192 --plan -o plan.json
  nvcomm model config.json --mesh dp=8,tp=8 --summary
  nvcomm model config.json --mesh dp=2,tp=4 --scale-down | nvcomm simulate -`,
		Args:              exactArgs(1),
		ValidArgsFunction: fileArg("json"),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.scheduleSet = cmd.Flags().Changed("schedule")
			o.changed = cmd.Flags().Changed
			o.auto.choicesOnly = true
			return o.run(cmd, args[0])
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.mesh, "mesh", "", "the device mesh as `AXES`: outermost first, each a parallelism (pp, dp, fsdp, cp, ep or tp) and its devices, as dp=2,tp=4, fsdp=8,tp=8, ep=8,tp=8 or pp=2,dp=2,tp=2 (required)")
	f.BoolVar(&o.sp, "sp", false, "sequence parallelism: tp also splits the sequence outside attention and the MLP (Megatron-LM's --sequence-parallel)")
	f.IntVar(&o.batch, "batch", 0, "the step's sequences, `B` (split over dp and fsdp; 0: one per data-parallel replica)")
	f.IntVar(&o.seq, "seq", 0, "the tokens of each sequence, `S` (0: the model's max_position_embeddings)")
	enumVar(cmd, o.dtype, "dtype", "the weights' and activations' element type")
	f.IntVar(&o.layers, "layers", 0, "write the first `K` blocks only (0: all of them)")
	f.BoolVar(&o.backward, "backward", false, "append the backward: the gradient of the loss with respect to every weight")
	f.BoolVar(&o.keep, "keep-gathered", false, "with --backward under fsdp, the backward reads the weights the forward gathered (FSDP2's reshard_after_forward=False) rather than gathering each again before its first backward use (FSDP2's default)")
	f.IntVar(&o.micro, "microbatches", 0, "with a pp axis: cut the batch into `M` micro-batches (0: one per pipeline stage group)")
	enumVar(cmd, o.schedule, "schedule", "with a pp axis: the pipeline schedule (docs/pipeline.md)")
	f.IntVar(&o.virtual, "virtual-stages", 0, "with --schedule interleaved: the stages each pipeline device group holds, `V` (0: 2)")
	f.IntVar(&o.first, "first-stage-layers", 0, "with a pp axis: the blocks of the pipeline's first stage, `N` (Megatron-LM's --decoder-first-pipeline-num-layers; 0: an equal share), the stages between sharing the rest equally")
	f.IntVar(&o.last, "last-stage-layers", 0, "with a pp axis: the blocks of the pipeline's last stage, `N` (Megatron-LM's --decoder-last-pipeline-num-layers; 0: an equal share), the stages between sharing the rest equally")
	f.Float64Var(&o.capacity, "capacity-factor", model.DefaultCapacityFactor, "a mixture of experts' capacity `FACTOR`: each expert takes ⌈top_k·seq/experts·FACTOR⌉ tokens of a sequence (at most seq; under cp, of each sequence's cp slice of seq/cp), the rest dropped")
	f.BoolVar(&o.scaleDown, "scale-down", false, "write a model of the same structure and sharding small enough to simulate: 2 layers, a smaller hidden size, one sequence per dp replica")
	f.BoolVar(&o.plan, "plan", false, "lower the fusion at once and write its plan (JSON, as lower does)")
	f.BoolVar(&o.summary, "summary", false, "lower the fusion and write, per device, the bytes of the parameters, gradients, optimizer state and activations, each collective's bytes per mesh axis, the predicted time, tokens/s and MFU")
	f.StringVarP(&o.output, "output", "o", "", "write to `FILE` (atomically) instead of standard output")
	fileFlag(cmd, "output")
	enumVar(cmd, o.policy, "policy", "lowering policy with --plan or --summary: optimal or nvfuser")
	objectiveVar(cmd, o.objective)
	f.BoolVar(&o.auto.enabled, "auto", false, "leave the weights' and activations' shardings to the search of lower --auto, within --memory-budget: -o writes the fusion with the chosen placements, --plan its plan, --summary what was chosen beside the mesh's own plan (docs/models.md)")
	f.Var(&o.auto.budget, "memory-budget", "with --auto: the most a device may hold at once, `SIZE` (bytes, or with a unit: 64GiB, 80GB); by default the topology's device memory (the built-in H200's: 150,109,880,320 bytes)")
	searchVars(cmd, &o.auto)
	choiceOrFileVar(cmd, &o.topology, "topology", "default",
		"price the steps on a topology: default (the built-in H200 one) or a FILE that calibrate --fit wrote",
		[]string{"default"}, topologyExts...)
	return cmd
}

// run writes the fusion, its plan or its summary.
func (o *modelOptions) run(cmd *cobra.Command, arg string) error {
	p, mo, err := o.check(arg)
	if err != nil {
		return err
	}
	name, src, err := readInput(cmd, arg)
	if err != nil {
		return err
	}
	c, err := model.ParseConfig(name, src)
	if err != nil {
		return report(cmd, err)
	}
	if o.scaleDown {
		if err := model.Check(c, p); err != nil {
			return reportIn(cmd, name, err)
		}
		c, mo = model.ScaleDown(c, p, mo)
		mo.Name += "_small"
	}
	if o.auto.enabled {
		return o.runAuto(cmd, name, c, p, mo)
	}
	fusion, err := model.Fusion(c, p, mo)
	if err != nil {
		return reportIn(cmd, name, err)
	}
	if !o.plan && !o.summary {
		return writeOutput(cmd, o.output, fusion)
	}
	opts, err := lowering(cmd, o.policy, o.objective, o.topology)
	if err != nil {
		return err
	}
	fusionName := mo.Name + ".yaml"
	if o.plan {
		return streamPlanSource(cmd, fusionName, fusion, o.output, opts)
	}
	pl, err := compileSource(cmd, fusionName, fusion, opts)
	if err != nil {
		return err
	}
	t := opts.Topology
	if t == nil {
		t = cost.Default()
	}
	s, err := model.Summarize(pl, c, p, mo, t)
	if err != nil {
		return err
	}
	return streamOutput(cmd, o.output, func(w io.Writer) error {
		fmt.Fprintf(w, "%s: %s\n\n", mo.Name, strings.TrimSpace(string(fusionHeader(fusion))))
		return s.WriteText(w)
	})
}

// check reads the flags into the plan and the step's options; their
// errors are usage errors.
func (o *modelOptions) check(arg string) (model.Parallel, model.Options, error) {
	var p model.Parallel
	switch {
	case o.mesh == "":
		return p, model.Options{}, usageError{fmt.Errorf("model needs --mesh, as --mesh dp=2,tp=4")}
	case o.plan && o.summary:
		return p, model.Options{}, usageError{fmt.Errorf("--plan and --summary write different things: give one")}
	case o.seq < 0 || o.batch < 0:
		return p, model.Options{}, usageError{fmt.Errorf("--batch %d --seq %d: want a positive batch (or 0, one sequence per dp replica) and a positive length (or 0, the model's longest)", o.batch, o.seq)}
	case !(o.capacity > 0) || math.IsInf(o.capacity, 0):
		return p, model.Options{}, usageError{fmt.Errorf("--capacity-factor %g: want a positive number (1.25, the default: a quarter more than each expert's even share)", o.capacity)}
	case o.layers < 0:
		return p, model.Options{}, usageError{fmt.Errorf("--layers %d: want 0 (all) or more", o.layers)}
	}
	axes, err := model.ParseMesh(o.mesh)
	if err != nil {
		return p, model.Options{}, usageError{fmt.Errorf("--mesh: %w", err)}
	}
	if err := o.checkAuto(axes); err != nil {
		return p, model.Options{}, err
	}
	p = model.NewParallel(axes, o.sp)
	if o.micro < 0 || o.virtual < 0 || o.first < 0 || o.last < 0 {
		return p, model.Options{}, usageError{fmt.Errorf("--microbatches %d --virtual-stages %d --first-stage-layers %d --last-stage-layers %d: want 1 or more (or 0, the default)", o.micro, o.virtual, o.first, o.last)}
	}
	if o.keep && (!o.backward || !slices.ContainsFunc(axes, func(a model.Axis) bool { return a.Name == model.FSDP && a.Size > 1 })) {
		return p, model.Options{}, usageError{fmt.Errorf("--keep-gathered: FSDP's gathered weights are kept for the backward only with --backward and an fsdp axis of 2 devices or more in --mesh")}
	}
	mo := model.Options{Name: fusionName(arg, o.mesh, o.sp), Batch: o.batch, Seq: o.seq, DType: o.dtype.value, Layers: o.layers, Backward: o.backward, KeepGathered: o.keep,
		Microbatches: o.micro, Virtual: o.virtual, FirstStageBlocks: o.first, LastStageBlocks: o.last, CapacityFactor: o.capacity}
	if o.scheduleSet {
		mo.Schedule = o.schedule.value
	}
	return p, mo, nil
}

// fusionName names the fusion after its configuration (the directory of
// a config.json) and its mesh: llama3_8b_dp2_tp4_sp.
func fusionName(arg, mesh string, sp bool) string {
	base := strings.TrimSuffix(filepath.Base(arg), filepath.Ext(arg))
	if base == "config" || base == "-" {
		base = filepath.Base(filepath.Dir(arg))
	}
	if base == "." || base == "/" || base == "" || base == "-" {
		base = "model"
	}
	name := base + "_" + strings.NewReplacer("=", "", ",", "_").Replace(mesh)
	if sp {
		name += "_sp"
	}
	return name
}

// fusionHeader is the fusion's leading comment, its description of the
// model, without the schema line and the comment marks.
func fusionHeader(fusion []byte) string {
	var lines []string
	for l := range strings.Lines(string(fusion)) {
		if !strings.HasPrefix(l, "#") {
			break
		}
		if strings.Contains(l, "$schema") {
			continue
		}
		lines = append(lines, strings.TrimPrefix(strings.TrimSpace(strings.TrimPrefix(l, "#")), "Written by nvcomm model: "))
	}
	return strings.Join(lines, " ")
}
