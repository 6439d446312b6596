package plan

import (
	"fmt"
	"slices"

	"github.com/nvcomm/nvcomm/internal/checked"
)

// checkCounts checks a step's element counts (rule 5): against its type and
// team size, against the local size of fusion tensors, and against what the
// producers of its inputs wrote.
func (v *validator) checkCounts(i int, s *Step) {
	c := s.Count
	if c.Input < 0 || c.Output < 0 {
		v.stepf(i, "count {%d, %d} is negative", c.Input, c.Output)
		return
	}
	v.checkTypeCount(i, s)
	var buf [2]read // most steps read one or two buffers
	reads := operandCounts(s, buf[:0])
	for k, name := range s.Operands() {
		if reads[k].ok {
			v.checkTensorRead(i, k, name, reads[k])
		}
	}
	v.checkTensorCount(i, "output", s.Output, c.Output)
	for k, name := range s.Operands() {
		if b, ok := v.producer(name, i); ok && reads[k].ok && b.count != reads[k].n {
			v.checkProducerCount(i, k, name, reads[k], b)
		}
	}
}

// read is how many elements a step reads from one of its inputs, and
// which of its fields say so; ok is false when they are invalid.
type read struct {
	n   int
	why string
	ok  bool
}

// operandCounts returns what a step reads from each input: count.input
// from the first; from a Matmul's B, Bt·K·N (K·N with broadcast_b) of its
// dims; from a Pointwise's later inputs, the product of their input_dims.
// It fills and returns reads, grown as needed.
func operandCounts(s *Step, reads []read) []read {
	names := s.Operands()
	reads = slices.Grow(reads[:0], len(names))[:len(names)]
	clear(reads)
	reads[0] = read{n: s.Count.Input, ok: true}
	for k := 1; k < len(names); k++ {
		switch {
		case s.Type == Matmul && k == 1 && len(s.Dims) == 4 && positive(s.Dims):
			bt, kk, n := s.Dims[0], s.Dims[2], s.Dims[3]
			why := fmt.Sprintf("Bt·K·N of dims %v", s.Dims)
			if s.BroadcastB {
				bt, why = 1, fmt.Sprintf("K·N of dims %v, broadcast_b", s.Dims)
			}
			reads[k].n, reads[k].ok = product([]int{bt, kk, n})
			reads[k].why = why
		case s.Type == Lookup && k == 1:
			reads[k] = lookupTableRead(s)
		case s.Type == ScatterAdd && k == 1:
			reads[k] = scatterValuesRead(s)
		case s.Type == Pointwise && k < len(s.InputDims) && positive(s.Dims) && broadcastsTo(s.InputDims[k], s.Dims) == "":
			reads[k].n, reads[k].ok = product(s.InputDims[k])
			reads[k].why = fmt.Sprintf("the product of input_dims[%d] %v", k, s.InputDims[k])
		case s.Type == Concat:
			reads[k].n, reads[k].ok = s.ConcatInput(k)
			reads[k].why = fmt.Sprintf("outer·m·inner of dims %v and windows[%d]", s.Dims, k)
		}
	}
	return reads
}

// positive reports whether every extent is at least 1.
func positive(dims []int) bool {
	for _, d := range dims {
		if d < 1 {
			return false
		}
	}
	return true
}

// checkTensorRead checks that the step reads a fusion tensor's local size
// from it.
func (v *validator) checkTensorRead(i, k int, name string, r read) {
	if k == 0 {
		v.checkTensorCount(i, "input", name, r.n)
		return
	}
	if t := v.tensor(name); t != nil && t.local >= 0 && t.local != r.n {
		v.stepf(i, "input %q holds %d elements per device, but the step reads %d (%s)", name, t.local, r.n, r.why)
	}
}

// checkProducerCount reports that the step reads another number of
// elements from input k than the step that wrote it wrote.
func (v *validator) checkProducerCount(i, k int, name string, r read, b buffer) {
	if k == 0 {
		v.stepf(i, "count.input is %d, but step %d wrote %q with %d elements", r.n, b.step, name, b.count)
		return
	}
	v.stepf(i, "input %q: step %d wrote %d elements, but the step reads %d (%s)", name, b.step, b.count, r.n, r.why)
}

