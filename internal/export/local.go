package export

import (
	"fmt"
	"slices"
	"strings"

	"github.com/nvcomm/nvcomm/internal/plan"
)

// block writes one planned block.
func (g *gen) block(b planned) error {
	if err := g.blockOnly(b); err != nil {
		return err
	}
	if g.graph && !g.async(&g.p.Steps[b.steps[0]]) {
		g.localEvent(b)
	}
	return nil
}

// blockOnly writes one planned block's statements.
func (g *gen) blockOnly(b planned) error {
	s := &g.p.Steps[b.steps[0]]
	switch b.kind {
	case permuteUnpad:
		u := &g.p.Steps[b.steps[1]]
		g.unpad(b, s.Input, u, s.Dims, s.Perm)
	case permuteSlice:
		g.permuteSlice(b, s, &g.p.Steps[b.steps[1]])
	case padPermute:
		q := &g.p.Steps[b.steps[1]]
		g.pad(b, s, q.Output, permuted(q.Dims, q.Perm), inverse(q.Perm))
	case permuteMatmul:
		return g.matmul(b, &g.p.Steps[b.steps[1]], s)
	default:
		return g.step(b, s)
	}
	return nil
}

// step writes a block of one step.
func (g *gen) step(b planned, s *plan.Step) error {
	if s.Kind == plan.KindCollective {
		return g.collective(b, s)
	}
	switch s.Type {
	case plan.Copy:
		g.comment(b, "a copy")
		g.copyStep(b, s)
	case plan.Permute:
		g.permute(b, s)
	case plan.Slice:
		g.slice(b, s)
	case plan.Pad:
		g.pad(b, s, s.Output, s.Dims, iota(len(s.Dims)))
	case plan.Unpad:
		g.unpad(b, s.Input, s, s.Dims, iota(len(s.Dims)))
	case plan.LocalReduce:
		g.localReduce(b, s)
	case plan.Matmul:
		return g.matmul(b, s, nil)
	case plan.Pointwise:
		return g.pointwise(b, s)
	case plan.Lookup:
		return g.lookup(b, s)
	case plan.ScatterAdd:
		return g.scatterAdd(b, s)
	case plan.Tril:
		return g.tril(b, s)
	case plan.Concat:
		g.concat(b, s)
	case plan.Scatter, plan.Gather, plan.Allgather, plan.Broadcast, plan.Reduce, plan.Allreduce,
		plan.ReduceScatter, plan.SendRecv, plan.AllToAll, plan.AllToAllV:
		return g.collective(b, s)
	default:
		return fmt.Errorf("step %d: unknown step type %q", s.ID, s.Type)
	}
	return nil
}

// record adds the block with its pass over memory.
func (g *gen) record(b planned, pass string, elements int64, kernels int) {
	g.blocks = append(g.blocks, Block{Steps: b.steps, Pass: pass, Elements: elements, Kernels: kernels})
}

func (g *gen) copyStep(b planned, s *plan.Step) {
	done := g.guard(s.Devices)
	conv := ".clone()"
	if dt := g.dtype[s.Output]; dt != g.dtype[s.Input] && dt != "" {
		conv = ".to(" + torchDTypes[dt] + ")" // a cast's: a copy in the output's dtype
	}
	g.w.line("%s = %s%s", g.names[s.Output], g.names[s.Input], conv)
	done()
	g.alloc(s.Output, s.Devices)
	g.record(b, "copy", 2*int64(s.Count.Input), 1)
}

