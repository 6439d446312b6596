package lower

import (
	"slices"
	"strconv"

	"github.com/nvcomm/nvcomm/internal/cost"
	"github.com/nvcomm/nvcomm/internal/ir"
	"github.com/nvcomm/nvcomm/internal/ops"
	"github.com/nvcomm/nvcomm/internal/plan"
	"github.com/nvcomm/nvcomm/internal/reshard"
)

// This file is the optimal policy's choice of a decomposed collective
// (docs/overlap.md, "Decomposed collectives"). A linear or matmul whose
// first operand a set inserted for it gathers along its rows in one
// Allgather (Allgather + matmul), a linear whose weight one is gathered
// along its output rows (FSDP's), or whose partial sums one ReduceScatter
// splits along their rows (matmul + ReduceScatter), is priced undecomposed
// and in the decomposed forms plan.Overlap builds: collective-based with
// every k from 2 to ops.MaxChunks that divides every device's rows, and
// ring-based. Each is the makespan of its step graph, where a chunk's
// transfer runs beside another chunk's product; the cheapest is taken, a
// tie keeping the undecomposed form, then the fewer chunks, then the
// collective-based form. Only a plan of format 2 decomposes: in a list of
// steps run in order the chunks only add steps. The fusion's overlap
// attribute forces a form (and chunks its k); the set of an Allgather +
// matmul is then computed within the op's steps (plan.Op.Within). The
// bound either form must meet is the undecomposed form's: the chunks
// move the same bytes.

// overlapForm is a linear or matmul that a decomposed collective can
// compute, and the form chosen.
type overlapForm struct {
	// geometry is plan.Overlap's but for Form and Chunks.
	geometry plan.Overlap
	// set is the Allgather's set of an Allgather + matmul (computed within
	// the op when decomposed); nil for a matmul + ReduceScatter.
	set *ir.Op
	// elem is the dtype's size in bytes.
	elem int
	// axis is the undecomposed collective's, which every collective of a
	// decomposed form names: the chunks split the axis it changes.
	axis *int
	// members are the set (if any) and the op; undecomposed their steps
	// undecomposed.
	members      []*ir.Op
	undecomposed []plan.Step
	// bounds are what the undecomposed form books, set's and the op's.
	bounds reshard.Bounds
	// prices are every form's price (seconds, or bytes under the bytes
	// objective), undecomposed first, in the order of OverlapChoice.
	prices []OverlapPrice
	// chosen is prices' entry the plan takes.
	chosen OverlapPrice
}

// OverlapPrice is one form of a decomposed collective and its price.
type OverlapPrice struct {
	// Form is ops.OverlapNone (undecomposed), ops.OverlapCollective or
	// ops.OverlapRing.
	Form string
	// Chunks is the number of chunks (the ring's rounds); 1 undecomposed.
	Chunks int
	// Price is the makespan of the form's step graph in seconds (for an
	// Allgather of a weight, what it adds to the makespan of the steps
	// before it: overlapContext), or the bytes its busiest device
	// receives under the bytes objective.
	Price float64
}

// decomposed reports whether the form chosen is a decomposed one.
func (o *overlapForm) decomposed() bool { return o.chosen.Form != ops.OverlapNone }

