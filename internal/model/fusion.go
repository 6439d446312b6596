package model

import (
	"cmp"
	"fmt"
	"strconv"
	"strings"
)

// Options are the step's sizes besides the model's.
type Options struct {
	// Name is the fusion's name.
	Name string
	// Batch and Seq are the sequences of a step and their length; Batch
	// 0 is one sequence per data-parallel replica, Seq 0 the model's
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
}

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
// replica when 0, and its sequence length, the model's longest when 0.
func withDefaults(c *Config, p Parallel, o Options) Options {
	if o.Batch == 0 {
		o.Batch = p.size(DP)
	}
	if o.Seq == 0 {
		o.Seq = cmp.Or(c.MaxPositions, 2048)
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
	vocab := paddedVocab(c.Vocab, p.size(TP))
	if err := fits(c, p, o); err != nil {
		return nil, err
	}
	w := &writer{c: c, p: p, o: o, vocab: vocab}
	w.header()
	w.tensors()
	w.line("ops:")
	w.embedding()
	for l := range c.Layers {
		w.block(l)
	}
	w.head()
	if o.Backward {
		w.line("backward:")
		w.line("  seeds: {loss: 1}   # torch's loss.backward()")
		w.line("  wrt: [%s]", strings.Join(w.weights, ", "))
	}
	return w, nil
}

// paddedVocab is the vocabulary the embedding and the LM head are written
// with: the configuration's when tp divides it, else padded up to a
// multiple of 128·tp, as Megatron-LM's --make-vocab-size-divisible-by
// (128) pads it for each tensor-parallel rank (GPT-3's 50257 tokens).
func paddedVocab(v, tp int) int {
	if v%tp == 0 {
		return v
	}
	m := 128 * tp
	return (v + m - 1) / m * m
}

// fits reports a plan the model's sizes or the step's cannot take.
func fits(c *Config, p Parallel, o Options) error {
	if err := Check(c, p); err != nil {
		return err
	}
	tp, dp := p.size(TP), p.size(DP)
	switch {
	case o.Batch < 1 || o.Seq < 1:
		return fmt.Errorf("--batch and --seq must be at least 1")
	case c.MaxPositions > 0 && o.Seq > c.MaxPositions:
		return fmt.Errorf("--seq %d is longer than the model's max_position_embeddings %d", o.Seq, c.MaxPositions)
	}
	if err := divides("--batch", o.Batch, dp); err != nil {
		return err
	}
	if p.SP {
		return divides("--seq", o.Seq, tp)
	}
	return nil
}

// Check reports a plan the model's sizes cannot take: tensor parallelism
// splits heads, key/value heads and the MLP's width. (ScaleDown's model
// always fits: the full model is checked first.)
func Check(c *Config, p Parallel) error {
	if !c.Learned && c.HeadDim%2 != 0 {
		return fmt.Errorf("head_dim %d is odd: the rotary embedding rotates halves of each head", c.HeadDim)
	}
	tp := p.size(TP)
	for _, ch := range []struct {
		what string
		n    int
	}{{"num_attention_heads", c.Heads}, {"num_key_value_heads", c.KVHeads}, {"intermediate_size", c.FFN}} {
		if err := divides(ch.what, ch.n, tp); err != nil {
			return err
		}
	}
	return nil
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
	w.line("# on mesh %s%s.", meshText(w.p.Mesh), map[bool]string{true: " with sequence parallelism", false: ""}[w.p.SP])
	w.line("format: 2")
	w.line("name: %s", o.Name)
	w.line("meshes:")
	w.line("  m: %s", w.p.meshYAML())
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
	column     = map[string]int{TP: 0} // a weight [out, in] split on its outputs
	row        = map[string]int{TP: 1} // split on its inputs
	batchSplit = map[string]int{DP: 0}
)

// tensors declares the inputs, the weights, the residual stream and the
// loss.
func (w *writer) tensors() {
	c, o := w.c, w.o
	w.line("tensors:")
	w.tensor("ids", []int{o.Batch, o.Seq}, "int64", batchSplit, "token ids")
	w.tensor("labels", []int{o.Batch, o.Seq}, "int64", batchSplit, "the next tokens, the loss's targets")
	w.weight("embed", []int{w.vocab, c.Hidden}, column, "[vocab, hidden], vocab-parallel")
	if c.Learned {
		w.weight("positions", []int{c.MaxPositions, c.Hidden}, replicated, "[positions, hidden], learned")
		// The step's rows are sliced whole: nvFuser splits no sliced axis.
		w.residual("pos", replicated)
	} else {
		w.tensor("cos", []int{1, o.Seq, 1, c.HeadDim}, o.DType, replicated, "the rotary embedding's cosines, [1, seq, 1, head_dim]")
		w.tensor("sin", []int{1, o.Seq, 1, c.HeadDim}, o.DType, replicated, "and sines")
	}
	stream := map[string]int{DP: 0}
	if w.p.SP {
		stream[TP] = 1
	}
	w.residual("h0", stream)
	for l := range c.Layers {
		w.layerTensors(l, stream)
	}
	w.norm("final_norm")
	if !c.TiedEmbeddings {
		w.weight("lm_head", []int{w.vocab, c.Hidden}, column, "[vocab, hidden], vocab-parallel")
	}
	w.line("  loss: {mesh: m, placements: %s}   # the mean over the step's tokens", w.p.placements(replicated))
}

// layerTensors declares layer l's weights and residual stream.
func (w *writer) layerTensors(l int, stream map[string]int) {
	c, o := w.c, w.o
	n := func(s string) string { return fmt.Sprintf("l%d_%s", l, s) }
	q, kv := c.Heads*c.HeadDim, c.KVHeads*c.HeadDim
	w.norm(n("attn_norm"))
	w.linear(n("q"), q, c.Hidden, column, "column-parallel")
	w.linear(n("k"), kv, c.Hidden, column, "column-parallel")
	w.linear(n("v"), kv, c.Hidden, column, "column-parallel")
	w.linear(n("o"), c.Hidden, q, row, "row-parallel")
	w.norm(n("mlp_norm"))
	if c.Act == "silu" {
		w.linear(n("gate"), c.FFN, c.Hidden, column, "column-parallel")
		w.linear(n("up"), c.FFN, c.Hidden, column, "column-parallel")
		w.linear(n("down"), c.Hidden, c.FFN, row, "row-parallel")
	} else {
		w.linear(n("fc1"), c.FFN, c.Hidden, column, "column-parallel")
		w.linear(n("fc2"), c.Hidden, c.FFN, row, "row-parallel")
	}
	w.residual(n("mid"), stream)
	w.residual(fmt.Sprintf("h%d", l+1), stream)
	if g := c.Heads / c.KVHeads; g > 1 {
		// A broadcast's output is declared: its shape gives the new
		// axis's extent, the query heads sharing a key/value head; its
		// key/value heads split along tp as its input's.
		for _, t := range []string{"k_g", "v_g"} {
			w.line("  %s: {mesh: m, shape: %s, placements: %s}", n(t), ints([]int{o.Batch, c.KVHeads, g, o.Seq, c.HeadDim}),
				w.p.placements(map[string]int{DP: 0, TP: 1}))
		}
	}
}

// tensor declares an input of the fusion.
func (w *writer) tensor(name string, shape []int, dtype string, shard map[string]int, note string) {
	if note != "" {
		note = "   # " + note
	}
	w.line("  %s: {mesh: m, shape: %s, dtype: %s, placements: %s}%s", name, ints(shape), dtype, w.p.placements(shard), note)
}

// weight declares a weight: an input of the step's dtype whose gradient
// the backward computes.
func (w *writer) weight(name string, shape []int, shard map[string]int, note string) {
	w.tensor(name, shape, w.o.DType, shard, note)
	w.weights = append(w.weights, name)
}

// linear declares the weight w_NAME [out, in] of a linear, and its bias
// b_NAME where the architecture has them, split on its outputs as the
// weight is (a row-parallel linear's bias is replicated: added once,
// after the sum).
func (w *writer) linear(name string, out, in int, shard map[string]int, note string) {
	w.weight(wName(name), []int{out, in}, shard, note)
	if w.c.Bias {
		bias := replicated
		if shard[TP] == 0 {
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
	w.line("  %s: {mesh: m, placements: %s}", name, w.p.placements(shard))
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
	in := []string{x, weight}
	if w.c.Norm == "layer_norm" {
		in = append(in, weight+"_b")
	}
	w.op(w.c.Norm, in, out, "axes: [-1], eps: "+strconv.FormatFloat(w.c.NormEps, 'g', -1, 64))
}

// linearOp writes out = linear(x, w_NAME[, b_NAME]).
func (w *writer) linearOp(x, name, out string) {
	in := []string{x, wName(name)}
	if w.c.Bias {
		in = append(in, bName(name))
	}
	w.op("linear", in, out, "")
}

// embedding writes the token embedding and, for learned positions, the
// position embedding's rows of the step's positions added to it.
func (w *writer) embedding() {
	w.comment("the token embedding, vocab-parallel along tp as Megatron-LM's VocabParallelEmbedding")
	if !w.c.Learned {
		w.op("embedding", []string{"ids", "embed"}, "h0", "")
		return
	}
	w.op("embedding", []string{"ids", "embed"}, "tok", "")
	w.comment("the learned positions 0 … seq-1, added to every sequence")
	w.op("slice", []string{"positions"}, "pos", fmt.Sprintf("axis: 0, start: 0, end: %d", w.o.Seq))
	w.op("reshape", []string{"pos"}, "pos3", "shape: "+ints([]int{1, w.o.Seq, w.c.Hidden}))
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
	w.op("linear", []string{"xf", head}, "logits", "")
	w.comment("the loss: Megatron-LM's vocab-parallel cross entropy of the logits where they are")
	w.op("cross_entropy", []string{"logits", "labels"}, "loss", "")
}

// block writes layer l: pre-norm attention and an MLP, each added to the
// residual stream.
func (w *writer) block(l int) {
	c := w.c
	n := func(s string) string { return fmt.Sprintf("l%d_%s", l, s) }
	x := fmt.Sprintf("h%d", l)
	what := map[bool]string{false: "rotary embedding, ", true: ""}[c.Learned]
	w.comment(fmt.Sprintf("layer %d: attention (%s, QKV, %s%s attention, output projection)", l, normName(c.Norm), what, attnKind()))
	w.normOp(x, n("attn_norm"), n("xa"))
	w.attention(l, n)
	w.linearOp(n("o"), n("o"), n("attn"))
	w.op("add", []string{x, n("attn")}, n("mid"), "")
	out := fmt.Sprintf("h%d", l+1)
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
		w.op("reshape", []string{n(t)}, n(t+"4"), "shape: "+ints([]int{o.Batch, o.Seq, heads[t], c.HeadDim}))
	}
	q, k := n("q4"), n("k4")
	if !c.Learned {
		w.rope(q, n("qr"), n("q_"))
		w.rope(k, n("kr"), n("k_"))
		q, k = n("qr"), n("kr")
	}
	w.op("permute", []string{q}, n("qh"), "dims: [0, 2, 1, 3]")
	w.kvHeads(k, n("kh"), n("k_"))
	w.kvHeads(n("v4"), n("vh"), n("v_"))
	w.op("sdpa", []string{n("qh"), n("kh"), n("vh")}, n("oh"), "causal: "+strconv.FormatBool(causalAttention))
	w.op("permute", []string{n("oh")}, n("o4"), "dims: [0, 2, 1, 3]")
	w.op("reshape", []string{n("o4")}, n("o"), "shape: "+ints([]int{o.Batch, o.Seq, c.Heads * c.HeadDim}))
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
	w.op("slice", []string{x}, p+"x1", fmt.Sprintf("axis: 3, start: 0, end: %d", d/2))
	w.op("slice", []string{x}, p+"x2", fmt.Sprintf("axis: 3, start: %d, end: %d", d/2, d))
	w.op("neg", []string{p + "x2"}, p+"nx2", "")
	w.op("cat", []string{p + "nx2", p + "x1"}, p+"rot", "axis: 3")
	w.op("mul", []string{x, "cos"}, p+"xc", "")
	w.op("mul", []string{p + "rot", "sin"}, p+"rs", "")
	w.op("add", []string{p + "xc", p + "rs"}, out, "")
}

// kvHeads writes x [batch, seq, kv_heads, head_dim] as attention reads
// it, [batch, heads, seq, head_dim]: each key/value head repeated for the
// query heads of its group (grouped-query attention, transformers'
// repeat_kv: a broadcast and a reshape), named with prefix p.
func (w *writer) kvHeads(x, out, p string) {
	c, o := w.c, w.o
	g := c.Heads / c.KVHeads
	if g == 1 {
		w.op("permute", []string{x}, out, "dims: [0, 2, 1, 3]")
		return
	}
	w.op("permute", []string{x}, p+"t", "dims: [0, 2, 1, 3]")
	w.op("broadcast", []string{p + "t"}, p+"g", "axes: [2]")
	w.op("reshape", []string{p + "g"}, out, "shape: "+ints([]int{o.Batch, c.Heads, o.Seq, c.HeadDim}))
}

// ints writes a YAML flow list of integers.
func ints(v []int) string {
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = strconv.Itoa(n)
	}
	return "[" + strings.Join(s, ", ") + "]"
}
