package sim

import (
	"fmt"

	"github.com/nvcomm/nvcomm/internal/ops"
	"github.com/nvcomm/nvcomm/internal/plan"
)

// This file defines the loss composites, log_softmax and cross_entropy,
// directly, as composite.go defines the others: row by row with the
// simulator's scalar functions, never from the registry's expansion.

// fnLog is the simulator's log, the fixed map that stands in for it.
var fnLog = pointwiseFuncOf("log")

// logSoftmaxRow is out[at(k)] = (x_k − m) − log Σ exp(x_j − m), m = max x.
func logSoftmaxRow(x, out []float64, n int, at func(int) int) {
	m, lse := rowMaxLogSumExp(x, n, at)
	for k := range n {
		out[at(k)] = fnSub(fnSub(x[at(k)], m), lse)
	}
}

// rowMaxLogSumExp is a row's max m and log Σ exp(x_k − m).
func rowMaxLogSumExp(x []float64, n int, at func(int) int) (m, lse float64) {
	m = x[at(0)]
	for k := 1; k < n; k++ {
		m = combine("max", m, x[at(k)])
	}
	var s float64
	for k := range n {
		s = combine("sum", s, fnExp(fnSub(x[at(k)], m), 0))
	}
	return m, fnLog(s, 0)
}

// crossEntropyDef is cross_entropy(logits [..., v], labels [...]): per
// token log Σ exp(x − m) − (x_label − m), m the row max, a label outside
// [0, v) picking 0 as gather does; with reduction mean, the sum of the
// per-token losses divided by their count.
func crossEntropyDef(of *plan.Of, ins []operand) ([]float64, error) {
	if len(ins) != 2 || len(ins[0].shape) == 0 {
		return nil, fmt.Errorf("composite %s: want logits [..., v] and labels", of.Op)
	}
	x, labels := ins[0], ins[1]
	v := x.shape[len(x.shape)-1]
	if len(labels.vals)*v != len(x.vals) {
		return nil, fmt.Errorf("composite %s: labels %q hold %d values, want one per row of %q %v", of.Op, labels.name, len(labels.vals), x.name, x.shape)
	}
	loss := make([]float64, len(labels.vals))
	for o, label := range labels.vals {
		at := func(k int) int { return o*v + k }
		m, lse := rowMaxLogSumExp(x.vals, v, at)
		var t float64
		if label >= 0 && label < float64(v) {
			t = fnSub(x.vals[at(int(label))], m)
		}
		loss[o] = fnSub(lse, t)
	}
	if ops.ReductionOf(reductionValues(of)) == ops.ReductionNone || len(x.shape) == 1 {
		return loss, nil
	}
	return []float64{meanOf(loss, len(loss), func(k int) int { return k })}, nil
}

// reductionValues is of's reduction as attribute values.
func reductionValues(of *plan.Of) ops.Values {
	if of.Reduction == "" {
		return nil
	}
	return ops.Values{{Key: ops.AttrReduction, Str: of.Reduction}}
}