// permute writes a Permute: torch.cat of the input's chunks along the
// dim the first moves to, where that is the permutation (cat reads
// contiguous chunks: on an H200 as fast as a copy, where a copy from the
// permuted view runs at two thirds of that), else a copy from the
// permuted view.
func (g *gen) permute(b planned, s *plan.Step) {
	dims, perm := canonPermute(s.Dims, s.Perm)
	x, y := g.names[s.Input], g.names[s.Output]
	n := s.Count.Input
	done := g.guard(s.Devices)
	defer g.alloc(s.Output, s.Devices)
	defer done()
	if a, q, ok := catDim(dims, perm); ok {
		g.comment(b, "the chunks of "+x+" concatenated: one pass")
		g.w.line("%s = %s", y, g.empty(s.Output, n))
		g.w.line("torch.cat(%s.view(%s).unbind(%d), dim=%d, out=%s.view(%s))", x, ints(dims), a, q, y, ints(catShape(dims, perm, q)))
		pass := "copy" // contiguous chunks
		if a > 0 {
			pass = "strided"
		}
		g.record(b, pass, 2*int64(n), 1)
		return
	}
	if isIdentity(perm) {
		g.comment(b, "the order does not change: a copy")
		g.w.line("%s = %s.clone()", y, x)
		g.record(b, "copy", 2*int64(n), 1)
		return
	}
	g.comment(b, "one copy from the permuted view")
	g.w.line("%s = %s", y, g.empty(s.Output, n))
	g.w.line("%s.view(%s).copy_(%s.view(%s).permute(%s))", y, ints(permuted(dims, perm)), x, ints(dims), ints(perm))
	g.record(b, "strided", 2*int64(n), 1)
}

// canonPermute drops the dims of extent 1 from a permutation and merges
// the dims that stay next to each other: [2, 1, 8, 6] by [2, 0, 1, 3] is
// [2, 48] by [1, 0].
func canonPermute(dims, perm []int) ([]int, []int) {
	var runs [][]int // runs of input dims, in output order
	for _, d := range perm {
		if dims[d] == 1 {
			continue
		}
		if n := len(runs); n > 0 && runs[n-1][len(runs[n-1])-1] == d-1 {
			runs[n-1] = append(runs[n-1], d)
			continue
		}
		if n := len(runs); n > 0 && onesBetween(dims, runs[n-1][len(runs[n-1])-1], d) {
			runs[n-1] = append(runs[n-1], d)
			continue
		}
		runs = append(runs, []int{d})
	}
	byInput := slices.Clone(runs)
	slices.SortFunc(byInput, func(a, b []int) int { return a[0] - b[0] })
	outDims := make([]int, len(byInput))
	for i, r := range byInput {
		outDims[i] = 1
		for _, d := range r {
			outDims[i] *= dims[d]
		}
	}
	outPerm := make([]int, len(runs))
	for k, r := range runs {
		outPerm[k] = slices.IndexFunc(byInput, func(x []int) bool { return x[0] == r[0] })
	}
	return outDims, outPerm
}

// onesBetween reports whether every dim strictly between a and b (a < b)
// has extent 1, so that b follows a in memory.
func onesBetween(dims []int, a, b int) bool {
	if b <= a {
		return false
	}
	for d := a + 1; d < b; d++ {
		if dims[d] != 1 {
			return false
		}
	}
	return true
}

// catDim reports whether a permutation moves one dim, a, of at most 16
// chunks (torch.cat of many small chunks is slower than one copy), to a
// position q that is not the last: then it is torch.cat of the input's
// chunks along a, concatenated along output dim q with the dim after it. Chunks along dim 0 (contiguous) are preferred: on an H200 their
// cat runs at a copy's rate, strided chunks about 25% slower, still faster
// than a copy from the permuted view.
func catDim(dims, perm []int) (a, q int, ok bool) {
	if len(perm) < 3 {
		return 0, 0, false
	}
	for a := range dims {
		if dims[a] > 16 {
			continue
		}
		rest := slices.DeleteFunc(iota(len(perm)), func(d int) bool { return d == a })
		for q := 0; q+1 < len(perm); q++ {
			if slices.Equal(perm, slices.Insert(slices.Clone(rest), q, a)) && q != a {
				return a, q, true
			}
		}
	}
	return 0, 0, false
}

// catShape is the output of a Permute seen as torch.cat writes it: dim q
// (the moved one) merged with the dim after it.
func catShape(dims, perm []int, q int) []int {
	out := permuted(dims, perm)
	return slices.Concat(out[:q], []int{out[q] * out[q+1]}, out[q+2:])
}

