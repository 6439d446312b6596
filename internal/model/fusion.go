package model

import (
	"fmt"
	"strconv"
	"strings"
)

// Options are the step's sizes besides the model's.
type Options struct {
	// Name is the fusion's name.
	Name string
	// Batch and Seq are the sequences of a step and their length.
	Batch, Seq int
	// DType is the weights' and activations' element type.
	DType string
	// Layers, when positive, replaces the configuration's number of
	// blocks (a smaller model of the same structure).
	Layers int
}

// Fusion writes the fusion (YAML, format 2) of c's forward pass under
// plan p: the embedding, the blocks, the final norm and the LM head. Only
// the inputs, the weights and the residual stream are declared; every
// other tensor takes its sharding from its ops.
func Fusion(c *Config, p Parallel, o Options) ([]byte, error) {
	if err := fits(c, p, o); err != nil {
		return nil, err
	}
	layers := c.Layers
	if o.Layers > 0 {
		layers = o.Layers
	}
	w := &writer{c: c, p: p, o: o}
	w.header(layers)
	w.tensors(layers)
	w.line("ops:")
	w.comment("the token embedding, vocab-parallel along tp as Megatron-LM's VocabParallelEmbedding")
	w.op("embedding", []string{"ids", "embed"}, "h0", "")
	for l := range layers {
		w.block(l)
	}
	w.comment("the final norm and the LM head, its weight split on the vocabulary along tp")
	w.op("rms_norm", []string{fmt.Sprintf("h%d", layers), "final_norm"}, "xf", w.normAttrs())
	head := "lm_head"
	if c.TiedEmbeddings {
		head = "embed"
	}
	w.op("linear", []string{"xf", head}, "logits", "")
	return []byte(w.b.String()), nil
}

// fits reports a plan the model's sizes cannot take: tensor parallelism
// splits heads, key/value heads, the MLP's width and the vocabulary, and
// sequence parallelism the sequence; data parallelism splits the batch.
func fits(c *Config, p Parallel, o Options) error {
	tp, dp := p.size(TP), p.size(DP)
	checks := []struct {
		what string
		n, d int
	}{
		{"num_attention_heads", c.Heads, tp}, {"num_key_value_heads", c.KVHeads, tp},
		{"intermediate_size", c.FFN, tp}, {"vocab_size", c.Vocab, tp}, {"--batch", o.Batch, dp},
	}
	if p.SP {
		checks = append(checks, struct {
			what string
			n, d int
		}{"--seq", o.Seq, tp})
	}
	for _, ch := range checks {
		if ch.n%ch.d != 0 {
			return fmt.Errorf("%s %d is not a multiple of %d: each device of the mesh axis takes an equal part", ch.what, ch.n, ch.d)
		}
	}
	switch {
	case o.Batch < 1 || o.Seq < 1:
		return fmt.Errorf("--batch and --seq must be at least 1")
	case c.MaxPositions > 0 && o.Seq > c.MaxPositions:
		return fmt.Errorf("--seq %d is longer than the model's max_position_embeddings %d", o.Seq, c.MaxPositions)
	case c.HeadDim%2 != 0:
		return fmt.Errorf("head_dim %d is odd: the rotary embedding rotates halves of each head", c.HeadDim)
	}
	return nil
}

// writer accumulates the fusion's text.
type writer struct {
	b strings.Builder
	c *Config
	p Parallel
	o Options
}

func (w *writer) line(format string, args ...any) { fmt.Fprintf(&w.b, format+"\n", args...) }

func (w *writer) comment(s string) { w.line("  # %s", s) }

// header writes the file's first lines and the mesh.
func (w *writer) header(layers int) {
	c := w.c
	w.line("# yaml-language-server: $schema=../../schema/fusion.schema.json")
	w.line("# Written by nvcomm model: the forward pass of a %s model (hidden %d, %d heads, %d key/value",
		c.Type, c.Hidden, c.Heads, c.KVHeads)
	w.line("# heads of %d, MLP %d, vocabulary %d, %d of %d layers), batch %d of %d tokens, %s,",
		c.HeadDim, c.FFN, c.Vocab, layers, c.Layers, w.o.Batch, w.o.Seq, w.o.DType)
	w.line("# on mesh %s%s.", meshText(w.p.Mesh), map[bool]string{true: " with sequence parallelism", false: ""}[w.p.SP])
	w.line("format: 2")
	w.line("name: %s", w.o.Name)
	w.line("meshes:")
	w.line("  m: %s", w.p.meshYAML())
}

// meshText writes a mesh as the flag does: dp=2,tp=4.
func meshText(axes []Axis) string {
	s := make([]string, len(axes))
	for i, a := range axes {
		s[i] = a.Name + "=" + strconv.Itoa(a.Size)
	}
	return strings.Join(s, ",")
}

