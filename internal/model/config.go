// Package model writes the fusion of a transformer's training step from a
// model's configuration (a Hugging Face config.json) and a parallelism
// plan: an embedding, the blocks, the final norm, the LM head and the
// loss, each tensor sharded as the plan says (docs/models.md). The fusion
// is ordinary format-2 YAML, which lower, validate and simulate read as
// they read any other.
package model

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/nvcomm/nvcomm/internal/diag"
)

// Config is what the fusion needs of a model's configuration.
type Config struct {
	// Type is the configuration's model_type ("llama", "gpt2").
	Type string
	// Norm is the blocks' norm: "rms_norm" (Llama) or "layer_norm" with a
	// bias (GPT-2). Act is the MLP's activation: "silu" in a gated MLP
	// (SwiGLU, Llama) or "gelu_tanh" in a plain one (GPT-2's gelu_new).
	Norm, Act string
	// Learned: positions are a learned table added to the token
	// embedding (GPT-2) rather than rotary (Llama).
	Learned bool
	// Bias: the linears and norms have biases (GPT-2).
	Bias bool
	// Hidden is the model dimension; Heads and KVHeads the query and the
	// key/value heads (grouped-query attention when fewer); HeadDim each
	// head's width.
	Hidden, Heads, KVHeads, HeadDim int
	// FFN is the MLP's inner width; Layers the number of blocks; Vocab the
	// vocabulary; MaxPositions the longest sequence.
	FFN, Layers, Vocab, MaxPositions int
	// NormEps is the norms' epsilon.
	NormEps float64
	// TiedEmbeddings: the LM head reuses the embedding table.
	TiedEmbeddings bool
	// Experts, when positive, makes every block's MLP a mixture of
	// Experts SwiGLU experts of width FFN (Mixtral), each token routed to
	// TopK of them.
	Experts, TopK int
}

// key is one key a configuration may have: where its value goes, and
// whether the fusion needs it.
type key struct {
	name     string
	into     func(c *Config, v json.RawMessage) error
	required bool
}

// arch is one architecture nvcomm writes: the keys of its configuration
// and what it fixes of the model.
type arch struct {
	keys []key
	// ignored are its keys that change nothing nvcomm plans, besides
	// ignoredKeys.
	ignored []string
	// init fixes the architecture's structure before the keys are read
	// (a key may override a default, as tie_word_embeddings does).
	init func(c *Config)
	// defaults fills what the configuration may leave out, as
	// transformers' configuration class does.
	defaults func(c *Config)
}

// archs are the model_types nvcomm writes fusions of.
var archs = map[string]arch{
	"llama":   {keys: llamaKeys, init: func(c *Config) { c.Norm, c.Act = "rms_norm", "silu" }, defaults: llamaDefaults},
	"mixtral": {keys: mixtralKeys, ignored: mixtralIgnored, init: func(c *Config) { c.Norm, c.Act = "rms_norm", "silu" }, defaults: llamaDefaults},
	"gpt2": {keys: gpt2Keys, ignored: gpt2Ignored, defaults: gpt2Defaults, init: func(c *Config) {
		c.Norm, c.Act, c.Learned, c.Bias, c.TiedEmbeddings = "layer_norm", "gelu_tanh", true, true, true
	}},
}

// unsupported are model_types nvcomm knows of but does not write yet, and
// what they lack.
var unsupported = map[string]string{
	"qwen2_moe":   "its mixture of experts' shared expert (a dense MLP beside the routed experts, gated by a sigmoid) is not written yet",
	"deepseek_v3": "its mixture of experts' shared experts and group-limited routing, and multi-head latent attention, are not written yet",
}

// llamaKeys are the keys of a Llama configuration that shape the fusion.
var llamaKeys = []key{
	{"hidden_size", intInto(func(c *Config) *int { return &c.Hidden }), true},
	{"intermediate_size", intInto(func(c *Config) *int { return &c.FFN }), true},
	{"num_attention_heads", intInto(func(c *Config) *int { return &c.Heads }), true},
	{"num_key_value_heads", intInto(func(c *Config) *int { return &c.KVHeads }), false},
	{"head_dim", intInto(func(c *Config) *int { return &c.HeadDim }), false},
	{"num_hidden_layers", intInto(func(c *Config) *int { return &c.Layers }), true},
	{"vocab_size", intInto(func(c *Config) *int { return &c.Vocab }), true},
	{"max_position_embeddings", intInto(func(c *Config) *int { return &c.MaxPositions }), false},
	{"rms_norm_eps", func(c *Config, v json.RawMessage) error { return json.Unmarshal(v, &c.NormEps) }, true},
	{"tie_word_embeddings", func(c *Config, v json.RawMessage) error { return json.Unmarshal(v, &c.TiedEmbeddings) }, false},
	{"hidden_act", wantString("silu"), false},
	{"attention_bias", wantFalse, false},
	{"mlp_bias", wantFalse, false},
	{"pretraining_tp", wantOne, false},
}

