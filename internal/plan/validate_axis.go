package plan

import (
	"fmt"
	"slices"
	"sort"
)

// checkCollectiveAxis checks that a collective's axis is the logical axis
// whose sharding it changes (docs/plan.md), as a non-reduction position of
// an input of the op: the reduced axis for Allreduce, Reduce and
// ReduceScatter (a contraction's k in its first input); for Allgather,
// Gather, AllToAll, AllToAllV and SendRecv the axis of the input the buffer comes from
// sharded along the device type the team spans; for Scatter and Slice (a
// local step that takes teams) the op output's, counted among the first
// input's axes; none for Broadcast.
func (v *validator) checkCollectiveAxis(i int, s *Step, op *Op) {
	if (s.Kind != KindCollective && s.Type != Slice) || op == nil || len(s.Teams) == 0 {
		return
	}
	first := op.Operands()[0]
	var want *int
	switch s.Type {
	case Broadcast:
	case Allreduce, Reduce, ReduceScatter:
		if want = v.reducedAxis(op); isLookup(op.Op) {
			if want = v.lookupSumAxis(op); want == nil && s.Axis != nil {
				// The rows summed are the table's: the indices, the first
				// operand, have no such axis.
				v.stepf(i, "axis is %s, but a lookup's indices have no axis it sums over (null)", AxisText(s.Axis))
			}
		}
	case Scatter, Slice:
		if !v.becomesTensor(i, s.Output, op.Output) {
			return // an intermediate sharding of a multi-step change
		}
		// The step's output becomes the op's output on the same devices,
		// so its team spans a type of the output's mesh, also for a Slice
		// after a move from another mesh.
		want = v.firstInputAxis(op, v.shardedAxis(op.Output, s.Teams[0]))
	case SendRecv:
		if first = v.sourceOperand(i, s, op); first == "" {
			return // an intermediate sharding of a multi-step change
		}
		want = v.firstShardedAxis(first)
		if want == nil {
			break // a replicated tensor: the axis must be null
		}
	case Allgather, Gather, AllToAll, AllToAllV:
		if first = v.sourceOperand(i, s, op); first == "" {
			return // an intermediate sharding of a multi-step change
		}
		want = v.shardedAxis(first, s.Teams[0])
	default:
		return
	}
	if want == nil && s.Type != Broadcast && s.Type != SendRecv {
		return // what the axis should be is unknown; other rules report why
	}
	if in := v.tensor(first); want != nil && (*want < 0 || in == nil || in.rank < 0 || *want >= in.rank) {
		return // the tensor or op is malformed, and reported as such
	}
	if !SameAxis(s.Axis, want) {
		v.stepf(i, "axis is %s, but the step changes the sharding of axis %s", AxisText(s.Axis), AxisText(want))
	}
}

// reducedAxis is the axis an op combines, among its first input's
// non-reduction axes: a reduction's axis, a contraction's k (the first
// input's last axis); nil for other ops.
func (v *validator) reducedAxis(op *Op) *int {
	if !isContraction(op.Op) || isLookup(op.Op) {
		if !isReductionOp(op.Op) && !isLookup(op.Op) {
			return nil // slice's and cat's axis combines nothing
		}
		return op.Axis
	}
	in := v.tensor(op.Operands()[0])
	if in == nil || in.rank < 1 {
		return nil
	}
	k := in.rank - 1
	return &k
}

// firstInputAxis maps axis j of an op's output (a non-reduction position)
// to the axis of its first input that holds the same index in every
// element the op computes, or nil when there is none (an axis that
// broadcast adds, an extent-1 axis that broadcasts, a contraction's n) or
// j is nil.
func (v *validator) firstInputAxis(op *Op, j *int) *int {
	if j == nil {
		return nil
	}
	a := *j
	switch {
	case op.Op == "broadcast":
		if slices.Contains(op.Axes, a) {
			return nil
		}
		n, _ := slices.BinarySearch(op.Axes, a)
		a -= n
	case op.Axis != nil && isReductionOp(op.Op):
		if a >= *op.Axis {
			a++ // the output's axes skip the reduced one
		}
	case isContraction(op.Op), isBinaryOp(op.Op):
		in, out := v.tensor(op.Operands()[0]), v.tensor(op.Output)
		if in == nil || out == nil || !sameIndex(op.Op, valueShape(in.t), valueShape(out.t), a) {
			return nil
		}
	}
	return &a
}

