package plan

import (
	"slices"

	"github.com/nvcomm/nvcomm/internal/ops"
)

// checkSteps checks every step in order (rules 4 to 6), tracking the
// buffers that earlier steps wrote.
func (v *validator) checkSteps() {
	v.indexBuffers()
	for i := range v.p.Steps {
		s := &v.p.Steps[i]
		v.checkStep(i, s)
		v.recordWriters(s)
	}
}

func (v *validator) checkStep(i int, s *Step) {
	before := v.probs.Count()
	if s.ID != i {
		v.stepf(i, "id is %d, want %d", s.ID, i)
	}
	var op *Op
	if s.Op >= 0 && s.Op < len(v.p.Ops) {
		op = &v.p.Ops[s.Op]
	} else {
		v.stepf(i, "op %d is not an op of the plan (%d ops)", s.Op, len(v.p.Ops))
	}
	known := v.checkKind(i, s)
	v.checkGraphFields(i, s)
	v.checkMembers(i, s)
	if known {
		v.checkRoot(i, s)
		v.checkReduceOp(i, s, op)
	}
	v.checkInputs(i, s, op)
	v.checkOutput(i, s, op)
	axisOK := v.checkStepAxis(i, s, op)
	if known && axisOK {
		v.checkCollectiveAxis(i, s, op)
		v.checkCounts(i, s)
		v.checkLocalFields(i, s)
	}
	v.checkBytes(i, s)
	// What follows relies on a sound step: its checks would only echo
	// the problems above.
	if v.probs.Count() > before {
		v.trafficUnknown = true
		v.heldSet(s.Output).unknown = true
		return
	}
	v.checkExpr(i, s, op)
	v.checkReaders(i, s)
	v.checkTraffic(i, s, op)
}

// checkExpr checks that the step names its op as the op renders itself.
func (v *validator) checkExpr(i int, s *Step, op *Op) {
	if op != nil && v.opOK[s.Op] && s.Expr != v.opExpr(s.Op) {
		v.stepf(i, "expr is %q, but op %d is %q", s.Expr, s.Op, v.opExpr(s.Op))
	}
}

// opExpr returns op k's Expr, rendered once: the steps of an op (a few
// each) all name it, and rendering it per step was a formatted string a
// step.
func (v *validator) opExpr(k int) string {
	if v.exprs == nil {
		v.exprs = make([]string, len(v.p.Ops))
	}
	if v.exprs[k] == "" {
		v.exprs[k] = v.p.Ops[k].Expr()
	}
	return v.exprs[k]
}

// checkKind checks the kind and the type and reports whether the type is
// one of the kind's.
func (v *validator) checkKind(i int, s *Step) bool {
	switch s.Kind {
	case KindCollective:
		if !slices.Contains(CollectiveTypes, s.Type) {
			v.stepf(i, "type %q is not a collective type", s.Type)
			return false
		}
	case KindLocal:
		if !slices.Contains(LocalTypes, s.Type) {
			v.stepf(i, "type %q is not a local step type", s.Type)
			return false
		}
	default:
		v.stepf(i, "kind %q is not collective or local", s.Kind)
		return false
	}
	return true
}

// checkMembers checks teams and devices: which of the two the kind takes,
// that they name devices of the plan, and that no device appears twice.
func (v *validator) checkMembers(i int, s *Step) {
	switch s.Kind {
	case KindCollective:
		if len(s.Teams) == 0 {
			v.stepf(i, "a collective needs teams")
		}
		if len(s.Devices) > 0 {
			v.stepf(i, "a collective takes teams, not devices")
		}
	case KindLocal:
		if s.Type == Slice {
			v.checkSliceMembers(i, s)
			break
		}
		if len(s.Devices) == 0 {
			v.stepf(i, "a local step needs devices")
		}
		if len(s.Teams) > 0 {
			v.stepf(i, "a local step takes devices, not teams")
		}
	}
	v.checkTeams(i, s)
	v.checkDevices(i, s)
}