// mixtralKeys are the keys of a Mixtral configuration (transformers'
// MixtralConfig): Llama's attention, and an MLP of num_local_experts
// SwiGLU experts, num_experts_per_tok of them a token.
var mixtralKeys = append(without(llamaKeys, "attention_bias", "mlp_bias", "pretraining_tp"),
	key{"num_local_experts", intInto(func(c *Config) *int { return &c.Experts }), true},
	key{"num_experts_per_tok", intInto(func(c *Config) *int { return &c.TopK }), true},
	key{"sliding_window", wantNull, false},
	key{"router_jitter_noise", wantZero, false},
)

// without is keys less those called names, a new slice.
func without(keys []key, names ...string) []key {
	return slices.DeleteFunc(slices.Clone(keys), func(k key) bool { return slices.Contains(names, k.name) })
}

// mixtralIgnored are Mixtral's keys that change nothing nvcomm plans: the
// router's auxiliary load-balancing loss (a scalar added to the loss:
// values, and a sum of one value per token).
var mixtralIgnored = []string{"output_router_logits", "router_aux_loss_coef"}

// gpt2Keys are the keys of a GPT-2 configuration (transformers'
// GPT2Config) that shape the fusion; GPT-3 is GPT-2's architecture at
// other sizes (its dense attention: nvcomm writes no sparse layers).
var gpt2Keys = []key{
	{"n_embd", intInto(func(c *Config) *int { return &c.Hidden }), true},
	{"n_head", intInto(func(c *Config) *int { return &c.Heads }), true},
	{"n_layer", intInto(func(c *Config) *int { return &c.Layers }), true},
	{"n_positions", intInto(func(c *Config) *int { return &c.MaxPositions }), true},
	{"n_inner", optionalInt(func(c *Config) *int { return &c.FFN }), false},
	{"vocab_size", intInto(func(c *Config) *int { return &c.Vocab }), true},
	{"layer_norm_epsilon", func(c *Config, v json.RawMessage) error { return json.Unmarshal(v, &c.NormEps) }, false},
	{"tie_word_embeddings", func(c *Config, v json.RawMessage) error { return json.Unmarshal(v, &c.TiedEmbeddings) }, false},
	{"activation_function", wantString("gelu_new"), false},
}

// gpt2Ignored are GPT-2's keys that change nothing nvcomm plans: dropout,
// the sequence-summary head of GPT2DoubleHeadsModel, attention's scaling
// (values, not shapes).
var gpt2Ignored = []string{
	"attn_pdrop", "embd_pdrop", "resid_pdrop", "n_ctx", "scale_attn_weights", "scale_attn_by_inverse_layer_idx",
	"reorder_and_upcast_attn", "summary_activation", "summary_first_dropout", "summary_proj_to_labels",
	"summary_type", "summary_use_proj", "task_specific_params",
}

// ignoredKeys are keys of Hugging Face configurations that change nothing
// nvcomm plans: token ids, initialisation, dropout (a training step's
// communication is the same with or without it), the rotary embedding's
// frequencies (values, not shapes), dtypes (--dtype says which).
var ignoredKeys = []string{
	"_name_or_path", "architectures", "attention_dropout", "bos_token_id", "eos_token_id",
	"hidden_dropout", "initializer_range", "model_type", "pad_token_id", "rope_scaling", "rope_theta",
	"torch_dtype", "transformers_version", "use_cache",
}

// supportedTypes are the model_types nvcomm writes fusions of, sorted.
var supportedTypes = slices.Sorted(maps.Keys(archs))