// sameIndex reports whether output axis j of an elementwise op or a
// contraction holds the index of its first input's axis j: an axis the
// input has with the output's extent, and not a contraction's n.
func sameIndex(op string, in, out []int, j int) bool {
	if isContraction(op) && !isLookup(op) && j == len(in)-1 {
		return false // the first input's last axis is k; the output's is n
	}
	return j < len(in) && j < len(out) && in[j] == out[j]
}

// sourceOperand returns the operand of op that buffer s.Input, read by
// step i, is or was made from by local steps that keep its sharding, or
// "" when there is none.
func (v *validator) sourceOperand(i int, s *Step, op *Op) string {
	for _, name := range op.Operands() {
		if v.comesFromTensor(i, s.Input, name) {
			return name
		}
	}
	return ""
}

// comesFromTensor reports whether buffer name, read by step i, is tensor t
// or was made from it by local steps that keep its sharding.
func (v *validator) comesFromTensor(i int, name, t string) bool {
	for name != t {
		w := v.writesOf(name)
		if w == nil {
			return false
		}
		n := sort.SearchInts(w.steps, i) // writers before i
		if n == 0 {
			return false
		}
		// Every step that wrote the buffer must keep the sharding: several
		// writers (SendRecv pairs and a Copy, say) move data between devices.
		if w.moved[n-1] {
			return false
		}
		i = w.steps[n-1]
		name = v.p.Steps[i].Input
	}
	return true
}

// becomesTensor reports whether buffer name, written by step i, is tensor t
// or is turned into it by later Permute or Copy steps.
func (v *validator) becomesTensor(i int, name, t string) bool {
	for name != t {
		next := -1
		readers := v.readsOf(name)
		for _, k := range readers[sort.SearchInts(readers, i+1):] {
			if s := &v.p.Steps[k]; s.Type == Permute || s.Type == Copy {
				next = k
				break
			}
		}
		if next < 0 {
			return false
		}
		// As in comesFromTensor, every step that writes the next buffer
		// must keep the sharding: a Copy on the devices that already hold
		// their block, beside SendRecv pairs that permute the others,
		// does not make this buffer the tensor.
		if w := v.writesOf(v.p.Steps[next].Output); w.moved[len(w.moved)-1] {
			return false
		}
		name, i = v.p.Steps[next].Output, next
	}
	return true
}

// writes is the steps that wrote one buffer, in order, and for each
// whether it or an earlier one moved data between devices (a collective or
// a Slice) or computed new values (a Matmul or a Pointwise) rather than
// rearrange the buffer, keeping its sharding.
type writes struct {
	steps []int
	moved []bool
}

// indexBuffers records, for every buffer, the steps that write it and the
// steps that read it, so that following a buffer through the steps costs
// a search rather than a scan of the plan. Most buffers have one writer
// and a reader or two: a buffer's first entry is a slice of one element
// cut from a slab (an append past it copies), its writes come from
// another, so that a plan of many steps allocates a few slabs rather
// than a few slices a buffer.
func (v *validator) indexBuffers() {
	n := len(v.p.Steps)
	steps, moves := make([]int, n), make([]bool, n)
	v.stepOutputs = make([]*nameInfo, n)
	var reads []int
	for k := range v.p.Steps {
		s := &v.p.Steps[k]
		moved := s.Kind != KindLocal || s.Type == Slice || readsSeveral(s.Type)
		v.stepOutputs[k] = v.outputEntry(s)
		if w := &v.stepOutputs[k].writes; len(w.steps) > 0 {
			moved = moved || w.moved[len(w.moved)-1]
			w.steps, w.moved = append(w.steps, k), append(w.moved, moved)
		} else {
			steps[k], moves[k] = k, moved
			*w = writes{steps: steps[k : k+1 : k+1], moved: moves[k : k+1 : k+1]}
		}
		for _, name := range s.Operands() {
			e := v.entry(name)
			if e.reads != nil {
				e.reads = append(e.reads, k)
				continue
			}
			if len(reads) == cap(reads) {
				reads = make([]int, 0, n)
			}
			reads = append(reads, k)
			e.reads = reads[len(reads)-1 : len(reads) : len(reads)]
		}
	}
}

