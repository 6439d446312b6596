package export

import (
	"fmt"
	"slices"

	"github.com/nvcomm/nvcomm/internal/ops"
	"github.com/nvcomm/nvcomm/internal/plan"
)

// matmul writes a Matmul: A viewed [Bt, M, K] (or [M, K] for one batch)
// times B viewed [Bt, K, N] (or [K, N], for one batch or broadcast over
// them). B stored [.., N, K] (transpose_b, or the input of a Permute fused
// into the Matmul) is read through its transposed view: cuBLAS reads it in
// place.
func (g *gen) matmul(b planned, s, perm *plan.Step) error {
	if len(s.Dims) != 4 || len(s.Inputs) != 2 {
		return fmt.Errorf("step %d (Matmul): needs inputs [A, B] and dims [Bt, M, K, N]", s.ID)
	}
	bt, m, k, n := s.Dims[0], s.Dims[1], s.Dims[2], s.Dims[3]
	a, bb := g.names[s.Inputs[0]], g.names[s.Inputs[1]]
	transposed := s.TransposeB
	what := "A @ B"
	if perm != nil {
		bb, transposed = g.names[perm.Input], true
		what = "A @ B, B read transposed from the Permute's input in place (no copy)"
	}
	aView := fmt.Sprintf("%s.view(%d, %d, %d)", a, bt, m, k)
	if bt == 1 {
		aView = fmt.Sprintf("%s.view(%d, %d)", a, m, k)
	}
	var bView string
	switch {
	case (s.BroadcastB || bt == 1) && transposed:
		bView = fmt.Sprintf("%s.view(%d, %d).t()", bb, n, k)
	case s.BroadcastB || bt == 1:
		bView = fmt.Sprintf("%s.view(%d, %d)", bb, k, n)
	case transposed:
		bView = fmt.Sprintf("%s.view(%d, %d, %d).transpose(1, 2)", bb, bt, n, k)
	default:
		bView = fmt.Sprintf("%s.view(%d, %d, %d)", bb, bt, k, n)
	}
	g.comment(b, what)
	done := g.guard(s.Devices)
	c := call{fn: "torch.matmul", args: []string{aView, bView}}
	g.w.line("%s = %s.view(-1)", g.names[s.Output], g.render(c, g.dtype[s.Output], "matmul"))
	done()
	g.alloc(s.Output, s.Devices)
	g.record(b, "", 0, 0)
	return nil
}

// pointwise writes a Pointwise: the function of its inputs viewed as
// their input_dims, broadcast to dims as torch broadcasts; inputs of the
// output's dims are read flat.
func (g *gen) pointwise(b planned, s *plan.Step) error {
	ins := s.Operands()
	f := ops.Func(deref(s.Func))
	if f == nil || !f.TakesOperands(len(ins)+len(s.Scalar.Args(nil))) || len(s.InputDims) != len(ins) {
		return fmt.Errorf("step %d (Pointwise): func %q does not take %d inputs", s.ID, deref(s.Func), len(ins))
	}
	flat := true
	for _, d := range s.InputDims {
		flat = flat && slices.Equal(d, s.Dims)
	}
	args := make([]string, len(ins))
	shape := make([]int, len(s.Dims))
	for i, in := range ins {
		args[i] = g.names[in]
		if !flat {
			args[i] += ".view(" + ints(s.InputDims[i]) + ")"
		}
		for d, e := range s.InputDims[i] {
			shape[d] = max(shape[d], e)
		}
	}
	expr := args[0]
	if f.Torch.Func != "" {
		// A number operand is a Python float literal, which torch
		// broadcasts as torch's v + 1e-5 does.
		expr = g.render(call{fn: f.Torch.Func, args: s.Scalar.Args(args)}, g.dtype[s.Output], deref(s.Func))
	}
	switch {
	case !slices.Equal(shape, s.Dims):
		expr += ".expand(" + ints(s.Dims) + ").contiguous().view(-1)"
	case f.Torch.Func == "":
		expr += ".clone()"
		if !flat {
			expr += ".view(-1)"
		}
	case !flat:
		expr += ".view(-1)"
	}
	g.comment(b, deref(s.Func))
	done := g.guard(s.Devices)
	g.w.line("%s = %s", g.names[s.Output], expr)
	done()
	g.alloc(s.Output, s.Devices)
	g.record(b, "", 0, 0)
	return nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
