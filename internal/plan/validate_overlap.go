package plan

import (
	"slices"
	"strings"
)

// A linear or matmul computed as a decomposed collective (Overlap) must
// take the steps plan.Overlap builds from the plan's tensors, as an sdpa
// computed whole must take ring attention's: validate rebuilds them from
// the op's operands (the Allgather's set computed within it, Op.Within)
// and requires the op's steps to be those, but for what the lowering adds
// (ids, op, expr, a collective's bytes and axis, a graph's stream and
// waits). A chunk cut from the wrong rows, or put back in the wrong
// place, is then an error naming the step.

// decomposedOps are the linears and matmuls computed as decomposed
// collectives: a set is computed within one, or a step of one writes one
// of the form's intermediate buffers (one pass over the steps).
func (v *validator) decomposedOps() map[int]bool {
	var out map[int]bool
	mark := func(k int) {
		if out == nil {
			out = map[int]bool{}
		}
		out[k] = true
	}
	linear := func(k int) bool {
		op := &v.p.Ops[k]
		return (op.Op == "linear" || op.Op == "matmul") && op.Of == nil
	}
	for k := range v.computesWithin {
		if k >= 0 && k < len(v.p.Ops) && linear(k) {
			mark(k)
		}
	}
	for i := range v.p.Steps {
		s := &v.p.Steps[i]
		if s.Op < 0 || s.Op >= len(v.p.Ops) || !strings.Contains(s.Output, "/overlap/") || !linear(s.Op) {
			continue
		}
		if strings.HasPrefix(s.Output, OverlapBuffers(v.p.Ops[s.Op].Output)("")) {
			mark(s.Op)
		}
	}
	return out
}

// checkOverlap checks op k's steps against the decomposed collective's.
func (v *validator) checkOverlap(k int) {
	op := &v.p.Ops[k]
	var got []Step
	forms := map[string]int{}
	for i := range v.p.Steps {
		if s := v.p.Steps[i]; s.Op == k {
			got = append(got, ringShape(s))
			forms[s.Type]++
		}
	}
	g, why := v.overlapOf(k)
	if why != "" {
		v.planf("op %d: computes %s as a decomposed collective, but %s (docs/overlap.md)", k, op.Expr(), why)
		return
	}
	switch {
	case forms[SendRecv] > 0:
		g.Form, g.Chunks = OverlapRing, len(g.Devices)
	case g.Kind == OverlapAllgather || g.Kind == OverlapAllgatherWeight:
		g.Form, g.Chunks = OverlapCollective, forms[Allgather]
	default:
		g.Form, g.Chunks = OverlapCollective, forms[ReduceScatter]
	}
	if g.Form == OverlapCollective && (g.Chunks < 2 || g.Rows%g.Chunks != 0) {
		v.planf("op %d: computes %s in %d chunks, which do not divide each device's %d rows in 2 or more", k, op.Expr(), g.Chunks, g.Rows)
		return
	}
	want := g.Steps()
	if at := firstDifference(got, want); at >= 0 {
		name := "the " + g.Form + "-based decomposed collective"
		if at >= len(got) {
			v.planf("op %d: computes %s as %s, but its %d steps are not its %d", k, op.Expr(), name, len(got), len(want))
			return
		}
		v.stepf(v.stepOf(k, at), "is not step %d of %s, whose steps the op must take (docs/overlap.md, \"Decomposed collectives\")", at, name)
	}
}

// overlapOf returns the geometry of op k's decomposed collective, but its
// form and chunks, from the plan's tensors: an Allgather + matmul where a
// set is computed within it (its input the chunked operand), else a
// matmul + ReduceScatter; or why there is none. K and N are the weight's
// local extents (a linear's is [N, K], a matmul's [K, N]), Rows a
// device's rows of the chunked operand or of the output.
func (v *validator) overlapOf(k int) (Overlap, string) {
	op := &v.p.Ops[k]
	in := op.Operands()
	bias := ""
	if len(in) == 3 && op.Op == "linear" {
		in, bias = in[:2], in[2]
	}
	if len(in) != 2 {
		return Overlap{}, "it has no two operands"
	}
	w, out := v.tensor(in[1]), v.tensor(op.Output)
	if w == nil || out == nil || out.mesh == nil || len(w.t.LocalShape) != 2 || out.local < 1 {
		return Overlap{}, "its weight is not of rank 2 or its output has no mesh"
	}
	g := Overlap{Devices: slices.Clone(out.mesh.Devices), Kind: OverlapReduceScatter, K: w.t.LocalShape[0], N: w.t.LocalShape[1],
		In: in[0], W: in[1], Out: op.Output, Bias: bias, Buffer: OverlapBuffers(op.Output)}
	if op.Op == "linear" {
		g.K, g.N, g.TransposeB = g.N, g.K, true
	}
	if b := v.tensor(bias); bias != "" && (b == nil || b.local != g.N) {
		return Overlap{}, "its bias is not a block of its weight's output extent"
	}
	t := len(g.Devices)
	x := v.tensor(in[0])
	for j := range v.p.Ops {
		s := &v.p.Ops[j]
		if s.Within == nil || *s.Within != k || s.Op != "set" {
			continue
		}
		switch s.Output {
		case in[0]:
			g.Kind, g.In, x = OverlapAllgather, s.Input, v.tensor(s.Input)
		case in[1]:
			g.Kind, g.W = OverlapAllgatherWeight, s.Input
			w = v.tensor(s.Input)
		}
	}
	if x == nil || x.local < 1 || g.K < 1 || g.N < 1 || t < 2 {
		return Overlap{}, "its operands are not tensors on a mesh of 2 devices or more"
	}
	if g.Kind == OverlapAllgatherWeight {
		// The weight gathered is a linear's [N, K], each device's block
		// its rows [Rows, K]; x is each device's own [M, K].
		if op.Op != "linear" || bias != "" || w == nil || w.local < 1 {
			return Overlap{}, "the op whose weight is gathered is not a linear without a bias"
		}
		if len(w.t.Sharding) != 1 || w.t.Sharding[0].LogicalAxis != 0 || w.t.Sharding[0].Kind != "block" || w.mesh == nil ||
			!slices.Equal(w.mesh.Devices, g.Devices) {
			return Overlap{}, "its weight is not split in blocks of rows over the output's devices"
		}
		g.Rows, g.M = w.local/g.K, x.local/g.K
		if g.Rows*g.K != w.local || g.Rows*t != g.N || g.M*g.K != x.local || out.local != g.M*g.N {
			return Overlap{}, "its gathered weight's and output's blocks are not rows and columns of its extents"
		}
		return g, ""
	}
	if g.Kind == OverlapAllgather {
		g.Rows = x.local / g.K
		if g.Rows*g.K != x.local || out.local != t*g.Rows*g.N {
			return Overlap{}, "its gathered operand's and output's blocks are not rows of its weight's extents"
		}
		return g, ""
	}
	g.Rows = out.local / g.N
	if g.Rows*g.N != out.local || x.local != t*g.Rows*g.K {
		return Overlap{}, "its operand's and output's blocks are not rows of its weight's extents"
	}
	return g, ""
}