// checkSliceMembers checks a Slice, the one local step that takes teams:
// each member keeps the chunk its rank names.
func (v *validator) checkSliceMembers(i int, s *Step) {
	if len(s.Teams) == 0 {
		v.stepf(i, "a Slice needs teams (each member keeps the chunk of its rank)")
	}
	if len(s.Devices) > 0 {
		v.stepf(i, "a Slice takes teams, not devices")
	}
}

func (v *validator) checkTeams(i int, s *Step) {
	teamOf, inTeam := &v.teamOf, &v.inTeam
	teamOf.reset(v.devIndex.n)
	pairs := s.Type == SendRecv && len(s.Teams) > 1 // a device may send in one and receive in another
	for k, team := range s.Teams {
		if len(team) == 0 {
			v.stepf(i, "team %d is empty", k)
		}
		selfCopy := s.Type == SendRecv && len(team) == 2
		inTeam.reset(v.devIndex.n)
		for _, d := range team {
			if _, in := inTeam.get(&v.devIndex, d); in {
				if !selfCopy {
					v.stepf(i, "device %d is in team %d more than once", d, k)
				}
				continue
			}
			inTeam.set(&v.devIndex, d, 0)
			if !v.inMesh(d) {
				v.stepf(i, "device %d of team %d is in no mesh", d, k)
			}
			if pairs {
				continue // checkPairs
			}
			if j, ok := teamOf.get(&v.devIndex, d); ok {
				v.stepf(i, "device %d is in teams %d and %d", d, j, k)
			} else {
				teamOf.set(&v.devIndex, d, int32(k))
			}
		}
	}
}

func (v *validator) checkDevices(i int, s *Step) {
	seen := &v.inTeam
	seen.reset(v.devIndex.n)
	for _, d := range s.Devices {
		n, _ := seen.get(&v.devIndex, d)
		n++
		seen.set(&v.devIndex, d, n)
		switch {
		case n == 2:
			v.stepf(i, "device %d is listed more than once", d)
		case n == 1 && !v.inMesh(d):
			v.stepf(i, "device %d is in no mesh", d)
		}
	}
}

// checkRoot checks that exactly the rooted types have a root, in their
// single team; a SendRecv of several pairs has none, each team's first
// member sending.
func (v *validator) checkRoot(i int, s *Step) {
	rooted := IsRooted(s.Type)
	switch {
	case s.Type == SendRecv && len(s.Teams) > 1:
		v.checkPairs(i, s)
	case !rooted && s.Root != nil:
		v.stepf(i, "root is %d, but type %s takes no root", *s.Root, s.Type)
	case rooted && s.Root == nil:
		v.stepf(i, "root is null, but type %s needs one", s.Type)
	case !rooted:
	case len(s.Teams) != 1:
		v.stepf(i, "type %s needs exactly one team, got %d", s.Type, len(s.Teams))
	case s.Type == SendRecv:
		v.checkSendRecv(i, *s.Root, s.Teams[0])
	case len(s.Teams[0]) > 0 && !slices.Contains(s.Teams[0], *s.Root):
		v.stepf(i, "root %d is not in the team", *s.Root)
	}
}

// checkPairs checks a SendRecv of several pairs: no root (each team's
// first member is its sender), every team [sender, receiver] of two
// devices, and every device sending at most once and receiving at most
// once, as the ranks of a ring shift do. A device that does both reads the
// input while it writes the output, so the two must be other buffers.
func (v *validator) checkPairs(i int, s *Step) {
	if s.Root != nil {
		v.stepf(i, "root is %d, but a SendRecv of %d pairs has none: each team's first member sends", *s.Root, len(s.Teams))
	}
	sends, receives := map[int]int{}, map[int]int{}
	both := -1
	for k, team := range s.Teams {
		if len(team) != 2 || team[0] == team[1] {
			v.stepf(i, "team %d of a SendRecv of several pairs must be [sender, receiver], two devices, got %v", k, team)
			continue
		}
		for end, seen := range []map[int]int{sends, receives} {
			d := team[end]
			if j, ok := seen[d]; ok {
				v.stepf(i, "device %d %s in teams %d and %d; in a SendRecv of pairs a device sends at most once and receives at most once", d, []string{"sends", "receives"}[end], j, k)
				continue
			}
			seen[d] = k
		}
	}
	for d := range receives {
		if _, ok := sends[d]; ok && (both < 0 || d < both) {
			both = d
		}
	}
	if both >= 0 && s.Input == s.Output {
		v.stepf(i, "device %d both sends and receives %q: a SendRecv of pairs must not write the buffer it reads", both, s.Input)
	}
}

