package sim

import (
	"fmt"

	"github.com/nvcomm/nvcomm/internal/plan"
)

// This file is the simulator's own definition of the composite ops
// (softmax, mean, rms_norm, layer_norm; log_softmax and cross_entropy in
// loss.go, sdpa in sdpa.go), which a plan holds expanded into
// primitive ops (docs/fusion.md, "Composite ops"). It computes each from
// its definition, row by row along the normalized axis, with the
// simulator's scalar functions, and never reads the registry's
// expansion: once the reference has computed the expansion's last op,
// the composite's output must equal this definition exactly, so that a
// wrong expansion (a missing step, a statistic over the wrong axis, a
// wrong n or eps) fails the simulation as a wrong plan does
// (docs/simulate.md, "Exactness").

// compositeDef computes composite of on its unsharded operands ins
// (values row-major, shapes their non-reduction shapes), or reports why
// it cannot.
func compositeDef(of *plan.Of, ins []operand) ([]float64, error) {
	switch of.Op {
	case "cross_entropy":
		return crossEntropyDef(of, ins)
	case "sdpa":
		return sdpaDef(ins, of.Causal, of.GQA)
	case "moe_topk":
		return moeTopKDef(of, ins)
	case "moe_dispatch":
		return moeDispatchDef(of, ins)
	}
	x := ins[0]
	axis := len(x.shape) - 1
	if of.Axis != nil {
		axis = *of.Axis
	}
	if axis < 0 || axis >= len(x.shape) {
		return nil, fmt.Errorf("composite %s: axis %d is not among the %d axes of %q", of.Op, axis, len(x.shape), x.name)
	}
	var eps float64
	if of.Eps != nil {
		eps = scalarResidue(*of.Eps)
	}
	n := x.shape[axis]
	outer, inner := product(x.shape[:axis]), product(x.shape[axis+1:])
	row := func(o, i, k int) int { return (o*n+k)*inner + i }
	var out []float64
	if of.Op != "mean" {
		out = make([]float64, len(x.vals))
	} else {
		out = make([]float64, outer*inner)
	}
	for o := range outer {
		for i := range inner {
			at := func(k int) int { return row(o, i, k) }
			switch of.Op {
			case "softmax":
				softmaxRow(x.vals, out, n, at)
			case "log_softmax":
				logSoftmaxRow(x.vals, out, n, at)
			case "mean":
				out[o*inner+i] = meanOf(x.vals, n, at)
			case "rms_norm":
				normRow(x.vals, out, ins[1:], n, at, eps, false)
			case "layer_norm":
				normRow(x.vals, out, ins[1:], n, at, eps, true)
			default:
				return nil, fmt.Errorf("unknown composite op %q", of.Op)
			}
		}
	}
	return out, nil
}

// The scalar functions the definitions are written with: the
// simulator's own, the same that compute every op and step.
var (
	fnSub, fnDiv, fnMul, fnAdd = pointwiseFuncOf("sub"), pointwiseFuncOf("div"), pointwiseFuncOf("mul"), pointwiseFuncOf("add")
	fnExp, fnRsqrt             = pointwiseFuncOf("exp"), pointwiseFuncOf("rsqrt")
)

// softmaxRow is out[at(k)] = exp(x_k − max x) / Σ exp(x_j − max x).
func softmaxRow(x, out []float64, n int, at func(int) int) {
	m := x[at(0)]
	for k := 1; k < n; k++ {
		m = combine("max", m, x[at(k)])
	}
	var s float64
	for k := range n {
		e := fnExp(fnSub(x[at(k)], m), 0)
		out[at(k)] = e
		s = combine("sum", s, e)
	}
	for k := range n {
		out[at(k)] = fnDiv(out[at(k)], s)
	}
}

// meanOf is Σ x_k / n.
func meanOf(x []float64, n int, at func(int) int) float64 {
	var s float64
	for k := range n {
		s = combine("sum", s, x[at(k)])
	}
	return fnDiv(s, scalarResidue(float64(n)))
}

// normRow is (x − μ)·rsqrt(mean((x − μ)²) + eps) (· weight) (+ bias),
// μ the mean when centred (layer_norm), 0 otherwise (rms_norm).
func normRow(x, out []float64, affine []operand, n int, at func(int) int, eps float64, centred bool) {
	var mu float64
	if centred {
		mu = meanOf(x, n, at)
	}
	for k := range n {
		out[at(k)] = x[at(k)]
		if centred {
			out[at(k)] = fnSub(x[at(k)], mu)
		}
	}
	sq := make([]float64, n)
	for k := range n {
		sq[k] = fnMul(out[at(k)], out[at(k)])
	}
	r := fnRsqrt(fnAdd(meanOf(sq, n, func(k int) int { return k }), eps), 0)
	for k := range n {
		v := fnMul(out[at(k)], r)
		if len(affine) > 0 {
			v = fnMul(v, affine[0].vals[k])
		}
		if len(affine) > 1 {
			v = fnAdd(v, affine[1].vals[k])
		}
		out[at(k)] = v
	}
}

// checkComposite checks, once op, the last op of a composite's expansion,
// has its reference, that reference against the composite's definition.
func (w *world) checkComposite(op plan.Op, ref map[string]vec) error {
	of := op.Of
	if of == nil || op.Output != of.Output || of.Grad {
		return nil // a backward's ops are proven as any op is
	}
	ins := make([]operand, len(of.Inputs))
	for k, name := range of.Inputs {
		info := w.tensors[name]
		v, has := ref[name]
		if info == nil || !has {
			return fmt.Errorf("op %d (%s): of names %q, which has no reference", op.Index, op.Op, name)
		}
		shape, vals := info.shard.shape, v.flat()
		switch {
		case w.isPending(name):
			shape = shape[1:] // the reference holds the reduction of its terms
		case info.t.Partial != "":
			// A Partial input's reference is its terms: the composite
			// reads their reduction, as the ops of its expansion do.
			vals, shape = reduceAxis(info.t.Partial, vals, shape, 0), shape[1:]
		}
		ins[k] = operand{name: name, v: stored(vals), vals: vals, shape: shape}
	}
	want, err := compositeDef(of, ins)
	if err != nil {
		return fmt.Errorf("op %d (%s): %v", op.Index, op.Op, err)
	}
	got := ref[op.Output].flat()
	if len(got) != len(want) {
		return fmt.Errorf("op %d (%s): the expansion of %s gives %d values, its definition %d", op.Index, op.Op, of.Expr(), len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			return fmt.Errorf("op %d (%s): the expansion of %s differs from its definition at element %d: %v, want %v",
				op.Index, op.Op, of.Expr(), i, got[i], want[i])
		}
	}
	return nil
}