// slice writes a Slice: a view of the chunk the rank keeps, no copy (of a
// short input, a rank whose chunk is cut short concatenates what is left
// of it and zeros into a buffer of its own); a strided Slice (dims
// [a, T, b]) copies the rank's a pieces of b elements into one buffer.
func (g *gen) slice(b planned, s *plan.Step) {
	members := slices.Concat(s.Teams...)
	if len(s.Dims) == 3 {
		g.stridedSlice(b, s, members)
		return
	}
	short := s.ShortSlice()
	if short {
		g.comment(b, "a view of the chunk this rank keeps; where the input cuts it short, what is left and zeros")
	} else {
		g.comment(b, "a view of the chunk this rank keeps, no copy")
	}
	done := g.guard(members)
	g.w.line("r = %s", perRank(members, func(d int) string { return fmt.Sprint(teamRank(s.Teams, d)) }))
	m, y := s.Count.Output, g.names[s.Output]
	g.w.line("%s = %s[%d * r:%d * (r + 1)]", y, g.names[s.Input], m, m)
	if short {
		g.w.line("if %s.numel() < %d:", y, m)
		g.w.indent++
		g.w.line("%s = torch.cat([%s, %s.new_zeros(%d - %s.numel())])", y, y, y, m, y)
		g.w.indent--
	}
	done()
	// A short rank's chunk is fresh memory, the others views of the input:
	// as an alias, it is never written in place while the input is read.
	g.alias(s.Output, s.Input, members)
	if short {
		g.record(b, "copy", 2*int64(m), 1)
		return
	}
	g.record(b, "view", 0, 0)
}

// stridedSlice writes a Slice with dims [a, T, b]: rank r keeps [:, r, :]
// of its input viewed so, copied into a buffer of its own.
func (g *gen) stridedSlice(b planned, s *plan.Step, members []int) {
	m, y := s.Count.Output, g.names[s.Output]
	g.comment(b, "this rank's index of the middle dim, copied into one buffer")
	done := g.guard(members)
	g.w.line("r = %s", perRank(members, func(d int) string { return fmt.Sprint(teamRank(s.Teams, d)) }))
	g.w.line("%s = %s", y, g.empty(s.Output, m))
	g.w.line("%s.view(%d, %d).copy_(%s.view(%d, %d, %d)[:, r, :])", y, s.Dims[0], s.Dims[2], g.names[s.Input], s.Dims[0], s.Dims[1], s.Dims[2])
	done()
	g.alloc(s.Output, members)
	g.record(b, "strided", 2*int64(m), 1)
}

// teamRank is d's position in its team.
func teamRank(teams [][]int, d int) int {
	for _, t := range teams {
		if i := slices.Index(t, d); i >= 0 {
			return i
		}
	}
	return -1
}

// permuteSlice writes a Permute whose output only a Slice reads: only the
// chunk the rank keeps is copied, from the permuted view.
func (g *gen) permuteSlice(b planned, p, s *plan.Step) {
	members := slices.Concat(s.Teams...)
	geo, _ := newGeometry(p.Dims, p.Perm, sliceShape(s))
	m := s.Count.Output
	y := g.names[s.Output]
	g.comment(b, "only the chunk this rank keeps, copied from the permuted view")
	done := g.guard(members)
	g.w.line("r = %s", perRank(members, func(d int) string { return fmt.Sprint(teamRank(s.Teams, d)) }))
	g.w.line("%s = %s", y, g.empty(s.Output, m))
	g.w.line("%s", geo.sliceLine(g.names[p.Input], y, m))
	done()
	g.alloc(s.Output, members)
	g.record(b, "strided", 2*int64(m), 1)
}

