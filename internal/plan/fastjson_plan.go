package plan

// The plan's schema for fastDecode, type by type: each object reads its
// fields by their exact names, each once (the bits of seen), and gives up
// on any other key, so that decodeLibrary reports it.

import (
	"bytes"

	"github.com/nvcomm/nvcomm/internal/ops"
)

func (d *fastDecoder) plan(p *Plan) {
	if !d.object() {
		d.fail() // a plan of null: decodeLibrary reports its format, 0
	}
	var seen uint32
	for k, more := d.firstKey(); more; k, more = d.nextKey() {
		switch string(k) {
		case "format":
			d.once(&seen, 1<<0)
			p.Format = d.int()
		case "fusion":
			d.once(&seen, 1<<1)
			p.Fusion = d.string()
		case "policy":
			d.once(&seen, 1<<2)
			p.Policy = d.string()
		case "objective":
			d.once(&seen, 1<<3)
			p.Objective = d.string()
		case "meshes":
			d.once(&seen, 1<<4)
			p.Meshes = d.meshes()
		case "tensors":
			d.once(&seen, 1<<5)
			p.Tensors = d.tensors()
		case "ops":
			d.once(&seen, 1<<6)
			p.Ops = d.ops(len(p.Tensors))
		case "steps":
			d.once(&seen, 1<<7)
			p.Steps = d.steps()
		case "summary":
			d.once(&seen, 1<<8)
			d.summary(&p.Summary)
		case "pipeline":
			d.once(&seen, 1<<9)
			p.Pipeline = d.pipeline()
		default:
			d.fail()
		}
	}
}

// pipeline reads a plan's pipeline; null gives up, for decodeLibrary to
// decode.
func (d *fastDecoder) pipeline() *Pipeline {
	if !d.object() {
		d.fail()
	}
	pl := &Pipeline{}
	var seen uint32
	for k, more := d.firstKey(); more; k, more = d.nextKey() {
		switch string(k) {
		case "stages":
			d.once(&seen, 1<<0)
			pl.Stages = d.symbolList()
		case "microbatches":
			d.once(&seen, 1<<1)
			pl.Microbatches = d.int()
		case "schedule":
			d.once(&seen, 1<<2)
			pl.Schedule = d.string()
		default:
			d.fail()
		}
	}
	return pl
}

// meshes reads the map of meshes: a name repeated gives up.
func (d *fastDecoder) meshes() map[string]Mesh {
	if !d.object() {
		return nil
	}
	m := make(map[string]Mesh)
	for k, more := d.firstKey(); more; k, more = d.nextKey() {
		name := d.intern(k) // tensors name their mesh
		if _, dup := m[name]; dup {
			d.fail()
		}
		var mesh Mesh
		d.mesh(&mesh)
		m[name] = mesh
	}
	return m
}

func (d *fastDecoder) mesh(m *Mesh) {
	if !d.object() {
		return
	}
	var seen uint32
	for k, more := d.firstKey(); more; k, more = d.nextKey() {
		switch string(k) {
		case "shape":
			d.once(&seen, 1<<0)
			m.Shape = d.intList()
		case "devices":
			d.once(&seen, 1<<1)
			m.Devices = d.intList()
		default:
			d.fail()
		}
	}
}

func (d *fastDecoder) tensors() []Tensor {
	if !d.list() {
		return nil
	}
	var ts blocks[Tensor]
	// Counted first, the tensors are decoded in place: gathered in blocks,
	// they were copied into one slice at the end, and a copy of 100k
	// tensors' pointers while the collector marks (a write barrier a
	// pointer, in a loop it cannot preempt) cost a command validating a
	// chain of 100k ops a fifth of its CPU time, the stalled collector
	// included.
	ts.reserve(d.listLength())
	for more := d.firstItem(); more; more = d.nextItem() {
		d.tensor(ts.next())
	}
	d.text.flush()
	return ts.all()
}

