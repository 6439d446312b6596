package plan

import (
	"fmt"
	"strings"

	"github.com/nvcomm/nvcomm/internal/ops"
)

// This file checks the computing local steps, Matmul and Pointwise, which
// implement the layer ops on flat buffers (docs/plan.md, "Step
// semantics").

// The functions a Pointwise may apply are the registry's elementwise ops
// and copy (ops.PointwiseFuncs).

// checkComputeFields checks that only a Pointwise has func and input_dims,
// and only a Matmul broadcast_b and transpose_b.
func (v *validator) checkComputeFields(i int, s *Step) {
	if s.Func != nil && s.Type != Pointwise {
		v.stepf(i, "func is set, but only a Pointwise takes one")
	}
	if s.Scalar != nil && s.Type != Pointwise {
		v.stepf(i, "scalar is set, but only a Pointwise takes one")
	}
	if len(s.InputDims) > 0 && s.Type != Pointwise {
		v.stepf(i, "input_dims is set, but only a Pointwise takes them")
	}
	if s.BroadcastB && s.Type != Matmul {
		v.stepf(i, "broadcast_b is set, but only a Matmul takes it")
	}
	if s.TransposeB && s.Type != Matmul {
		v.stepf(i, "transpose_b is set, but only a Matmul takes it")
	}
}

// checkMatmul checks a Matmul: two inputs, dims [Bt, M, K, N] of positive
// extents that count Bt·M·K elements in and Bt·M·N out.
func (v *validator) checkMatmul(i int, s *Step) {
	if n := len(s.Operands()); n != 2 {
		v.stepf(i, "a Matmul reads 2 buffers (inputs [A, B]), got %d", n)
	}
	if len(s.Dims) != 4 || !positive(s.Dims) {
		v.stepf(i, "dims %v are not [Bt, M, K, N], four positive extents", s.Dims)
		return
	}
	bt, m, k, n := s.Dims[0], s.Dims[1], s.Dims[2], s.Dims[3]
	in, okIn := product([]int{bt, m, k})
	out, okOut := product([]int{bt, m, n})
	if _, okB := product([]int{bt, k, n}); !okIn || !okOut || !okB {
		v.stepf(i, "dims %v hold more elements than an int counts", s.Dims)
		return
	}
	if s.Count.Input != in {
		v.stepf(i, "count.input is %d, want Bt·M·K = %d (dims %v)", s.Count.Input, in, s.Dims)
	}
	if s.Count.Output != out {
		v.stepf(i, "count.output is %d, want Bt·M·N = %d (dims %v)", s.Count.Output, out, s.Dims)
	}
}

// checkPointwise checks a Pointwise: a known func with its number of
// inputs, positive dims, one input_dims per input that broadcasts to dims,
// and counts of the first input's and the output's elements.
func (v *validator) checkPointwise(i int, s *Step) {
	if s.Func == nil {
		v.stepf(i, "a Pointwise needs a func (one of %s)", strings.Join(ops.PointwiseFuncs(), ", "))
		return
	}
	f := ops.Func(*s.Func)
	if f == nil {
		v.stepf(i, "func %q is not one of %s", *s.Func, strings.Join(ops.PointwiseFuncs(), ", "))
		return
	}
	if msg := scalarProblem(*s.Func, s.Scalar); msg != "" {
		v.stepf(i, "scalar: %s", msg)
		return
	}
	arity, _ := f.Arity()
	if n := len(s.Operands()) + scalarCount(s.Scalar); n != arity {
		v.stepf(i, "func %s takes %s, got %d", *s.Func, f.ArityText(), n)
		return
	}
	for k, d := range s.Dims {
		if d < 1 {
			v.stepf(i, "dims[%d] is %d, want >= 1", k, d)
			return
		}
	}
	if !v.checkInputDims(i, s) {
		return
	}
	in, okIn := product(s.InputDims[0])
	out, okOut := product(s.Dims)
	switch {
	case !okIn || !okOut:
		v.stepf(i, "dims %v hold more elements than an int counts", s.Dims)
		return
	case s.Count.Input != in:
		v.stepf(i, "count.input is %d, want %d (the product of input_dims[0] %v)", s.Count.Input, in, s.InputDims[0])
	}
	if s.Count.Output != out {
		v.stepf(i, "count.output is %d, want %d (the product of dims %v)", s.Count.Output, out, s.Dims)
	}
}

// checkInputDims checks that a Pointwise has one input_dims per input,
// each of dims' rank with every extent dims' or 1, and reports whether it
// does.
func (v *validator) checkInputDims(i int, s *Step) bool {
	if n := len(s.Operands()); len(s.InputDims) != n {
		v.stepf(i, "input_dims has %d entries for %d inputs", len(s.InputDims), n)
		return false
	}
	for k, d := range s.InputDims {
		if msg := broadcastsTo(d, s.Dims); msg != "" {
			v.stepf(i, "input_dims[%d] %v does not broadcast to dims %v: %s", k, d, s.Dims, msg)
			return false
		}
	}
	return true
}

// broadcastsTo says why dims d do not broadcast to dims: another rank, or
// an extent that is neither dims' nor 1; "" when they do.
func broadcastsTo(d, dims []int) string {
	if len(d) != len(dims) {
		return fmt.Sprintf("%d dims, want %d", len(d), len(dims))
	}
	for k, e := range d {
		if e != dims[k] && e != 1 {
			return fmt.Sprintf("dim %d is %d, neither %d nor 1", k, e, dims[k])
		}
	}
	return ""
}
