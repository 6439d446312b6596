package lower

import (
	"slices"

	"github.com/nvcomm/nvcomm/internal/cost"
	"github.com/nvcomm/nvcomm/internal/ir"
	"github.com/nvcomm/nvcomm/internal/ops"
	"github.com/nvcomm/nvcomm/internal/plan"
	"github.com/nvcomm/nvcomm/internal/reshard"
)

// This file is the optimal policy's choice of attention's form under
// context parallelism (docs/layers.md, "Ring attention"). An sdpa whose
// q, k, v and output are split on the sequence, in blocks, over a 1-D
// mesh, is planned three ways: its expansion op by op, as every composite
// is (the scores split as kᵀ is, q gathered, the softmax's statistics
// and the output summed by collectives); as a ring (plan.RingAttention):
// c rounds of local attention on the k and v blocks a device holds (under
// the causal mask, those with a key its queries see), merged by online
// softmax, while one SendRecv per tensor passes the blocks on; or in the
// all-gather form (plan.RingAttention.GatherSteps): k and v gathered
// whole, then each device's queries against every key, locally. Each is
// priced by the makespan of its step graph (each round's transfers run
// beside its attention) on the planner's topology, or by the bytes its
// busiest device receives under the bytes objective, and the cheapest
// taken; a tie keeps the op-by-op form, then the ring. The ring's or the
// all-gather form's expansion ops but the last are then computed within
// the last one's steps (plan.Op.Within), which read q, k and v.

// ringForm is an sdpa that the ring and the all-gather form can compute,
// and the form chosen.
type ringForm struct {
	// geometry is the ring's and the all-gather form's, but for its
	// buffers' names (stepsOf).
	geometry plan.RingAttention
	// seqAxis is the sequence's axis (dim −2), which the SendRecvs name.
	seqAxis int
	// elem is the dtype's size in bytes.
	elem int
	// bounds are what the op-by-op form or the ring must receive
	// (reshard.Least of theirs; the all-gather form's, every other block,
	// is never less than the ring's): the fusion's lower bound does not
	// depend on the form taken.
	bounds reshard.Bounds
	// ring, gather and ops are the three forms' prices (seconds, or bytes
	// under the bytes objective).
	ring, gather, ops float64
	// chosen is the form that computes the sdpa, as sdpa's cp names it:
	// ops.CPRing, ops.CPAllgather, or ops.CPExpansion (its ops lowered one
	// by one, lowerBounded).
	chosen string
}

// whole reports whether the form chosen computes the sdpa whole, its
// expansion's ops within its last op.
func (r *ringForm) whole() bool { return r.chosen != ops.CPExpansion }

// choose is the form that computes the sdpa under the optimal policy
// (optimal) with sdpa's cp: the form cp names, else the cheapest, a tie
// going to the op-by-op form, then the ring; under nvFuser's policy the
// op-by-op form.
func (r *ringForm) choose(optimal bool, cp string) string {
	switch {
	case !optimal:
		return ops.CPExpansion
	case cp != "":
		return cp
	}
	best, price := ops.CPExpansion, r.ops
	if r.ring < price {
		best, price = ops.CPRing, r.ring
	}
	if r.gather < price {
		best = ops.CPAllgather
	}
	return best
}