// tensor reads a tensor. One whose bytes after its name are those of a
// tensor read before (alikeTensor) is that tensor copied: the tensors of
// a chain's plan are a few shardings under 100k names, and reading them
// field by field was a sixth of decoding it.
func (d *fastDecoder) tensor(t *Tensor) {
	if !d.object() {
		return
	}
	var seen uint32
	k, more := d.firstKey()
	rest := -1
	if more && string(k) == "name" {
		d.tensorField(t, k, &seen)
		if d.alikeTensor(t) {
			return
		}
		rest = d.pos
		k, more = d.nextKey()
	}
	for ; more; k, more = d.nextKey() {
		d.tensorField(t, k, &seen)
	}
	if rest >= 0 {
		d.tensorsRead.remember(d.src[rest:d.pos], t)
	}
}

// tensorField reads the value of a tensor's field k.
func (d *fastDecoder) tensorField(t *Tensor, k []byte, seen *uint32) {
	switch string(k) {
	case "name":
		d.once(seen, 1<<0)
		d.textInto(&t.Name)
	case "dtype":
		d.once(seen, 1<<1)
		t.DType = d.symbol(&d.dtypes)
	case "mesh":
		d.once(seen, 1<<2)
		t.Mesh = d.symbol(&d.meshNames)
	case "shape":
		d.once(seen, 1<<3)
		t.Shape = d.intList()
	case "reduction_axes":
		d.once(seen, 1<<4)
		t.ReductionAxes = d.intList()
	case "schedule":
		d.once(seen, 1<<5)
		t.Schedule = d.schedule()
	case "allocation":
		d.once(seen, 1<<6)
		t.Allocation = d.intList()
	case "sharding":
		d.once(seen, 1<<7)
		t.Sharding = d.shardingList()
	case "local_shape":
		d.once(seen, 1<<8)
		t.LocalShape = d.intList()
	case "padded_shape":
		d.once(seen, 1<<9)
		t.PaddedShape = d.intList()
	case "layout":
		d.once(seen, 1<<10)
		t.Layout = d.intList()
	case "partial":
		d.once(seen, 1<<11)
		t.Partial = d.symbol(&d.opNames)
	case "propagated":
		d.once(seen, 1<<12)
		t.Propagated = d.bool()
	default:
		d.fail()
	}
}

// alikeTensor reports whether the bytes after a tensor's name, up to the
// end of its object, are those of a tensor read before, and if so reads
// them as a copy of that tensor's fields (the name stays): the same bytes
// read the same fields. The copy shares no list or pointer with the
// tensor it copies, as no two tensors decoded field by field do.
func (d *fastDecoder) alikeTensor(t *Tensor) bool {
	prev, n := d.tensorsRead.find(d.src[d.pos:])
	if prev == nil {
		return false
	}
	d.pos += n
	t.DType, t.Mesh, t.Partial, t.Propagated = prev.DType, prev.Mesh, prev.Partial, prev.Propagated
	t.Shape = d.copyInts(prev.Shape)
	t.ReductionAxes = d.copyInts(prev.ReductionAxes)
	t.Allocation = d.copyInts(prev.Allocation)
	t.LocalShape = d.copyInts(prev.LocalShape)
	t.PaddedShape = d.copyInts(prev.PaddedShape)
	t.Layout = d.copyInts(prev.Layout)
	t.Schedule = d.copySchedule(prev.Schedule)
	t.Sharding = d.copyShardings(prev.Sharding)
	return true
}

// copyInts is a copy of xs, nil for nil, carved as intList carves.
func (d *fastDecoder) copyInts(xs []int) []int {
	if xs == nil {
		return nil
	}
	return d.ints.take(xs)
}

// copySchedule is a copy of steps and of what their pointers point at.
func (d *fastDecoder) copySchedule(steps []ScheduleStep) []ScheduleStep {
	if steps == nil {
		return nil
	}
	out := d.schedules.take(steps)
	for i := range out {
		s := &out[i]
		s.Split = copyPtr(&d.splits, s.Split)
		s.OuterSplit = copyPtr(&d.splits, s.OuterSplit)
		s.Merge = copyPtr(&d.merges, s.Merge)
		s.Parallelize = copyPtr(&d.parallels, s.Parallelize)
		s.Reorder = d.copyInts(s.Reorder)
	}
	return out
}