func (v *validator) checkSendRecv(i, root int, team []int) {
	switch {
	case len(team) == 0:
		// reported as an empty team
	case len(team) > 2:
		v.stepf(i, "a SendRecv team is [sender, receiver], got %d members", len(team))
	case root != team[0]:
		v.stepf(i, "root %d is not the sender %d (the first member of the team)", root, team[0])
	}
}

// checkReduceOp checks that exactly the reduction types have a reduce op,
// a valid one, and the op's own when the op reduces or contracts.
func (v *validator) checkReduceOp(i int, s *Step, op *Op) {
	red := IsReduction(s.Type)
	switch {
	case !red && s.ReduceOp != nil:
		v.stepf(i, "reduce_op is %q, but type %s does not reduce", *s.ReduceOp, s.Type)
	case red && s.ReduceOp == nil:
		v.stepf(i, "reduce_op is null, but type %s needs one", s.Type)
	case !red:
	case !isReductionOp(*s.ReduceOp):
		v.stepf(i, "reduce_op %q is not sum, prod, max or min", *s.ReduceOp)
	case op != nil && opReduceOp(op.Op) != "" && *s.ReduceOp != opReduceOp(op.Op) && !v.computesWithin[s.Op]:
		// An op that computes its composite whole reduces as the
		// composite's ops would: ring attention's row max and sums.
		v.stepf(i, "reduce_op is %q, but op %d is a %s", *s.ReduceOp, s.Op, op.Op)
	}
}

// opReduceOp is what op combines partial results with: a reduction its
// own operator, a contraction the sum over k; "" for other ops.
func opReduceOp(op string) string {
	switch {
	case isReductionOp(op):
		return ops.Lookup(op).Combine
	case isContraction(op):
		return "sum"
	}
	return ""
}

// checkInputs checks how the step names the buffers it reads (input for
// one, inputs for the several a Matmul, a binary Pointwise or a Concat
// reads), and
// each of them.
func (v *validator) checkInputs(i int, s *Step, op *Op) {
	switch {
	case len(s.Inputs) > 0 && s.Input != "":
		v.stepf(i, "has both input %q and inputs; a step that reads several buffers lists them in inputs alone", s.Input)
	case len(s.Inputs) == 1:
		v.stepf(i, "inputs lists one buffer; a step that reads one names it in input")
	case len(s.Inputs) > 0 && !readsSeveral(s.Type):
		v.stepf(i, "inputs is set, but type %s reads one buffer (input)", s.Type)
	}
	for _, name := range s.Operands() {
		v.checkInput(i, s, name, op)
	}
}

// readsSeveral reports whether a step type may read several buffers.
func readsSeveral(typ string) bool {
	return typ == Matmul || typ == Pointwise || typ == Lookup || typ == ScatterAdd || typ == Concat
}

// checkInput checks that a buffer the step reads is a fusion input or a
// buffer an earlier step wrote, and, for a tensor, an operand or the
// output of the step's op.
func (v *validator) checkInput(i int, s *Step, name string, op *Op) {
	if v.tensor(name) == nil {
		v.checkIntermediate(i, "input", name, op)
	} else if op != nil && !slices.Contains(op.Operands(), name) && name != op.Output && !v.readsWhole(s.Op, name) {
		which := "the input"
		if len(op.Operands()) > 1 {
			which = "an input"
		}
		v.stepf(i, "input %q is neither %s nor the output of op %d", name, which, s.Op)
	}
	if _, ok := v.producer(name, i); !ok && !v.isFusionInput(name) {
		v.stepf(i, "input %q is neither a fusion input nor written by an earlier step", name)
	}
}

