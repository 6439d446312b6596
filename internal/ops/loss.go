package ops

import (
	"slices"
	"strconv"
)

// The loss ops are composites too: log_softmax (torch.log_softmax), and
// cross_entropy (torch.nn.functional.cross_entropy with the classes on
// the last axis), written with softmax's head — the row max, x − max and
// its exp — then the log of the sum of exponentials, and for
// cross_entropy a gather of the target's shifted logit. With the logits
// split on the vocabulary this is Megatron-LM's _VocabParallelCrossEntropy
// (megatron/core/tensor_parallel/cross_entropy.py): three small
// Allreduces of one value per token (the max, the sum of exponentials,
// the target logit), never the logits.

// AttrReduction is cross_entropy's reduction of the per-token losses:
// mean (torch's default, a scalar) or none (the losses, labels' shape).
const AttrReduction Attr = "reduction"

// The values of AttrReduction, the default first.
const (
	ReductionMean = "mean"
	ReductionNone = "none"
)

// lossAttrSpecs are the specs of the loss ops' attributes besides axis.
var lossAttrSpecs = []AttrSpec{
	{Key: AttrReduction, Kind: NameAttr, Names: []string{ReductionMean, ReductionNone}, Optional: true,
		Doc: "cross_entropy only: mean (the default) averages the per-token losses into a scalar, none keeps them"},
}

// ReductionOf returns cross_entropy's reduction among values vs: its
// default, mean, when it is not given.
func ReductionOf(vs Values) string {
	if r := vs.Str(AttrReduction); r != "" {
		return r
	}
	return ReductionMean
}

// registerLossOps adds log_softmax and cross_entropy.
func registerLossOps(r *Registry) {
	for _, c := range []Op{
		{Name: "log_softmax", Operands: []string{"x"}, Attrs: []Attr{AttrAxis}, Expand: expandLogSoftmax,
			Doc: "x − max − log Σ exp(x − max) along one axis, torch.log_softmax"},
		{Name: "cross_entropy", Operands: []string{"logits", "labels"}, Attrs: []Attr{AttrReduction}, Expand: expandCrossEntropy,
			Indexed: &Indexed{Indices: 1, Table: 0, Rows: -1},
			Doc:     "−log softmax(logits)[labels] over the last axis, averaged (reduction mean) or per token (none), torch.nn.functional.cross_entropy"},
	} {
		c.Family = Composite
		r.MustRegister(c)
	}
}

// logSumExp is log Σ exp(x − m) along axis, ex = exp(x − m): the row's
// log-sum-exp less its max, one value per row (the axis reduced).
func (e *expansion) logSumExp(ex Ref, axis int) Ref {
	return e.unary("lse", "log", e.reduce("sum", "sum", ex, axis))
}

// expandLogSoftmax is log_softmax(x, axis) = (x − m) − log Σ exp(x − m),
// m = max(x).
var expandLogSoftmax = alongAxis(func(e *expansion, sub, ex Ref, axis int) {
	e.binary("log_softmax", "sub", sub, e.back("lse_b", e.logSumExp(ex, axis), axis))
})

// expandCrossEntropy is cross_entropy(logits [..., v], labels [...]):
// per token, log Σ exp(x − m) − (x − m)[label], m the row max, as
// Megatron-LM's vocab-parallel loss computes it; the target is gathered
// from x − m with labels given an axis of extent 1 (gather's index) and
// summed over it back to labels' shape. reduction mean then sums the
// losses over every token axis and divides by their count.
func expandCrossEntropy(in [][]int, a Attrs) ([]ExpandStep, *ExpandError) {
	x, labels := in[0], in[1]
	if len(x) == 0 {
		return nil, &ExpandError{Index: 0, Msg: "logits have rank 0, expected [..., classes]",
			Hint: "logits hold one row of class scores per token, the classes on the last axis"}
	}
	last := len(x) - 1
	if !slices.Equal(labels, x[:last]) {
		return nil, &ExpandError{Index: 1, Msg: "labels have shape " + intText(labels) + ", want " + intText(x[:last]) + " (logits' shape without its last axis, the classes)",
			Hint: "labels hold one class index per token, as torch's target of shape [N] for logits [N, C]"}
	}
	var e expansion
	sub, ex := e.shiftedExp(0, last)
	lse := e.logSumExp(ex, last)
	index := e.add(ExpandStep{Name: "labels_b", Op: "broadcast", In: []Ref{1}, Axes: []int{last}})
	picked := e.add(ExpandStep{Name: "gather", Op: "gather", In: []Ref{sub, index}, Axis: last})
	loss := e.binary("nll", "sub", lse, e.reduce("target", "sum", picked, last))
	if ReductionOf(a.Values) == ReductionMean && last > 0 {
		for k := 1; k < last; k++ {
			loss = e.reduce("tokens_sum"+strconv.Itoa(k), "sum", loss, 0)
		}
		e.mean("mean", loss, 0, Product(x[:last]))
	}
	return e.done(), nil
}
