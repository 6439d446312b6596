package model

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// Options are the step's sizes besides the model's.
type Options struct {
	// Name is the fusion's name.
	Name string
	// Batch and Seq are the sequences of a step and their length; Batch
	// 0 is one sequence per data-parallel replica (dp and fsdp), Seq 0 the model's
	// max_position_embeddings (2048 when it has none).
	Batch, Seq int
	// DType is the weights' and activations' element type.
	DType string
	// Layers, when positive, replaces the configuration's number of
	// blocks (a smaller model of the same structure).
	Layers int
	// Backward appends the step's backward: the gradient of the loss
	// with respect to every weight.
	Backward bool
	// KeepGathered, with Backward under fsdp, has the backward read the
	// weights' copies that the forward gathered (FSDP2's
	// reshard_after_forward=False); by default the backward gathers each
	// again before its first backward use (reshard_after_forward: true,
	// FSDP2's default), and the forward's copy lives until its last
	// forward reader.
	KeepGathered bool
	// Microbatches, Schedule and Virtual are the pipeline's, under a pp
	// axis (docs/pipeline.md): the micro-batches the batch is cut into
	// (0: one per stage group), the schedule (gpipe, 1f1b, the default,
	// or interleaved) and, interleaved, the stages each device group
	// holds (0: 2).
	Microbatches int
	Schedule     string
	Virtual      int
	// FirstStageBlocks and LastStageBlocks, when positive, are the blocks
	// of the pipeline's first and last stages (Megatron-LM's
	// --decoder-first-pipeline-num-layers and
	// --decoder-last-pipeline-num-layers): fewer than the others' to make
	// room for the embedding, or the LM head and the loss. The stages
	// between share the remaining blocks equally; 0 is an equal share.
	FirstStageBlocks, LastStageBlocks int
	// Auto writes the fusion for lower --auto to shard (docs/models.md,
	// "Choosing the sharding: --auto"): every weight `placements: auto`,
	// read where it is stored (no FSDP gather), and the activations
	// outside attention (the residual stream, the norms' outputs, the
	// projections', the MLP's) left undeclared, for the search to choose.
	// The inputs (token ids, labels, the rotary tables), the loss and
	// attention's tensors (attentionTensors) stay given as the plan says.
	Auto bool
	// CapacityFactor scales a mixture of experts' capacity, the tokens of
	// a group (a sequence, or under cp its cp slice) each expert takes:
	// ⌈top_k·group/experts · CapacityFactor⌉, at most the group; 0 is
	// DefaultCapacityFactor.
	CapacityFactor float64
}

// DefaultCapacityFactor is the Switch Transformer's training capacity
// factor (Fedus et al. 2021, §2.2): room for a quarter more than each
// expert's even share of the tokens.
const DefaultCapacityFactor = 1.25

// The pipeline schedules (docs/pipeline.md).
const (
	GPipe       = "gpipe"
	OneFOneB    = "1f1b"
	Interleaved = "interleaved"
)

// causalAttention is the sdpa's causal flag: a language model's attention
// is causal (torch's is_causal). Heads split, its masks are local: the
// communication is the unmasked attention's.
var causalAttention = true

// Fusion writes the fusion (YAML, format 2) of a training step's forward
// of c under plan p: the embedding, the blocks, the final norm, the LM
// head and the loss (and, with o.Backward, its backward). Only the
// inputs, the weights, the residual stream and the loss are declared;
// every other tensor takes its sharding from its ops.
func Fusion(c *Config, p Parallel, o Options) ([]byte, error) {
	w, err := write(c, p, o)
	if err != nil {
		return nil, err
	}
	return []byte(w.b.String()), nil
}

// Weights are the names of the weights of Fusion(c, p, o), in order.
func Weights(c *Config, p Parallel, o Options) ([]string, error) {
	w, err := write(c, p, o)
	if err != nil {
		return nil, err
	}
	return w.weights, nil
}

// withDefaults is o with its batch, one sequence per data-parallel
// replica (dp and fsdp) when 0, and its sequence length, the model's longest when 0.
func withDefaults(c *Config, p Parallel, o Options) Options {
	if o.Batch == 0 {
		o.Batch = p.split(batchSplit) * max(cmp.Or(o.Microbatches, p.stageGroups()), 1)
	}
	if o.Seq == 0 {
		o.Seq = cmp.Or(c.MaxPositions, 2048)
	}
	if p.stageGroups() > 1 {
		o.Schedule = cmp.Or(o.Schedule, OneFOneB)
		o.Microbatches = cmp.Or(o.Microbatches, p.stageGroups())
		if o.Schedule == Interleaved {
			o.Virtual = cmp.Or(o.Virtual, 2)
		} else {
			o.Virtual = 1
		}
	}
	if o.CapacityFactor == 0 {
		o.CapacityFactor = DefaultCapacityFactor
	}
	return o
}

// write writes the fusion of Fusion.
func write(c *Config, p Parallel, o Options) (*writer, error) {
	o = withDefaults(c, p, o)
	if o.Layers > 0 {
		c2 := *c
		c2.Layers = min(o.Layers, c.Layers)
		c = &c2
	}
	vocab := paddedVocab(c.Vocab, p.vocabSplit())
	if err := fits(c, p, o); err != nil {
		return nil, err
	}
	w := &writer{c: c, p: p, o: o, vocab: vocab, gathered: map[string]bool{}, stages: o.stages(p)}
	w.starts, _ = stageStarts(c.Layers, w.stages, o) // fits checked them
	if n := len(p.batchAxes()); n > 1 {
		w.lead = 1
	}
	if p.size(CP) > 1 {
		w.cpLead = 1
	}
	w.header()
	w.tensors()
	if w.err != nil {
		return nil, w.err
	}
	w.line("ops:")
	w.stage = 0
	w.embedding()
	for l := range c.Layers {
		w.block(l)
	}
	w.stage = w.stages - 1
	w.head()
	w.pipeline()
	if o.Backward {
		w.line("backward:")
		if w.stages == 1 {
			w.line("  seeds: {loss: 1}   # torch's loss.backward()")
		} else {
			w.line("  seeds: {tok_loss: dloss}   # each token's loss: its gradient, 1 / the step's tokens, is each micro-batch's own")
		}
		w.line("  wrt: [%s]", strings.Join(w.weights, ", "))
		if len(w.gathered) > 0 && !o.KeepGathered {
			w.line("  reshard_after_forward: true   # FSDP2's default: each gathered weight gathered again before its first backward use")
		}
	}
	return w, nil
}

// paddedVocab is the vocabulary the embedding and the LM head are written
// with: the configuration's when the n devices that split it divide it,
// else padded up to a multiple of 128·n, as Megatron-LM's
// --make-vocab-size-divisible-by (128) pads it for each tensor-parallel
// rank (GPT-3's 50257 tokens) and FSDP2 pads a weight's dim 0 to a
// multiple of its shards.
func paddedVocab(v, n int) int {
	if v%n == 0 {
		return v
	}
	m := 128 * n
	return (v + m - 1) / m * m
}