// chooseOverlaps is the pass that chooses, for every linear and matmul a
// decomposed collective can compute, its form: under the optimal policy
// the overlap attribute's, or in a plan of format 2 the cheapest; nvFuser's
// policy never decomposes. An op that forces a decomposed form it cannot
// take is an error.
func (l *lowerer) chooseOverlaps() {
	if l.planner.Policy() != PolicyOptimal {
		return
	}
	for _, op := range l.f.Ops {
		if attr, given := op.Attrs.Get(ops.AttrOverlap); given && attr.Str != ops.OverlapNone {
			l.graph = true
		}
	}
	var readers map[*ir.Tensor][]*ir.Op
	var ctx *overlapContext
	for _, op := range l.f.Ops {
		if op.Kind != "linear" && op.Kind != "matmul" || l.failed[op] || l.within[op] != nil || l.rings[op] != nil {
			continue
		}
		attr, given := op.Attrs.Get(ops.AttrOverlap)
		chunks, _ := op.Attrs.Get(ops.AttrChunks)
		if chunks.Int != 0 && attr.Str != ops.OverlapCollective {
			l.planner.Job(l.ledger, l.f, op).Fail("chunks: "+strconv.Itoa(chunks.Int)+" without overlap: collective",
				"write overlap: collective with chunks, or leave chunks out (the ring's rounds are the mesh's devices; auto chooses k)")
			continue
		}
		if attr.Str == ops.OverlapNone || !given && !l.graph {
			continue
		}
		if readers == nil {
			readers = readersOf(l.f)
			l.producers = map[*ir.Tensor]*ir.Op{}
			for _, o := range l.f.Ops {
				l.producers[o.Out] = o
			}
		}
		form, why := l.overlapOf(op, readers)
		if form == nil {
			if attr.Str == ops.OverlapCollective || attr.Str == ops.OverlapRing {
				l.planner.Job(l.ledger, l.f, op).Fail("overlap: "+attr.Str+" needs "+why,
					"write overlap: none, or leave overlap out, to plan the op undecomposed (docs/overlap.md)")
			}
			continue
		}
		var context []plan.Step
		if form.geometry.Kind == plan.OverlapAllgatherWeight {
			if ctx == nil {
				ctx = &overlapContext{l: l}
			}
			context = ctx.before(form.members[0])
		}
		if !l.priceOverlap(op, form, attr.Str, chunks.Int, context) {
			continue
		}
		if l.overlaps == nil {
			l.overlaps = map[*ir.Op]*overlapForm{}
		}
		l.overlaps[op] = form
		if form.set != nil && form.decomposed() {
			if l.within == nil {
				l.within = map[*ir.Op]*ir.Op{}
			}
			l.within[form.set] = op
		}
	}
}

