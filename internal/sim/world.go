package sim

import (
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/nvcomm/nvcomm/internal/ops"
	"github.com/nvcomm/nvcomm/internal/plan"
)

// tensorInfo is what the simulation knows of one tensor of the plan.
type tensorInfo struct {
	t        *plan.Tensor // in the plan's list: a copy of every tensor was a tenth of what a long plan's simulation allocated
	index    int          // position in plan.Tensors: selects its input data
	mesh     plan.Mesh
	shard    *sharder
	elemSize int64
	// input is set when no op produces the tensor, and pending when an op
	// produces pending terms in it (isPending): known once the ops are
	// read, so that the passes over every tensor and op ask no map.
	input, pending bool
}

// world is a checked plan: its tensors with their shard geometry and which
// op produces each tensor.
type world struct {
	p *plan.Plan
	// order is the positions of the steps in the order they run (nil:
	// the list's).
	order    []int
	tensors  map[string]*tensorInfo
	producer map[string]int
	// ordered are the tensors in the plan's order, and opOutputs every
	// op's output: what each step and op needs, found without looking
	// names up in maps of every tensor.
	ordered   []*tensorInfo
	opOutputs []*tensorInfo
	// outputs are the tensors some op writes: an operand among them that
	// no earlier op produced is produced later (one lookup, where a scan
	// of the later ops made checking quadratic in ops).
	outputs map[string]bool
	// scratch holds the sorted offsets of the shard being loaded or
	// checked when its tensor needs them (sharder.sortRuns), reused for
	// every device and tensor.
	scratch []int
	// sharders are the sharders built so far by geometry (geometryKey):
	// the tensors of a long plan repeat a few shardings, and building a
	// sharder a tensor was most of what checking the plan allocated.
	sharders map[string]*sharder
	key      []byte
	// runBudget is what is left of the runs the shared sharders may keep.
	runBudget int
	// copied are the steps whose long chunks the memory model has copied
	// (footprint): the machine copies them too.
	copied map[*plan.Step]bool
	// reduced are the reference's reductions of values in pieces, by the
	// values they read (combinationKey).
	reduced map[string]vec
	// given are, for Reference, the values of the fusion inputs by name,
	// in place of the generated ones.
	given map[string][]float64
}

// dtypeSizes gives the bytes of an element of each dtype.
var dtypeSizes = map[string]int64{
	"float32": 4, "float16": 2, "bfloat16": 2, "float64": 8, "int64": 8, "int32": 4,
}

// newWorld checks p's tensors and ops and builds every tensor's sharder.
func newWorld(p *plan.Plan) (*world, error) {
	// The maps of every tensor and op are sized once: growing them rehashed
	// every entry several times over in a plan of 100k ops.
	w := &world{p: p, tensors: make(map[string]*tensorInfo, len(p.Tensors)), producer: make(map[string]int, len(p.Ops)),
		sharders: map[string]*sharder{}, runBudget: runBudget, ordered: make([]*tensorInfo, 0, len(p.Tensors)),
		opOutputs: make([]*tensorInfo, 0, len(p.Ops))}
	for i := range p.Tensors {
		if err := w.addTensor(i, &p.Tensors[i]); err != nil {
			return nil, err
		}
	}
	w.outputs = make(map[string]bool, len(p.Ops))
	for _, op := range p.Ops {
		w.outputs[op.Output] = true
	}
	for i, op := range p.Ops {
		if err := w.addOp(i, op); err != nil {
			return nil, err
		}
	}
	for _, info := range w.ordered {
		info.input = !w.outputs[info.t.Name]
		info.pending = !info.input && info.t.Partial != ""
	}
	return w, nil
}

func (w *world) addTensor(i int, t *plan.Tensor) error {
	if _, dup := w.tensors[t.Name]; dup {
		return fmt.Errorf("tensor %q is listed twice", t.Name)
	}
	size, ok := dtypeSizes[t.DType]
	if !ok {
		return fmt.Errorf("tensor %q: unknown dtype %q", t.Name, t.DType)
	}
	m, ok := w.p.Meshes[t.Mesh]
	if !ok {
		return fmt.Errorf("tensor %q: unknown mesh %q", t.Name, t.Mesh)
	}
	s, err := w.sharder(*t, m)
	if err != nil {
		return err
	}
	info := &tensorInfo{t: t, index: i, mesh: m, shard: s, elemSize: size}
	w.tensors[t.Name] = info
	w.ordered = append(w.ordered, info)
	return nil
}