// digitOf renders digit i of value v in the mixed radix.
func digitOf(v string, radix []int, i int) string {
	below := 1
	for _, e := range radix[i+1:] {
		below *= e
	}
	switch {
	case len(radix) == 1:
		return v
	case i == 0:
		return fmt.Sprintf("%s // %d", v, below)
	case below == 1:
		return fmt.Sprintf("%s %% %d", v, radix[i])
	}
	return fmt.Sprintf("%s // %d %% %d", v, below, radix[i])
}

// localReduce writes a LocalReduce: the input viewed as dims, combined
// over reduce_dims.
func (g *gen) localReduce(b planned, s *plan.Step) {
	x, y := g.names[s.Input], g.names[s.Output]
	view := fmt.Sprintf("%s.view(%s)", x, ints(s.Dims))
	rd := slices.Sorted(slices.Values(s.ReduceDims))
	op := ""
	if s.ReduceOp != nil {
		op = *s.ReduceOp
	}
	g.comment(b, fmt.Sprintf("%s over dims [%s] of [%s]", op, ints(rd), ints(s.Dims)))
	done := g.guard(s.Devices)
	defer g.record(b, "", 0, 0)
	defer g.alloc(s.Output, s.Devices)
	defer done()
	if len(rd) == 0 {
		g.w.line("%s = %s.clone()", y, x)
		return
	}
	dim := fmt.Sprint(rd[0])
	if len(rd) > 1 {
		dim = "(" + ints(rd) + ")"
	}
	c := call{fn: "torch.sum", args: []string{view}, kw: "dim=" + dim}
	switch op {
	case "max", "min":
		c.fn = "torch.a" + op
	case "prod": // torch.prod takes one dim at a time: a chain of methods
		c = call{args: []string{view}}
		for _, d := range slices.Backward(rd) {
			c.method += fmt.Sprintf(".prod(dim=%d)", d)
		}
	}
	g.w.line("%s = %s.view(-1)", y, g.render(c, g.dtype[s.Output], op))
}

// call is a torch call: fn(args..., kw), or, with method, the methods
// applied to the one argument.
type call struct {
	fn     string
	args   []string
	kw     string
	method string
}

// render writes a call, through the exact helper where the device may
// have no kernel for the dtype: integer matmuls on CUDA, float16 (and a
// bfloat16 prod) on older CPUs. The helper then runs it in float64 and
// rounds back once, as the dtype's own kernel rounds.
func (g *gen) render(c call, dtype, what string) string {
	args := slices.Clone(c.args)
	if c.kw != "" {
		args = append(args, c.kw)
	}
	fn := c.fn
	if !(dtype == "float16" || strings.HasPrefix(dtype, "int") || dtype == "bfloat16" && what == "prod") {
		if c.method != "" {
			return c.args[0] + c.method
		}
		return fn + "(" + strings.Join(args, ", ") + ")"
	}
	if c.method != "" {
		fn = "lambda v: v" + c.method
	}
	g.helpers["exact"] = true
	return "exact(" + strings.Join(append([]string{fn}, args...), ", ") + ")"
}

// concat writes a Concat: torch.cat of each input's window, the input
// viewed [outer, m, inner] and cut along the middle dim, into the output
// viewed [outer, N, inner]: one pass, rows of windows apart.
func (g *gen) concat(b planned, s *plan.Step) {
	outer, inner := s.Dims[0], s.Dims[2]
	parts := make([]string, len(s.Windows))
	for k, name := range s.Operands() {
		w := s.Windows[k]
		parts[k] = fmt.Sprintf("%s.view(%d, %d, %d)[:, %d:%d]", g.names[name], outer, w[0], inner, w[1], w[1]+w[2])
	}
	y := g.names[s.Output]
	done := g.guard(s.Devices)
	g.comment(b, "the inputs' windows joined along the middle dim: one pass")
	g.w.line("%s = %s", y, g.empty(s.Output, s.Count.Output))
	g.w.line("torch.cat([%s], dim=1, out=%s.view(%s))", strings.Join(parts, ", "), y, ints(s.Dims))
	done()
	g.alloc(s.Output, s.Devices)
	g.record(b, "strided", 2*int64(s.Count.Output), 1)
}