// overlapOf returns the decomposed collective that can compute op, from
// its undecomposed steps (and those of the set inserted for its first
// operand), with their bounds; or why there is none.
func (l *lowerer) overlapOf(op *ir.Op, readers map[*ir.Tensor][]*ir.Op) (*overlapForm, string) {
	gathers := func(t *ir.Tensor) *ir.Op {
		if p := l.producer(t); p != nil && p.Kind == ir.OpSet && p.Inserted != nil && p.Inserted.For != nil && p.Inserted.For.Out == op.Out &&
			!p.Inserted.Output && len(readers[p.Out]) == 1 && !l.failed[p] && l.within[p] == nil {
			return p
		}
		return nil
	}
	set := gathers(op.Inputs[0])
	weight := false
	if set == nil && op.Kind == "linear" && len(op.Inputs) == 2 {
		// FSDP's gathered weight: the set of a linear's second operand.
		set = gathers(op.Inputs[1])
		weight = set != nil
	}
	members := []*ir.Op{op}
	if set != nil {
		members = []*ir.Op{set, op}
	}
	trial := &lowerer{f: l.f, planner: l.planner, ledger: reshard.NewLedger(l.f.File), sumTypes: l.sumTypes,
		failed: l.failed, bcast: l.bcast, opBounds: l.opBounds, discard: l.discard, trials: l.trials}
	bounds := trial.ledger.CaptureBounds(func() {
		for _, m := range members {
			trial.lowerOp(m)
		}
	})
	if trial.ledger.Err() != nil {
		return nil, "the op to lower"
	}
	steps := trial.ledger.Steps()
	form := &overlapForm{elem: op.Out.DType.Size(), bounds: bounds, members: members, undecomposed: steps}
	why := "its first operand (or a linear's weight) gathered along its rows by one Allgather over a 1-D mesh just before it, or its partial sums reduce-scattered along their rows by one ReduceScatter, its product one Matmul of rows, and each device's rows divisible by the chunks"
	// A linear's bias is one Pointwise add after the rest (biasOf), which
	// the decomposed form keeps after its own steps.
	out, bias := op.Out.Name, ""
	if len(op.Inputs) == 3 && op.Kind == "linear" {
		var ok bool
		if out, bias, ok = biasOf(steps, op); !ok {
			return nil, why
		}
		steps = steps[:len(steps)-1]
	}
	switch {
	case weight && len(steps) == 2:
		// The Allgather of a linear's weight [N, K] along its rows, each
		// device's block [Rows, K], read whole as the Matmul's B.
		ag, mm := steps[0], steps[1]
		if ag.Type != plan.Allgather || len(ag.Teams) != 1 || ag.Input != set.In().Name || ag.Output != set.Out.Name ||
			ag.Axis != nil && *ag.Axis != 0 || mm.Type != plan.Matmul || len(mm.Inputs) != 2 || mm.Inputs[0] != op.Inputs[0].Name ||
			mm.Inputs[1] != ag.Output || mm.Output != out || len(mm.Dims) != 4 || mm.Dims[0] != 1 || !mm.TransposeB || mm.BroadcastB ||
			!slices.Equal(mm.Devices, op.Out.Mesh.Devices) || !slices.Equal(ag.Teams[0], mm.Devices) ||
			ag.Count.Output != mm.Dims[2]*mm.Dims[3] || ag.Count.Input*len(ag.Teams[0]) != ag.Count.Output {
			return nil, why
		}
		form.set, form.axis = set, ag.Axis
		t := len(ag.Teams[0])
		form.geometry = plan.Overlap{Devices: slices.Clone(ag.Teams[0]), Kind: plan.OverlapAllgatherWeight, K: mm.Dims[2], N: mm.Dims[3],
			M: mm.Dims[1], Rows: mm.Dims[3] / t, TransposeB: true, In: mm.Inputs[0], W: ag.Input, Out: op.Out.Name, Buffer: plan.OverlapBuffers(op.Out.Name)}
		if mm.Dims[3]%t != 0 {
			return nil, why
		}
		return form, ""
	case set != nil && len(steps) == 2:
		ag, mm := steps[0], steps[1]
		if ag.Type != plan.Allgather || len(ag.Teams) != 1 || ag.Input != set.In().Name || ag.Output != set.Out.Name ||
			!rowsOf(&mm, op, ag.Output, out) || ag.Count.Output != mm.Dims[1]*mm.Dims[2] {
			return nil, why
		}
		form.set, form.axis = set, ag.Axis
		form.geometry = overlapGeometry(plan.OverlapAllgather, ag.Teams[0], &mm, ag.Input, op.Out.Name)
	case set == nil && len(steps) == 2:
		mm, rs := steps[0], steps[1]
		if rs.Type != plan.ReduceScatter || len(rs.Teams) != 1 || rs.Input != mm.Output || rs.Output != out ||
			rs.ReduceOp == nil || *rs.ReduceOp != "sum" || !rowsOf(&mm, op, op.Inputs[0].Name, mm.Output) ||
			rs.Count.Input != mm.Dims[1]*mm.Dims[3] {
			return nil, why
		}
		form.axis = rs.Axis
		form.geometry = overlapGeometry(plan.OverlapReduceScatter, rs.Teams[0], &mm, op.Inputs[0].Name, op.Out.Name)
	default:
		return nil, why
	}
	form.geometry.Bias = bias
	if t := len(form.geometry.Devices); t < 2 || mmRows(steps)%t != 0 {
		return nil, why
	}
	form.geometry.Rows = mmRows(steps) / len(form.geometry.Devices)
	return form, ""
}