// vocabSplit is the number of devices that split the embedding's rows:
// tp's, or those that shard the weights when tp splits nothing (fsdpDim).
func (p Parallel) vocabSplit() int {
	if p.size(TP) > 1 {
		return p.size(TP)
	}
	return p.weightShards()
}

// weightAxes are the mesh axes that shard every weight: fsdp, and with it
// cp, as torchtitan applies FSDP2 over the flattened dp_shard × cp mesh
// (its dp_shard_cp), so that each weight's gradient, summed over both
// axes' tokens, is reduce-scattered over both. Their shards nest in the
// mesh's order. Empty without fsdp.
func (p Parallel) weightAxes() map[string]int {
	if p.size(FSDP) == 1 {
		return nil
	}
	m := map[string]int{FSDP: 0}
	if p.size(CP) > 1 {
		m[CP] = 0
	}
	return m
}

// weightShards is the number of shards of every weight: the product of
// the weight axes' devices (1 without fsdp).
func (p Parallel) weightShards() int { return p.split(p.weightAxes()) }

// batchAxes are the mesh's axes of more than one device that split the
// batch, the outer of a written two-dim batch first: dp, ep, fsdp. A
// weight's gradient sums the inner dim's devices first (training.md), so
// fsdp is inner: its ReduceScatter comes first and the outer axis
// reduces the shard (HSDP: dp outside fsdp, as PyTorch's HSDP splits the
// batch over replicas and then within each; ep outside fsdp alike). With
// dp, ep is inner: dp's groups are Megatron-LM's expert-data-parallel
// groups, which hold the same experts. In a pipeline, ep is outer with
// dp too, as with fsdp: the pipeline cuts the micro-batches along the
// inner dim, and the experts' inputs merge the batch's dims with the
// one ep does not split outermost (expertOrder), so that only with ep
// outer is a micro-batch's rows a block of the merged dim.
func (p Parallel) batchAxes() []string {
	order := []string{DP, EP, FSDP}
	if p.PP > 1 {
		order = []string{EP, DP, FSDP}
	}
	var axes []string
	for _, a := range order {
		if p.size(a) > 1 {
			axes = append(axes, a)
		}
	}
	return axes
}

// fits reports a plan the model's sizes or the step's cannot take.
func fits(c *Config, p Parallel, o Options) error {
	if err := Check(c, p); err != nil {
		return err
	}
	switch {
	case o.Batch < 1 || o.Seq < 1:
		return fmt.Errorf("--batch and --seq must be at least 1")
	case c.MaxPositions > 0 && o.Seq > c.MaxPositions:
		return fmt.Errorf("--seq %d is longer than the model's max_position_embeddings %d", o.Seq, c.MaxPositions)
	}
	if err := divides("--batch", o.Batch, p.split(batchSplit)); err != nil {
		return fmt.Errorf("%w (%s splits the batch)", err, p.axesText(batchSplit))
	}
	if err := fitsPipeline(c, p, o); err != nil {
		return err
	}
	seq := map[string]int{CP: 1}
	if p.SP {
		seq[TP] = 1
	}
	if err := divides("--seq", o.Seq, p.split(seq)); err != nil {
		return fmt.Errorf("%w (%s splits the sequence)", err, p.axesText(seq))
	}
	return nil
}

// axesText names the mesh's axes of more than one device among those of
// s, in the mesh's order: "dp×fsdp".
func (p Parallel) axesText(s map[string]int) string {
	var names []string
	for _, a := range p.Mesh {
		if _, ok := s[a.Name]; ok && a.Size > 1 {
			names = append(names, a.Name)
		}
	}
	return strings.Join(names, "×")
}

// Check reports a plan the model's sizes cannot take: tensor parallelism
// splits heads, key/value heads and the MLP's width, and fsdp shards the
// sizes of fsdpSplits. (ScaleDown's model always fits: the full model is
// checked first.)
func Check(c *Config, p Parallel) error {
	if !c.Learned && c.HeadDim%2 != 0 {
		return fmt.Errorf("head_dim %d is odd: the rotary embedding rotates halves of each head", c.HeadDim)
	}
	tp := p.size(TP)
	for _, ch := range []extent{{"num_attention_heads", c.Heads}, {"num_key_value_heads", c.KVHeads}, {"intermediate_size", c.FFN}} {
		if err := divides(ch.what, ch.n, tp); err != nil {
			return fmt.Errorf("%w (tp splits it)", err)
		}
	}
	if ep := p.size(EP); ep > 1 && (c.Experts == 0 || c.Experts%ep != 0) {
		if c.Experts == 0 {
			return fmt.Errorf("ep splits a mixture of experts' experts, and model_type %s has none", c.Type)
		}
		return fmt.Errorf("%w (ep splits the experts)", divides("num_local_experts", c.Experts, ep))
	}
	for _, ch := range fsdpSplits(c, p) {
		if err := divides(ch.what, ch.n, p.weightShards()); err != nil {
			return fmt.Errorf("%w (%s shards every weight on it)", err, p.axesText(p.weightAxes()))
		}
	}
	return nil
}

// fsdpSplits are the sizes FSDP shards (fsdpDim): the hidden size, which
// every norm's weight is and every linear has as its input or output;
// and when tp splits nothing, every weight's rows.
func fsdpSplits(c *Config, p Parallel) []extent {
	if p.size(FSDP) == 1 {
		return nil
	}
	s := []extent{{"hidden_size", c.Hidden}}
	if p.size(TP) > 1 {
		return s
	}
	s = append(s, extent{"num_attention_heads × head_dim", c.Heads * c.HeadDim},
		extent{"num_key_value_heads × head_dim", c.KVHeads * c.HeadDim}, extent{"intermediate_size", c.FFN})
	if c.Learned {
		s = append(s, extent{"max_position_embeddings", c.MaxPositions})
	}
	return s
}

// extent is a size of the model a mesh axis splits, named as the
// configuration names it.
type extent struct {
	what string
	n    int
}

// divides reports n that d does not divide.
func divides(what string, n, d int) error {
	if n%d != 0 {
		return fmt.Errorf("%s %d is not a multiple of %d: each device of the mesh axis takes an equal part", what, n, d)
	}
	return nil
}

