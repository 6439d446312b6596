package plan

import (
	"fmt"
	"slices"

	"github.com/nvcomm/nvcomm/internal/ops"
)

// PartialInput describes a fusion input that holds partial terms (its
// Partial field is set): its logical axis 0, of the mesh axis's size,
// holds one term per device along device type Type, and every op that
// reads it reduces those terms with Op.
type PartialInput struct {
	Op   string // sum, prod, max or min
	Type string // the device type along which the terms lie
}

// PartialInputOf reports whether tensor name holds partial terms: a
// tensor whose Partial field holds (Validate's check: its logical axis 0
// parallelized on a device type whole, one term per device, and only
// reductions of its op over that axis read it).
func PartialInputOf(p *Plan, name string) (PartialInput, bool) {
	t, ok := tensorNamed(p, name)
	if !ok || t.Partial == "" {
		return PartialInput{}, false
	}
	var ops []int
	for i, op := range p.Ops {
		if op.Output == name || slices.Contains(op.Operands(), name) {
			ops = append(ops, i)
		}
	}
	return partialInputOf(p, &t, ops, partialTensors(p))
}

// SumsLate reports whether an op of p computes on pending terms of sums
// (docs/fusion.md, "placements"): an op that passes sums whose output
// holds terms.
func (p *Plan) SumsLate() bool {
	partial := map[string]bool{}
	for i := range p.Tensors {
		if p.Tensors[i].Partial != "" {
			partial[p.Tensors[i].Name] = true
		}
	}
	for _, op := range p.Ops {
		if passesSums(op.Op) && partial[op.Output] {
			return true
		}
	}
	return false
}

// partialTensors maps the name of each tensor of p with a Partial field to
// it.
func partialTensors(p *Plan) map[string]*Tensor {
	out := map[string]*Tensor{}
	for i := range p.Tensors {
		if t := &p.Tensors[i]; t.Partial != "" {
			out[t.Name] = t
		}
	}
	return out
}

// partialInputOf is PartialInputOf of tensor t, which ops read or write.
func partialInputOf(p *Plan, t *Tensor, ops []int, partials map[string]*Tensor) (PartialInput, bool) {
	if t.Partial == "" || partialProblem(p, t, ops, partials) != "" {
		return PartialInput{}, false
	}
	typ, _ := wholeAxisZeroType(p, *t)
	return PartialInput{Op: t.Partial, Type: typ}, true
}

// partialInputs maps the name of every tensor of p that holds partial
// terms to what PartialInputOf says of it, from one pass over p.
func partialInputs(p *Plan) map[string]PartialInput {
	out := map[string]PartialInput{}
	var readers map[string][]int // built when a tensor is Partial
	var partials map[string]*Tensor
	for i := range p.Tensors {
		t := &p.Tensors[i]
		if t.Partial == "" {
			continue
		}
		if readers == nil {
			readers, partials = readersByName(p), partialTensors(p)
		}
		if pi, ok := partialInputOf(p, t, readers[t.Name], partials); ok {
			out[t.Name] = pi
		}
	}
	return out
}

// wholeAxisZeroType is the device type that parallelizes t's logical axis
// 0 unsplit, when one does and its mesh axis has axis 0's extent.
func wholeAxisZeroType(p *Plan, t Tensor) (string, bool) {
	loop, _, why := Replay(&t, nil)
	if why != "" {
		return "", false
	}
	for _, a := range loop {
		if a.Logical == 0 && !a.Split && a.OnDevices() && meshExtent(p, t.Mesh, a.Parallel) == t.Shape[0] {
			return a.Parallel, true
		}
	}
	return "", false
}

// checkPartials checks every tensor's Partial field (rule 2): the terms
// of a reduce op, on a tensor without reduction axes whose logical axis 0
// one mesh axis parallelizes whole, written by no op (a fusion input) or
// by a contraction (terms of a sum) or a reduction (of its own op) that
// leaves them pending, and read only by reductions of that op over axis 0
// (as a fusion file's set from a Partial tensor becomes).
func (v *validator) checkPartials() {
	var readers map[string][]int // built when a tensor is Partial
	var partials map[string]*Tensor
	for i := range v.p.Tensors {
		t := &v.p.Tensors[i]
		if t.Partial == "" {
			continue
		}
		if readers == nil {
			readers, partials = readersByName(v.p), partialTensors(v.p)
		}
		if why := partialProblem(v.p, t, readers[t.Name], partials); why != "" {
			v.planf("%s: partial %q: %s", tensorRef{name: t.Name, index: i, sharding: -1}, t.Partial, why)
		}
	}
}