// sharder returns t's sharder on m, shared with every earlier tensor of
// the same geometry. A sharder depends on nothing else but for the name its
// errors give, and only a sharder built without error is shared.
func (w *world) sharder(t plan.Tensor, m plan.Mesh) (*sharder, error) {
	w.key = geometryKey(w.key[:0], t)
	if s, ok := w.sharders[string(w.key)]; ok {
		s.cacheRuns(&w.runBudget) // it serves several tensors now
		return s, nil
	}
	s, err := newSharder(t, m)
	if err != nil {
		return nil, err
	}
	w.sharders[string(w.key)] = s
	return s, nil
}

// geometryKey appends to b what newSharder reads of t besides its name:
// its mesh's name, shape, reduction axes, schedule and allocation, each
// list preceded by its length so that the key is unambiguous.
func geometryKey(b []byte, t plan.Tensor) []byte {
	b = binary.AppendVarint(b, int64(len(t.Mesh)))
	b = appendInts(append(b, t.Mesh...), t.Shape)
	b = appendInts(b, t.ReductionAxes)
	b = binary.AppendVarint(b, int64(len(t.Schedule)))
	for _, st := range t.Schedule {
		b = appendSchedule(b, st)
	}
	if t.Allocation == nil { // nil is row-major; an empty allocation is checked
		return append(b, 0)
	}
	return appendInts(append(b, 1), t.Allocation)
}

// appendSchedule appends one schedule step: each of its transforms, set
// or not, and its arguments.
func appendSchedule(b []byte, st plan.ScheduleStep) []byte {
	for _, split := range []*plan.SplitArgs{st.Split, st.OuterSplit} {
		if split == nil {
			b = append(b, 0)
		} else {
			b = binary.AppendVarint(binary.AppendVarint(append(b, 1), int64(split.Axis)), int64(split.Factor))
		}
	}
	if st.Merge == nil {
		b = append(b, 0)
	} else {
		b = binary.AppendVarint(append(b, 1), int64(st.Merge.Axis))
	}
	if st.Reorder == nil {
		b = append(b, 0)
	} else {
		b = appendInts(append(b, 1), st.Reorder)
	}
	if st.Parallelize == nil {
		return append(b, 0)
	}
	b = binary.AppendVarint(append(b, 1), int64(st.Parallelize.Axis))
	b = binary.AppendVarint(b, int64(len(st.Parallelize.Type)))
	return append(b, st.Parallelize.Type...)
}

// appendInts appends xs and, first, their count.
func appendInts(b []byte, xs []int) []byte {
	b = binary.AppendVarint(b, int64(len(xs)))
	for _, x := range xs {
		b = binary.AppendVarint(b, int64(x))
	}
	return b
}

// addOp checks that op is a known op with as many inputs as it takes,
// that it reads tensors that exist by then and writes a tensor nothing
// else writes.
func (w *world) addOp(i int, op plan.Op) error {
	if op.Index != i {
		return fmt.Errorf("op at position %d has index %d", i, op.Index)
	}
	if op.Input != "" && len(op.Inputs) > 0 {
		return fmt.Errorf("op %d: input %q and inputs %q are both set; an op names its operands in one of them", i, op.Input, op.Inputs)
	}
	if err := checkArity(op); err != nil {
		return err
	}
	out, ok := w.tensors[op.Output]
	if !ok {
		return fmt.Errorf("op %d: unknown tensor %q", i, op.Output)
	}
	if _, dup := w.producer[op.Output]; dup {
		return fmt.Errorf("op %d: tensor %q is already produced by op %d", i, op.Output, w.producer[op.Output])
	}
	for _, in := range op.Operands() {
		if err := w.checkOperand(i, in, op.Output); err != nil {
			return err
		}
	}
	w.producer[op.Output] = i
	w.opOutputs = append(w.opOutputs, out)
	return nil
}

// checkOperand checks that op i's operand in is a tensor other than its
// output, and not one that a later op produces.
func (w *world) checkOperand(i int, in, out string) error {
	if _, ok := w.tensors[in]; !ok {
		return fmt.Errorf("op %d: unknown tensor %q", i, in)
	}
	if in == out {
		return fmt.Errorf("op %d: reads and writes the same tensor %q", i, in)
	}
	if _, earlier := w.producer[in]; !earlier && w.outputs[in] {
		return fmt.Errorf("op %d: input %q is produced by a later op", i, in)
	}
	return nil
}