// writer accumulates the fusion's text.
type writer struct {
	b     strings.Builder
	c     *Config
	p     Parallel
	o     Options
	vocab int
	// weights are the declared weights, in order: the backward's wrt.
	weights []string
	// gathered are the weights FSDP shards: true once the set that
	// gathers the weight has been written.
	gathered map[string]bool
	// err is the first weight that cannot be sharded as the plan says.
	err error
	// lead is 1 when the batch is written as two dims, [dp, batch/dp]:
	// under HSDP, dp splits the first and fsdp the second, as PyTorch's
	// HSDP splits the batch over replicas and then within each; with ep,
	// dp or fsdp splits the first and ep the second (batchAxes), as
	// propagation carries one split of a dim, not two nested. Every
	// activation's dims after the batch move up by lead.
	lead int
	// cpLead is 1 when the residual stream is written with the
	// sequence's cp slices as its first dim, [cp, batch, seq/cp, ...]:
	// under context parallelism cp splits the first dim, and with
	// sequence parallelism tp the seq/cp one, as Megatron-LM splits the
	// sequence over cp and then, within each slice, over tp. The cp dim
	// comes first so that a weight's gradient, summed over the leading
	// dims innermost first (training.md), sums each device's tokens
	// locally and its batch's partial sums along fsdp or dp before it
	// sums the cp slices' (the reduction along cp is then of one weight,
	// not of one a sequence). Attention's tensors keep one sequence dim,
	// split by cp: a permute and the reshapes into and out of heads move
	// and merge the two.
	cpLead int
	// stages are the pipeline's stages, pp × the stages each device group
	// holds (1 without a pipeline), and stage the one whose mesh the
	// tensors and ops being written are on.
	stages, stage int
	// starts are stageStarts's: the first block of each stage.
	starts []int
}

// stream is the shape of a tensor of the residual stream's form: under
// context parallelism the cp slices, then the batch's dims, the
// sequence's (a slice's tokens under cp), then rest.
func (w *writer) stream(rest ...int) []int {
	if w.cpLead == 0 {
		return w.batched(append([]int{w.o.Seq}, rest...)...)
	}
	cp := w.p.size(CP)
	return append([]int{cp}, w.batched(append([]int{w.o.Seq / cp}, rest...)...)...)
}

// streamSplit is the sharding of a tensor of the residual stream's form:
// its cp dim split by cp, its batch by dp and fsdp, and with sp its
// sequence by tp.
func (w *writer) streamSplit(sp bool) map[string]int {
	seq := map[string]int{}
	if sp {
		seq[TP] = 1
	}
	m := w.sharded(seq)
	if w.cpLead == 0 {
		return m
	}
	for a, d := range m {
		m[a] = d + 1
	}
	m[CP] = 0
	return m
}

// batchFirst is the permute of a tensor of the residual stream's form
// that moves its cp dim after the batch's: [cp, batch, seq/cp, x] to
// [batch, cp, seq/cp, x], which a reshape merges into [batch, seq, ...].
func (w *writer) batchFirst() string {
	dims := []int{}
	for d := range 1 + w.lead {
		dims = append(dims, d+1)
	}
	dims = append(dims, 0, w.dim(2), w.dim(3))
	return "dims: " + ints(dims)
}

// cpFirst is batchFirst's inverse: [batch, cp, seq/cp, x] to [cp,
// batch, seq/cp, x].
func (w *writer) cpFirst() string {
	dims := []int{w.dim(1)}
	for d := range 1 + w.lead {
		dims = append(dims, d)
	}
	dims = append(dims, w.dim(2), w.dim(3))
	return "dims: " + ints(dims)
}

// batched is the shape of an activation: the batch's dims, then rest.
func (w *writer) batched(rest ...int) []int {
	if w.lead == 0 {
		return append([]int{w.o.Batch}, rest...)
	}
	outer := w.p.size(w.p.batchAxes()[0])
	return append([]int{outer, w.o.Batch / outer}, rest...)
}

// dim is the dim of an activation that is dim d after the batch's first.
func (w *writer) dim(d int) int { return d + w.lead }

// sharded is the sharding of an activation split on its batch by dp and
// fsdp, and on the dims after the batch as rest maps the other axes (the
// dims counted as without lead).
func (w *writer) sharded(rest map[string]int) map[string]int {
	m := maps.Clone(batchSplit)
	if w.lead > 0 {
		m[w.p.batchAxes()[1]] = 1
	}
	for a, d := range rest {
		m[a] = w.dim(d)
	}
	return m
}

// headsFirst is the permute that swaps an activation's sequence and heads
// ([batch, seq, heads, head_dim] and [batch, heads, seq, head_dim]).
func (w *writer) headsFirst() string {
	if w.lead == 0 {
		return "dims: [0, 2, 1, 3]"
	}
	return "dims: [0, 1, 3, 2, 4]"
}

func (w *writer) line(format string, args ...any) { fmt.Fprintf(&w.b, format+"\n", args...) }

func (w *writer) comment(s string) { w.line("  # %s", s) }

// header writes the file's first lines and the mesh.
func (w *writer) header() {
	c, o := w.c, w.o
	w.line("# yaml-language-server: $schema=../../schema/fusion.schema.json")
	w.line("# Written by nvcomm model: a training step's %s of a %s model (hidden %d, %d heads,",
		map[bool]string{false: "forward", true: "forward and backward"}[o.Backward], c.Type, c.Hidden, c.Heads)
	w.line("# %d key/value heads of %d, MLP %d, vocabulary %d%s, %s), batch %d of %d tokens, %s,",
		c.KVHeads, c.HeadDim, c.FFN, c.Vocab, w.padNote(), plural(c.Layers, "layer"), o.Batch, o.Seq, o.DType)
	w.line("# on mesh %s%s.", w.meshText(), map[bool]string{true: " with sequence parallelism", false: ""}[w.p.SP])
	if c.Experts > 0 {
		w.line("# Mixture of experts: %d SwiGLU experts a block, each token routed to %d, each expert taking %d tokens of %s", c.Experts, c.TopK, capacity(c, o, w.group()), w.groupText())
		w.line("# (capacity factor %g), the rest dropped; %s.", o.CapacityFactor,
			map[bool]string{true: "the experts split along ep, the tokens sent to them and back by AllToAll", false: "every device holds every expert"}[w.p.size(EP) > 1])
	}
	switch {
	case w.cpShards():
		w.line("# FSDP over fsdp×cp, as torchtitan's: every weight (but a bias tp splits) is stored sharded along fsdp and, within")
		w.line("# each shard, along cp, and gathered along cp (a set, NAME_fsdp), then along fsdp (NAME_full) before its first use%s.",
			map[bool]string{true: ";\n# each gradient is declared sharded as its weight: a ReduceScatter along fsdp, then one along cp", false: ""}[o.Backward])
	case w.p.size(FSDP) > 1:
		w.line("# FSDP: every weight (but a bias tp splits) is stored sharded along fsdp and gathered (a set, NAME_full) before its first use%s.",
			map[bool]string{true: ";\n# each gradient is declared sharded as its weight: a ReduceScatter along fsdp", false: ""}[o.Backward])
	}
	if w.lead > 0 {
		outer, inner := w.p.batchAxes()[0], w.p.batchAxes()[1]
		switch {
		case outer == DP && inner == FSDP:
			w.line("# HSDP: the batch is written as two dims, [dp, batch/dp]; dp splits the first, fsdp the second.")
		case inner == FSDP:
			w.line("# The batch is written as two dims, [ep, batch/ep]; ep splits the first, fsdp the second: each gradient is")
			w.line("# reduce-scattered along fsdp first, as HSDP's; the experts' are reduced along fsdp only.")
		case outer == EP:
			w.line("# The batch is written as two dims, [ep, batch/ep]; ep splits the first, dp the second (a micro-batch's rows")
			w.line("# stay a block of the experts' tokens): each dp group's experts take its own tokens, their gradients reduced")
			w.line("# along dp only (Megatron-LM's expert-data-parallel groups).")
		default:
			w.line("# The batch is written as two dims, [dp, batch/dp]; dp splits the first, ep the second: each dp group's experts")
			w.line("# take its own tokens, their gradients reduced along dp only (Megatron-LM's expert-data-parallel groups).")
		}
	}
	if w.cpLead > 0 {
		w.line("# Context parallelism: each cp device holds a slice of the sequence; attention gathers the keys and values.")
		w.line("# The residual stream is written [cp, batch, seq/cp, ...]: cp splits the first dim%s.",
			map[bool]string{true: ", tp the seq/cp one", false: ""}[w.p.SP && w.p.size(TP) > 1])
	}
	if o.Auto {
		w.line("# The shardings of the weights and of the activations outside attention are left to the search of lower --auto;")
		w.line("# the inputs, the loss and attention (its heads split along tp) are as the mesh's names say.")
	}
	if w.stages > 1 {
		w.line("# Pipeline: %d stages%s, %s, %d micro-batches; the residual stream moves to the next stage with a set.",
			w.stages, w.virtualNote(), o.Schedule, o.Microbatches)
		if o.FirstStageBlocks > 0 || o.LastStageBlocks > 0 {
			blocks := make([]int, w.stages)
			for s := range blocks {
				blocks[s] = w.starts[s+1] - w.starts[s]
			}
			w.line("# Uneven stages (--first-stage-layers, --last-stage-layers): %s blocks, first to last.", ints(blocks))
		}
	}
	w.line("format: 2")
	w.line("name: %s", o.Name)
	w.line("meshes:")
	for s := range w.stages {
		w.line("  %s: %s", w.meshName(s), w.p.meshYAML(s%w.p.stageGroups()*w.p.devices()))
	}
}