// copyShardings is a copy of shs and of what their pointers point at.
func (d *fastDecoder) copyShardings(shs []Sharding) []Sharding {
	if shs == nil {
		return nil
	}
	out := d.shardings.take(shs)
	for i := range out {
		out[i].ShapeAxis = copyPtr(&d.intPtrs, out[i].ShapeAxis)
		out[i].LogicalAxes = d.copyInts(out[i].LogicalAxes)
	}
	return out
}

// copyPtr is a copy of *p in memory carved from c, nil for nil.
func copyPtr[T any](c *chunk[T], p *T) *T {
	if p == nil {
		return nil
	}
	q := c.one()
	*q = *p
	return q
}

// tensorsRead are the last tensors a decoder read field by field, each
// with the bytes after its name (its body), for alikeTensor.
type tensorsRead struct {
	bodies [8][]byte
	fields [8]Tensor
	next   int
}

// remember keeps t, read from body, in place of the oldest.
func (r *tensorsRead) remember(body []byte, t *Tensor) {
	r.bodies[r.next], r.fields[r.next] = body, *t
	r.next = (r.next + 1) % len(r.bodies)
}

// find returns the tensor whose body src starts with, and the body's
// length, or nil.
func (r *tensorsRead) find(src []byte) (*Tensor, int) {
	for i, body := range r.bodies {
		if len(body) > 0 && bytes.HasPrefix(src, body) {
			return &r.fields[i], len(body)
		}
	}
	return nil, 0
}

func (d *fastDecoder) schedule() []ScheduleStep {
	return structList(d, &d.scratchSchedule, &d.schedules, d.scheduleStep)
}

// structList reads a list of structs, or null (nil), each item by item,
// through scratch, into a slice carved from c.
func structList[T any](d *fastDecoder, scratch *[]T, c *chunk[T], item func(*T)) []T {
	if !d.list() {
		return nil
	}
	xs := (*scratch)[:0]
	for more := d.firstItem(); more; more = d.nextItem() {
		xs = append(xs, *new(T))
		item(&xs[len(xs)-1])
	}
	*scratch = xs
	out := c.take(xs)
	clear(xs) // drop the references
	return out
}

func (d *fastDecoder) scheduleStep(s *ScheduleStep) {
	if !d.object() {
		return
	}
	var seen uint32
	for k, more := d.firstKey(); more; k, more = d.nextKey() {
		switch string(k) {
		case "split":
			d.once(&seen, 1<<0)
			s.Split = d.split()
		case "outer_split":
			d.once(&seen, 1<<1)
			s.OuterSplit = d.split()
		case "merge":
			d.once(&seen, 1<<2)
			s.Merge = d.merge()
		case "reorder":
			d.once(&seen, 1<<3)
			s.Reorder = d.intList()
		case "parallelize":
			d.once(&seen, 1<<4)
			s.Parallelize = d.parallelize()
		default:
			d.fail()
		}
	}
}

func (d *fastDecoder) split() *SplitArgs {
	if !d.object() {
		return nil
	}
	a := d.splits.one()
	var seen uint32
	for k, more := d.firstKey(); more; k, more = d.nextKey() {
		switch string(k) {
		case "axis":
			d.once(&seen, 1<<0)
			a.Axis = d.int()
		case "factor":
			d.once(&seen, 1<<1)
			a.Factor = d.int()
		default:
			d.fail()
		}
	}
	return a
}

func (d *fastDecoder) merge() *AxisArgs {
	if !d.object() {
		return nil
	}
	a := d.merges.one()
	var seen uint32
	for k, more := d.firstKey(); more; k, more = d.nextKey() {
		switch string(k) {
		case "axis":
			d.once(&seen, 1<<0)
			a.Axis = d.int()
		default:
			d.fail()
		}
	}
	return a
}

func (d *fastDecoder) parallelize() *ParallelizeArgs {
	if !d.object() {
		return nil
	}
	a := d.parallels.one()
	var seen uint32
	for k, more := d.firstKey(); more; k, more = d.nextKey() {
		switch string(k) {
		case "axis":
			d.once(&seen, 1<<0)
			a.Axis = d.int()
		case "type":
			d.once(&seen, 1<<1)
			a.Type = d.symbol(&d.shardTypes)
		default:
			d.fail()
		}
	}
	return a
}