// partialProblem says why t's Partial field does not hold, "" when it
// does; ops are the positions of the ops that read t.
func partialProblem(p *Plan, t *Tensor, ops []int, partials map[string]*Tensor) string {
	switch {
	case !isReductionOp(t.Partial):
		return "the terms combine with sum, prod, max or min"
	case len(t.ReductionAxes) > 0 || len(t.Shape) == 0:
		return "the terms need a logical axis 0 and no reduction axes"
	}
	if _, ok := wholeAxisZeroType(p, *t); !ok {
		return fmt.Sprintf("its schedule does not parallelize logical axis 0 (the terms) unsplit over a mesh axis of %d devices", t.Shape[0])
	}
	for _, i := range ops {
		op := &p.Ops[i]
		if passesSums(op.Op) && t.Partial == "sum" {
			if why := sumsOnTerms(p, op, t, partials); why != "" {
				return fmt.Sprintf("op %d reads or writes it, and %s", i, why)
			}
			continue
		}
		if op.Output == t.Name {
			if why := pendingWriter(op, t.Partial); why != "" {
				return fmt.Sprintf("op %d writes it, and %s", i, why)
			}
			continue
		}
		if op.Input != t.Name || op.Op != t.Partial || op.Axis == nil || *op.Axis != 0 || slices.Contains(op.Operands()[1:], t.Name) {
			return fmt.Sprintf("op %d reads it but is not a %s of it over axis 0, which reduces the terms", i, t.Partial)
		}
	}
	return ""
}

// readersByName maps each tensor name to the positions of the ops that
// read or write it.
func readersByName(p *Plan) map[string][]int {
	out := map[string][]int{}
	for i, op := range p.Ops {
		for _, name := range op.Operands() {
			out[name] = append(out[name], i)
		}
		out[op.Output] = append(out[op.Output], i)
	}
	return out
}

// passesSums reports whether op is an op of sums that is the sum of the op
// of their terms (add, sub, neg: ops.Op.PassesSums).
func passesSums(op string) bool {
	e := ops.InPlan(op)
	return e != nil && e.PassesSums
}

// sumsOnTerms says why op, which passes sums and reads or writes t, the
// pending terms of a sum, does not compute on pending terms alike, ""
// when it does: every operand and its output hold terms of a sum of t's
// shape along t's device type, and it takes no number as an operand
// (adding one to every term would add it once per term).
func sumsOnTerms(p *Plan, op *Op, t *Tensor, partials map[string]*Tensor) string {
	if op.Scalar != nil {
		return "it takes a number as an operand, which its terms would each add"
	}
	typ, _ := wholeAxisZeroType(p, *t)
	for _, name := range append(op.Operands(), op.Output) {
		if name == t.Name {
			continue
		}
		u, ok := partials[name]
		if !ok {
			return fmt.Sprintf("%q holds no terms: an %s reads and writes terms alike or none", name, op.Op)
		}
		if uTyp, _ := wholeAxisZeroType(p, *u); u.Partial != "sum" || !slices.Equal(u.Shape, t.Shape) || uTyp != typ {
			return fmt.Sprintf("%q does not hold terms of a sum of the same shape along %s: an %s reads and writes terms alike or none", name, typ, op.Op)
		}
	}
	return ""
}

// pendingWriter says why op cannot leave its output as pending terms of
// r, "" when it can: a contraction's partial products are terms of a sum,
// a reduction's of its own op.
func pendingWriter(op *Op, r string) string {
	switch {
	case isContraction(op.Op) && r == "sum", isReductionOp(op.Op) && r == op.Op:
		return ""
	case isContraction(op.Op) || isReductionOp(op.Op):
		return fmt.Sprintf("%s leaves terms that combine with %s, not %s", op.Op, termsOp(op.Op, isContraction(op.Op)), r)
	}
	return fmt.Sprintf("only a contraction or a reduction leaves pending terms, not %s", op.Op)
}

// termsOp is the op a contraction's (sum) or a reduction's terms combine with.
func termsOp(op string, contraction bool) string {
	if contraction {
		return "sum"
	}
	return op
}