// padNote says how the vocabulary was padded, if it was.
func (w *writer) padNote() string {
	if w.vocab == w.c.Vocab {
		return ""
	}
	return fmt.Sprintf(" padded to %d", w.vocab)
}

// plural writes n things: 1 layer, 2 layers.
func plural(n int, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	return strconv.Itoa(n) + " " + thing + "s"
}

// meshText writes a mesh as the flag does: dp=2,tp=4.
func meshText(axes []Axis) string {
	s := make([]string, len(axes))
	for i, a := range axes {
		s[i] = a.Name + "=" + strconv.Itoa(a.Size)
	}
	return strings.Join(s, ",")
}

// Shardings of the declared tensors.
var (
	replicated = map[string]int{}
	column     = map[string]int{TP: 0}                 // a weight [out, in] split on its outputs
	row        = map[string]int{TP: 1}                 // split on its inputs
	batchSplit = map[string]int{DP: 0, FSDP: 0, EP: 0} // the axes that split the batch
)

// tensors declares the inputs, the weights, the residual stream and the
// loss.
func (w *writer) tensors() {
	c, o := w.c, w.o
	w.line("tensors:")
	tokens := w.streamSplit(false)
	w.stage = 0
	w.tensor("ids", w.stream(), "int64", tokens, "token ids")
	w.stage = w.stages - 1
	w.tensor("labels", w.stream(), "int64", tokens, "the next tokens, the loss's targets")
	w.stage = 0
	w.weight("embed", []int{w.vocab, c.Hidden}, column, "[vocab, hidden], vocab-parallel")
	if _, fsdp := w.gathered["embed"]; o.Backward && !fsdp && !o.Auto {
		// The lookup's gradient adds rows into the table: its split on
		// the vocabulary is in none of its operands, so it is declared
		// (as weight declares every gradient that fsdp shards).
		w.line("  embed.grad: {placements: %s}   # sharded as embed: each device adds the rows of its vocabulary", w.p.placements(column))
	}
	if c.Learned {
		w.weight("positions", []int{c.MaxPositions, c.Hidden}, replicated, "[positions, hidden], learned")
		// The step's rows are sliced whole: nvFuser splits no sliced axis.
		w.residual("pos", replicated)
		if o.Backward {
			// and its gradient, before the slice's backward pads it.
			w.line("  pos.grad: {placements: %s}", w.p.placements(replicated))
		}
		if w.cpLead > 0 && w.p.SP && w.p.size(TP) > 1 {
			// Split by cp alone, so that each op changes one device
			// type's split as nvFuser's lowering takes it: the
			// reshape cp's, the add tp's.
			w.residual("pos3", map[string]int{CP: 0})
		}
	} else {
		// Each cp device holds the positions of its tokens.
		shape := append(slices.Repeat([]int{1}, 1+w.lead), o.Seq, 1, c.HeadDim)
		pos := map[string]int{CP: w.dim(1)}
		for w.stage = range w.stages {
			note := "the rotary embedding's cosines, [" + strings.Repeat("1, ", 1+w.lead) + "seq, 1, head_dim]"
			if w.stage > 0 {
				note = "stage " + strconv.Itoa(w.stage) + "'s own"
			}
			w.tensor(w.rotary("cos"), shape, o.DType, pos, note)
			w.tensor(w.rotary("sin"), shape, o.DType, pos, map[bool]string{true: "and sines", false: ""}[w.stage == 0])
		}
		w.stage = 0
	}
	stream := w.streamSplit(w.p.SP)
	w.residual("h0", stream)
	for l := range c.Layers {
		w.layerTensors(l, stream)
	}
	w.stage = w.stages - 1
	w.norm("final_norm")
	if !c.TiedEmbeddings {
		w.weight("lm_head", []int{w.vocab, c.Hidden}, column, "[vocab, hidden], vocab-parallel")
	} else if w.stages > 1 {
		w.residual(tiedCopy, column)
	}
	w.line("  loss: {mesh: %s, placements: %s}   # the mean over the step's tokens", w.mesh(), w.p.placements(replicated))
	if w.stages > 1 && o.Backward {
		w.tensor("dloss", w.stream(), o.DType, tokens, "the gradient of each token's loss, the backward's seed")
	}
}