func (d *fastDecoder) shardingList() []Sharding {
	return structList(d, &d.scratchShardings, &d.shardings, d.sharding)
}

func (d *fastDecoder) sharding(s *Sharding) {
	if !d.object() {
		return
	}
	var seen uint32
	for k, more := d.firstKey(); more; k, more = d.nextKey() {
		switch string(k) {
		case "type":
			d.once(&seen, 1<<0)
			s.Type = d.symbol(&d.shardTypes)
		case "logical_axis":
			d.once(&seen, 1<<1)
			s.LogicalAxis = d.int()
		case "shape_axis":
			d.once(&seen, 1<<2)
			s.ShapeAxis = d.intPtr()
		case "kind":
			d.once(&seen, 1<<3)
			s.Kind = d.symbol(&d.shardKinds)
		case "logical_axes":
			d.once(&seen, 1<<4)
			s.LogicalAxes = d.intList()
		default:
			d.fail()
		}
	}
}

// ops reads the list of ops, in place when it has at most tensors ops,
// as a plan has: an op's output is a tensor of its own.
func (d *fastDecoder) ops(tensors int) []Op {
	if !d.list() {
		return nil
	}
	var ops blocks[Op]
	for more := d.firstItem(); more; more = d.nextItem() {
		if ops.n == 0 {
			ops.reserve(tensors)
		}
		d.op(ops.next())
	}
	d.text.flush()
	return ops.all()
}

func (d *fastDecoder) op(o *Op) {
	if !d.object() {
		return
	}
	var seen uint32
	for k, more := d.firstKey(); more; k, more = d.nextKey() {
		switch string(k) {
		case "index":
			d.once(&seen, 1<<0)
			o.Index = d.int()
		case "op":
			d.once(&seen, 1<<1)
			o.Op = d.symbol(&d.opNames)
		case "input":
			d.once(&seen, 1<<2)
			d.textInto(&o.Input)
		case "inputs":
			d.once(&seen, 1<<3)
			o.Inputs = d.symbolList()
		case "output":
			d.once(&seen, 1<<4)
			d.textInto(&o.Output)
		case "axis":
			d.once(&seen, 1<<5)
			o.Axis = d.intPtr()
		case "axes":
			d.once(&seen, 1<<6)
			o.Axes = d.intList()
		case "inserted":
			d.once(&seen, 1<<7)
			o.Inserted = d.inserted()
		case "scalar":
			d.once(&seen, 1<<8)
			o.Scalar = d.scalar()
		case "of":
			d.once(&seen, 1<<9)
			o.Of = d.of()
		case "within":
			d.once(&seen, 1<<10)
			o.Within = d.intPtr()
		default:
			d.attr(o, k)
		}
	}
	o.Attrs = inEntryOrder(o.Op, o.Attrs)
}

// attr reads the op's attribute key, by its spec's kind; a key that is
// no attribute's, or a repeated one, gives up.
func (d *fastDecoder) attr(o *Op, key []byte) {
	spec := ops.AttrOf(string(key))
	if spec == nil || !spec.Stored() {
		d.fail()
	}
	if _, dup := o.Attrs.Get(spec.Key); dup || d.peek() == 'n' {
		d.fail() // null is the library's error
	}
	v := ops.Value{Key: spec.Key}
	switch spec.Kind {
	case ops.IntAttr:
		v.Int = d.int()
	case ops.IntsAttr:
		v.Ints = d.intList()
	case ops.DTypeAttr, ops.NameAttr:
		v.Str = d.string()
	case ops.FloatAttr:
		v.Float = d.number()
	case ops.BoolAttr:
		v.Bool = d.bool()
	}
	o.Attrs = append(o.Attrs, v)
}

// inserted reads an op's provenance; null is nil.
func (d *fastDecoder) inserted() *Inserted {
	if !d.object() {
		return nil
	}
	in := &Inserted{}
	var seen uint32
	for k, more := d.firstKey(); more; k, more = d.nextKey() {
		switch string(k) {
		case "for":
			d.once(&seen, 1<<0)
			in.For = d.int()
		case "operands":
			d.once(&seen, 1<<1)
			in.Operands = d.intList()
		case "output":
			d.once(&seen, 1<<2)
			in.Output = d.bool()
		default:
			d.fail()
		}
	}
	return in
}

