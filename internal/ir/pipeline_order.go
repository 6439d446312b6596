package ir

// This file orders a micro-batched fusion's ops per its pipeline's
// schedule. The ops of one stage, one micro-batch and one direction
// (forward or backward) are a group: the unit a schedule orders. Each
// stage runs its groups in the schedule's order; the op list interleaves
// the stages' sequences, a group of each stage in turn whose operands
// are ready, so that the list is a topological order in which every
// device sees its own stage's schedule. A step graph (plan format 2) then
// lets the stages run at once, and the makespan shows the bubble. Under
// the interleaved schedule a device group holds several stages, and the
// sequences are the groups'.

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

// InterleavedOrder is the order in which device group rank (of groups,
// each holding v stages: stage c·groups + rank for chunk c) runs its
// stages' forwards and backwards of m micro-batches under
// ScheduleInterleaved, as Megatron-LM's
// forward_backward_pipelining_with_interleaving does: the group's
// virtual micro-batches k = 0 … m·v − 1 run their forwards on chunks
// 0, 1, … in rounds of one micro-batch per group, and their backwards on
// chunks v − 1, v − 2, …; a warm-up of 2·(groups − rank − 1) + (v − 1)·groups
// forwards (all of them when m = groups), then one forward and one backward in
// turn, then the backwards left. m is a multiple of groups.
func InterleavedOrder(groups, v, rank, m int) []Slot {
	total := m * v
	warm := min(2*(groups-rank-1)+(v-1)*groups, total)
	if m == groups {
		warm = total
	}
	slot := func(k int, back bool) Slot {
		round := k % (groups * v)
		chunk := round / groups
		if back {
			chunk = v - 1 - chunk
		}
		return Slot{Stage: chunk*groups + rank, Microbatch: k/(groups*v)*groups + k%groups, Backward: back}
	}
	var seq []Slot
	for k := range warm {
		seq = append(seq, slot(k, false))
	}
	for i := range total - warm {
		seq = append(seq, slot(warm+i, false), slot(i, true))
	}
	for k := total - warm; k < total; k++ {
		seq = append(seq, slot(k, true))
	}
	return seq
}

// Slot is one entry of a device group's order: a stage's forward or
// backward of one micro-batch.
type Slot struct {
	Stage, Microbatch int
	Backward          bool
}

// groupOrder is device group rank's order of slots under pl's schedule.
func groupOrder(pl *Pipeline, rank int) []Slot {
	n := len(pl.Stages)
	if pl.Schedule == ScheduleInterleaved {
		return InterleavedOrder(pl.Groups, n/pl.Groups, rank, pl.Microbatches)
	}
	var seq []Slot
	for _, mb := range StageOrder(pl.Schedule, n, rank, pl.Microbatches) {
		if mb < 0 {
			seq = append(seq, Slot{Stage: rank, Microbatch: -1 - mb, Backward: true})
		} else {
			seq = append(seq, Slot{Stage: rank, Microbatch: mb})
		}
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
	n := pl.Groups
	seqs := make([][]Slot, n)
	next := make([]int, n)
	left := 0
	for r := range n {
		seqs[r] = groupOrder(pl, r)
		left += len(seqs[r])
	}
	for left > 0 {
		progress := false
		for r := range n {
			if next[r] == len(seqs[r]) {
				continue
			}
			sl := seqs[r][next[r]]
			ops := groups[group{back: sl.Backward, mb: sl.Microbatch, stage: sl.Stage}]
			if !ready(ops, done) {
				continue
			}
			place(ops)
			next[r]++
			left--
			progress = true
		}
		if !progress {
			p.errs.AddHint(g.Ops[0].Pos, "please report it",
				"pipeline: internal error: the %s schedule waits on itself (device groups at steps %v)", pl.Schedule, next)
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