// producer returns the latest step before step i that wrote buffer name
// and its count.output, or false when no earlier step wrote it.
func (v *validator) producer(name string, i int) (buffer, bool) {
	w := v.writesOf(name)
	if w == nil {
		return buffer{}, false
	}
	n := sort.SearchInts(w.steps, i) // writers before i
	if n == 0 {
		return buffer{}, false
	}
	k := w.steps[n-1]
	return buffer{step: k, count: v.p.Steps[k].Count.Output}, true
}

// firstShardedAxis returns the axis of a tensor's first sharding entry (a
// SendRecv moves a whole shard and names that axis), or nil.
// It is a lookup: searching the tensors for every SendRecv step made
// plans of many ops quadratic.
func (v *validator) firstShardedAxis(name string) *int {
	if v.firstSharded == nil {
		v.firstSharded = map[string]*int{}
		for i := range v.p.Tensors {
			t := &v.p.Tensors[i]
			if _, seen := v.firstSharded[t.Name]; !seen && len(t.Sharding) > 0 {
				v.firstSharded[t.Name] = &t.Sharding[0].LogicalAxis
			}
		}
	}
	return v.firstSharded[name]
}

// shardedAxis returns the logical axis of tensor name that is sharded along
// the device type whose mesh axis team spans, or nil.
func (v *validator) shardedAxis(name string, team []int) *int {
	t := v.tensor(name)
	if t == nil || t.mesh == nil {
		return nil
	}
	typ := spannedType(*t.mesh, team)
	for k := range t.t.Sharding {
		// The plan's own field: a pointer to a loop variable's copy
		// escaped, an allocation a step.
		if sh := &t.t.Sharding[k]; sh.Type == typ {
			return &sh.LogicalAxis
		}
	}
	return nil
}

// spannedType names the device type whose mesh axis the team members (those
// in m) differ along; "" when they differ along none or several. On a 1-D
// mesh it is DIDx.
func spannedType(m Mesh, team []int) string {
	if len(m.Shape) == 1 {
		return "DIDx" // a 1-D mesh has one device type; cross-mesh teams span none
	}
	var first []int
	varying := -1
	for _, d := range team {
		c := coords(m, d)
		if c == nil {
			continue
		}
		if first == nil {
			first = c
			continue
		}
		for a := range c {
			if c[a] != first[a] {
				if varying >= 0 && varying != a {
					return ""
				}
				varying = a
			}
		}
	}
	if varying < 0 {
		return ""
	}
	return deviceTypes[len(m.Shape)-1-varying]
}

// coords returns the mesh coordinates of device d, or nil when d is not in m
// or m is malformed.
func coords(m Mesh, d int) []int {
	if len(m.Shape) == 0 || len(m.Shape) > 3 {
		return nil
	}
	for i, dev := range m.Devices {
		if dev != d {
			continue
		}
		c := make([]int, len(m.Shape))
		for a := len(m.Shape) - 1; a >= 0; a-- {
			if m.Shape[a] <= 0 {
				return nil
			}
			c[a] = i % m.Shape[a]
			i /= m.Shape[a]
		}
		return c
	}
	return nil
}

// SameAxis reports whether two optional axes are equal (both absent, or
// the same position).
func SameAxis(a, b *int) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// AxisText renders an optional axis as a plan writes it: its position, or
// null.
func AxisText(a *int) string {
	if a == nil {
		return "null"
	}
	return fmt.Sprint(*a)
}