// chooseRings is the pass that chooses, for every sdpa the ring can
// compute, between the op-by-op form, the ring and the all-gather form:
// the optimal policy by its objective or the sdpa's cp, nvFuser's always
// the op-by-op form (it has no context parallelism). Under every policy
// such an sdpa books what the op-by-op form or the ring must receive
// (ringForm.bounds), so that the fusion's bound does not depend on the
// policy.
func (l *lowerer) chooseRings() {
	optimal := l.planner.Policy() == PolicyOptimal
	var readers map[*ir.Tensor][]*ir.Op
	for _, last := range l.f.Ops {
		of := last.Of
		if of == nil || of.Grad || of.Kind != "sdpa" || last.Out.Name != of.Output {
			continue
		}
		cp, _ := of.Attrs.Get(ops.AttrCP)
		fixed := optimal && (cp.Str == ops.CPRing || cp.Str == ops.CPAllgather)
		g, ok := ringGeometry(l.f, last)
		if !ok {
			if fixed {
				l.planner.Job(l.ledger, l.f, last).Fail("sdpa's cp: "+cp.Str+" needs q, k, v and its output on one 1-D mesh of at least 2 devices, each split in even blocks on its sequence (dim -2) alone and stored row-major",
					"split q, k, v and the output as Shard(rank-2) on one mesh, or write cp: expansion (or leave cp out) to plan the sdpa op by op")
			}
			continue
		}
		if readers == nil {
			readers = readersOf(l.f)
		}
		members, reader, read := expansionOf(l.f, last, readers)
		if reader != nil {
			if fixed {
				which, hint := "op "+reader.Out.Name, "write cp: expansion (or leave cp out) to plan the sdpa op by op, or read only its output"
				if reader.Of != nil && reader.Of.Grad && reader.Of.Output == of.Output {
					which += " of its gradient"
					hint = "write cp: expansion (or leave cp out): an sdpa whose gradient a backward takes is planned op by op, its gradient rule reading the forward's probabilities"
				}
				l.planner.Job(l.ledger, l.f, last).Fail("sdpa's cp: "+cp.Str+" computes the sdpa whole and holds none of its intermediates, but "+which+" reads "+read.Name, hint)
			}
			continue
		}
		form, ok := l.priceRing(g, last, members)
		if !ok {
			continue
		}
		form.chosen = form.choose(optimal, cp.Str)
		if l.rings == nil {
			l.rings, l.within = map[*ir.Op]*ringForm{}, map[*ir.Op]*ir.Op{}
		}
		l.rings[last] = form
		for _, op := range members {
			switch {
			case !form.whole():
				l.within[op] = nil // lowered on its own, its bounds the form's
			case op != last:
				l.within[op] = last
			}
		}
	}
}

// lowerBounded lowers op, of an sdpa that the ring could compute but
// that is planned op by op: its steps are its own, but its bounds are
// dropped, and the expansion's last op books what either form must
// receive.
func (l *lowerer) lowerBounded(op *ir.Op) {
	l.ledger.CaptureBounds(func() { l.lowerOpAlone(op) })
	if r := l.rings[op]; r != nil {
		l.ledger.Book(r.bounds)
	}
}

// ringGeometry returns the ring of sdpa op last, the last op of its
// expansion, when q, k, v and its output lie on one 1-D mesh of at least
// two devices, each split in even blocks on its sequence (its dim −2)
// alone, stored row-major, of one dtype, holding no pending terms; k of
// q's heads, or with enable_gqa of H/G heads (grouped-query attention:
// the ring and the all-gather form move and read the key/value heads
// unrepeated, plan.RingAttention).
func ringGeometry(f *ir.Fusion, last *ir.Op) (plan.RingAttention, bool) {
	of := last.Of
	if of == nil || of.Grad || of.Kind != "sdpa" || last.Out.Name != of.Output || len(of.Inputs) != 3 {
		return plan.RingAttention{}, false
	}
	q, k, v := f.Tensor(of.Inputs[0]), f.Tensor(of.Inputs[1]), f.Tensor(of.Inputs[2])
	o := last.Out
	for _, t := range []*ir.Tensor{q, k, v, o} {
		if !seqBlocks(t, q) {
			return plan.RingAttention{}, false
		}
	}
	qs, ks, vs := q.Shape(), k.Shape(), v.Shape()
	r, c := len(qs), len(q.Mesh.Devices)
	gqa, _ := of.Attrs.Get(ops.AttrGQA)
	grp, err := ops.SDPAGroup([][]int{qs, ks, vs}, gqa.Bool)
	if err != nil {
		return plan.RingAttention{}, false
	}
	bt := 1
	for _, e := range qs[:r-2] {
		bt *= e
	}
	causal, _ := of.Attrs.Get(ops.AttrCausal)
	return plan.RingAttention{Devices: slices.Clone(q.Mesh.Devices), BT: bt, SB: qs[r-2] / c, TB: ks[r-2] / c,
		D: qs[r-1], DV: vs[r-1], G: grp, Causal: causal.Bool}, true
}