// layerTensors declares layer l's weights and residual stream.
func (w *writer) layerTensors(l int, stream map[string]int) {
	c, o := w.c, w.o
	n := func(s string) string { return fmt.Sprintf("l%d_%s", l, s) }
	q, kv := c.Heads*c.HeadDim, c.KVHeads*c.HeadDim
	w.stage = w.stageOf(l)
	if in := w.blockInput(l); in != fmt.Sprintf("h%d", l) {
		w.residual(in, stream) // the stream received from the stage before
		if o.Backward {
			// Its gradient is sent back once, to the stage before, where
			// the gradients of that stage's ops are computed.
			w.stage--
			w.residual(fmt.Sprintf("h%d.grad", l), stream)
			w.stage++
		}
	}
	w.norm(n("attn_norm"))
	w.linear(n("q"), q, c.Hidden, column, "column-parallel")
	w.linear(n("k"), kv, c.Hidden, column, "column-parallel")
	w.linear(n("v"), kv, c.Hidden, column, "column-parallel")
	w.linear(n("o"), c.Hidden, q, row, "row-parallel")
	w.norm(n("mlp_norm"))
	switch {
	case c.Experts > 0:
		w.moeTensors(l, n)
	case c.Act == "silu":
		w.linear(n("gate"), c.FFN, c.Hidden, column, "column-parallel")
		w.linear(n("up"), c.FFN, c.Hidden, column, "column-parallel")
		w.linear(n("down"), c.Hidden, c.FFN, row, "row-parallel")
	default:
		w.linear(n("fc1"), c.FFN, c.Hidden, column, "column-parallel")
		w.linear(n("fc2"), c.Hidden, c.FFN, row, "row-parallel")
	}
	w.residual(n("mid"), stream)
	w.residual(fmt.Sprintf("h%d", l+1), stream)
	if o.Auto {
		w.attentionTensors(n)
	}
	if w.p.size(CP) > 1 {
		// Context parallelism gathers the keys and values whole: the
		// sequence of each, its heads split as before.
		for _, t := range []string{"k_all", "v_all"} {
			w.residual(n(t), w.sharded(map[string]int{TP: 2}))
		}
	}
}

// attentionTensors declares, for --auto, the tensors of a layer's
// attention between the q, k and v projections' outputs and the output
// projection's input: its heads split along tp and its batch along dp
// and fsdp, as the plan says (Megatron-LM's head-parallel attention).
// Left to the search, the rotary embedding's and the grouped-query
// broadcast's tensors, several alive at once, made the search's frontier
// the product of five or six tensors' options: beyond what it tabulates.
func (w *writer) attentionTensors(n func(string) string) {
	c := w.c
	seqFirst := w.p.placements(w.sharded(map[string]int{TP: 2}))   // [batch, seq, heads, head_dim]
	headsFirst := w.p.placements(w.sharded(map[string]int{TP: 1})) // [batch, heads, seq, head_dim]
	var names []string
	for _, t := range []string{"q", "k", "v"} {
		names = append(names, t+"4")
	}
	if !c.Learned {
		for _, t := range []string{"q", "k"} {
			for _, x := range []string{"x1", "x2", "nx2", "rot", "xc", "rs"} {
				names = append(names, t+"_"+x)
			}
		}
		names = append(names, "qr", "kr")
	}
	for _, t := range names {
		w.line("  %s: {mesh: %s, placements: %s}", n(t), w.mesh(), seqFirst)
	}
	for _, t := range []string{"qh", "kh", "vh", "oh"} {
		w.line("  %s: {mesh: %s, placements: %s}", n(t), w.mesh(), headsFirst)
	}
	w.line("  %s: {mesh: %s, placements: %s}", n("o4"), w.mesh(), seqFirst)
}

// tensor declares an input of the fusion.
func (w *writer) tensor(name string, shape []int, dtype string, shard map[string]int, note string) {
	if note != "" {
		note = "   # " + note
	}
	w.line("  %s: {mesh: %s, shape: %s, dtype: %s, placements: %s}%s", name, w.mesh(), ints(shape), dtype, w.p.placements(shard), note)
}

// weight declares a weight: an input of the step's dtype whose gradient
// the backward computes. Under fsdp the weight is stored sharded on fsdp
// as well (fsdpDim), and gathered, its copy Gathered(name) sharded as
// shard says; with the backward, its gradient is declared sharded as the
// stored weight: the ReduceScatter into the shard each device keeps.
func (w *writer) weight(name string, shape []int, shard map[string]int, note string) {
	w.weights = append(w.weights, name)
	if w.o.Auto {
		// No note: the plan's (column-parallel, ...) names a sharding
		// the search may not choose.
		w.line("  %s: {mesh: %s, shape: %s, dtype: %s, placements: auto}", name, w.mesh(), ints(shape), w.o.DType)
		return
	}
	d := w.p.fsdpDim(shard, len(shape))
	if d < 0 {
		w.tensor(name, shape, w.o.DType, shard, note)
		return
	}
	if err := divides(fmt.Sprintf("weight %s %v: its dim %d,", name, shape, d), shape[d], w.p.weightShards()); err != nil && w.err == nil {
		w.err = err
	}
	stored := maps.Clone(shard)
	for a := range w.p.weightAxes() {
		stored[a] = d
	}
	w.tensor(name, shape, w.o.DType, stored, note)
	w.gathered[name] = false
	if w.cpShards() {
		half := maps.Clone(shard)
		half[FSDP] = d
		w.line("  %s: {placements: %s}", gatheredCP(name), w.p.placements(half))
	}
	w.line("  %s: {placements: %s}", Gathered(name), w.p.placements(shard))
	if w.o.Backward {
		w.line("  %s.grad: {placements: %s}", name, w.p.placements(stored))
		if w.cpShards() {
			// The gathered copies' gradients too: propagation carries
			// the outer of two nested splits only (fusion.md), and the
			// sum over the cp slices then reduce-scatters into the
			// stored shard rather than all-reducing it whole. A
			// gradient that a layer op writes (the tied embedding's
			// add of its two uses, the learned positions' pad) cannot
			// be split nested: it is reduced whole along cp and sliced.
			w.line("  %s.grad: {placements: %s}", gatheredCP(name), w.p.placements(stored))
			if !w.layerOpGrad(name) {
				w.line("  %s.grad: {placements: %s}", Gathered(name), w.p.placements(stored))
			}
		}
	}
}

// cpShards reports whether cp shards the weights with fsdp (weightAxes).
func (w *writer) cpShards() bool { return len(w.p.weightAxes()) > 1 }

// layerOpGrad reports whether a layer op, not a sum, writes the gradient
// of weight name's gathered copy: the learned positions' (the slice's
// backward, a cat) and a tied embedding's (the add of the lookup's and
// the LM head's).
func (w *writer) layerOpGrad(name string) bool {
	return name == "positions" || name == "embed" && w.c.TiedEmbeddings
}

// fsdpDim is the dim of a weight of rank r, sharded as shard says, that
// fsdp shards; -1 for none. FSDP2 shards dim 0 of what tp leaves each
// device (a strided shard of the global dim 0 where tp splits it too,
// DTensor's _StridedShard); nvcomm's placements have no strided shard,
// so where tp splits dim 0, fsdp shards dim 1 instead: the same bytes per
// device, gathered by the same Allgather along fsdp. (Its gradient is
// summed by an Allreduce and a Slice rather than a ReduceScatter, which
// the lowering scatters along a buffer's outermost dim: docs/models.md.)
// A vector tp splits (a column-parallel bias) stays whole along fsdp, its
// gradient Allreduced as data parallelism's.
func (p Parallel) fsdpDim(shard map[string]int, r int) int {
	if p.size(FSDP) == 1 {
		return -1
	}
	// The first dim neither tp nor ep splits: an expert's weight
	// [experts, ...] is split along ep on dim 0 and sharded on a dim of
	// its own (the hidden size of w_gate and w_up, w_down's too under tp).
	d := 0
	for ; d < r; d++ {
		if !slices.ContainsFunc([]string{TP, EP}, func(a string) bool { t, ok := shard[a]; return ok && t == d && p.size(a) > 1 }) {
			return d
		}
	}
	return -1
}

