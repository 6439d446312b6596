package ir

// This file orders a micro-batched fusion's ops per its pipeline's
// schedule. The ops of one stage, one micro-batch and one direction
// (forward or backward) are a group: the unit a schedule orders. Each
// stage runs its groups in the schedule's order; the op list interleaves
// the stages' sequences, a group of each stage in turn whose operands
// are ready, so that the list is a topological order in which every
// device sees its own stage's schedule. A step graph (plan format 2) then
// lets the stages run at once, and the makespan shows the bubble.

// group is one stage's forward or backward of one micro-batch.
type group struct {
	back      bool
	mb, stage int
}

// StageOrder is the order in which stage (of stages) runs the forwards
// and backwards of m micro-batches under schedule: each entry a
// micro-batch, negative for a backward (−1 − mb). A forward-only fusion
// skips the backwards, and GPipe and 1F1B then coincide.
func StageOrder(schedule string, stages, stage, m int) []int {
	var seq []int
	fwd := func(mb int) { seq = append(seq, mb) }
	bwd := func(mb int) { seq = append(seq, -1-mb) }
	if schedule == Schedule1F1B {
		// Warm-up of stages − stage − 1 forwards (Narayanan et al.,
		// 2021, PipeDream-Flush): the stage's in-flight micro-batches
		// never exceed that plus one.
		warm := min(stages-stage-1, m)
		for mb := range warm {
			fwd(mb)
		}
		for i := range m - warm {
			fwd(warm + i)
			bwd(i)
		}
		for mb := m - warm; mb < m; mb++ {
			bwd(mb)
		}
		return seq
	}
	for mb := range m {
		fwd(mb)
	}
	for mb := range m {
		bwd(mb)
	}
	return seq
}

// orderPipeline orders g's ops per the schedule: first the ops that no
// micro-batch reads and that read none (the prologue: a weight's cast),
// then the stages' groups, then the ops that read the micro-batches'
// accumulated results only (the epilogue). It numbers the ops and lists
// the tensors again: inputs first, then in the order the ops produce
// them.
func orderPipeline(p *Source, g *Fusion, e *expansion) bool {
	pl := e.pl
	groups := map[group][]*Op{}
	late := map[*Op]bool{} // ops of the epilogue
	var pro, epi []*Op
	for _, op := range g.Ops {
		mb := e.mb[op]
		if mb >= 0 {
			k := group{back: e.backward[op], mb: mb, stage: e.stage[op]}
			groups[k] = append(groups[k], op)
			continue
		}
		after := false
		for _, in := range op.Inputs {
			if pr := in.Producer; pr != nil && (e.mb[pr] >= 0 || late[pr]) {
				after = true
			}
		}
		if after {
			late[op] = true
			epi = append(epi, op)
		} else {
			pro = append(pro, op)
		}
	}
	done := map[*Op]bool{}
	order := make([]*Op, 0, len(g.Ops))
	place := func(ops []*Op) {
		for _, op := range ops {
			done[op] = true
			order = append(order, op)
		}
	}
	place(pro)
	n := len(pl.Stages)
	seqs := make([][]int, n)
	next := make([]int, n)
	left := 0
	for s := range n {
		seqs[s] = StageOrder(pl.Schedule, n, s, pl.Microbatches)
		left += len(seqs[s])
	}
	for left > 0 {
		progress := false
		for s := range n {
			if next[s] == len(seqs[s]) {
				continue
			}
			mb, back := seqs[s][next[s]], false
			if mb < 0 {
				mb, back = -1-mb, true
			}
			ops := groups[group{back: back, mb: mb, stage: s}]
			if !ready(ops, done) {
				continue
			}
			place(ops)
			next[s]++
			left--
			progress = true
		}
		if !progress {
			p.errs.AddHint(g.Ops[0].Pos, "please report it",
				"pipeline: internal error: the %s schedule waits on itself (stages at steps %v)", pl.Schedule, next)
			return false
		}
	}
	place(epi)
	g.Ops = order
	tensors := make([]*Tensor, 0, len(g.Tensors))
	for _, t := range g.Tensors {
		if t.Producer == nil {
			tensors = append(tensors, t)
		}
	}
	for i, op := range order {
		op.Index = i
		op.Out.Producer = op
		tensors = append(tensors, op.Out)
	}
	g.Tensors = tensors
	return true
}

// ready reports whether every operand of ops is an input, made by a
// placed op, or made by an op of ops before it.
func ready(ops []*Op, done map[*Op]bool) bool {
	mine := map[*Op]bool{}
	for _, op := range ops {
		for _, in := range op.Inputs {
			if pr := in.Producer; pr != nil && !done[pr] && !mine[pr] {
				return false
			}
		}
		mine[op] = true
	}
	return true
}
