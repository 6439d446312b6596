package lower

import (
	"fmt"
	"slices"

	"github.com/nvcomm/nvcomm/internal/ir"
	"github.com/nvcomm/nvcomm/internal/ops"
	"github.com/nvcomm/nvcomm/internal/plan"
	"github.com/nvcomm/nvcomm/internal/shard"
)

// This file lowers the computing ops (elementwise, broadcast, matmul,
// linear) once insertReshardings has made their operands sharded as their
// output requires: each device computes its block of the output from its
// blocks of the operands with Matmul and Pointwise steps on flat buffers,
// after a Permute where an operand is not stored in the order the step
// reads. The one collective a computing op may have is the sum of a
// contraction whose summed axis is split over devices: each device then
// multiplies its slices of that axis into a partial product, which an
// Allreduce or a ReduceScatter adds up (nvFuser's rFactor, Megatron's
// row-parallel linear).

// lowerComputing lowers c.op, a computing op.
func (c *opCtx) lowerComputing() {
	if y := c.op.Out; y.Combined != nil {
		cp := *c.op
		cp.Out, c.pending, c.op = y.Combined, y, &cp
	}
	op := c.op
	want, ok := BlockShards(op.Out)
	if !ok {
		return // insertReshardings reported it
	}
	c.sumType, c.summed = c.sumDevice()
	if c.summed {
		want = append(want, Split{-1, c.sumType})
	}
	if !c.sliceBroadcasts(want) {
		return
	}
	switch {
	case op.Kind.IsContraction():
		c.contraction()
	case op.Kind.Entry().Family == ops.View:
		c.view()
	default:
		c.pointwise(op.Out.Name, op.Out.Layout())
	}
}

// view emits a permute or a reshape, which moves each device's block of
// its operand into its block of the output without computing: the
// resharding pass has made the operand's splits those of the output's
// dims that share their outermost factors (ops.Rule.OperandSplit), so the
// blocks hold the same elements. A permute is one Permute of the operand
// into the output's order, or a Copy when it is stored so; a reshape
// reads its operand's block row-major as the output's block row-major (a
// Copy), after and before a Permute where either is stored otherwise. A
// cast is a Copy into the output's dtype (cast).
func (c *opCtx) view() {
	op, x, y := c.op, c.op.In(), c.op.Out
	if op.Kind.Entry().Takes(ops.AttrAxis) { // slice, cat: along their axis
		c.concat()
		return
	}
	switch op.Kind {
	case ir.OpPermute:
		if order := operandOrder(op, 0, y.Layout()); !c.permuteInto(x.Name, localDims(x, x.Layout()), x.Layout(), order, y.Name) {
			c.emitCopy(x.Name, y.Name)
		}
	case ir.OpTril:
		c.emitTril()
	case ir.OpCast: // converted in the operand's order, then put in the output's
		c.copyThenPermute(x.Name, localDims(x, x.Layout()), x.Layout(), y.Layout(), "converted")
	default: // a reshape: row-major blocks, the same elements in the same order
		identity := shard.Identity(len(y.Shape()))
		in := c.arranged(0, shard.Identity(len(x.Shape())))
		c.copyThenPermute(in, localDims(y, identity), identity, y.Layout(), "rowmajor")
	}
}

// concat emits a slice or a cat: one Concat of each operand's block, read
// row-major, taking its window along the op's axis (ops.Windows), into
// the output's block row-major, then a Permute where the output is stored
// otherwise. The resharding pass has left the axis whole on every device
// (the rule's NeedReplication factor), so each device's window is the
// op's own, and the blocks agree on every other axis.
func (c *opCtx) concat() {
	op, y := c.op, c.op.Out
	identity := shard.Identity(len(y.Shape()))
	local := y.LocalShape()
	outer, inner := localCount(local[:op.Axis]), localCount(local[op.Axis+1:])
	extents, bufs := make([]int, len(op.Inputs)), make([]string, len(op.Inputs))
	for i, x := range op.Inputs {
		extents[i], bufs[i] = x.LocalShape()[op.Axis], c.arranged(i, identity)
	}
	windows := make([][]int, len(op.Inputs))
	for k, w := range ops.Windows(string(op.Kind), extents, op.Attrs) {
		windows[k] = []int{extents[k], w.Start, w.Len}
	}
	out := y.Name
	if !slices.Equal(y.Layout(), identity) {
		out = c.buffer("joined")
	}
	s := plan.Step{Type: plan.Concat, Output: out, Dims: []int{outer, local[op.Axis], inner}, Windows: windows}
	setInputs(&s, bufs)
	c.emitLocalOn(s, y.Mesh.Devices, outer*extents[0]*inner, localCount(local))
	if out != y.Name {
		c.permuteInto(out, local, identity, y.Layout(), y.Name)
	}
}