// biasOf checks that the last of a linear's undecomposed steps adds its
// bias: a Pointwise add of what the steps before it wrote and the bias
// [1, N] broadcast over the rows [M, N], on every device of the mesh, into
// the op's output. It returns the buffer it adds the bias to, and the
// bias.
func biasOf(steps []plan.Step, op *ir.Op) (product, bias string, ok bool) {
	if len(steps) < 2 {
		return "", "", false
	}
	s := &steps[len(steps)-1]
	bias = op.Inputs[2].Name
	if s.Type != plan.Pointwise || s.Func == nil || *s.Func != "add" || len(s.Inputs) != 2 || s.Inputs[1] != bias ||
		s.Output != op.Out.Name || len(s.Dims) != 2 || !slices.Equal(s.Devices, op.Out.Mesh.Devices) ||
		len(s.InputDims) != 2 || !slices.Equal(s.InputDims[0], s.Dims) || !slices.Equal(s.InputDims[1], []int{1, s.Dims[1]}) {
		return "", "", false
	}
	return s.Inputs[0], bias, true
}

// mmRows is the rows of the Matmul among steps.
func mmRows(steps []plan.Step) int {
	for _, s := range steps {
		if s.Type == plan.Matmul {
			return s.Dims[1]
		}
	}
	return 0
}

// rowsOf reports whether s is op's product of rows: a Matmul of a, op's
// second operand, into out, dims [1, M, K, N], on every device of the
// mesh.
func rowsOf(s *plan.Step, op *ir.Op, a, out string) bool {
	return (len(op.Inputs) == 2 || len(op.Inputs) == 3 && op.Kind == "linear") && s.Type == plan.Matmul && len(s.Inputs) == 2 && s.Inputs[0] == a && s.Inputs[1] == op.Inputs[1].Name &&
		s.Output == out && len(s.Dims) == 4 && s.Dims[0] == 1 && !s.BroadcastB && slices.Equal(s.Devices, op.Out.Mesh.Devices)
}

// overlapGeometry is the decomposed collective of kind on team, whose
// product is mm, reading in and writing out.
func overlapGeometry(kind string, team []int, mm *plan.Step, in, out string) plan.Overlap {
	return plan.Overlap{Devices: slices.Clone(team), Kind: kind, K: mm.Dims[2], N: mm.Dims[3], TransposeB: mm.TransposeB,
		In: in, W: mm.Inputs[1], Out: out, Buffer: plan.OverlapBuffers(out)}
}

// priceOverlap prices op's forms into form and chooses one: the form attr
// names (auto or "": the cheapest), with chunks k when given. False, after
// an error where attr forced the form, when a form cannot be priced or
// chunks does not divide every device's rows.
func (l *lowerer) priceOverlap(op *ir.Op, form *overlapForm, attr string, chunks int, context []plan.Step) bool {
	members := form.members
	price, ok := l.contextPrice(context, form.undecomposed, members, nil)
	if !ok {
		return false
	}
	form.prices = []OverlapPrice{{Form: ops.OverlapNone, Chunks: 1, Price: price}}
	rows := form.geometry.Rows
	ks := chunkCandidates(rows)
	if chunks != 0 {
		if rows%chunks != 0 {
			l.planner.Job(l.ledger, l.f, op).Fail("chunks: "+strconv.Itoa(chunks)+" does not divide each device's "+strconv.Itoa(rows)+" rows",
				"write chunks that divide "+strconv.Itoa(rows)+", or leave chunks out for the makespan to choose")
			return false
		}
		ks = []int{chunks}
	}
	candidates := []OverlapPrice{}
	for _, k := range ks {
		if rows%k == 0 {
			candidates = append(candidates, OverlapPrice{Form: ops.OverlapCollective, Chunks: k})
		}
	}
	candidates = append(candidates, OverlapPrice{Form: ops.OverlapRing, Chunks: len(form.geometry.Devices)})
	for _, c := range candidates {
		ledger := reshard.NewLedger(l.f.File)
		l.emitOverlap(ledger, op, form, c)
		if c.Price, ok = l.contextPrice(context, ledger.Steps(), members, op); !ok || ledger.Err() != nil {
			return false
		}
		form.prices = append(form.prices, c)
	}
	form.chosen = form.choose(attr)
	return true
}