// tensors declares the inputs, the weights and the residual stream.
func (w *writer) tensors(layers int) {
	c, o := w.c, w.o
	w.line("tensors:")
	batch := map[string]int{DP: 0}
	w.tensor("ids", []int{o.Batch, o.Seq}, "int64", batch, "token ids")
	w.tensor("embed", []int{c.Vocab, c.Hidden}, o.DType, map[string]int{TP: 0}, "[vocab, hidden], vocab-parallel")
	w.tensor("cos", []int{1, o.Seq, 1, c.HeadDim}, o.DType, nil, "the rotary embedding's cosines, [1, seq, 1, head_dim]")
	w.tensor("sin", []int{1, o.Seq, 1, c.HeadDim}, o.DType, nil, "and sines")
	stream := map[string]int{DP: 0}
	if w.p.SP {
		stream[TP] = 1
	}
	w.residual("h0", stream)
	for l := range layers {
		n := func(s string) string { return fmt.Sprintf("l%d_%s", l, s) }
		w.tensor(n("attn_norm"), []int{c.Hidden}, o.DType, nil, "")
		w.tensor(n("wq"), []int{c.Heads * c.HeadDim, c.Hidden}, o.DType, map[string]int{TP: 0}, "column-parallel")
		w.tensor(n("wk"), []int{c.KVHeads * c.HeadDim, c.Hidden}, o.DType, map[string]int{TP: 0}, "column-parallel")
		w.tensor(n("wv"), []int{c.KVHeads * c.HeadDim, c.Hidden}, o.DType, map[string]int{TP: 0}, "column-parallel")
		w.tensor(n("wo"), []int{c.Hidden, c.Heads * c.HeadDim}, o.DType, map[string]int{TP: 1}, "row-parallel")
		w.tensor(n("mlp_norm"), []int{c.Hidden}, o.DType, nil, "")
		w.tensor(n("w_gate"), []int{c.FFN, c.Hidden}, o.DType, map[string]int{TP: 0}, "column-parallel")
		w.tensor(n("w_up"), []int{c.FFN, c.Hidden}, o.DType, map[string]int{TP: 0}, "column-parallel")
		w.tensor(n("w_down"), []int{c.Hidden, c.FFN}, o.DType, map[string]int{TP: 1}, "row-parallel")
		w.residual(n("mid"), stream)
		w.residual(fmt.Sprintf("h%d", l+1), stream)
		if g := c.Heads / c.KVHeads; g > 1 {
			// A broadcast's output is declared: its shape gives the new
			// axis's extent, the query heads sharing a key/value head;
			// its key/value heads split along tp as its input's.
			for _, t := range []string{"k_g", "v_g"} {
				w.line("  %s: {mesh: m, shape: %s, placements: %s}", n(t), ints([]int{o.Batch, c.KVHeads, g, o.Seq, c.HeadDim}),
					w.p.placements(map[string]int{DP: 0, TP: 1}))
			}
		}
	}
	w.tensor("final_norm", []int{c.Hidden}, o.DType, nil, "")
	if !c.TiedEmbeddings {
		w.tensor("lm_head", []int{c.Vocab, c.Hidden}, o.DType, map[string]int{TP: 0}, "[vocab, hidden], vocab-parallel")
	}
}

// tensor declares an input of the fusion.
func (w *writer) tensor(name string, shape []int, dtype string, shard map[string]int, note string) {
	if note != "" {
		note = "   # " + note
	}
	w.line("  %s: {mesh: m, shape: %s, dtype: %s, placements: %s}%s", name, ints(shape), dtype, w.p.placements(shard), note)
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

func (w *writer) normAttrs() string {
	return "axes: [-1], eps: " + strconv.FormatFloat(w.c.NormEps, 'g', -1, 64)
}

// block writes layer l: pre-norm attention and a SwiGLU MLP, each added to
// the residual stream.
func (w *writer) block(l int) {
	c, o := w.c, w.o
	n := func(s string) string { return fmt.Sprintf("l%d_%s", l, s) }
	x := fmt.Sprintf("h%d", l)
	w.comment(fmt.Sprintf("layer %d: attention (RMSNorm, QKV, rotary embedding, causal attention, output projection)", l))
	w.op("rms_norm", []string{x, n("attn_norm")}, n("xa"), w.normAttrs())
	heads := map[string]int{"q": c.Heads, "k": c.KVHeads, "v": c.KVHeads}
	for _, t := range []string{"q", "k", "v"} {
		w.op("linear", []string{n("xa"), n("w" + t)}, n(t), "")
		w.op("reshape", []string{n(t)}, n(t+"4"), "shape: "+ints([]int{o.Batch, o.Seq, heads[t], c.HeadDim}))
	}
	w.rope(n("q4"), n("qr"), n("q_"))
	w.rope(n("k4"), n("kr"), n("k_"))
	w.op("permute", []string{n("qr")}, n("qh"), "dims: [0, 2, 1, 3]")
	w.kvHeads(n("kr"), n("kh"), n("k_"))
	w.kvHeads(n("v4"), n("vh"), n("v_"))
	w.op("sdpa", []string{n("qh"), n("kh"), n("vh")}, n("oh"), "causal: true")
	w.op("permute", []string{n("oh")}, n("o4"), "dims: [0, 2, 1, 3]")
	w.op("reshape", []string{n("o4")}, n("o"), "shape: "+ints([]int{o.Batch, o.Seq, c.Heads * c.HeadDim}))
	w.op("linear", []string{n("o"), n("wo")}, n("attn"), "")
	w.op("add", []string{x, n("attn")}, n("mid"), "")
	w.comment(fmt.Sprintf("layer %d: MLP (RMSNorm, SwiGLU)", l))
	w.op("rms_norm", []string{n("mid"), n("mlp_norm")}, n("xm"), w.normAttrs())
	w.op("linear", []string{n("xm"), n("w_gate")}, n("gate"), "")
	w.op("silu", []string{n("gate")}, n("act"), "")
	w.op("linear", []string{n("xm"), n("w_up")}, n("up"), "")
	w.op("mul", []string{n("act"), n("up")}, n("gated"), "")
	w.op("linear", []string{n("gated"), n("w_down")}, n("down"), "")
	w.op("add", []string{n("mid"), n("down")}, fmt.Sprintf("h%d", l+1), "")
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