// copyThenPermute copies buffer in, the output's local block with dims in
// layout, into the output, through a buffer "out/what" and a Permute
// into the output's order where that differs.
func (c *opCtx) copyThenPermute(in string, dims, layout, order []int, what string) {
	y := c.op.Out.Name
	if slices.Equal(layout, order) {
		c.emitCopy(in, y)
		return
	}
	mid := c.buffer(what)
	c.emitCopy(in, mid)
	c.permuteInto(mid, dims, layout, order, y)
}

// permuteInto emits a Permute of buffer in, dims stored in layout, into
// out with its axes in order, and reports whether it did: not when in is
// stored so already.
func (c *opCtx) permuteInto(in string, dims, layout, order []int, out string) bool {
	if slices.Equal(layout, order) {
		return false
	}
	perm := make([]int, len(order))
	for k, a := range order {
		perm[k] = slices.Index(layout, a)
	}
	c.emitPermute(in, dims, perm, out)
	return true
}

// emitCopy appends a Copy of buffer in into out on the output's devices.
func (c *opCtx) emitCopy(in, out string) {
	n := c.op.Out.LocalSize()
	c.emitLocalOn(plan.Step{Type: plan.Copy, Input: in, Output: out}, c.op.Out.Mesh.Devices, n, n)
}

// sliceBroadcasts checks that every operand is sharded as the output
// requires but for its broadcast axes (broadcast.go), and makes the block
// each device reads of an operand that does not hold it as it is: a local
// Slice of the broadcast axes it holds whole where the output splits them,
// and, for a contraction's factor, a Pointwise copy that repeats a
// broadcast axis of local extent 1 across the block. It then points c.op
// at a copy of the op that reads those blocks. A tensor that two slots
// read alike is made once.
func (c *opCtx) sliceBroadcasts(want []Split) bool {
	op := c.op
	var inputs []*ir.Tensor
	var reads [][]Split // per slot, the splits of the block made for it
	for i, x := range op.Inputs {
		need := OperandShards(op, i, want)
		f, ok := c.bcast.fits(op, i, need)
		if !ok {
			c.fail(fmt.Sprintf("operand %q is not sharded as the output requires", x.Name),
				"this is a bug in nvcomm's resharding pass; please report it with the input")
			return false
		}
		repeat := f.repeated && op.ContractedAxis(i) >= 0
		if len(f.missing) == 0 && !repeat {
			continue
		}
		if inputs == nil {
			inputs, reads = slices.Clone(op.Inputs), make([][]Split, len(op.Inputs))
		}
		have, _ := BlockShards(x)
		reads[i] = slices.Concat(have, f.missing)
		if repeat {
			reads[i] = need
		}
		if k := madeBefore(op.Inputs, reads, i); k >= 0 {
			inputs[i] = inputs[k] // the same tensor, read the same way
			continue
		}
		if inputs[i], ok = c.operandBlock(i, slices.Concat(have, f.missing), repeat, need); !ok {
			return false
		}
	}
	if inputs != nil {
		cp := *op
		cp.Inputs = inputs
		c.op = &cp
	}
	return true
}

// madeBefore returns an earlier slot than i that reads the same tensor
// through a block of the same splits, or -1.
func madeBefore(inputs []*ir.Tensor, reads [][]Split, i int) int {
	for k := range i {
		if inputs[k] == inputs[i] && reads[k] != nil && SameSplits(reads[k], reads[i]) {
			return k
		}
	}
	return -1
}