// seqBlocks reports whether t lies as q must for the ring: on q's mesh,
// 1-D with at least two devices, of q's dtype, split only on its dim −2
// in even blocks, its values stored row-major (a contraction's output
// keeps its summed axis as a reduction axis, which holds no values), with
// no pending terms.
func seqBlocks(t, q *ir.Tensor) bool {
	if t == nil || q == nil || t.Mesh != q.Mesh || len(t.Mesh.Shape) != 1 || len(t.Mesh.Devices) < 2 ||
		t.DType != q.DType || t.Partial != "" || t.Combined != nil || t.IsUneven() {
		return false
	}
	shape := t.Shape()
	r := len(shape)
	if r < 2 {
		return false
	}
	sh := t.Shardings()
	if len(sh) != 1 || sh[0].Kind != ir.Block || len(sh[0].Digits) != 1 || sh[0].Axis() != r-2 {
		return false
	}
	c := len(t.Mesh.Devices)
	if shape[r-2]%c != 0 || t.LocalShape()[r-2]*c != shape[r-2] {
		return false
	}
	for i, a := range t.Layout() {
		if a != i {
			return false
		}
	}
	return true
}

// readersOf maps every tensor of f to the ops that read it.
func readersOf(f *ir.Fusion) map[*ir.Tensor][]*ir.Op {
	readers := map[*ir.Tensor][]*ir.Op{}
	for _, op := range f.Ops {
		for _, in := range op.Inputs {
			readers[in] = append(readers[in], op)
		}
	}
	return readers
}

// expansionOf returns the ops of last's expansion, in order, with the
// sets inserted for them, last the last: what the ring computes. When an
// op outside them reads one of their outputs (a backward that reads the
// forward's probabilities) it returns that op and what it reads instead:
// the ring holds none of them.
func expansionOf(f *ir.Fusion, last *ir.Op, readers map[*ir.Tensor][]*ir.Op) ([]*ir.Op, *ir.Op, *ir.Tensor) {
	in := map[*ir.Op]bool{}
	var members []*ir.Op
	for _, op := range f.Ops[:last.Index+1] {
		mine := sameComposite(op, last)
		if why := op.Inserted; why != nil {
			mine = sameComposite(why.For, last)
		}
		if mine {
			in[op] = true
			members = append(members, op)
		}
	}
	for _, op := range members {
		if op == last {
			continue
		}
		for _, r := range readers[op.Out] {
			if !in[r] {
				return nil, r, op.Out
			}
		}
	}
	return members, nil, nil
}

// sameComposite reports whether op is of the expansion whose last op is
// last.
func sameComposite(op, last *ir.Op) bool {
	return op.Of != nil && !op.Of.Grad && op.Of.Output == last.Of.Output
}