// checkTypeCount checks count.input against count.output as the step type
// relates them (docs/plan.md, "Step semantics").
func (v *validator) checkTypeCount(i int, s *Step) {
	in, out := s.Count.Input, s.Count.Output
	switch s.Type {
	case Allgather:
		if t, ok := v.teamSize(i, s); ok {
			v.wantMultiple(i, "count.output", out, "count.input", in, t, "the team size")
		}
	case ReduceScatter, Scatter:
		if t, ok := v.teamSize(i, s); ok {
			v.wantMultiple(i, "count.input", in, "count.output", out, t, "the team size")
		}
	case Slice:
		if t, ok := v.teamSize(i, s); ok {
			v.checkSliceCount(i, s, t)
		}
	case AllToAll:
		v.wantEqual(i, in, out)
		if t, ok := v.teamSize(i, s); ok && in%t != 0 {
			v.stepf(i, "count.input %d does not divide among the %d members of a team", in, t)
		}
	case AllToAllV:
		if t, ok := v.teamSize(i, s); ok {
			v.checkSendCounts(i, s, t)
		}
	case Allreduce, Broadcast, Reduce, SendRecv, Copy, Permute, Tril:
		v.wantEqual(i, in, out)
	case Gather:
		if n, ok := v.gatherSenders(s); ok {
			v.wantMultiple(i, "count.output", out, "count.input", in, n, fmt.Sprintf("the team members that hold %q", s.Input))
		}
	case LocalReduce:
		if r, ok := reducedExtent(s); ok {
			v.wantMultiple(i, "count.input", in, "count.output", out, r, "the extent of reduce_dims")
		}
	}
}

// checkSliceCount checks a Slice's counts for teams of t: a strided one
// (dims) reads exactly t chunks; a plain one may read a short input,
// 1 <= count.input <= t·count.output, each rank keeping what is left of its
// chunk and zeros after it (docs/plan.md, "Step semantics").
func (v *validator) checkSliceCount(i int, s *Step, t int) {
	in, out := s.Count.Input, s.Count.Output
	if len(s.Dims) > 0 {
		v.wantMultiple(i, "count.input", in, "count.output", out, t, "the team size")
		return
	}
	most, ok := mul(out, t)
	switch {
	case !ok:
		v.stepf(i, "count.output %d * %d (the team size) overflows", out, t)
	case in < 1 || in > most:
		v.stepf(i, "count.input is %d, want 1 to count.output * %d = %d (the team size; the last chunks may be short)", in, t, most)
	}
}

// wantMultiple checks that got == factor*base.
func (v *validator) wantMultiple(i int, field string, got int, baseField string, base, factor int, why string) {
	want, ok := mul(base, factor)
	switch {
	case !ok:
		v.stepf(i, "%s is %d, but %s * %d (%s) overflows", field, got, baseField, factor, why)
	case got != want:
		v.stepf(i, "%s is %d, want %s * %d = %d (%s)", field, got, baseField, factor, want, why)
	}
}

func (v *validator) wantEqual(i int, in, out int) {
	if in != out {
		v.stepf(i, "count.output is %d, want count.input = %d", out, in)
	}
}

// teamSize returns the size of the step's teams; false, with a problem when
// they differ, when there is no common size.
func (v *validator) teamSize(i int, s *Step) (int, bool) {
	if len(s.Teams) == 0 || len(s.Teams[0]) == 0 {
		return 0, false
	}
	t := len(s.Teams[0])
	for k, team := range s.Teams[1:] {
		if len(team) != t {
			v.stepf(i, "teams 0 and %d differ in size (%d and %d)", k+1, t, len(team))
			return 0, false
		}
	}
	return t, true
}

// gatherSenders returns S, the number of members of a Gather's team that
// hold its input, or false when that is unknown.
func (v *validator) gatherSenders(s *Step) (int, bool) {
	if len(s.Teams) != 1 {
		return 0, false
	}
	holders := v.holders(s.Input)
	if holders == nil {
		return 0, false
	}
	n := 0
	seen := map[int]bool{}
	for _, d := range s.Teams[0] {
		if holders.has(&v.devIndex, d) && !seen[d] {
			n++
		}
		seen[d] = true
	}
	return n, true
}

// holders returns the devices that hold buffer name: the mesh of a fusion
// input, or the devices the steps so far left it on; nil when unknown.
func (v *validator) holders(name string) *deviceSet {
	if t := v.tensor(name); t != nil && v.isFusionInput(name) {
		if t.mesh == nil {
			return nil
		}
		return v.meshSet(t.t.Mesh, t.mesh)
	}
	if s := v.heldBy(name); s != nil && !s.unknown {
		return s
	}
	return nil
}