// operandBlock makes the block of operand i the op reads: sliced (when
// sliced lists more splits than the operand has) to those splits, by a
// local Slice on every device, then, when repeat, copied by a Pointwise
// into the splits need with its broadcast axes of local extent 1
// repeated. No data moves between devices.
func (c *opCtx) operandBlock(i int, sliced []Split, repeat bool, need []Split) (*ir.Tensor, bool) {
	op := c.op
	x := op.Inputs[i]
	src := x
	if have, _ := BlockShards(x); len(sliced) > len(have) {
		t, ok := c.blockTensor(x, fmt.Sprintf("operand%d/sliced", i), sliced)
		if !ok {
			return nil, false
		}
		set := &ir.Op{Index: op.Index, Kind: ir.OpSet, Inputs: []*ir.Tensor{x}, Out: t, Axis: -1, Pos: op.Pos}
		c.job.Slice(set, firstInputAxes(op, i))
		src = t
	}
	if !repeat {
		return src, true
	}
	t, ok := c.blockTensor(x, fmt.Sprintf("operand%d/repeated", i), need)
	if !ok {
		return nil, false
	}
	identity := shard.Identity(len(x.Shape()))
	buf := c.arrangedTensor(src, fmt.Sprintf("operand%d/in", i), identity)
	dims := localDims(t, identity)
	c.emitPointwise(ops.CopyFunc, nil, []string{buf}, [][]int{localDims(src, identity)}, dims, t.Name)
	return t, true
}

// blockTensor describes a row-major copy of x on its mesh with the block
// splits given, named "out/what".
func (c *opCtx) blockTensor(x *ir.Tensor, what string, splits []Split) (*ir.Tensor, bool) {
	t, err := ir.NewTensor(ir.TensorSpec{Name: c.buffer(what), Mesh: x.Mesh, DType: x.DType,
		Shape: x.Shape(), Schedule: BlockSchedule(x.Mesh, splits)})
	if err != nil {
		c.fail(fmt.Sprintf("the block of operand %q it reads cannot be described: %v", x.Name, err), "please report this with the input")
		return nil, false
	}
	return t, true
}

// firstInputAxes maps the axes of operand i to the axes of op's first
// input that the same output axis maps to (-1 where none does), for the
// axis a step names; nil for the first input itself.
func firstInputAxes(op *ir.Op, i int) []int {
	if i == 0 {
		return nil
	}
	m := make([]int, len(op.Inputs[i].Shape()))
	for a := range m {
		m[a] = -1
	}
	for j := range op.Out.Shape() {
		if a := op.InputAxis(i, j); a >= 0 {
			m[a] = op.InputAxis(0, j)
		}
	}
	return m
}

// pointwise emits the Pointwise step of an elementwise op or a broadcast,
// writing buffer out in the output's axis order.
func (c *opCtx) pointwise(out string, order []int) {
	op := c.op
	fn := string(op.Kind)
	if op.Kind == ir.OpBroadcast {
		fn = ops.CopyFunc
	}
	var bufs []string
	var inDims [][]int
	for i := range op.Inputs {
		bufs = append(bufs, c.arranged(i, operandOrder(op, i, order)))
		inDims = append(inDims, operandDims(op, i, order))
	}
	c.emitPointwise(fn, op.Scalar, bufs, inDims, localDims(op.Out, order), out)
}

// emitPointwise appends a Pointwise step on the output's devices; sc is
// the number a binary function takes as an operand, or nil.
func (c *opCtx) emitPointwise(fn string, sc *ops.Scalar, bufs []string, inDims [][]int, dims []int, out string) {
	s := plan.Step{Type: plan.Pointwise, Func: new(fn), Scalar: sc.Clone(), Output: out, Dims: dims, InputDims: inDims}
	setInputs(&s, bufs)
	c.emitLocalOn(s, c.op.Out.Mesh.Devices, localCount(inDims[0]), localCount(dims))
}