// chunkCandidates are the k the makespan tries for a collective-based
// form over rows rows a device: every k from 2 to ops.MaxChunks that divides
// rows (3 and 6 as well as 2, 4 and 8), in increasing order, so that a
// tie keeps the fewer chunks.
func chunkCandidates(rows int) []int {
	var ks []int
	for k := 2; k <= ops.MaxChunks && k <= rows; k++ {
		if rows%k == 0 {
			ks = append(ks, k)
		}
	}
	return ks
}

// contextSteps is the most steps of the ops before it that an Allgather
// of a weight is priced after: enough for the layers before it whose
// compute its transfer can run beside, few enough that pricing every
// weight of a deep model stays linear in its steps.
const contextSteps = 256

// overlapContext lowers the fusion's ops, in order and as the plan will
// (with the forms chosen so far), on a ledger of its own: the steps
// before an op, after which an Allgather of its weight is priced. FSDP's
// weight gather reads only a fusion input, so the undecomposed Allgather
// runs beside the compute before it (PyTorch FSDP's prefetch), where a
// decomposed form's cuts run on the compute stream after that compute;
// priced alone, the undecomposed form would look exposed when it is not.
type overlapContext struct {
	l *lowerer
	// trial lowers the ops; next is the first op it has not lowered.
	trial *lowerer
	next  int
}

// before lowers the ops up to first (not included) and returns the last
// contextSteps of their steps, numbered from 0.
func (c *overlapContext) before(first *ir.Op) []plan.Step {
	l := c.l
	if c.trial == nil {
		c.trial = &lowerer{f: l.f, planner: l.planner, ledger: reshard.NewLedger(l.f.File), sumTypes: l.sumTypes,
			failed: l.failed, bcast: l.bcast, opBounds: l.opBounds, discard: l.discard, trials: l.trials, rings: l.rings}
	}
	c.trial.within, c.trial.overlaps = l.within, l.overlaps
	for ; c.next < len(l.f.Ops) && l.f.Ops[c.next] != first; c.next++ {
		c.trial.lowerOp(l.f.Ops[c.next])
	}
	all := c.trial.ledger.Steps()
	steps := slices.Clone(all[max(0, len(all)-contextSteps):])
	for i := range steps {
		steps[i].ID = i
	}
	return steps
}

// contextPrice is formPrice of steps after context: the makespan of
// both less the context's own, what the steps add to the plan so far;
// formPrice of steps alone where there is no context or the objective is
// bytes.
func (l *lowerer) contextPrice(context, steps []plan.Step, members []*ir.Op, whole *ir.Op) (float64, bool) {
	if len(context) == 0 || l.planner.Objective() == ObjectiveBytes {
		return l.formPrice(steps, members, whole)
	}
	var ops []*ir.Op
	seen := map[int]bool{}
	for _, s := range context {
		if !seen[s.Op] && s.Op >= 0 && s.Op < len(l.f.Ops) {
			seen[s.Op] = true
			ops = append(ops, l.f.Ops[s.Op])
		}
	}
	before, ok := l.formPrice(context, ops, nil)
	if !ok {
		return 0, false
	}
	all := slices.Concat(context, steps)
	for i := len(context); i < len(all); i++ {
		all[i].ID = i
	}
	total, ok := l.formPrice(all, append(ops, members...), whole)
	return total - before, ok
}

// choose is the form attr forces, else the cheapest of prices, the first
// in their order on a tie.
func (o *overlapForm) choose(attr string) OverlapPrice {
	best := o.prices[0]
	for _, p := range o.prices[1:] {
		switch {
		case attr == ops.OverlapCollective || attr == ops.OverlapRing:
			if p.Form == attr && (best.Form != attr || p.Price < best.Price) {
				best = p
			}
		case p.Price < best.Price:
			best = p
		}
	}
	return best
}

// stepsOf are the steps of form c.
func (o *overlapForm) stepsOf(c OverlapPrice) []plan.Step {
	g := o.geometry
	g.Form, g.Chunks = c.Form, c.Chunks
	return g.Steps()
}

