package ops

import "strconv"

// The rules of the ops that move data along one axis, slice and cat,
// are data movement too: cat's gradient is the upstream gradient cut
// back into its operands' windows, slice's the upstream gradient put
// back into its window of the input with zeros around it.

// gradSlice is slice's rule (slice.Tensor: slice_backward(grad,
// input_sizes, dim, start, end, step), the gradient written into a
// tensor of zeros of the input's shape): dx = cat(zeros, dy, zeros)
// along the axis. The zeros are the input's entries before and after
// the window times 0 — exact in every arithmetic, and of the input's
// sharding off the axis, so no new tensor needs a mesh or a placement.
func gradSlice(g *GradIn) ([]ExpandStep, []Ref, *ExpandError) {
	b := newGrad(g)
	if !g.Need[0] {
		return b.result()
	}
	ax, n := g.Attrs.Axis, g.In[0][g.Attrs.Axis]
	start, end := g.Attrs.Values.Int(AttrStart), g.Attrs.Values.Int(AttrEnd)
	parts := []Ref{g.DY()}
	if start > 0 {
		parts = append([]Ref{b.zerosOf("dx_before", 0, ax, 0, start)}, parts...)
	}
	if end < n {
		parts = append(parts, b.zerosOf("dx_after", 0, ax, end, n))
	}
	if len(parts) == 1 {
		b.grads[0] = g.DY() // the whole axis: the slice is a copy
		return b.result()
	}
	b.grads[0] = b.add(ExpandStep{Name: "dx", Op: "cat", In: parts, Axis: ax})
	return b.result()
}

// zerosOf is a tensor of zeros of x's shape with entries start to end
// along axis: x's window there, times 0.
func (b *gradBuilder) zerosOf(name string, x Ref, axis, start, end int) Ref {
	w := b.slice(name+"_slice", x, axis, start, end)
	return b.withScalar(name, "mul", w, 0)
}

// slice is x's entries start to end along axis.
func (b *gradBuilder) slice(name string, x Ref, axis, start, end int) Ref {
	return b.add(ExpandStep{Name: name, Op: "slice", In: []Ref{x}, Axis: axis,
		Values: Values{{Key: AttrStart, Int: start}, {Key: AttrEnd, Int: end}}})
}

// gradCat is cat's rule (cat: cat_tensors_backward, grad.narrow along
// dim for each operand): operand k's gradient is dy's entries in its
// window along the axis.
func gradCat(g *GradIn) ([]ExpandStep, []Ref, *ExpandError) {
	b := newGrad(g)
	ax, off := g.Attrs.Axis, 0
	for k, in := range g.In {
		if g.Need[k] {
			b.grads[k] = b.slice("d"+strconv.Itoa(k), g.DY(), ax, off, off+in[ax])
		}
		off += in[ax]
	}
	return b.result()
}