// readsWhole reports whether op k computes its composite whole (other
// ops are computed within it) and name is an operand of that composite.
func (v *validator) readsWhole(k int, name string) bool {
	if !v.computesWithin[k] {
		return false
	}
	if of := v.p.Ops[k].Of; of != nil {
		return slices.Contains(of.Inputs, name)
	}
	for j := range v.p.Ops { // a decomposed collective reads its set's input
		if o := &v.p.Ops[j]; o.Within != nil && *o.Within == k && o.Input == name {
			return true
		}
	}
	return false
}

// checkOutput checks that the output is the op's output tensor or one of its
// intermediate buffers.
func (v *validator) checkOutput(i int, s *Step, op *Op) {
	switch {
	case v.stepOutput(i).tensor == nil:
		v.checkIntermediate(i, "output", s.Output, op)
	case v.isFusionInput(s.Output):
		v.stepf(i, "output %q is a fusion input", s.Output)
	case op != nil && s.Output != op.Output:
		v.stepf(i, "output %q is not the output %q of op %d", s.Output, op.Output, s.Op)
	}
}

// checkIntermediate checks a buffer that is not a tensor of the plan: an
// intermediate buffer of the op whose step first writes it, which no step
// of another op may read or write (the engines name buffers by name alone:
// two ops sharing one would read each other's data).
func (v *validator) checkIntermediate(i int, field, name string, op *Op) {
	if b, ok := v.producer(name, i); ok && op != nil && v.p.Steps[b.step].Op != v.p.Steps[i].Op {
		v.stepf(i, "%s %q is an intermediate buffer of op %d (step %d writes it); an op's intermediate buffers are its own", field, name, v.p.Steps[b.step].Op, b.step)
	}
}

// checkStepAxis checks that the axis, when set, is a non-reduction axis of
// an input of the op (the largest, when it has several).
func (v *validator) checkStepAxis(i int, s *Step, op *Op) bool {
	if s.Axis == nil {
		return true
	}
	a := *s.Axis
	if s.Kind == KindLocal && s.Type != Slice {
		v.stepf(i, "axis is %d, but a local step other than Slice takes none", a)
		return false
	}
	if a < 0 {
		v.stepf(i, "axis is %d, want >= 0", a)
		return false
	}
	if op == nil {
		return false
	}
	if name, in := v.widestOperand(op); in != nil && a >= in.rank {
		v.stepf(i, "axis %d is not among the %d non-reduction axes of %q", a, in.rank, name)
		return false
	}
	return true
}

// widestOperand returns the operand of op with the most non-reduction
// axes, the first of them on a tie, or nil when an operand's rank is
// unknown.
func (v *validator) widestOperand(op *Op) (string, *tensorInfo) {
	var name string
	var widest *tensorInfo
	for _, n := range op.Operands() {
		in := v.tensor(n)
		if in == nil || in.rank < 0 {
			return "", nil
		}
		if widest == nil || in.rank > widest.rank {
			name, widest = n, in
		}
	}
	return name, widest
}

// checkBytes checks that collectives, and only they, carry bytes, and that
// the bytes are not negative.
func (v *validator) checkBytes(i int, s *Step) {
	b := s.Bytes
	switch {
	case b == nil && s.Kind == KindCollective:
		v.stepf(i, "a collective needs bytes (sent_per_device, received_per_device)")
	case b != nil && s.Kind == KindLocal:
		v.stepf(i, "a local step moves no bytes between devices; bytes must be absent")
	case b != nil && (b.SentPerDevice < 0 || b.ReceivedPerDevice < 0):
		v.stepf(i, "bytes {%d, %d} are negative", b.SentPerDevice, b.ReceivedPerDevice)
	case b != nil && (b.LowerBound < 0 || b.LowerBound > b.ReceivedPerDevice):
		// What the busiest device must receive is at most what it does.
		v.stepf(i, "lower_bound is %d, not between 0 and received_per_device %d", b.LowerBound, b.ReceivedPerDevice)
	}
}