// ParseConfig reads a configuration (JSON) named file. Its errors are
// diagnostics at the key or value they are about, several at once.
func ParseConfig(file string, src []byte) (*Config, error) {
	errs := &diag.List{File: file}
	fields, err := topLevel(src)
	if err != nil {
		errs.Add(posAt(src, offsetOf(err, len(src))), "%s is not a JSON object of keys: %v", file, err)
		return nil, errs
	}
	c := &Config{}
	typ, ok := fields.get("model_type")
	if !ok {
		errs.AddHint(diag.Pos{Line: 1, Col: 1}, `add "model_type": "llama"`, "the configuration has no model_type (supported: %s)", strings.Join(supportedTypes, ", "))
		return nil, errs
	}
	err = json.Unmarshal(typ.value, &c.Type)
	a, ok := archs[c.Type]
	if missing, known := unsupported[c.Type]; known && err == nil {
		errs.AddHint(posAt(src, typ.valueAt), "nvcomm writes the fusions of "+strings.Join(supportedTypes, ", "),
			"model_type %q is not supported yet: %s", c.Type, missing)
		return nil, errs
	}
	if err != nil || !ok {
		errs.AddHint(posAt(src, typ.valueAt), "nvcomm writes the fusions of "+strings.Join(supportedTypes, ", "),
			"model_type %s is not supported", strings.TrimSpace(string(typ.value)))
		return nil, errs
	}
	a.init(c)
	readKeys(c, fields, src, a, errs)
	if errs.Len() > 0 {
		return nil, errs
	}
	a.defaults(c)
	c.check(errs)
	return c, errs.Err()
}

// readKeys reads fields into c by keys, reporting unknown keys, values of
// the wrong kind and missing required keys.
func readKeys(c *Config, fields fieldList, src []byte, a arch, errs *diag.List) {
	keys, ignored := a.keys, slices.Concat(ignoredKeys, a.ignored)
	names := make([]string, 0, len(keys))
	for _, k := range keys {
		names = append(names, k.name)
	}
	for _, f := range fields {
		i := slices.IndexFunc(keys, func(k key) bool { return k.name == f.name })
		switch {
		case i >= 0:
			if err := keys[i].into(c, f.value); err != nil {
				errs.Add(posAt(src, f.valueAt), "%s: %v", f.name, err)
			}
		case !slices.Contains(ignored, f.name):
			hint := "nvcomm reads " + strings.Join(names, ", ") + ", and ignores " + strings.Join(ignored, ", ")
			if s := diag.Suggest(f.name, names); s != "" {
				hint = s
			}
			errs.AddHint(posAt(src, f.keyAt), hint, "key %q is not one nvcomm knows for model_type %s: it may change the model in a way nvcomm would not plan", f.name, c.Type)
		}
	}
	for _, k := range keys {
		if _, ok := fields.get(k.name); k.required && !ok {
			errs.Add(diag.Pos{Line: 1, Col: 1}, "the configuration has no %s", k.name)
		}
	}
}

// llamaDefaults fills what a Llama configuration may leave out, as
// transformers' LlamaConfig does.
func llamaDefaults(c *Config) {
	if c.KVHeads == 0 {
		c.KVHeads = c.Heads
	}
	if c.HeadDim == 0 && c.Heads > 0 {
		c.HeadDim = c.Hidden / c.Heads
	}
}

// gpt2Defaults fills what a GPT-2 configuration may leave out, as
// transformers' GPT2Config and GPT2MLP do: n_inner null is 4·n_embd.
func gpt2Defaults(c *Config) {
	llamaDefaults(c)
	if c.FFN == 0 {
		c.FFN = 4 * c.Hidden
	}
	if c.NormEps == 0 {
		c.NormEps = 1e-5
	}
}

// check reports sizes no model has.
func (c *Config) check(errs *diag.List) {
	at := diag.Pos{Line: 1, Col: 1}
	for _, v := range []struct {
		name string
		n    int
	}{{"hidden_size", c.Hidden}, {"intermediate_size", c.FFN}, {"num_attention_heads", c.Heads},
		{"num_key_value_heads", c.KVHeads}, {"head_dim", c.HeadDim}, {"num_hidden_layers", c.Layers}, {"vocab_size", c.Vocab}} {
		if v.n < 1 {
			errs.Add(at, "%s is %d; it must be at least 1", v.name, v.n)
		}
	}
	if c.Type == "mixtral" && (c.Experts < 1 || c.TopK < 1 || c.TopK > c.Experts) {
		errs.AddHint(at, "each token goes to num_experts_per_tok of the num_local_experts experts",
			"num_local_experts %d and num_experts_per_tok %d: want 1 ≤ num_experts_per_tok ≤ num_local_experts", c.Experts, c.TopK)
	}
	if c.KVHeads > 0 && c.Heads%c.KVHeads != 0 {
		errs.AddHint(at, "grouped-query attention shares each key/value head among num_attention_heads / num_key_value_heads query heads",
			"num_attention_heads %d is not a multiple of num_key_value_heads %d", c.Heads, c.KVHeads)
	}
}

// intInto reads a positive integer value into the field at.
func intInto(at func(c *Config) *int) func(c *Config, v json.RawMessage) error {
	return func(c *Config, v json.RawMessage) error {
		var n int
		if err := json.Unmarshal(v, &n); err != nil {
			return fmt.Errorf("want an integer, got %s", v)
		}
		*at(c) = n
		return nil
	}
}