// priceRing prices the three forms of the sdpa whose expansion is
// members (last the last): the op-by-op form lowered on a ledger of its
// own, the ring and the all-gather form emitted on ledgers of theirs, as
// the lowering emits them (emitWhole); false when the op-by-op form fails
// there or a price does not fit.
func (l *lowerer) priceRing(g plan.RingAttention, last *ir.Op, members []*ir.Op) (*ringForm, bool) {
	trial := &lowerer{f: l.f, planner: l.planner, ledger: reshard.NewLedger(l.f.File), sumTypes: l.sumTypes, gathered: l.gathered,
		failed: l.failed, bcast: l.bcast, opBounds: l.opBounds, discard: l.discard, trials: l.trials}
	bounds := trial.ledger.CaptureBounds(func() {
		for _, op := range members {
			trial.lowerOp(op)
		}
	})
	if trial.ledger.Err() != nil {
		return nil, false
	}
	for _, op := range members {
		if l.failed[op] {
			return nil, false
		}
	}
	form := &ringForm{geometry: g, seqAxis: len(last.Out.Shape()) - 2, elem: last.Out.DType.Size()}
	form.bounds = reshard.Least(bounds, form.needs())
	form.geometry.Scale = scoresScale(members)
	out := last.Out.Name
	form.geometry.Q, form.geometry.K, form.geometry.V, form.geometry.Out = last.Of.Inputs[0], last.Of.Inputs[1], last.Of.Inputs[2], out
	var ok bool
	if form.ops, ok = l.formPrice(trial.ledger.Steps(), members, nil); !ok {
		return nil, false
	}
	for _, f := range []struct {
		name  string
		price *float64
	}{{ops.CPRing, &form.ring}, {ops.CPAllgather, &form.gather}} {
		whole := reshard.NewLedger(l.f.File)
		l.emitWhole(whole, last, form, f.name)
		if *f.price, ok = l.formPrice(whole.Steps(), members, last); !ok || whole.Err() != nil {
			return nil, false
		}
	}
	return form, true
}

// needs is the ring form's bound: the blocks of k and v that hold a key
// some query of its own block sees, but for its own, are what a device
// must receive to compute its block of the output by the ring — every
// other block, or under the causal mask the earlier ones (device c − 1
// still needs c − 1 blocks: the busiest device's bound is the same).
func (r *ringForm) needs() reshard.Bounds {
	g := r.geometry
	block := int64(g.KVBT()) * int64(g.TB) * int64(g.D+g.DV) * int64(r.elem)
	need := map[int]int64{}
	for i, d := range g.Devices {
		for j := range g.Devices {
			if j != i && (!g.Causal || j*g.TB <= (i+1)*g.SB-1) {
				need[d] += block
			}
		}
	}
	return reshard.DeviceBounds(need)
}

// scoresScale is the number the expansion multiplies the scores by (its
// one op with a number operand, sdpa's 1/√d), so that the ring scales
// as the expansion does.
func scoresScale(members []*ir.Op) float64 {
	for _, op := range members {
		if op.Scalar != nil && op.Kind == "mul" {
			return op.Scalar.Value
		}
	}
	return 1
}

// stepsOf are the steps of form (ops.CPRing or ops.CPAllgather), their
// buffers named for it (plan.RingBuffers, plan.GatherBuffers).
func (r *ringForm) stepsOf(form string) []plan.Step {
	g := r.geometry
	if form == ops.CPAllgather {
		g.Buffer = plan.GatherBuffers(g.Out)
		return g.GatherSteps()
	}
	g.Buffer = plan.RingBuffers(g.Out)
	return g.Steps()
}

// formPrice is the price of steps, the steps of members' ops, under the
// planner's objective: the makespan of their step graph on its topology,
// or the bytes the busiest device receives in them. A non-nil whole is
// the op that computes the others within its steps, as the plan will say
// (the cost model prices a ring's rounds by their masks: cost.Predict).
func (l *lowerer) formPrice(steps []plan.Step, members []*ir.Op, whole *ir.Op) (float64, bool) {
	if l.planner.Objective() == ObjectiveBytes {
		received := map[int]int64{}
		for i := range steps {
			s := &steps[i]
			if s.Bytes == nil {
				continue
			}
			seen := map[int]bool{} // a ring shift's device is in two teams, and receives once
			for _, team := range s.Teams {
				for _, d := range team {
					if !seen[d] {
						seen[d] = true
						received[d] += s.Bytes.ReceivedPerDevice
					}
				}
			}
		}
		busiest := int64(0)
		for _, n := range received {
			busiest = max(busiest, n)
		}
		return float64(busiest), true
	}
	p := &plan.Plan{Format: plan.Format, Ops: make([]plan.Op, len(l.f.Ops)), Steps: steps}
	seen := map[*ir.Tensor]bool{}
	for _, op := range members {
		p.Ops[op.Index] = opOf(op)
		if whole != nil && op != whole {
			p.Ops[op.Index].Within = new(whole.Index)
		}
		for _, t := range append(slices.Clone(op.Inputs), op.Out) {
			if !seen[t] {
				seen[t] = true
				p.Tensors = append(p.Tensors, tensorOf(t))
			}
		}
	}
	plan.ToGraph(p)
	pr, err := cost.Predict(l.planner.Topology(), p)
	if err != nil {
		return 0, false
	}
	return pr.Total, true
}