// smallInput is the size below which a fusion input's values are stored
// rather than generated where they are read: a long chain of small
// tensors checks every one of them against the same few inputs, and
// generating the values again for every check cost more than the rest of
// checking (the memory model prices them: 512 KiB at most each).
var smallInput = 1 << 16 // tests lower it to generate every input

// reference evaluates every op on unsharded tensors, values row-major over
// each tensor's non-reduction axes. A fusion input's values are its
// stream, generated where they are read; a set shares its input's values
// and a reduction reads them a block at a time. Only the other ops, which
// read their operands in an order of their own, get a fusion input's
// values stored, once (the memory model prices them: storedInputs).
func (w *world) reference(seed uint64) (map[string]vec, error) {
	ref := make(map[string]vec, len(w.p.Tensors))
	data, bounds := DataOf(w.p), IndexBounds(w.p)
	for _, info := range w.ordered {
		if v, ok := w.given[info.t.Name]; ok && info.input {
			ref[info.t.Name] = stored(v)
		} else if info.input {
			g := &stream{key: streamKey(seed, info.index), data: data, bound: bounds[info.t.Name]}
			ref[info.t.Name] = generated(g, product(info.shard.shape))
			if product(info.shard.shape) < smallInput {
				ref[info.t.Name] = stored(ref[info.t.Name].flat())
			}
		}
	}
	flat := map[*rope][]float64{} // the streams stored so far
	for i, op := range w.p.Ops {
		ins := w.operands(op, ref)
		if e := ops.InPlan(op.Op); e != nil && e.PassesSums {
			w.termsAsValues(ins)
		}
		if err := w.checkOutputDomain(op, ins); err != nil {
			return nil, err
		}
		shape := w.opOutputs[i].shard.shape
		switch {
		case op.Op == "set":
			ref[op.Output] = ins[0].v
		case isReduceOp(op.Op) && ins[0].info.pending:
			// The reference of pending terms holds their reduction.
			ref[op.Output] = ins[0].v
		case isReduceOp(op.Op):
			ref[op.Output] = w.reduction(op.Op, ins[0], *op.Axis)
		default:
			for k := range ins {
				ins[k].vals = storedValues(ins[k].v, flat)
			}
			if w.opOutputs[i].pending {
				shape = shape[1:] // the reference holds the combined values
			}
			ref[op.Output] = stored(evalOp(op, ins, shape))
		}
		if err := w.checkComposite(op, ref); err != nil {
			return nil, err
		}
	}
	return ref, nil
}

// reduction is the reference of the reduction of in along axis with op.
// When in's values are a stream's, it is kept by the values it reads
// (reductionKey) and computed only when first read: a reduction step that
// reads the very same values shares it, and the check then finds the
// devices' buffers equal to it without reading it. Otherwise it is
// computed now.
func (w *world) reduction(op string, in operand, axis int) vec {
	compute := func() []float64 { return reduceAxisVec(op, in.v, in.shape, axis) }
	key, ok := reductionKey(op, in, axis)
	if !ok {
		return stored(compute())
	}
	outer, inner := product(in.shape[:axis]), product(in.shape[axis+1:])
	v := lazyVec(&lazy{compute: compute}, outer*inner)
	if w.reduced == nil {
		w.reduced = map[string]vec{}
	}
	w.reduced[key] = v
	return v
}

// reductionKey words the reduction of in along axis with op as the
// combination of its parts (combinationKey): in's rows along axis, part k
// listing row k of every outer index, combined with op (reduceAxisVec). ok
// is false when in is stored, the key would list too many pieces, or the
// output is short (not worth a key).
func reductionKey(op string, in operand, axis int) (string, bool) {
	outer, n, inner := product(in.shape[:axis]), in.shape[axis], product(in.shape[axis+1:])
	if in.v.rope == nil || satMul(int64(outer), int64(n)) > maxKeyPieces || outer*inner < ropeMin {
		return "", false
	}
	parts := make([]span, n)
	for k := range parts {
		var b ropeBuilder
		for o := range outer {
			lo := (o*n + k) * inner
			b.add(in.v, lo, lo+inner)
		}
		parts[k] = span{b.vec(), 0, b.n}
	}
	return combinationKey(op, parts)
}

