package plan

import "fmt"

// checkCounts checks a step's element counts (rule 5): against its type and
// team size, against the local size of fusion tensors, and against what the
// producer of its input wrote.
func (v *validator) checkCounts(i int, s *Step) {
	c := s.Count
	if c.Input < 0 || c.Output < 0 {
		v.stepf(i, "count {%d, %d} is negative", c.Input, c.Output)
		return
	}
	v.checkTypeCount(i, s)
	v.checkTensorCount(i, "input", s.Input, c.Input)
	v.checkTensorCount(i, "output", s.Output, c.Output)
	if b, ok := v.buffers[s.Input]; ok && b.count != c.Input {
		v.stepf(i, "count.input is %d, but step %d wrote %q with %d elements", c.Input, b.step, s.Input, b.count)
	}
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
	case ReduceScatter, Scatter, Slice:
		if t, ok := v.teamSize(i, s); ok {
			v.wantMultiple(i, "count.input", in, "count.output", out, t, "the team size")
		}
	case AllToAll:
		v.wantEqual(i, in, out)
		if t, ok := v.teamSize(i, s); ok && in%t != 0 {
			v.stepf(i, "count.input %d does not divide among the %d members of a team", in, t)
		}
	case Allreduce, Broadcast, Reduce, SendRecv, Copy, Permute:
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
		if holders[d] && !seen[d] {
			n++
		}
		seen[d] = true
	}
	return n, true
}

// holders returns the devices that hold buffer name: the mesh of a fusion
// input, or the devices the steps so far left it on; nil when unknown.
func (v *validator) holders(name string) map[int]bool {
	if t := v.tensors[name]; t != nil && v.isFusionInput(name) {
		if t.mesh == nil {
			return nil
		}
		return v.meshSet(t.t.Mesh, t.mesh)
	}
	if v.unknownHolders[name] {
		return nil
	}
	return v.held[name]
}

// meshSet returns the devices of a mesh as a set, once per mesh.
func (v *validator) meshSet(name string, m *Mesh) map[int]bool {
	if set, ok := v.meshSets[name]; ok {
		return set
	}
	set := make(map[int]bool, len(m.Devices))
	for _, d := range m.Devices {
		set[d] = true
	}
	v.meshSets[name] = set
	return set
}

// checkTensorCount checks that a fusion tensor's count is its local size.
func (v *validator) checkTensorCount(i int, field, name string, got int) {
	t := v.tensors[name]
	if t == nil || t.local < 0 || got == t.local {
		return
	}
	v.stepf(i, "count.%s is %d, but %q holds %d elements per device", field, got, name, t.local)
}

// checkLocalFields checks dims, perm and reduce_dims (rule 6).
func (v *validator) checkLocalFields(i int, s *Step) {
	if s.Kind == KindCollective {
		v.checkNoLocalFields(i, s)
		return
	}
	switch s.Type {
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

func (v *validator) checkNoLocalFields(i int, s *Step) {
	for _, f := range []struct {
		name string
		n    int
	}{{"dims", len(s.Dims)}, {"perm", len(s.Perm)}, {"reduce_dims", len(s.ReduceDims)}, {"valid", len(s.Valid)}} {
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