// scalar reads an op's or a step's number operand; null is nil.
func (d *fastDecoder) scalar() *ops.Scalar {
	if !d.object() {
		return nil
	}
	sc := &ops.Scalar{}
	var seen uint32
	for k, more := d.firstKey(); more; k, more = d.nextKey() {
		switch string(k) {
		case "slot":
			d.once(&seen, 1<<0)
			sc.Slot = d.int()
		case "value":
			d.once(&seen, 1<<1)
			sc.Value = d.number()
		default:
			d.fail()
		}
	}
	return sc
}

// of reads the composite op an op's expansion comes from; null is nil.
func (d *fastDecoder) of() *Of {
	if !d.object() {
		return nil
	}
	of := &Of{}
	var seen uint32
	for k, more := d.firstKey(); more; k, more = d.nextKey() {
		switch string(k) {
		case "op":
			d.once(&seen, 1<<0)
			of.Op = d.symbol(&d.opNames)
		case "inputs":
			d.once(&seen, 1<<1)
			of.Inputs = d.symbolList()
		case "output":
			d.once(&seen, 1<<2)
			d.textInto(&of.Output)
		case "axis":
			d.once(&seen, 1<<3)
			of.Axis = d.intPtr()
		case "axes":
			d.once(&seen, 1<<4)
			of.Axes = d.intList()
		case "eps":
			d.once(&seen, 1<<5)
			of.Eps = new(d.number())
		case "reduction":
			d.once(&seen, 1<<6)
			d.textInto(&of.Reduction)
		case "causal":
			d.once(&seen, 1<<7)
			of.Causal = d.bool()
		case "grad":
			d.once(&seen, 1<<8)
			of.Grad = d.bool()
		case "cp":
			d.once(&seen, 1<<9)
			d.textInto(&of.CP)
		case "top_k":
			d.once(&seen, 1<<10)
			of.TopK = d.int()
		case "capacity":
			d.once(&seen, 1<<11)
			of.Capacity = d.int()
		case "enable_gqa":
			d.once(&seen, 1<<12)
			of.GQA = d.bool()
		default:
			d.fail()
		}
	}
	return of
}

// steps reads the list of steps, in place once its length is foreseen.
func (d *fastDecoder) steps() []Step {
	if !d.list() {
		return nil
	}
	var steps blocks[Step]
	start := d.pos
	for more := d.firstItem(); more; more = d.nextItem() {
		if steps.n == foresee {
			d.text.flush()
			steps.reserve(d.foreseeLength(start, steps.n))
		}
		d.step(steps.next())
	}
	d.text.flush()
	return steps.all()
}