// meshSet returns the devices of a mesh as a set, once per mesh.
func (v *validator) meshSet(name string, m *Mesh) *deviceSet {
	if set, ok := v.meshSets[name]; ok {
		return set
	}
	set := v.newSet()
	for _, d := range m.Devices {
		set.add(&v.devIndex, d)
	}
	v.meshSets[name] = set
	return set
}

// checkTensorCount checks that a fusion tensor's count is its local size.
func (v *validator) checkTensorCount(i int, field, name string, got int) {
	t := v.tensor(name)
	if t == nil || t.local < 0 || got == t.local {
		return
	}
	v.stepf(i, "count.%s is %d, but %q holds %d elements per device", field, got, name, t.local)
}

// checkLocalFields checks dims, perm, reduce_dims and the fields of the
// computing steps (rule 6).
func (v *validator) checkLocalFields(i int, s *Step) {
	v.checkComputeFields(i, s)
	if len(s.SendCounts) > 0 && s.Type != AllToAllV {
		v.stepf(i, "send_counts is set, but only an AllToAllV takes them")
	}
	if len(s.Offsets) > 0 && s.Type != Lookup && s.Type != ScatterAdd && s.Type != Tril {
		v.stepf(i, "offsets is set, but only a Lookup, a ScatterAdd or a Tril takes them")
	}
	if s.Kind == KindCollective {
		v.checkNoLocalFields(i, s)
		return
	}
	switch s.Type {
	case Matmul:
		v.checkMatmul(i, s)
	case Lookup:
		v.checkLookup(i, s)
	case ScatterAdd:
		v.checkScatterAdd(i, s)
	case Tril:
		v.checkTril(i, s)
	case Pointwise:
		v.checkPointwise(i, s)
	case Permute:
		v.checkDims(i, s)
		if !isPermutation(s.Perm, len(s.Dims)) {
			v.stepf(i, "perm %v is not a permutation of the %d dims", s.Perm, len(s.Dims))
		}
	case LocalReduce:
		v.checkDims(i, s)
		v.checkReduceDims(i, s)
	case Pad, Unpad:
		v.checkPad(i, s)
	case Slice:
		if len(s.Dims) > 0 {
			v.checkSliceDims(i, s)
		}
	case Concat:
		v.checkConcat(i, s)
	}
	if len(s.Windows) > 0 && s.Type != Concat {
		v.stepf(i, "windows is set, but only a Concat takes them")
	}
	if (len(s.Valid) > 0 || s.Fill != nil) && s.Type != Pad && s.Type != Unpad {
		v.stepf(i, "valid or fill is set, but only a Pad or Unpad takes them")
	}
	if len(s.Perm) > 0 && s.Type != Permute {
		v.stepf(i, "perm is set, but only a Permute takes one")
	}
	if len(s.ReduceDims) > 0 && s.Type != LocalReduce {
		v.stepf(i, "reduce_dims is set, but only a LocalReduce takes them")
	}
}

// checkSendCounts checks an AllToAllV's split sizes: a t×t matrix of
// counts of at least 0 whose row k, what member k sends, sums to
// count.input or to 0 (a member that sends nothing, and need not hold the
// input), and whose column r, what member r receives, to count.output or
// to 0 (a member that receives nothing, and writes no output).
func (v *validator) checkSendCounts(i int, s *Step, t int) {
	if len(s.SendCounts) != t {
		v.stepf(i, "send_counts has %d rows, want one per member of a team (%d)", len(s.SendCounts), t)
		return
	}
	cols := make([]int, t)
	for k, row := range s.SendCounts {
		if len(row) != t {
			v.stepf(i, "send_counts[%d] has %d counts, want one per member of a team (%d)", k, len(row), t)
			return
		}
		sum, ok := 0, true
		for r, n := range row {
			if n < 0 {
				v.stepf(i, "send_counts[%d][%d] is %d, want >= 0", k, r, n)
				return
			}
			sum, ok = checked.Add(sum, n)
			if ok {
				cols[r], ok = checked.Add(cols[r], n)
			}
			if !ok {
				v.stepf(i, "send_counts[%d] sums to more elements than an int counts", k)
				return
			}
		}
		if sum != s.Count.Input && sum != 0 {
			v.stepf(i, "send_counts[%d] sums to %d, but member %d sends its whole input, count.input = %d, or nothing", k, sum, k, s.Count.Input)
		}
	}
	for r, sum := range cols {
		if sum != s.Count.Output && sum != 0 {
			v.stepf(i, "member %d receives %d elements (column %d of send_counts), but count.output is %d, or nothing", r, sum, r, s.Count.Output)
		}
	}
}