// optionalInt reads an integer or null (the default) into the field at.
func optionalInt(at func(c *Config) *int) func(c *Config, v json.RawMessage) error {
	return func(c *Config, v json.RawMessage) error {
		if string(v) == "null" {
			return nil
		}
		return intInto(at)(c, v)
	}
}

// wantString accepts only the string s: another value would change the
// model in a way the fusion does not write.
func wantString(s string) func(c *Config, v json.RawMessage) error {
	return func(_ *Config, v json.RawMessage) error {
		var got string
		if err := json.Unmarshal(v, &got); err != nil || got != s {
			return fmt.Errorf("nvcomm writes %q only, got %s", s, v)
		}
		return nil
	}
}

// wantNull accepts null: Mixtral-8x7B's sliding_window; a window would
// mask attention in a way the fusion does not write.
func wantNull(_ *Config, v json.RawMessage) error {
	if string(v) != "null" {
		return fmt.Errorf("nvcomm writes full causal attention only (null), got %s", v)
	}
	return nil
}

// wantZero accepts 0: router_jitter_noise, the multiplicative noise some
// MoE training adds to the router's input, which nvcomm does not write.
func wantZero(_ *Config, v json.RawMessage) error {
	var f float64
	if err := json.Unmarshal(v, &f); err != nil || f != 0 {
		return fmt.Errorf("nvcomm writes the router without jitter (0), got %s", v)
	}
	return nil
}

// wantFalse accepts false (or null): biases nvcomm does not write.
func wantFalse(_ *Config, v json.RawMessage) error {
	var b *bool
	if err := json.Unmarshal(v, &b); err != nil || b != nil && *b {
		return fmt.Errorf("nvcomm writes layers without biases, got %s", v)
	}
	return nil
}

// wantOne accepts 1: Llama 2's pretraining_tp > 1 splits its linears in
// the reference code, which computes the same values.
func wantOne(_ *Config, v json.RawMessage) error {
	var n int
	if err := json.Unmarshal(v, &n); err != nil || n != 1 {
		return fmt.Errorf("want 1, got %s", v)
	}
	return nil
}

// field is one key of the configuration's object with its raw value and
// their byte offsets.
type field struct {
	name           string
	value          json.RawMessage
	keyAt, valueAt int
}

// fieldList is the object's fields in file order.
type fieldList []field

// get returns the field named name.
func (fl fieldList) get(name string) (field, bool) {
	i := slices.IndexFunc(fl, func(f field) bool { return f.name == name })
	if i < 0 {
		return field{}, false
	}
	return fl[i], true
}

// topLevel splits src, one JSON object, into its fields with their
// offsets. A key given twice is an error, as encoding/json would silently
// keep the last.
func topLevel(src []byte) (fieldList, error) {
	dec := json.NewDecoder(bytes.NewReader(src))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, cmpErr(err, &offsetError{errors.New("the file does not start with {"), 0})
	}
	var fl fieldList
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, err
		}
		name, _ := t.(string)
		keyAt := keyStart(src, int(dec.InputOffset()))
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		if _, dup := fl.get(name); dup {
			return nil, &offsetError{fmt.Errorf("key %q appears twice", name), keyAt}
		}
		valueAt := int(dec.InputOffset()) - len(v)
		fl = append(fl, field{name, v, keyAt, valueAt})
	}
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, &offsetError{errors.New("text after the object"), int(dec.InputOffset())}
	}
	return fl, nil
}

// keyStart returns the offset of the opening quote of the key that ends
// just before end.
func keyStart(src []byte, end int) int {
	i := bytes.LastIndexByte(src[:end-1], '"')
	return max(i, 0)
}

// offsetError is an error at a byte offset of the input.
type offsetError struct {
	err    error
	offset int
}

func (e *offsetError) Error() string { return e.err.Error() }

// offsetOf returns the input offset err is at, or n when it has none.
func offsetOf(err error, n int) int {
	var se *json.SyntaxError
	var oe *offsetError
	switch {
	case errors.As(err, &se):
		return int(se.Offset)
	case errors.As(err, &oe):
		return oe.offset
	}
	return n
}

// cmpErr returns err, or def when err is nil.
func cmpErr(err, def error) error {
	if err != nil {
		return err
	}
	return def
}

// posAt converts byte offset off of src to a line and column (characters,
// 1-based).
func posAt(src []byte, off int) diag.Pos {
	off = min(max(off, 0), len(src))
	line := 1 + bytes.Count(src[:off], []byte("\n"))
	start := bytes.LastIndexByte(src[:off], '\n') + 1
	return diag.At(line, 1+utf8.RuneCount(src[start:off]))
}
