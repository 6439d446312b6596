package sim

import (
	"fmt"
	"slices"

	"github.com/nvcomm/nvcomm/internal/plan"
)

// This file checks a pipeline's plan against the whole batch's program
// (docs/pipeline.md): the micro-batches' programs, run on blocks of the
// whole program's inputs, must give blocks of its tensors, and the sums
// over the batch (the weights' accumulated gradients) its sums.

// microbatchSep separates a tensor's name from its micro-batch in a
// pipeline's plan: y@mb2 is y of micro-batch 2.
const microbatchSep = "@mb"

// ProgramCheck is what a comparison of two programs compared.
type ProgramCheck struct {
	// Compared counts the tensors compared: for CheckMicrobatches, the
	// whole program's whose micro-batches' copies are blocks of one of
	// their dims, and those both programs have; for CheckSameProgram,
	// those both programs have.
	Compared int
	// Differ names the tensors whose values differ, in the first plan's
	// order.
	Differ []string
}

// MicrobatchCheck is what CheckMicrobatches compared.
type MicrobatchCheck = ProgramCheck

// CheckSameProgram runs the unsharded programs of written, a fusion's
// plan with every reduction where the file puts it, and p, the plan of
// the same fusion with its sums computed late (docs/fusion.md), on the
// same inputs, simulate's under seed: every tensor both name must hold
// the same values (a tensor of pending terms is compared by its values,
// which its reference holds). The plans' steps are not run: Run proves
// each plan's steps against its own program.
func CheckSameProgram(written, p *plan.Plan, seed uint64) (*ProgramCheck, error) {
	want, err := Reference(written, seed, nil)
	if err != nil {
		return nil, err
	}
	got, err := Reference(p, seed, want)
	if err != nil {
		return nil, err
	}
	c := &ProgramCheck{}
	for i := range written.Tensors {
		name := written.Tensors[i].Name
		if v, ok := got[name]; ok {
			c.compare(name, v, want[name])
		}
	}
	return c, nil
}

// CheckMicrobatches runs the unsharded programs of whole, a fusion's
// plan, and micro, the plan of the same fusion with a pipeline section
// (its ops once per micro-batch), on the same data: whole's inputs as
// simulate fills them under seed, micro's copy t@mbK of an input t the
// K-th of m equal blocks of t along the one dim where their shapes
// differ. Each tensor of whole must then be its copies concatenated
// along that dim, or equal its namesake in micro.
func CheckMicrobatches(whole, micro *plan.Plan, seed uint64) (*MicrobatchCheck, error) {
	if micro.Pipeline == nil {
		return nil, fmt.Errorf("plan %q has no pipeline", micro.Fusion)
	}
	m := micro.Pipeline.Microbatches
	ref, err := Reference(whole, seed, nil)
	if err != nil {
		return nil, err
	}
	shapes := make(map[string][]int, len(micro.Tensors))
	for i := range micro.Tensors {
		shapes[micro.Tensors[i].Name] = valuesShape(&micro.Tensors[i])
	}
	inputs := map[string][]float64{}
	for i := range whole.Tensors {
		t := &whole.Tensors[i]
		v, ok := ref[t.Name]
		if !ok {
			continue
		}
		if _, same := shapes[t.Name]; same {
			inputs[t.Name] = v
			continue
		}
		full := valuesShape(t)
		for k := range m {
			name := fmt.Sprintf("%s%s%d", t.Name, microbatchSep, k)
			if d := blockDim(full, shapes[name], m); d >= 0 {
				inputs[name] = block(v, full, d, m, k)
			}
		}
	}
	got, err := Reference(micro, seed, inputs)
	if err != nil {
		return nil, err
	}
	c := &MicrobatchCheck{}
	for i := range whole.Tensors {
		t := &whole.Tensors[i]
		want := ref[t.Name]
		if v, ok := got[t.Name]; ok {
			c.compare(t.Name, v, want)
			continue
		}
		full := valuesShape(t)
		d := blockDim(full, shapes[t.Name+microbatchSep+"0"], m)
		if d < 0 {
			continue
		}
		cat := make([]float64, 0, len(want))
		for k := range m {
			cat = append(cat, got[fmt.Sprintf("%s%s%d", t.Name, microbatchSep, k)]...)
		}
		if d > 0 {
			cat = interleave(cat, full, d, m)
		}
		c.compare(t.Name, cat, want)
	}
	return c, nil
}

func (c *ProgramCheck) compare(name string, got, want []float64) {
	c.Compared++
	if !slices.EqualFunc(got, want, func(a, b float64) bool { return a == b || a != a && b != b }) {
		c.Differ = append(c.Differ, name)
	}
}

// valuesShape is t's shape without its reduction axes: what its reference
// holds.
func valuesShape(t *plan.Tensor) []int {
	var s []int
	for i, e := range t.Shape {
		if !slices.Contains(t.ReductionAxes, i) {
			s = append(s, e)
		}
	}
	return s
}

// blockDim is the one dim of full that part cuts into m blocks, its
// other dims whole; -1 when there is none.
func blockDim(full, part []int, m int) int {
	if len(full) != len(part) {
		return -1
	}
	dim := -1
	for d := range full {
		switch {
		case full[d] == part[d]:
		case full[d] == m*part[d] && dim < 0:
			dim = d
		default:
			return -1
		}
	}
	return dim
}

// block is the k-th of m blocks of v, of shape shape, along dim d.
func block(v []float64, shape []int, d, m, k int) []float64 {
	outer, inner := product(shape[:d]), product(shape[d+1:])
	n := shape[d] / m
	out := make([]float64, 0, len(v)/m)
	for o := range outer {
		base := (o*shape[d] + k*n) * inner
		out = append(out, v[base:base+n*inner]...)
	}
	return out
}

// interleave turns the m blocks along dim d, laid one after another in
// cat, into the tensor of shape shape they are blocks of.
func interleave(cat []float64, shape []int, d, m int) []float64 {
	outer, inner := product(shape[:d]), product(shape[d+1:])
	n := shape[d] / m
	out := make([]float64, len(cat))
	size := len(cat) / m
	for k := range m {
		for o := range outer {
			src := k*size + o*n*inner
			copy(out[(o*shape[d]+k*n)*inner:], cat[src:src+n*inner])
		}
	}
	return out
}