// Gathered names the copy of an FSDP-sharded weight that the step
// gathers before the weight's first use (a set: one Allgather along
// fsdp), as FSDP2's pre-forward hook unshards each module's parameters.
func Gathered(weight string) string { return weight + "_full" }

// gatheredCP names the copy of a weight sharded over fsdp and cp that is
// gathered along cp alone, still sharded along fsdp: the step gathers
// the weight in two sets, one along each axis, as nvFuser lowers one
// change of sharding per op (the inner, cp's, first: what is left is a
// block split along fsdp). The two Allgathers receive the bytes of one
// over both axes (torchtitan's, over dp_shard × cp): (cp−1)/(fsdp·cp) and
// (fsdp−1)/fsdp of the weight.
func gatheredCP(weight string) string { return weight + "_fsdp" }

// use is the name under which an op reads weight x: x itself, or under
// fsdp its gathered copy, whose set it writes before x's first use.
func (w *writer) use(x string) string {
	done, sharded := w.gathered[x]
	if !sharded {
		return x
	}
	if !done {
		from := x
		if w.cpShards() {
			w.op("set", []string{x}, gatheredCP(x), "")
			from = gatheredCP(x)
		}
		w.op("set", []string{from}, Gathered(x), "")
		w.gathered[x] = true
	}
	return Gathered(x)
}

// linear declares the weight w_NAME [out, in] of a linear, and its bias
// b_NAME where the architecture has them, split on its outputs as the
// weight is (a row-parallel linear's bias is replicated: added once,
// after the sum).
func (w *writer) linear(name string, out, in int, shard map[string]int, note string) {
	w.weight(wName(name), []int{out, in}, shard, note)
	if w.c.Bias {
		bias := replicated
		if d, ok := shard[TP]; ok && d == 0 {
			bias = column
		}
		w.weight(bName(name), []int{out}, bias, "")
	}
}

// norm declares a norm's weight, and its bias for a LayerNorm.
func (w *writer) norm(name string) {
	w.weight(name, []int{w.c.Hidden}, replicated, "")
	if w.c.Norm == "layer_norm" {
		w.weight(name+"_b", []int{w.c.Hidden}, replicated, "")
	}
}

// wName and bName name a linear's weight and bias: l0_q is l0_wq, l0_bq.
func wName(name string) string { return affix(name, "w") }
func bName(name string) string { return affix(name, "b") }

// affix puts p before the last part of name: l0_q -> l0_wq, and w_gate
// style names for the MLP's (l0_gate -> l0_w_gate).
func affix(name, p string) string {
	i := strings.LastIndexByte(name, '_')
	last := name[i+1:]
	if len(last) > 1 {
		p += "_"
	}
	return name[:i+1] + p + last
}

// residual declares a tensor of the residual stream: its placements only.
func (w *writer) residual(name string, shard map[string]int) {
	if w.o.Auto {
		return // a decision of the search
	}
	w.line("  %s: {mesh: %s, placements: %s}", name, w.mesh(), w.p.placements(shard))
}

// op writes one op; attrs are its attributes as YAML ("axis: -1").
func (w *writer) op(kind string, in []string, out, attrs string) {
	if attrs != "" {
		attrs = ", " + attrs
	}
	operands := in[0]
	if len(in) > 1 {
		operands = "[" + strings.Join(in, ", ") + "]"
	}
	w.line("  - {op: %s, in: %s, out: %s%s}", kind, operands, out, attrs)
}

// normOp writes the norm of x named by its weight.
func (w *writer) normOp(x, weight, out string) {
	in := []string{x, w.use(weight)}
	if w.c.Norm == "layer_norm" {
		in = append(in, w.use(weight+"_b"))
	}
	w.op(w.c.Norm, in, out, "axes: [-1], eps: "+strconv.FormatFloat(w.c.NormEps, 'g', -1, 64))
}

// linearOp writes out = linear(x, w_NAME[, b_NAME]).
func (w *writer) linearOp(x, name, out string) {
	in := []string{x, w.use(wName(name))}
	if w.c.Bias {
		in = append(in, w.use(bName(name)))
	}
	w.op("linear", in, out, "")
}

// embedding writes the token embedding and, for learned positions, the
// position embedding's rows of the step's positions added to it.
func (w *writer) embedding() {
	w.comment("the token embedding, vocab-parallel along tp as Megatron-LM's VocabParallelEmbedding")
	embed := w.use("embed")
	if !w.c.Learned {
		w.op("embedding", []string{"ids", embed}, "h0", "")
		return
	}
	w.op("embedding", []string{"ids", embed}, "tok", "")
	w.comment("the learned positions 0 … seq-1, added to every sequence")
	w.op("slice", []string{w.use("positions")}, "pos", fmt.Sprintf("axis: 0, start: 0, end: %d", w.o.Seq))
	shape := w.stream(w.c.Hidden)
	for i := range 1 + w.lead {
		shape[w.cpLead+i] = 1 // broadcast over the batch
	}
	w.op("reshape", []string{"pos"}, "pos3", "shape: "+ints(shape))
	w.op("add", []string{"tok", "pos3"}, "h0", "")
}

// head writes the final norm, the LM head and the loss.
func (w *writer) head() {
	w.comment("the final norm and the LM head, its weight split on the vocabulary along tp")
	w.normOp(fmt.Sprintf("h%d", w.c.Layers), "final_norm", "xf")
	head := "lm_head"
	if w.c.TiedEmbeddings {
		head = "embed"
	}
	head = w.use(head)
	if w.c.TiedEmbeddings && w.stages > 1 {
		w.comment("the tied embedding, sent from the first stage to the last (its gradient back, added to the lookup's)")
		w.op("set", []string{head}, tiedCopy, "")
		head = tiedCopy
	}
	w.op("linear", []string{"xf", head}, "logits", "")
	w.comment("the loss: Megatron-LM's vocab-parallel cross entropy of the logits where they are")
	if w.stages == 1 {
		w.op("cross_entropy", []string{"logits", "labels"}, "loss", "")
		return
	}
	// In a pipeline each micro-batch's backward starts from its own
	// tokens' losses, whose gradient is a constant (1 / the step's
	// tokens, Megatron-LM's loss scaling by the micro-batches): the
	// backward is seeded there (dloss), not at the step's mean, which
	// only the last micro-batch completes.
	w.op("cross_entropy", []string{"logits", "labels"}, "tok_loss", "reduction: none")
	in, tokens := "tok_loss", 1
	for d, n := range w.stream() {
		// The step's mean as sums, then one division: the micro-batches'
		// sums over the batch accumulate (docs/pipeline.md).
		out := fmt.Sprintf("loss_sum%d", d)
		w.op("sum", []string{in}, out, "axis: -1")
		in, tokens = out, tokens*n
	}
	w.op("div", []string{in, strconv.Itoa(tokens) + ".0"}, "loss", "")
}

