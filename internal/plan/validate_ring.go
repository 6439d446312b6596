package plan

import (
	"fmt"
	"reflect"
	"slices"

	"github.com/nvcomm/nvcomm/internal/ops"
)

// An op that computes its composite whole (others are within it, Op.Within)
// must compute it as ring attention's steps do (RingAttention), or the
// all-gather form's (RingAttention.GatherSteps, whose first step is an
// Allgather, where the ring's is a Matmul or a SendRecv): the
// simulator proves its output, but not each of its intermediates, and a
// change that softmax's algebra cannot see — the row max replaced by
// another shift, which the simulator's exact exp takes as well as the
// max but a float's range does not — would pass it. So validate rebuilds
// the ring from the plan's tensors and the composite's record, and the
// op's steps must be those, but for what the lowering adds (ids, op,
// expr, a collective's bytes and axis, a graph's stream and waits), with
// each round's SendRecvs after its compute or before it.

// checkWholes checks the steps of every op that computes its composite
// whole.
func (v *validator) checkWholes() {
	decomposed := v.decomposedOps()
	for k := range v.p.Ops {
		switch {
		case decomposed[k]:
			v.checkOverlap(k)
		case v.computesWithin[k]:
			v.checkRing(k)
		}
	}
}

// checkRing checks op k's steps against ring attention's, or the
// all-gather form's where they start with an Allgather.
func (v *validator) checkRing(k int) {
	op := &v.p.Ops[k]
	g, why := v.ringOf(op)
	if why == recordContradicted {
		return // the record's problem (checkSDPAHeads), reported once
	}
	if why != "" {
		v.planf("op %d: computes %s whole, but %s; only ring attention and the all-gather form compute an sdpa whole (docs/layers.md)", k, op.Of.Expr(), why)
		return
	}
	var got []Step
	for i := range v.p.Steps {
		if v.p.Steps[i].Op == k {
			got = append(got, ringShape(v.p.Steps[i]))
		}
	}
	form, want := "ring attention", g.Steps()
	if len(got) > 0 && got[0].Type == Allgather {
		g.Buffer = GatherBuffers(op.Of.Output)
		form, want = "the all-gather form", g.GatherSteps()
		if at := firstDifference(got, want); at >= 0 {
			v.notForm(k, op, form, got, want, at)
		}
		return
	}
	var diffs [2]int
	for f, first := range []bool{false, true} {
		g.SendFirst = first
		diffs[f] = firstDifference(got, g.Steps())
		if diffs[f] < 0 {
			return
		}
	}
	v.notForm(k, op, form, got, want, max(diffs[0], diffs[1]))
}

// notForm reports that op k's steps got, which should be form's steps
// want, differ from them at position at.
func (v *validator) notForm(k int, op *Op, form string, got, want []Step, at int) {
	if at >= len(got) {
		v.planf("op %d: computes %s whole, but its %d steps are not %s's %d", k, op.Of.Expr(), len(got), form, len(want))
		return
	}
	s := v.stepOf(k, at)
	v.stepf(s, "is not step %d of %s, whose steps an op that computes %s whole must take (docs/layers.md, \"Ring attention\")", at, form, op.Of.Expr())
}

// stepOf returns the index in the plan of op k's step n.
func (v *validator) stepOf(k, n int) int {
	for i := range v.p.Steps {
		if v.p.Steps[i].Op == k {
			if n == 0 {
				return i
			}
			n--
		}
	}
	return -1
}

// ringShape is s without what the lowering adds to ring attention's
// steps.
func ringShape(s Step) Step {
	s.ID, s.Op, s.Expr, s.Bytes, s.Axis, s.Stream, s.After = 0, 0, "", nil, nil, "", nil
	return s
}

// firstDifference returns the first position where got and want differ,
// -1 when they are equal.
func firstDifference(got, want []Step) int {
	for i := range min(len(got), len(want)) {
		if !reflect.DeepEqual(got[i], want[i]) {
			return i
		}
	}
	if len(got) != len(want) {
		return min(len(got), len(want))
	}
	return -1
}

// recordContradicted is ringOf's why when the sdpa's operands are not
// those its record takes (enable_gqa against their heads): a problem of
// the record, which checkSDPAHeads reports at its first op.
const recordContradicted = "its record contradicts its operands' shapes"

// ringOf returns the ring attention that op, the last op of an sdpa's
// expansion, computes: its geometry from q, k and v as the plan declares
// them and its scale from the expansion's scaling op; or why there is
// none.
func (v *validator) ringOf(op *Op) (RingAttention, string) {
	of := op.Of
	if of.Op != "sdpa" || len(of.Inputs) != 3 {
		return RingAttention{}, "it is not an sdpa"
	}
	var shapes [4][]int
	var mesh *Mesh
	meshName := ""
	for n, name := range append(slices.Clone(of.Inputs), of.Output) {
		t := v.tensor(name)
		if t == nil || t.mesh == nil || t.rank < 2 {
			return RingAttention{}, fmt.Sprintf("%q is not a tensor of rank 2 or more on a mesh", name)
		}
		if mesh == nil {
			mesh, meshName = t.mesh, t.t.Mesh
		}
		shape := make([]int, t.rank)
		for a, pos := range t.values {
			shape[a] = t.t.Shape[pos]
		}
		r := t.rank
		c := len(mesh.Devices)
		sh := t.t.Sharding
		if t.t.Mesh != meshName || len(mesh.Shape) != 1 || c < 2 || len(sh) != 1 || sh[0].Kind != "block" || sh[0].LogicalAxis != r-2 ||
			len(t.t.LocalShape) != r || t.t.LocalShape[r-2]*c != shape[r-2] || t.t.PaddedShape != nil {
			return RingAttention{}, fmt.Sprintf("%q is not split in even blocks on its dim %d alone over a 1-D mesh of 2 devices or more, as q is", name, r-2)
		}
		shapes[n] = shape
	}
	q, k, val := shapes[0], shapes[1], shapes[2]
	r, c := len(q), len(mesh.Devices)
	grp, err := ops.SDPAGroup([][]int{q, k, val}, of.GQA)
	if err != nil {
		return RingAttention{}, recordContradicted
	}
	bt := 1
	for _, e := range q[:r-2] {
		bt *= e
	}
	scale, found := 0.0, false
	for _, o := range v.p.Ops {
		if o.Of != nil && o.Of.Output == of.Output && !o.Of.Grad && o.Op == "mul" && o.Scalar != nil {
			scale, found = o.Scalar.Value, true
		}
	}
	if !found {
		return RingAttention{}, "its expansion has no scaling of the scores"
	}
	return RingAttention{Devices: mesh.Devices, BT: bt, SB: q[r-2] / c, TB: k[r-2] / c, D: q[r-1], DV: val[r-1], G: grp,
		Causal: of.Causal, Scale: scale, Q: of.Inputs[0], K: of.Inputs[1], V: of.Inputs[2], Out: of.Output,
		Buffer: RingBuffers(of.Output)}, ""
}
