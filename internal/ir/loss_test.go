package ir

import (
	"strings"
	"testing"
)

// lossHead is compositeHead with integer labels of x's tokens, and float
// ones for the errors.
var lossHead = strings.Replace(compositeHead, "ops:\n",
	"  labels: {mesh: m, dtype: int64, shape: [8]}\n  fl: {mesh: m, shape: [8]}\n  l1: {mesh: m, dtype: int32, shape: [8, 1]}\n  s: {mesh: m, shape: []}\nops:\n", 1)

// TestLossExpansion checks the primitive ops of log_softmax and
// cross_entropy: softmax's head, the log-sum-exp, the target gathered
// from the shifted logits, the mean over the tokens for reduction mean.
func TestLossExpansion(t *testing.T) { checkExpansions(t, lossHead, lossTests) }

// crossEntropyHead is the expansion of cross_entropy(x, labels) up to the
// per-token loss y/nll (y when reduction is none).
func crossEntropyHead(last string) []opSum {
	ce := of("cross_entropy", "y")
	return []opSum{
		{"y/max = max(x, axis=1)", ce, "m propagated"},
		{"y/max_b = broadcast(y/max, axes=[1])", ce, "m propagated"},
		{"y/sub = sub(x, y/max_b)", ce, "m propagated"},
		{"y/exp = exp(y/sub)", ce, "m propagated"},
		{"y/sum = sum(y/exp, axis=1)", ce, "m propagated"},
		{"y/lse = log(y/sum)", ce, "m propagated"},
		{"y/labels_b = broadcast(labels, axes=[1])", ce, "m propagated"},
		{"y/gather = gather(y/sub, y/labels_b, axis=1)", ce, "m propagated"},
		{"y/target = sum(y/gather, axis=1)", ce, "m propagated"},
		{last + " = sub(y/lse, y/target)", ce, "m propagated"},
	}
}

// lossTests are fusions of the loss composites and the primitive ops the
// builder makes of them.
var lossTests = []expansionTest{
	{"log_softmax", "  - {op: log_softmax, in: x, out: y, axis: 1}\n", []opSum{
		{"y/max = max(x, axis=1)", of("log_softmax", "y"), "m propagated"},
		{"y/max_b = broadcast(y/max, axes=[1])", of("log_softmax", "y"), "m propagated"},
		{"y/sub = sub(x, y/max_b)", of("log_softmax", "y"), "m propagated"},
		{"y/exp = exp(y/sub)", of("log_softmax", "y"), "m propagated"},
		{"y/sum = sum(y/exp, axis=1)", of("log_softmax", "y"), "m propagated"},
		{"y/lse = log(y/sum)", of("log_softmax", "y"), "m propagated"},
		{"y/lse_b = broadcast(y/lse, axes=[1])", of("log_softmax", "y"), "m propagated"},
		{"y = sub(y/sub, y/lse_b)", of("log_softmax", "y"), "m propagated"},
	}},
	{"cross_entropy none", "  - {op: cross_entropy, in: [x, labels], out: y, reduction: none}\n", crossEntropyHead("y")},
	{"cross_entropy mean", "  - {op: cross_entropy, in: [x, labels], out: y}\n", append(crossEntropyHead("y/nll"),
		opSum{"y/mean_sum = sum(y/nll, axis=0)", of("cross_entropy", "y"), "m propagated"},
		opSum{"y = div(y/mean_sum, 8)", of("cross_entropy", "y"), "m propagated"})},
}

// TestLossErrors checks the errors of the loss composites: each at the
// value at fault, with a hint.
func TestLossErrors(t *testing.T) {
	checkParseErrors(t, lossHead, []struct{ name, ops, want string }{
		{"float labels", "  - {op: cross_entropy, in: [x, fl], out: y}\n",
			`in.yaml:13:33: error: ops[0]: cross_entropy operand labels, "fl", is float32, expected an integer dtype (int32, int64); declare "fl" int32 or int64: it holds row indices of "x"`},
		{"labels of gather's shape", "  - {op: cross_entropy, in: [x, l1], out: y}\n",
			`in.yaml:13:33: error: ops[0]: cross_entropy of "x": labels have shape [8, 1], want [8] (logits' shape without its last axis, the classes); labels hold one class index per token, as torch's target of shape [N] for logits [N, C]`},
		{"labels of another shape", "  - {op: cross_entropy, in: [y0, labels], out: y}\n  - {op: sum, in: x, out: y0, axis: 0}\n",
			`in.yaml:13:34: error: ops[0]: cross_entropy of "y0": labels have shape [8], want [] (logits' shape without its last axis, the classes); labels hold one class index per token, as torch's target of shape [N] for logits [N, C]`},
		{"rank-0 logits", "  - {op: cross_entropy, in: [s, labels], out: y}\n",
			`in.yaml:13:30: error: ops[0]: cross_entropy of "s": logits have rank 0, expected [..., classes]; logits hold one row of class scores per token, the classes on the last axis`},
		{"unknown reduction", "  - {op: cross_entropy, in: [x, labels], out: y, reduction: sum}\n",
			`in.yaml:13:61: error: ops[0] reduction: "sum" is not one of mean, none; write one of mean, none`},
		{"reduction of another op", "  - {op: softmax, in: x, out: y, axis: 1, reduction: none}\n",
			`in.yaml:13:54: error: ops[0]: softmax takes no "reduction"; "reduction" is an attribute of cross_entropy`},
		{"log_softmax axis", "  - {op: log_softmax, in: x, out: y, axis: -3}\n",
			`in.yaml:13:44: error: ops[0]: log_softmax of "x": axis -3 is out of range for rank 2; an axis is among the input's axes, negative from the end`},
	})
}