// block writes layer l: pre-norm attention and an MLP, each added to the
// residual stream.
func (w *writer) block(l int) {
	c := w.c
	n := func(s string) string { return fmt.Sprintf("l%d_%s", l, s) }
	w.stage = w.stageOf(l)
	x := w.blockInput(l)
	if x != fmt.Sprintf("h%d", l) {
		w.comment(fmt.Sprintf("stage %d: the residual stream from stage %d (a SendRecv from each device to its peer)", w.stage, w.stage-1))
		w.op("set", []string{fmt.Sprintf("h%d", l)}, x, "")
	}
	what := map[bool]string{false: "rotary embedding, ", true: ""}[c.Learned]
	w.comment(fmt.Sprintf("layer %d: attention (%s, QKV, %s%s attention, output projection)", l, normName(c.Norm), what, attnKind()))
	w.normOp(x, n("attn_norm"), n("xa"))
	w.attention(l, n)
	w.linearOp(n("o"), n("o"), n("attn"))
	w.op("add", []string{x, n("attn")}, n("mid"), "")
	out := fmt.Sprintf("h%d", l+1)
	if c.Experts > 0 {
		w.comment(fmt.Sprintf("layer %d: mixture of experts (%s, router, top-%d of %d SwiGLU experts, AllToAll dispatch and combine)", l, normName(c.Norm), c.TopK, c.Experts))
		w.normOp(n("mid"), n("mlp_norm"), n("xm"))
		w.moe(n, n("xm"), n("moe"))
		w.op("add", []string{n("mid"), n("moe")}, out, "")
		return
	}
	if c.Act == "silu" {
		w.comment(fmt.Sprintf("layer %d: MLP (%s, SwiGLU)", l, normName(c.Norm)))
		w.normOp(n("mid"), n("mlp_norm"), n("xm"))
		w.linearOp(n("xm"), n("gate"), n("gate"))
		w.op("silu", []string{n("gate")}, n("act"), "")
		w.linearOp(n("xm"), n("up"), n("up"))
		w.op("mul", []string{n("act"), n("up")}, n("gated"), "")
		w.linearOp(n("gated"), n("down"), n("down"))
		w.op("add", []string{n("mid"), n("down")}, out, "")
		return
	}
	w.comment(fmt.Sprintf("layer %d: MLP (%s, GELU)", l, normName(c.Norm)))
	w.normOp(n("mid"), n("mlp_norm"), n("xm"))
	w.linearOp(n("xm"), n("fc1"), n("fc1"))
	w.op("gelu_tanh", []string{n("fc1")}, n("act"), "")
	w.linearOp(n("act"), n("fc2"), n("fc2"))
	w.op("add", []string{n("mid"), n("fc2")}, out, "")
}

// attention writes layer l's q, k and v, their heads and sdpa, ending in
// l_o [batch, seq, heads·head_dim].
func (w *writer) attention(l int, n func(string) string) {
	c, o := w.c, w.o
	heads := map[string]int{"q": c.Heads, "k": c.KVHeads, "v": c.KVHeads}
	for _, t := range []string{"q", "k", "v"} {
		w.linearOp(n("xa"), n(t), n(t))
		x := n(t)
		if w.cpLead > 0 {
			w.op("permute", []string{x}, n(t+"b"), w.batchFirst())
			x = n(t + "b")
		}
		w.op("reshape", []string{x}, n(t+"4"), "shape: "+ints(w.batched(o.Seq, heads[t], c.HeadDim)))
	}
	q, k, v := n("q4"), n("k4"), n("v4")
	if !c.Learned {
		w.rope(q, n("qr"), n("q_"))
		w.rope(k, n("kr"), n("k_"))
		q, k = n("qr"), n("kr")
	}
	if w.p.size(CP) > 1 {
		w.comment("context parallelism: the keys and values of every token gathered along cp (Llama 3's all-gather attention); each device attends its own queries")
		w.op("set", []string{k}, n("k_all"), "")
		w.op("set", []string{v}, n("v_all"), "")
		k, v = n("k_all"), n("v_all")
	}
	w.op("permute", []string{q}, n("qh"), w.headsFirst())
	w.op("permute", []string{k}, n("kh"), w.headsFirst())
	w.op("permute", []string{v}, n("vh"), w.headsFirst())
	attrs := "causal: " + strconv.FormatBool(causalAttention)
	if c.KVHeads < c.Heads {
		// Grouped-query attention: sdpa reads the key/value heads
		// unrepeated, as torch's enable_gqa, so that the gradients of k
		// and v sum each group's query heads inside their contraction.
		attrs += ", enable_gqa: true"
	}
	w.op("sdpa", []string{n("qh"), n("kh"), n("vh")}, n("oh"), attrs)
	w.op("permute", []string{n("oh")}, n("o4"), w.headsFirst())
	if w.cpLead == 0 {
		w.op("reshape", []string{n("o4")}, n("o"), "shape: "+ints(w.stream(c.Heads*c.HeadDim)))
		return
	}
	cp := w.p.size(CP)
	w.op("reshape", []string{n("o4")}, n("ob"), "shape: "+ints(w.batched(cp, o.Seq/cp, c.Heads*c.HeadDim)))
	w.op("permute", []string{n("ob")}, n("o"), w.cpFirst())
}

// normName names a norm as the comments do.
func normName(norm string) string {
	return map[string]string{"rms_norm": "RMSNorm", "layer_norm": "LayerNorm"}[norm]
}

// attnKind names the attention's mask as the comments do.
func attnKind() string {
	if causalAttention {
		return "causal"
	}
	return "unmasked"
}

// rope writes the rotary embedding of x [batch, seq, heads, head_dim] as
// Llama's apply_rotary_pos_emb and rotate_half do: x·cos +
// cat(−x2, x1)·sin, x1 and x2 the halves of each head; its intermediates
// are named with prefix p.
func (w *writer) rope(x, out, p string) {
	d := w.c.HeadDim
	a := w.dim(3)
	w.op("slice", []string{x}, p+"x1", fmt.Sprintf("axis: %d, start: 0, end: %d", a, d/2))
	w.op("slice", []string{x}, p+"x2", fmt.Sprintf("axis: %d, start: %d, end: %d", a, d/2, d))
	w.op("neg", []string{p + "x2"}, p+"nx2", "")
	w.op("cat", []string{p + "nx2", p + "x1"}, p+"rot", fmt.Sprintf("axis: %d", a))
	w.op("mul", []string{x, w.rotary("cos")}, p+"xc", "")
	w.op("mul", []string{p + "rot", w.rotary("sin")}, p+"rs", "")
	w.op("add", []string{p + "xc", p + "rs"}, out, "")
}