// contraction emits a matmul or linear: the local product, the sum of
// partial products when the contracted axis is split over devices, the
// bias, and a Permute when the output is not stored row-major.
func (c *opCtx) contraction() {
	if c.pending != nil {
		c.pendingContraction()
		return
	}
	op, y := c.op, c.op.Out
	identity := shard.Identity(len(y.Shape()))
	bias := op.Kind == ir.OpLinear && len(op.Inputs) == 3
	sumType, split := c.sumType, c.summed
	direct := !bias && !split && slices.Equal(y.Layout(), identity)
	product := y.Name
	if !direct {
		product = c.buffer("product")
	}
	c.emitProduct(product)
	if split {
		product = c.sumPartials(product, sumType, bias)
	}
	if bias {
		product = c.addBias(product, slices.Equal(y.Layout(), identity))
	}
	if product != y.Name {
		c.emitPermute(product, localDims(y, identity), y.Layout(), y.Name)
	}
}

// pendingContraction emits a contraction whose output holds pending
// terms: each device's partial product over its slice of k is its term,
// written straight into the output, which stores [1, ...values] row-major.
// A bias would be added once per term, and an output stored in another
// order would need a Permute of the terms: neither is lowered yet.
func (c *opCtx) pendingContraction() {
	y := c.pending
	switch {
	case c.op.Kind == ir.OpLinear && len(c.op.Inputs) == 3:
		c.fail(fmt.Sprintf("%q holds pending terms, and linear's bias would be added to every term", y.Name),
			"leave the bias out of the linear and add it after the terms are reduced, or declare the output Replicate() or Shard(d)")
	case !slices.Equal(y.Layout(), shard.Identity(len(y.Shape()))):
		c.fail(fmt.Sprintf("%q holds pending terms stored in another order than row-major", y.Name),
			"leave out its allocation")
	default:
		c.emitProduct(y.Name)
	}
}

// pendingReduction emits a reduction whose output y holds pending terms:
// each device combines its slice of the reduced axis, a LocalReduce of its
// block into its term. insertReshardings has made its operand hold the
// slices the terms are of, stored row-major (termsOperand).
func (c *opCtx) pendingReduction() {
	op, y, x := c.op, c.op.Out, c.op.In()
	need, ok := termsOperand(op)
	have, xok := BlockShards(x)
	switch {
	case !ok || !xok || !SameSplits(have, need):
		c.fail(fmt.Sprintf("%q holds pending terms, and its operand %q is not split as they are", y.Name, x.Name),
			"this is a bug in nvcomm's resharding pass; please report it with the input")
	case !slices.Equal(y.Layout(), shard.Identity(len(y.Shape()))):
		c.fail(fmt.Sprintf("%q holds pending terms stored in another order than row-major", y.Name), "leave out its allocation")
	default:
		dims := x.LocalShape()
		s := plan.Step{Type: plan.LocalReduce, ReduceOp: new(string(op.Kind)), Input: x.Name, Output: y.Name, Dims: dims, ReduceDims: []int{op.Axis}}
		c.emitLocalOn(s, y.Mesh.Devices, localCount(dims), localCount(y.LocalShape()))
	}
}

// termsOperand returns the splits the operand of a reduction whose output
// holds pending terms must have: its reduced axis along the terms' device
// type, its others as the output's values.
func termsOperand(op *ir.Op) ([]Split, bool) {
	want, ok := BlockShards(op.Out)
	var need []Split
	for _, s := range want {
		switch {
		case s.Axis == 0:
			need = append(need, Split{op.Axis, s.Type})
		case s.Axis-1 < op.Axis:
			need = append(need, Split{s.Axis - 1, s.Type})
		default:
			need = append(need, Split{s.Axis, s.Type})
		}
	}
	return need, ok
}

// sumDevice returns the device type over which c.op sums partial
// products: the one that splits its output's summed axis, unless the
// optimal policy gathers its operands, or the one the optimal policy
// chose.
func (c *opCtx) sumDevice() (ir.ParallelType, bool) {
	if t, ok := ContractedDevice(c.op.Out); ok && !c.gathered[c.op] {
		return t, true
	}
	t, ok := c.sumTypes[c.op]
	return t, ok
}

