package plan

// This file follows which devices hold which buffers, as simulate does
// with real data: a device takes part in a step only with the buffers it
// holds, so a step whose readers lack its input, or an op that leaves a
// device of its output's mesh without the output, cannot compute the
// program, whatever the numbers say.

// readers returns the devices of a step that must hold its input: those
// that send it or transform it. A Gather or Reduce needs none (members
// without the input contribute nothing, as when the root is appended to
// the team); a Broadcast, Scatter or SendRecv only its source; an
// AllToAllV its members that send something.
func readers(s *Step) []int { return readersIn(s, nil) }

// readersIn is readers, the members of several teams listed in buf's
// memory (membersIn).
func readersIn(s *Step, buf *[]int) []int {
	switch s.Type {
	case Gather, Reduce:
		return nil
	case Broadcast, Scatter:
		if s.Root == nil {
			return nil
		}
		return []int{*s.Root}
	case SendRecv:
		return pairEnds(s, 0)
	case AllToAllV:
		return exchangeMembers(s, s.Count.Input, func(k, r int) int { return s.SendCounts[k][r] })
	}
	return membersIn(s, buf)
}

// writers returns the devices a step leaves holding its output: the root
// of a Gather or Reduce, the receiver of a SendRecv, an AllToAllV's
// members that receive something, every member or device otherwise.
func writers(s *Step) []int { return writersIn(s, nil) }

// writersIn is writers, the members of several teams listed in buf's
// memory (membersIn).
func writersIn(s *Step, buf *[]int) []int {
	switch s.Type {
	case Gather, Reduce:
		if s.Root == nil {
			return nil
		}
		return []int{*s.Root}
	case SendRecv:
		return pairEnds(s, 1)
	case AllToAllV:
		return exchangeMembers(s, s.Count.Output, func(r, k int) int { return s.SendCounts[k][r] })
	}
	return membersIn(s, buf)
}

// pairEnds lists a SendRecv's senders (end 0) or receivers (end 1): one
// device of each team [sender, receiver]; a team of another size has none.
func pairEnds(s *Step, end int) []int {
	var out []int
	for _, team := range s.Teams {
		if len(team) == 2 {
			out = append(out, team[end])
		}
	}
	return out
}

// exchangeMembers lists the members of an AllToAllV's teams whose line of
// send_counts (count(k, r) for r in the team) is not all zeros: those that
// send, read the input, or that receive, write the output. With no
// elements to move (n = 0), every member does, as for other collectives.
// A malformed matrix counts every member; it is reported as such.
func exchangeMembers(s *Step, n int, count func(k, r int) int) []int {
	all := members(s)
	if n == 0 || len(s.Teams) == 0 || len(s.SendCounts) != len(s.Teams[0]) {
		return all
	}
	t := len(s.SendCounts)
	for _, row := range s.SendCounts {
		if len(row) != t {
			return all
		}
	}
	active := make([]bool, t)
	for k := range t {
		for r := range t {
			if count(k, r) != 0 {
				active[k] = true
				break
			}
		}
	}
	var out []int
	for _, team := range s.Teams {
		for k, d := range team {
			if k < t && active[k] {
				out = append(out, d)
			}
		}
	}
	return out
}

// members lists a step's devices and team members.
// Members lists the devices a step runs on: its teams' members, in order,
// or its devices. The slice may be the step's own: callers only read it.
func (s *Step) Members() []int { return members(s) }

func members(s *Step) []int { return membersIn(s, nil) }

// membersIn is members, the members of several teams listed in *buf's
// memory (grown as needed; a new list when buf is nil): the validator
// lists them for every step, twice, and a new list a step was a tenth of
// its allocations on a 2-D mesh.
func membersIn(s *Step, buf *[]int) []int {
	switch len(s.Teams) {
	case 0:
		return s.Devices
	case 1:
		return s.Teams[0] // no copy: callers only read it
	}
	var b []int
	if buf != nil {
		b = (*buf)[:0]
	}
	for _, team := range s.Teams {
		b = append(b, team...)
	}
	if buf != nil {
		*buf = b
	}
	return b
}

// checkReaders checks that every device that must hold the step's inputs
// holds each of them.
func (v *validator) checkReaders(i int, s *Step) {
	rs := readersIn(s, &v.teamScratch)
	for _, name := range s.Operands() {
		have := v.holders(name)
		for _, d := range rs {
			if have != nil && !have.has(&v.devIndex, d) {
				v.stepf(i, "device %d reads %q, which it does not hold", d, name)
			}
		}
	}
}

// recordWriters notes the devices that hold the step's output after it.
func (v *validator) recordWriters(s *Step) {
	held := v.heldSet(s.Output)
	for _, d := range writersIn(s, &v.teamScratch) {
		held.add(&v.devIndex, d)
	}
}

// checkOutputsHeld checks that every device of an op output's mesh holds
// the output once the steps are done.
func (v *validator) checkOutputsHeld() {
	for i, op := range v.p.Ops {
		t, held := v.opOutputs[i].tensor, v.opOutputs[i].held
		if t == nil || t.mesh == nil || held == nil || held.unknown {
			continue // reported as a missing tensor, or a step with problems
		}
		for _, d := range t.mesh.Devices {
			if !held.has(&v.devIndex, d) {
				v.planf("op %d: device %d of mesh %q never receives the output %q", i, d, t.t.Mesh, op.Output)
			}
		}
	}
}