// lowerWhole emits the chosen form's steps as op last's, and books what
// either form must receive (ringForm.bounds).
func (l *lowerer) lowerWhole(last *ir.Op, r *ringForm) {
	l.emitWhole(l.ledger, last, r, r.chosen)
	l.ledger.Book(r.bounds)
}

// emitWhole emits the steps of form (ops.CPRing or ops.CPAllgather) as
// op last's on ledger, each collective along the sequence: what a device
// does not hold of its output is a SendRecv's whole block, an
// Allgather's blocks but its own.
func (l *lowerer) emitWhole(ledger *reshard.Ledger, last *ir.Op, r *ringForm, form string) {
	job := l.planner.Job(ledger, l.f, last)
	for _, s := range r.stepsOf(form) {
		if s.Kind == plan.KindCollective {
			s.Axis = new(r.seqAxis)
			n := int64(s.Count.Input)
			if s.Type == plan.Allgather {
				n = int64(s.Count.Output - s.Count.Input)
			}
			job.EmitCollective(s, r.elem, func(int) int64 { return n })
			continue
		}
		job.EmitLocal(s, s.Devices, s.Count.Input, s.Count.Output)
	}
}

// planOp describes op for the plan, with the op it is computed within.
func (l *lowerer) planOp(op *ir.Op) plan.Op {
	o := opOf(op)
	if last := l.within[op]; last != nil {
		o.Within = new(last.Index)
	}
	return o
}

// Form is the optimal policy's choice of an sdpa's form (docs/layers.md,
// "Ring attention"): the three forms' prices under its objective, seconds
// (the makespan of each form's step graph) or, under the bytes
// objective, the bytes the busiest device receives.
type Form struct {
	// Op is the expansion's last op.
	Op int
	// Ring, Gather and Expansion are the prices of the ring, of the
	// all-gather form and of the expansion planned op by op.
	Ring, Gather, Expansion float64
	// Bytes says that the prices are bytes, not seconds.
	Bytes bool
	// Chosen is the form the plan takes, as sdpa's cp names it: ring,
	// allgather or expansion.
	Chosen string
}

// Forms prices the forms of every sdpa of p's fusion that the ring can
// compute, as lowering p's fusion under its policy and objective on topo
// does (nil: the default topology); none under policy nvfuser. It
// expects a plan that Validate accepts.
func Forms(p *plan.Plan, topo *cost.Topology) ([]Form, error) {
	ps := plan.NewProblems()
	f, _ := rebuild(p, ps)
	if f == nil {
		return nil, ps.Err()
	}
	l, err := newLowerer(f, Options{Policy: Policy(p.Policy), Objective: Objective(p.Objective), Topology: topo}, nil, nil)
	if err != nil || l.planner.Policy() != PolicyOptimal {
		return nil, err
	}
	for _, ps := range passes {
		ps.run(l)
		if ps.name == "choose attention's form" {
			break
		}
	}
	var forms []Form
	for _, op := range l.f.Ops {
		if r := l.rings[op]; r != nil {
			forms = append(forms, Form{Op: op.Index, Ring: r.ring, Gather: r.gather, Expansion: r.ops,
				Bytes: l.planner.Objective() == ObjectiveBytes, Chosen: r.chosen})
		}
	}
	return forms, nil
}