// emitProduct appends the local step of c.op, a contraction, into
// buffer out: a Lookup for a lookup, a ScatterAdd for a scatter, else a
// Matmul.
func (c *opCtx) emitProduct(out string) {
	switch e := c.op.Kind.Entry(); {
	case e.Indexed != nil:
		c.emitLookup(out)
		return
	case e.Scatters != nil:
		c.emitScatter(out)
		return
	}
	c.emitMatmul(out)
}

// emitMatmul appends the Matmul step of c.op into buffer out: row-major
// [Bt, M, N] from A [Bt, M, K] and B [Bt, K, N] (or [K, N] for every batch).
func (c *opCtx) emitMatmul(out string) {
	op := c.op
	a, b := op.Inputs[0], op.Inputs[1]
	la, lb := a.LocalShape(), b.LocalShape()
	ra, rb := len(la), len(lb)
	var bt, m, k, n int
	if op.Kind == ir.OpMatmul {
		bt, m, k, n = localCount(la[:ra-2]), la[ra-2], la[ra-1], lb[rb-1]
	} else {
		bt, m, k, n = 1, localCount(la[:ra-1]), la[ra-1], lb[0]
	}
	// linear's w is [n, k]: the step reads it transposed, in place.
	s := plan.Step{Type: plan.Matmul, Output: out, Dims: []int{bt, m, k, n}, BroadcastB: rb == 2 && bt > 1, TransposeB: op.Kind == ir.OpLinear}
	setInputs(&s, []string{c.arranged(0, shard.Identity(ra)), c.arranged(1, shard.Identity(rb))})
	c.emitLocalOn(s, op.Out.Mesh.Devices, bt*m*k, bt*m*n)
}

// sumPartials adds up the partial products in buffer partial, one per
// device along t, with the planner's lowering of a Partial tensor's set:
// an Allreduce, or a ReduceScatter when the output is split along t too.
// It returns the buffer that holds the sum: the output, or an
// intermediate when a bias is still to be added.
func (c *opCtx) sumPartials(partial string, t ir.ParallelType, bias bool) string {
	op, y := c.op, c.op.Out
	want, _ := BlockShards(y)
	p, err := partialProducts(partial, y, t)
	if err != nil {
		c.fail(fmt.Sprintf("its partial products cannot be described: %v", err), "please report this with the input")
		return y.Name
	}
	sum := y
	if bias {
		if sum, err = ir.NewTensor(ir.TensorSpec{Name: c.buffer("sum"), Mesh: y.Mesh, DType: y.DType, Shape: y.Shape(), Schedule: BlockSchedule(y.Mesh, want)}); err != nil {
			c.fail(fmt.Sprintf("its sum cannot be described: %v", err), "please report this with the input")
			return y.Name
		}
	}
	sumOp := &ir.Op{Index: op.Index, Kind: ir.OpSum, Inputs: []*ir.Tensor{p}, Out: sum, Axis: 0, Pos: op.Pos}
	c.job.Reshard(sumOp, partialAxes(op, len(y.Shape())))
	return sum.Name
}

// partialProducts describes buffer name, the partial products of a
// contraction's output y over the devices along t: [terms, ...y's axes],
// the terms split along t, y's axes as y's other splits.
func partialProducts(name string, y *ir.Tensor, t ir.ParallelType) (*ir.Tensor, error) {
	want, _ := BlockShards(y)
	var terms []Split
	for _, s := range want {
		if s.Type != t {
			terms = append(terms, Split{s.Axis + 1, s.Type})
		}
	}
	return ir.NewTensor(ir.TensorSpec{Name: name, Mesh: y.Mesh, DType: y.DType,
		Shape:    append([]int{y.Mesh.Size(t)}, y.Shape()...),
		Schedule: append(BlockSchedule(y.Mesh, terms), ir.ScheduleStep{Kind: ir.StepParallelize, Axis: 0, Type: t})})
}

// partialAxes maps the axes of op's partial products ([terms, ...output])
// to its first operand's, for the axis the sum's collective names: the
// terms are its contracted axis.
func partialAxes(op *ir.Op, rank int) []int {
	m := []int{op.ContractedAxis(0)}
	for j := range rank {
		m = append(m, max(op.InputAxis(0, j), 0))
	}
	return m
}