func (d *fastDecoder) step(s *Step) {
	if !d.object() {
		return
	}
	var seen uint32
	for k, more := d.firstKey(); more; k, more = d.nextKey() {
		switch string(k) {
		case "id":
			d.once(&seen, 1<<0)
			s.ID = d.int()
		case "op":
			d.once(&seen, 1<<1)
			s.Op = d.int()
		case "expr":
			d.once(&seen, 1<<2)
			d.textInto(&s.Expr)
		case "kind":
			d.once(&seen, 1<<3)
			s.Kind = d.symbol(&d.kinds)
		case "type":
			d.once(&seen, 1<<4)
			s.Type = d.symbol(&d.types)
		case "teams":
			d.once(&seen, 1<<5)
			s.Teams = d.intLists()
		case "devices":
			d.once(&seen, 1<<6)
			s.Devices = d.intList()
		case "root":
			d.once(&seen, 1<<7)
			s.Root = d.intPtr()
		case "reduce_op":
			d.once(&seen, 1<<8)
			s.ReduceOp = d.symbolPtr()
		case "input":
			d.once(&seen, 1<<9)
			d.textInto(&s.Input)
		case "inputs":
			d.once(&seen, 1<<10)
			s.Inputs = d.symbolList()
		case "output":
			d.once(&seen, 1<<11)
			d.textInto(&s.Output)
		case "axis":
			d.once(&seen, 1<<12)
			s.Axis = d.intPtr()
		case "count":
			d.once(&seen, 1<<13)
			d.count(&s.Count)
		case "dims":
			d.once(&seen, 1<<14)
			s.Dims = d.intList()
		case "perm":
			d.once(&seen, 1<<15)
			s.Perm = d.intList()
		case "reduce_dims":
			d.once(&seen, 1<<16)
			s.ReduceDims = d.intList()
		case "valid":
			d.once(&seen, 1<<17)
			s.Valid = d.intLists()
		case "fill":
			d.once(&seen, 1<<18)
			s.Fill = d.symbolPtr()
		case "func":
			d.once(&seen, 1<<19)
			s.Func = d.symbolPtr()
		case "scalar":
			d.once(&seen, 1<<27)
			s.Scalar = d.scalar()
		case "input_dims":
			d.once(&seen, 1<<20)
			s.InputDims = d.intLists()
		case "broadcast_b":
			d.once(&seen, 1<<21)
			s.BroadcastB = d.bool()
		case "transpose_b":
			d.once(&seen, 1<<22)
			s.TransposeB = d.bool()
		case "send_counts":
			d.once(&seen, 1<<23)
			s.SendCounts = d.intLists()
		case "bytes":
			d.once(&seen, 1<<24)
			s.Bytes = d.bytesPtr()
		case "stream":
			d.once(&seen, 1<<25)
			d.textInto(&s.Stream)
		case "after":
			d.once(&seen, 1<<26)
			s.After = d.intList()
		case "offsets":
			d.once(&seen, 1<<28)
			s.Offsets = d.intList()
		case "windows":
			d.once(&seen, 1<<29)
			s.Windows = d.intLists()
		default:
			d.fail()
		}
	}
}

func (d *fastDecoder) count(c *Count) {
	if !d.object() {
		return
	}
	var seen uint32
	for k, more := d.firstKey(); more; k, more = d.nextKey() {
		switch string(k) {
		case "input":
			d.once(&seen, 1<<0)
			c.Input = d.int()
		case "output":
			d.once(&seen, 1<<1)
			c.Output = d.int()
		default:
			d.fail()
		}
	}
}

func (d *fastDecoder) bytesPtr() *Bytes {
	if !d.object() {
		return nil
	}
	b := d.bytes.one()
	var seen uint32
	for k, more := d.firstKey(); more; k, more = d.nextKey() {
		switch string(k) {
		case "sent_per_device":
			d.once(&seen, 1<<0)
			b.SentPerDevice = d.integer()
		case "received_per_device":
			d.once(&seen, 1<<1)
			b.ReceivedPerDevice = d.integer()
		case "lower_bound":
			d.once(&seen, 1<<2)
			b.LowerBound = d.integer()
		default:
			d.fail()
		}
	}
	return b
}

func (d *fastDecoder) summary(s *Summary) {
	if !d.object() {
		return
	}
	var seen uint32
	for k, more := d.firstKey(); more; k, more = d.nextKey() {
		switch string(k) {
		case "collectives":
			d.once(&seen, 1<<0)
			s.Collectives = d.int()
		case "local_steps":
			d.once(&seen, 1<<1)
			s.LocalSteps = d.int()
		case "by_type":
			d.once(&seen, 1<<2)
			s.ByType = d.byType()
		case "bytes_received_max":
			d.once(&seen, 1<<3)
			s.BytesReceivedMax = d.integer()
		case "bytes_lower_bound":
			d.once(&seen, 1<<4)
			s.BytesLowerBound = d.integer()
		case "bytes_ratio":
			d.once(&seen, 1<<5)
			if !d.isNull() {
				r := d.floatPtrs.one()
				*r = d.number()
				s.BytesRatio = r
			}
		default:
			d.fail()
		}
	}
}

// byType reads the summary's counts by step type: a type repeated gives
// up.
func (d *fastDecoder) byType() map[string]int {
	if !d.object() {
		return nil
	}
	m := make(map[string]int)
	for k, more := d.firstKey(); more; k, more = d.nextKey() {
		typ := d.intern(k)
		if _, dup := m[typ]; dup {
			d.fail()
		}
		m[typ] = d.int()
	}
	return m
}