// checkSliceDims checks a strided Slice: dims [outer, T, inner] of
// count.input elements, T the team size, each rank keeping outer·inner.
func (v *validator) checkSliceDims(i int, s *Step) {
	if len(s.Dims) != 3 {
		v.stepf(i, "dims %v are not [outer, T, inner], three extents", s.Dims)
		return
	}
	v.checkDims(i, s)
	if t, ok := v.teamSize(i, s); ok && s.Dims[1] != t {
		v.stepf(i, "dims[1] is %d, want the team size %d (each rank keeps its index of it)", s.Dims[1], t)
	}
	if kept, ok := mul(s.Dims[0], s.Dims[2]); ok && kept != s.Count.Output {
		v.stepf(i, "count.output is %d, want outer·inner = %d (dims %v)", s.Count.Output, kept, s.Dims)
	}
}

func (v *validator) checkNoLocalFields(i int, s *Step) {
	for _, f := range []struct {
		name string
		n    int
	}{{"dims", len(s.Dims)}, {"perm", len(s.Perm)}, {"reduce_dims", len(s.ReduceDims)}, {"valid", len(s.Valid)}, {"windows", len(s.Windows)}} {
		if f.n > 0 {
			v.stepf(i, "%s is set, but a collective takes none", f.name)
		}
	}
}

// checkDims checks that dims has positive extents that hold count.input
// elements.
func (v *validator) checkDims(i int, s *Step) {
	if len(s.Dims) == 0 {
		v.stepf(i, "dims is missing, but type %s needs it", s.Type)
		return
	}
	for k, d := range s.Dims {
		if d < 1 {
			v.stepf(i, "dims[%d] is %d, want >= 1", k, d)
			return
		}
	}
	switch n, ok := product(s.Dims); {
	case !ok:
		v.stepf(i, "dims %v hold more elements than an int counts", s.Dims)
	case n != s.Count.Input:
		v.stepf(i, "dims %v hold %d elements, but count.input is %d", s.Dims, n, s.Count.Input)
	}
}

func (v *validator) checkReduceDims(i int, s *Step) {
	switch {
	case len(s.ReduceDims) == 0:
		v.stepf(i, "reduce_dims is missing, but type LocalReduce needs it")
	case !distinctPositions(s.ReduceDims, len(s.Dims)):
		v.stepf(i, "reduce_dims %v are not distinct positions in the %d dims", s.ReduceDims, len(s.Dims))
	}
}

// reducedExtent returns the product of a LocalReduce's reduced dims, or
// false when dims or reduce_dims are invalid.
func reducedExtent(s *Step) (int, bool) {
	if len(s.ReduceDims) == 0 || !distinctPositions(s.ReduceDims, len(s.Dims)) {
		return 0, false
	}
	r := 1
	for _, k := range s.ReduceDims {
		d := s.Dims[k]
		if d < 1 {
			return 0, false
		}
		var ok bool
		if r, ok = mul(r, d); !ok {
			return 0, false
		}
	}
	return r, true
}

// distinctPositions reports whether xs are distinct values in 0..n-1.
func distinctPositions(xs []int, n int) bool {
	seen := make([]bool, n)
	for _, x := range xs {
		if x < 0 || x >= n || seen[x] {
			return false
		}
		seen[x] = true
	}
	return true
}

// checkTril checks a Tril: dims [Bt, R, C] of positive extents that
// count.input counts, and one diagonal per device (offsets, any integer).
func (v *validator) checkTril(i int, s *Step) {
	if len(s.Offsets) != len(s.Devices) {
		v.stepf(i, "offsets has %d entries for %d devices (each device's diagonal)", len(s.Offsets), len(s.Devices))
	}
	if len(s.Dims) != 3 {
		v.stepf(i, "dims %v are not [Bt, R, C], three extents", s.Dims)
		return
	}
	v.checkDims(i, s)
}