// addBias adds linear's bias to the row-major product in buffer in, into
// the output when it is stored row-major, else into an intermediate.
func (c *opCtx) addBias(in string, rowMajor bool) string {
	op, y := c.op, c.op.Out
	order := shard.Identity(len(y.Shape()))
	out := y.Name
	if !rowMajor {
		out = c.buffer("biased")
	}
	dims := localDims(y, order)
	c.emitPointwise(string(ir.OpAdd), nil, []string{in, op.Inputs[2].Name}, [][]int{dims, operandDims(op, 2, order)}, dims, out)
	return out
}

// emitPermute appends a Permute of buffer in, row-major dims, into out with
// output dimension k = input dimension perm[k].
func (c *opCtx) emitPermute(in string, dims, perm []int, out string) {
	s := plan.Step{Type: plan.Permute, Input: in, Output: out, Dims: dims, Perm: slices.Clone(perm)}
	c.emitLocalOn(s, c.op.Out.Mesh.Devices, localCount(dims), localCount(dims))
}

// arranged returns the name of a buffer holding operand i's local block
// with its axes in order: the operand itself when it is stored so, else a
// Permute of it into "out/operandI".
func (c *opCtx) arranged(i int, order []int) string {
	return c.arrangedTensor(c.op.Inputs[i], fmt.Sprintf("operand%d", i), order)
}

// arrangedTensor returns the name of a buffer holding x's local block with
// its axes in order: x itself when it is stored so — or stored in an
// order that differs only in where axes of local extent 1 go, which moves
// no element (a row statistic broadcast back, [8, 1]) — else a Permute of
// it into "out/what".
func (c *opCtx) arrangedTensor(x *ir.Tensor, what string, order []int) string {
	layout := x.Layout()
	if slices.Equal(layout, order) || sameElementOrder(x.LocalShape(), layout, order) {
		return x.Name
	}
	out := c.buffer(what)
	c.permuteInto(x.Name, localDims(x, layout), layout, order, out)
	return out
}

// sameElementOrder reports whether a block of local extents stored with
// its axes in layout holds its elements in the order it would in order:
// the axes of extent more than 1 come in the same order in both.
func sameElementOrder(local, layout, order []int) bool {
	long := func(axes []int) []int {
		var out []int
		for _, a := range axes {
			if local[a] > 1 {
				out = append(out, a)
			}
		}
		return out
	}
	return slices.Equal(long(layout), long(order))
}

// operandOrder is the order in which operand i's axes are read when the
// output is written in order: the operand axes that output axes map to,
// in that order, after those that none maps to (extent 1: broadcast).
func operandOrder(op *ir.Op, i int, order []int) []int {
	var mapped []int
	for _, j := range order {
		if a := op.InputAxis(i, j); a >= 0 {
			mapped = append(mapped, a)
		}
	}
	var rest []int
	for a := range op.Inputs[i].Shape() {
		if !slices.Contains(mapped, a) {
			rest = append(rest, a)
		}
	}
	return append(rest, mapped...)
}

// operandDims is operand i's local block seen with the output's rank in
// the output's axis order: its extent along the axis each output axis maps
// to, 1 where none does.
func operandDims(op *ir.Op, i int, order []int) []int {
	local := op.Inputs[i].LocalShape()
	dims := make([]int, len(order))
	for k, j := range order {
		dims[k] = 1
		if a := op.InputAxis(i, j); a >= 0 {
			dims[k] = local[a]
		}
	}
	return dims
}

// localDims is t's local block with its axes in order.
func localDims(t *ir.Tensor, order []int) []int {
	local := t.LocalShape()
	dims := make([]int, len(order))
	for k, a := range order {
		dims[k] = local[a]
	}
	return dims
}

// setInputs names a local step's buffers: Input for one, Inputs for more.
func setInputs(s *plan.Step, bufs []string) {
	if len(bufs) == 1 {
		s.Input = bufs[0]
		return
	}
	s.Inputs = bufs
}

// localCount is the product of a local block's extents, which fit in an int.
func localCount(xs []int) int {
	n := 1
	for _, x := range xs {
		n *= x
	}
	return n
}
