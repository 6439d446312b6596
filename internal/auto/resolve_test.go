package auto

import "slices"

// The runner-ups as auto found them before the backward pass read them
// off the tables (solver.backward): by solving again with the chosen
// option barred, from the first op that sees the tensor. Kept as the
// reference TestRunnerUps compares the tables' runner-ups with.

// runnerUp solves again with decision k barred from its chosen option.
func runnerUp(sv *solver, k int, best *solution) (Decision, error) {
	others := make([]bool, len(sv.m.vars[k].options))
	for o := range others {
		others[o] = o != best.choice[k]
	}
	return runnerUpAmong(sv, k, best, others)
}

// runnerUpAmong solves again with decision k allowed only the options
// among (which leave out its chosen one), after an exact solve: from the
// step that first sees k on, the layers before it kept (and restored
// after, for the next runner-up). Allowed only the options that tie for
// the runner-up's cost, the programme keeps fewer states while k is on
// its frontier, and finds the same assignment: every other option costs
// more.
func runnerUpAmong(sv *solver, k int, best *solution, among []bool) (Decision, error) {
	v := sv.m.vars[k]
	d := Decision{Tensor: v.t.Name, Chosen: v.describe(best.choice[k])}
	sv.allowed[k] = among
	layers, layerBytes := sv.layers, sv.layerBytes
	defer func() { sv.allowed[k], sv.layers, sv.layerBytes = nil, layers, layerBytes }()
	other, err := sv.resolveFrom(sv.firstSeen(k))
	switch {
	case err == errInfeasible || err == errStopped:
		return d, nil // no runner-up to show
	case err == nil && !sv.exact:
		return d, nil // stopped at the time limit: its greedy finish may not be the runner-up
	case err != nil:
		return d, err
	}
	d.RunnerUp = v.describe(other.choice[k])
	d.Slower = float64(other.cost-best.cost) / 1e12
	return d, nil
}

// resolveFrom solves again, after an exact solve, with a change to the
// options allowed of variables first seen at step from or later: the
// layers before it do not depend on them (advance reads only its step's
// fresh variables' options), so the last exact solve's are kept and the
// programme runs on from there. A runner-up's solve so does half the work
// of a full one on average, with the same result (TestResolveFrom).
func (s *solver) resolveFrom(from int) (*solution, error) {
	if from < 0 || from >= len(s.layers) {
		return s.solve() // no exact solve before, or a variable no op reads
	}
	layer, bytes := s.layers[from], s.layerBytes[from]
	s.layers, s.layerBytes, s.tableBytes = s.layers[:from:from], s.layerBytes[:from:from], bytes
	return s.resume(from, layer)
}

// firstSeen is the step whose op first reads or writes variable k.
func (s *solver) firstSeen(k int) int {
	return slices.IndexFunc(s.steps, func(st *step) bool { return slices.Contains(st.fresh, k) })
}