// ints writes a YAML flow list of integers.
func ints(v []int) string {
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = strconv.Itoa(n)
	}
	return "[" + strings.Join(s, ", ") + "]"
}

// stages is the number of pipeline stages of o (withDefaults's) under p:
// pp × the stages each device group holds; 1 without a pipeline.
func (o Options) stages(p Parallel) int { return p.stageGroups() * max(o.Virtual, 1) }

// fitsPipeline reports a pipeline the model or the step cannot take: the
// stages take equal numbers of blocks, the micro-batches equal parts of
// the batch, and the interleaved schedule a multiple of the stage groups.
func fitsPipeline(c *Config, p Parallel, o Options) error {
	if p.stageGroups() == 1 {
		if o.Microbatches > 0 || o.Schedule != "" || o.Virtual > 0 || o.FirstStageBlocks > 0 || o.LastStageBlocks > 0 {
			return fmt.Errorf("--microbatches, --schedule, --virtual-stages, --first-stage-layers and --last-stage-layers need a pp axis in --mesh")
		}
		return nil
	}
	stages := o.stages(p)
	switch {
	case o.Schedule != GPipe && o.Schedule != OneFOneB && o.Schedule != Interleaved:
		return fmt.Errorf("--schedule %q: want gpipe, 1f1b or interleaved", o.Schedule)
	case o.Virtual < 1 || o.Virtual > 1 && o.Schedule != Interleaved:
		return fmt.Errorf("--virtual-stages %d: the stages a device group holds, 2 or more, with --schedule interleaved only", o.Virtual)
	case o.Schedule == Interleaved && o.Virtual < 2:
		return fmt.Errorf("--schedule interleaved holds 2 or more stages a device group: --virtual-stages %d", o.Virtual)
	case o.Schedule == Interleaved && o.Microbatches%p.stageGroups() != 0:
		return fmt.Errorf("--microbatches %d is not a multiple of pp %d, as Megatron-LM's interleaved schedule requires", o.Microbatches, p.stageGroups())
	}
	if _, err := stageStarts(c.Layers, stages, o); err != nil {
		return err
	}
	if err := divides("--batch", o.Batch, p.split(batchSplit)*o.Microbatches); err != nil {
		return fmt.Errorf("%w (%d micro-batches, each split over %s)", err, o.Microbatches, cmp.Or(p.axesText(batchSplit), "one device"))
	}
	return nil
}

// tiedCopy is the last stage's copy of a tied embedding, which the LM
// head reads: the first stage's table, sent each step (Megatron-LM keeps
// a replica there instead and all-reduces the two gradients:
// docs/models.md).
const tiedCopy = "embed_last"

// stageStarts is the first block of each of the pipeline's stages, and
// the number of blocks after them: runs of blocks in order, the first
// and last of o's lengths when given, the others of equal lengths.
func stageStarts(blocks, stages int, o Options) ([]int, error) {
	first, last := o.FirstStageBlocks, o.LastStageBlocks
	given := min(first, 1) + min(last, 1)
	if stages == 1 {
		return []int{0, blocks}, nil
	}
	rest, between := blocks-first-last, stages-given
	switch {
	case rest < 0 || between == 0 && rest != 0:
		return nil, fmt.Errorf("--first-stage-layers %d --last-stage-layers %d: the first and last of %d stages would hold %d blocks, the model has %d",
			first, last, stages, first+last, blocks)
	case between > 0 && rest < between:
		return nil, fmt.Errorf("--first-stage-layers %d --last-stage-layers %d leave %d of %d blocks to %d stages between: every stage holds one or more",
			first, last, rest, blocks, between)
	case between > 0 && rest%between != 0:
		what := "the pipeline's stages hold equal numbers of blocks, unless --first-stage-layers or --last-stage-layers says otherwise"
		if given > 0 {
			what = fmt.Sprintf("the %d stages besides the first and last given hold equal numbers", between)
		}
		return nil, fmt.Errorf("num_hidden_layers %d: %d blocks do not split over %d stages (%s)", blocks, rest, between, what)
	}
	starts := make([]int, 0, stages+1)
	for s, at := 0, 0; s <= stages; s++ {
		starts = append(starts, at)
		switch {
		case s == 0 && first > 0:
			at += first
		case s == stages-1 && last > 0:
			at += last
		case s < stages:
			at += rest / between
		}
	}
	return starts, nil
}

// stageOf is the pipeline stage of block l (stageStarts's runs).
func (w *writer) stageOf(l int) int {
	s, _ := slices.BinarySearch(w.starts, l+1)
	return s - 1
}

// blockInput is the residual stream block l reads: h{l}, or on the first
// block of a stage after the first, its copy received from the stage
// before, h{l}_s{stage}.
func (w *writer) blockInput(l int) string {
	if l > 0 && w.stageOf(l) != w.stageOf(l-1) {
		return fmt.Sprintf("h%d_s%d", l, w.stageOf(l))
	}
	return fmt.Sprintf("h%d", l)
}

// meshName names stage s's mesh: m without a pipeline, else m0, m1, ...
func (w *writer) meshName(s int) string {
	if w.stages == 1 {
		return "m"
	}
	return "m" + strconv.Itoa(s)
}

// mesh is the mesh of the stage being written.
func (w *writer) mesh() string { return w.meshName(w.stage) }

// rotary names the rotary table t (cos, sin) of the stage being written:
// each stage holds its own, as each computes them (cos, cos_s1, ...).
func (w *writer) rotary(t string) string {
	if w.stage == 0 {
		return t
	}
	return t + "_s" + strconv.Itoa(w.stage)
}

// meshText writes the plan's mesh as the flag does, pp first.
func (w *writer) meshText() string {
	m := meshText(w.p.Mesh)
	if w.p.stageGroups() > 1 {
		m = "pp=" + strconv.Itoa(w.p.PP) + "," + m
	}
	return m
}

// virtualNote says how the interleaved schedule places the stages.
func (w *writer) virtualNote() string {
	if w.o.Virtual < 2 {
		return ""
	}
	return fmt.Sprintf(" (%d on each of %d device groups, stage s on group s mod %d)", w.o.Virtual, w.p.PP, w.p.PP)
}

// pipeline writes the pipeline section: the stages' meshes, the
// micro-batches, the schedule, and the inputs cut into micro-batches
// along the batch (the token ids and the labels; the weights are read
// whole by every micro-batch).
func (w *writer) pipeline() {
	if w.stages == 1 {
		return
	}
	names := make([]string, w.stages)
	for s := range names {
		names[s] = w.meshName(s)
	}
	inputs := "ids, labels"
	if w.o.Backward {
		inputs += ", dloss"
	}
	w.line("pipeline: {stages: [%s], microbatches: %d, schedule: %s, batch_axis: %d, inputs: [%s]}",
		strings.Join(names, ", "), w.o.Microbatches, w.o.Schedule, w.cpLead+w.lead, inputs)
}