// storedValues returns v's values stored: a stream's generated once and
// kept in flat.
func storedValues(v vec, flat map[*rope][]float64) []float64 {
	if v.rope == nil {
		return v.vals
	}
	if vals, ok := flat[v.rope]; ok {
		return vals
	}
	vals := v.flat()
	flat[v.rope] = vals
	return vals
}

// termsAsValues makes the operands of an op that passes sums that hold
// pending terms of a sum their values: the op of the values is the sum of
// the op of the terms (sums computed late, docs/fusion.md). The
// reference of an op's pending terms holds their sum already, a fusion
// input's its terms, summed here.
func (w *world) termsAsValues(ins []operand) {
	for k := range ins {
		in := &ins[k]
		if in.info == nil || in.info.t.Partial != "sum" || len(in.shape) == 0 {
			continue
		}
		if in.info.input {
			in.v = w.reduction("sum", *in, 0)
		}
		in.shape = in.shape[1:]
	}
}

// isReduceOp reports whether op is a reduction (sum, prod, max, min).
func isReduceOp(op string) bool { return ops.Is(op, ops.Reduction) }

// operands returns op's inputs with their unsharded values from ref (not
// yet stored: see reference).
func (w *world) operands(op plan.Op, ref map[string]vec) []operand {
	names := op.Operands()
	ins := make([]operand, len(names))
	for k, name := range names {
		info := w.tensors[name]
		ins[k] = operand{name: name, v: ref[name], shape: info.shard.shape, info: info}
	}
	return ins
}

// checkOutputDomain checks that op's inputs fit together and that its
// output declares the logical domain op makes of them (opDomain), which
// evalOp relies on.
func (w *world) checkOutputDomain(op plan.Op, ins []operand) error {
	out := w.opOutputs[op.Index].t
	want, err := opDomain(op, ins, out.Shape)
	if err != nil {
		return err
	}
	if w.opOutputs[op.Index].pending && len(out.Shape) > 0 {
		want = pendingDomain(want, out.Shape[0])
	}
	if slices.Equal(out.Shape, want.shape) && slices.Equal(out.ReductionAxes, want.reduction) {
		return nil
	}
	return fmt.Errorf("op %d (%s): output %q has logical shape %v with reduction axes %v, expected %v with reduction axes %v",
		op.Index, op.Op, op.Output, out.Shape, out.ReductionAxes, want.shape, want.reduction)
}

// load puts every fusion input's shard onto each device of its mesh: the
// pieces of the input's stream it holds when its rows are long
// (sharder.longRows), the very values of a stored input when every
// device's shard is one run of them (sharder.contiguous), else its values
// generated or copied into a buffer.
func (w *world) load(m *machine, ref map[string]vec) {
	for _, info := range w.ordered {
		t := info.t
		if !info.input {
			continue
		}
		src := source(ref[t.Name])
		out := m.output(t.Name, len(info.mesh.Devices))
		long := info.shard.longRows()
		shared := !long && src.vals != nil && info.shard.contiguous(&w.scratch)
		for _, d := range info.mesh.Devices {
			if shared {
				out[d] = stored(info.shard.oneRun(d, &w.scratch, src.vals))
				continue
			}
			if long {
				var b ropeBuilder
				info.shard.eachRun(d, &w.scratch, func(r run) bool {
					p := src
					p.run = r
					b.addPiece(p)
					return true
				})
				out[d] = b.vec()
				continue
			}
			buf := make([]float64, info.shard.size(d, &w.scratch))
			pos := 0
			info.shard.eachRun(d, &w.scratch, func(r run) bool {
				p := src
				p.run = r
				p.fill(buf[pos : pos+r.n])
				pos += r.n
				return true
			})
			out[d] = stored(buf)
		}
	}
}

// source is the array a fusion input's reference lists, as a piece
// without a run: its stream, or its stored values (a small input's).
func source(v vec) piece {
	if v.rope == nil {
		return piece{vals: v.vals}
	}
	return piece{gen: v.rope.pieces[0].gen}
}

// satAdd adds non-negative numbers, saturating instead of overflowing.
func satAdd(a, b int64) int64 {
	if s := a + b; s >= a {
		return s
	}
	return int64(^uint64(0) >> 1)
}

// satProduct multiplies extents, saturating instead of overflowing.
func satProduct(xs []int) int64 {
	n := int64(1)
	for _, x := range xs {
		n = satMul(n, int64(x))
	}
	return n
}