// emitOverlap emits decomposed form c's steps as op's on ledger, each
// collective along the undecomposed one's axis: what a device does not
// hold of its output is an Allgather's chunks but its own, a
// SendRecv's whole block, a ReduceScatter's share of every other
// device's partial sums.
func (l *lowerer) emitOverlap(ledger *reshard.Ledger, op *ir.Op, o *overlapForm, c OverlapPrice) {
	job := l.planner.Job(ledger, l.f, op)
	for _, s := range o.stepsOf(c) {
		if s.Kind == plan.KindCollective {
			if o.axis != nil {
				s.Axis = new(*o.axis)
			}
			n := int64(s.Count.Input)
			switch s.Type {
			case plan.Allgather:
				n = int64(s.Count.Output - s.Count.Input)
			case plan.ReduceScatter:
				n = int64(s.Count.Input - s.Count.Output)
			}
			job.EmitCollective(s, o.elem, func(int) int64 { return n })
			continue
		}
		job.EmitLocal(s, s.Devices, s.Count.Input, s.Count.Output)
	}
}

// lowerOverlap emits the chosen decomposed form's steps as op's, and
// books the undecomposed form's bound in place of theirs.
func (l *lowerer) lowerOverlap(op *ir.Op, o *overlapForm) {
	l.ledger.CaptureBounds(func() { l.emitOverlap(l.ledger, op, o, o.chosen) })
	l.ledger.Book(o.bounds)
}

// OverlapChoice is the optimal policy's choice of a decomposed
// collective (docs/overlap.md, "Decomposed collectives"): every form's
// price under its objective and the form the plan takes.
type OverlapChoice struct {
	// Op is the linear's or matmul's index.
	Op int
	// Kind is plan.OverlapAllgather, plan.OverlapReduceScatter or
	// plan.OverlapAllgatherWeight.
	Kind string
	// Prices are the undecomposed form's, then each decomposed form's.
	Prices []OverlapPrice
	// Bytes says that the prices are bytes, not seconds.
	Bytes bool
	// Chosen is the form the plan takes.
	Chosen OverlapPrice
}

// Overlaps prices the decomposed collectives of p's fusion as lowering it
// under its policy and objective on topo (nil: the default topology), as
// a plan of p's format, does; none under policy nvfuser or in a plan of
// format 1 that forces none. It expects a plan that Validate accepts.
func Overlaps(p *plan.Plan, topo *cost.Topology) ([]OverlapChoice, error) {
	ps := plan.NewProblems()
	f, _ := rebuild(p, ps)
	if f == nil {
		return nil, ps.Err()
	}
	l, err := newLowerer(f, Options{Policy: Policy(p.Policy), Objective: Objective(p.Objective), Topology: topo, StepGraph: p.Graph()}, nil, nil)
	if err != nil || l.planner.Policy() != PolicyOptimal {
		return nil, err
	}
	for _, ps := range passes {
		ps.run(l)
		if ps.name == "decompose collectives" {
			break
		}
	}
	var out []OverlapChoice
	for _, op := range l.f.Ops {
		if o := l.overlaps[op]; o != nil {
			out = append(out, OverlapChoice{Op: op.Index, Kind: o.geometry.Kind, Prices: o.prices,
				Bytes: l.planner.Objective() == ObjectiveBytes, Chosen: o.chosen})
		}
	}
	return out, nil
}

// forcesGraph reports whether an op of f has an overlap attribute other
// than none, which makes its plan a step graph under the optimal policy.
func forcesGraph(f *ir.Fusion) bool {
	for _, op := range f.Ops {
		if attr, ok := op.Attrs.Get(ops.AttrOverlap); ok && attr.Str != ops.OverlapNone {
			return true
		}
	}
	return false
}

// producer is the op that writes t, nil for a fusion input.
func (l *lowerer) producer(t *ir.Tensor) *ir.Op { return l.producers[t] }
