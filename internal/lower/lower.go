// Package lower compiles a checked fusion into a communication plan: it finds
// every op that changes sharding and turns it into collectives and the local
// steps that make flat-buffer collectives correct, and computes each
// device's block of every layer op (docs/lowering.md, docs/layers.md).
//
// Input: an *ir.Fusion that ir.Parse accepted. Output: a *plan.Plan whose
// steps, executed with the flat-buffer semantics of docs/plan.md, leave every
// device holding its shard of every op's output. What the policy cannot
// lower correctly is an error naming the op, never a plan with wrong data.
//
// Files, in the order of the passes (docs/architecture.md):
//
//   - lower.go: Lower, the lowerer the passes share, plan assembly;
//   - reshard_insert.go, choose.go: the pass that inserts resharding sets
//     around layer ops, and the optimal policy's rFactor choice;
//   - ring.go: the form of a context-parallel sdpa, ring attention or
//     its expansion op by op, chosen by the objective;
//   - compute.go: Matmul and Pointwise steps of layer ops;
//   - certify.go: a plan's numbers recomputed (validate).
//
// Sets and reductions go to the resharding planner, package reshard, one
// reshard.Job per op; so does the sum of a contraction's partial products.
package lower

import (
	"slices"

	"github.com/nvcomm/nvcomm/internal/cost"
	"github.com/nvcomm/nvcomm/internal/ir"
	"github.com/nvcomm/nvcomm/internal/ops"
	"github.com/nvcomm/nvcomm/internal/plan"
	"github.com/nvcomm/nvcomm/internal/reshard"
)

// Policy names a lowering policy (reshard.Policy).
type Policy = reshard.Policy

// The policies. PolicyOptimal, the default, searches for the best plan under
// an Objective; PolicyNvFuser follows nvFuser's lowering table.
const (
	PolicyOptimal = reshard.PolicyOptimal
	PolicyNvFuser = reshard.PolicyNvFuser
)

// Policies lists the accepted policy names, the default first: a copy of
// reshard's, so that no caller can change the planner's list.
var Policies = slices.Clone(reshard.Policies)

// Objective names what the optimal policy minimizes (reshard.Objective).
type Objective = reshard.Objective

// The objectives (reshard.ObjectiveTime, reshard.ObjectiveBytes).
const (
	ObjectiveTime  = reshard.ObjectiveTime
	ObjectiveBytes = reshard.ObjectiveBytes
)

// Objectives lists the accepted objective names, the default first (a
// copy of reshard's).
var Objectives = slices.Clone(reshard.Objectives)

// Options configure Lower.
type Options struct {
	Policy Policy // empty means PolicyOptimal
	// Objective is what the optimal policy minimizes; empty means
	// ObjectiveTime. The nvfuser policy has none.
	Objective Objective
	// Topology prices steps for the optimal policy; nil means
	// cost.Default().
	Topology *cost.Topology
	// Debug is for tests (reshard.Debug): the zero value lowers as nvcomm
	// does.
	Debug reshard.Debug
	// SkipBounds leaves out the pass that bounds the ways of computing an
	// op (ways.go), for a caller that reads only the plan's steps (their
	// predicted times: internal/auto prices thousands of single-op
	// fusions): the steps are the same, and the plan's bytes_lower_bound,
	// which that pass makes a bound, is left 0 (no bound claimed).
	SkipBounds bool
	// StepGraph lowers to a plan of format 2, whose steps form a graph
	// (plan.ToGraph), where the optimal policy may decompose collectives
	// (docs/overlap.md); a fusion whose ops force a decomposed form is
	// lowered so without it.
	StepGraph bool
	// Searches, when set, keeps the resharding planner's searches across
	// the Lower calls given it, for a caller that lowers many small
	// fusions alike; nil keeps them per call.
	Searches *Searches
}

// Searches keeps the resharding planner's searches across Lower calls
// (reshard.Searches), for Options.Searches: safe for concurrent lowerings.
type Searches = reshard.Searches

// NewSearches returns an empty store of searches.
func NewSearches() *Searches { return reshard.NewSearches() }

// Lower compiles f into a plan. Ops the policy cannot lower correctly are
// errors (a *diag.List) naming the op, its YAML position and the reason.
func Lower(f *ir.Fusion, opts Options) (*plan.Plan, error) {
	l, err := lowerSteps(f, opts, nil)
	if err != nil {
		return nil, err
	}
	return l.plan(), nil
}

// Stream is Lower writing the plan to w as it is made, never holding it
// whole: its head, tensors and ops once the resharding sets are inserted,
// each op's steps once the op is lowered (the ledger then forgets them),
// and its summary. The bytes are those plan.Encode writes for Lower's
// plan. On an error, what w has received is no plan: the caller drops
// it.
//
// Stream also keeps the fusion small, and takes f to do it: f's tensors
// alike, and those of the fusion with the resharding sets inserted, share
// their domains (ir.Fusion.ShareAlike), and the fusion with the sets
// inserted is made of f's own ops, renumbered and reading the sets, where
// Lower copies them (a copy of each op after the first set inserted).
// The caller must not use f after.
func Stream(f *ir.Fusion, opts Options, w *plan.Writer) error {
	if f.Pipeline != nil || opts.StepGraph || forcesGraph(f) {
		// A pipeline's plan is a graph, whose waits need every step, as
		// is one that may decompose a collective.
		return writeWhole(f, opts, w)
	}
	f.ShareAlike()
	l, err := lowerInto(f, opts, w, nil)
	if err != nil {
		return err
	}
	sum := l.summary()
	return w.Finish(&sum)
}

// writeWhole is Stream of a plan assembled whole by Lower.
func writeWhole(f *ir.Fusion, opts Options, w *plan.Writer) error {
	p, err := Lower(f, opts)
	if err != nil {
		return err
	}
	return w.Whole(p)
}

// lowerSteps runs the passes of Lower and returns the lowerer, whose
// ledger holds the steps and bounds, without assembling the plan: Certify
// compares only those. alike, when not nil, lowers the sets and
// reductions alike once (Certify's, certify_alike.go).
func lowerSteps(f *ir.Fusion, opts Options, alike *opsAlike) (*lowerer, error) {
	return lowerInto(f, opts, nil, alike)
}

// lowerInto runs the passes of Lower; with a writer, the lowering of the
// ops writes the plan's sections to it as they are made (streamOps).
func lowerInto(f *ir.Fusion, opts Options, w *plan.Writer, alike *opsAlike) (*lowerer, error) {
	l, err := newLowerer(f, opts, w, alike)
	if err != nil {
		return nil, err
	}
	for _, p := range passes {
		if p.bounds && l.noBound {
			continue
		}
		p.run(l)
	}
	if err := l.ledger.Err(); err != nil {
		return nil, err
	}
	return l, nil
}

// newLowerer is the lowerer of f under opts, before its passes.
func newLowerer(f *ir.Fusion, opts Options, w *plan.Writer, alike *opsAlike) (*lowerer, error) {
	planner, err := reshard.NewPlanner(opts.Policy, opts.Objective, opts.Topology, opts.Debug)
	if err != nil {
		return nil, err
	}
	planner.Share(opts.Searches)
	return &lowerer{f: f, planner: planner, ledger: reshard.NewLedger(f.File), w: w, alike: alike, owned: w != nil,
		opBounds: map[*ir.Op]reshard.Bounds{}, discard: map[*ir.Op]bool{}, trials: newTrials(f), noBound: opts.SkipBounds,
		graph: opts.StepGraph || f.Pipeline != nil}, nil
}

// pass is one pass of the lowering.
type pass struct {
	name string
	run  func(*lowerer)
	// bounds is set for a pass that only books the plan's bound, which
	// Options.SkipBounds leaves out.
	bounds bool
}

// passes are the passes of Lower, in order (docs/architecture.md, "The
// passes of lower.Lower"); each reads what those before it left in the
// lowerer, and errors collect in its ledger. Lower then assembles the
// plan (plan).
var passes = []pass{
	{"insert reshardings", (*lowerer).insertReshardings, false},
	{"bound the ways", (*lowerer).boundWays, true},
	{"choose attention's form", (*lowerer).chooseRings, false},
	{"decompose collectives", (*lowerer).chooseOverlaps, false},
	{"lower each op", (*lowerer).lowerOps, false},
}

// insertReshardings is the pass that gives every computing op operands
// sharded as it computes (reshard_insert.go): the lowerer's fusion becomes
// a new one, the caller's unchanged unless the lowerer owns it (Stream).
func (l *lowerer) insertReshardings() {
	var ins *inserter
	l.f, ins = insertReshardings(l.f, l)
	l.sumTypes, l.gathered, l.failed, l.bcast = ins.sumTypes, ins.gathered, ins.failed, ins.bcast
	l.chains = ins.chainList
}

// lowerOps is the pass that lowers each op into the ledger's steps.
func (l *lowerer) lowerOps() {
	if l.w != nil {
		l.streamOps()
		return
	}
	// The plan's steps are reserved up front, so that they are not copied
	// as they grow: room for the first ops' steps, then, once reserveProbe
	// ops are lowered, for as many as those say the whole fusion will have
	// (a set on a 1-D mesh takes one or two steps, on a 2×4 mesh four) and
	// a sixteenth more.
	l.ledger.Reserve(2 * min(len(l.f.Ops), reserveProbe))
	for i, op := range l.f.Ops {
		if i == reserveProbe {
			n := len(l.f.Ops)
			l.ledger.Reserve(l.ledger.NumSteps()*n/reserveProbe + n/16)
		}
		l.lowerOp(op)
	}
}

// streamOps writes the plan's head, tensors and ops to the lowerer's
// writer, then lowers each op and hands its steps to the writer: only one
// op's steps are held at a time. The counts of the summary are kept as
// the steps go.
func (l *lowerer) streamOps() {
	l.f.ShareAlike() // the tensors the resharding sets write too
	p := l.head()
	l.w.Head(p)
	for _, t := range l.f.Tensors {
		pt := tensorOf(t)
		l.w.Tensor(&pt)
	}
	for _, op := range l.f.Ops {
		o := l.planOp(op)
		l.w.Op(&o)
	}
	l.counts = newStepCounts()
	step := func(s *plan.Step) {
		l.counts.add(s)
		l.w.Step(s)
	}
	for _, op := range l.f.Ops {
		l.lowerOp(op)
		l.ledger.Flush(step)
	}
}

// reserveProbe is the number of ops whose steps Lower counts to reserve
// the plan's.
const reserveProbe = 256

// lowerer holds what the passes share: the fusion, the resharding planner
// and the ledger its steps, bytes and errors go to.
type lowerer struct {
	f       *ir.Fusion
	planner *reshard.Planner
	ledger  *reshard.Ledger
	// sumTypes are the contractions the optimal policy rFactors although
	// their outputs do not split the summed axis (choose.go).
	sumTypes map[*ir.Op]ir.ParallelType
	// gathered are the contractions whose outputs split the summed axis
	// but whose operands the optimal policy gathers (choose.go).
	gathered map[*ir.Op]bool
	// failed are the ops the resharding pass reported errors for.
	failed map[*ir.Op]bool
	// bcast are the broadcast axes of the tensors (broadcast.go).
	bcast bcastAxes
	// w, when set, receives the plan as it is made (Stream), and counts
	// the steps it has been given.
	w      *plan.Writer
	counts *stepCounts
	// alike, for Certify, lowers sets and reductions alike once; nil
	// lowers each.
	alike *opsAlike
	// opBounds are, per op that more than one way computes, what every
	// way must receive, which it books in place of its own bound and its
	// inserted sets' (discard): ways.go. trials lowers the ways.
	opBounds map[*ir.Op]reshard.Bounds
	discard  map[*ir.Op]bool
	// chains are the chains of two sums over two device types
	// (hierarchy.go), lowered either way, whose bound boundChains books.
	chains []*hierChain
	trials *trials
	// rings are the sdpas a ring could compute, by their expansion's last
	// op, and within maps the ops of their expansions to the last op that
	// computes them, or to nil where the sdpa is planned op by op
	// (ring.go); nil when there are none.
	rings  map[*ir.Op]*ringForm
	within map[*ir.Op]*ir.Op
	// overlaps are the linears and matmuls a decomposed collective could
	// compute, with the form chosen (overlap.go); graph says that the
	// plan is a step graph (Options.StepGraph, or an op's overlap
	// attribute).
	overlaps  map[*ir.Op]*overlapForm
	producers map[*ir.Tensor]*ir.Op
	graph     bool
	// owned is set when the caller's fusion is the lowerer's to change
	// (Stream): the resharding pass then renumbers its ops and gives them
	// their new operands in place, rather than copy them.
	owned bool
	// noBound is Options.SkipBounds: the ledger's bound is no bound, and
	// the plan claims none.
	noBound bool
}

// opCtx is the lowering of one computing op.
type opCtx struct {
	*lowerer
	job *reshard.Job
	// op is the op, or a copy of it that reads the blocks of its operands
	// that it sliced locally (compute.go).
	op *ir.Op
	// sumType, when summed, is the device type over which the op sums
	// partial products.
	sumType ir.ParallelType
	summed  bool
	// pending is the op's output when it holds pending terms: op is then
	// a copy that writes its Combined tensor, and the op stops before the
	// sum of its partial products, which are the terms.
	pending *ir.Tensor
}

// lowerOp lowers op into the ledger's steps and books its bound: an sdpa
// that the ring could compute books what the op-by-op form or the ring
// must receive at its last op, which emits the ring's or the all-gather
// form's steps where one of them computes it, the others then none
// (ring.go); an op that more than one way computes books
// what every way must receive, for itself and the sets inserted to
// reshard its operands or its result (ways.go).
func (l *lowerer) lowerOp(op *ir.Op) {
	if last, ok := l.within[op]; ok {
		if last == nil { // an op of an sdpa planned op by op
			l.lowerBounded(op)
		}
		return // else the ring's last op computes it
	}
	if r := l.rings[op]; r != nil && r.whole() {
		l.lowerWhole(op, r)
		return
	}
	if o := l.overlaps[op]; o != nil && o.decomposed() {
		l.lowerOverlap(op, o)
		return
	}
	l.lowerOpAlone(op)
}

// lowerOpAlone is lowerOp of an op that no sdpa's form concerns.
func (l *lowerer) lowerOpAlone(op *ir.Op) {
	if b, ok := l.opBounds[op]; ok {
		l.ledger.CaptureBounds(func() { l.lowerSteps(op) })
		l.ledger.Book(b)
		return
	}
	if l.discard[op] {
		l.ledger.CaptureBounds(func() { l.lowerSteps(op) })
		return
	}
	l.lowerSteps(op)
}

// lowerSteps lowers op into the ledger's steps, booking their bound.
func (l *lowerer) lowerSteps(op *ir.Op) {
	if l.failed[op] {
		return
	}
	job := l.planner.Job(l.ledger, l.f, op)
	if op.Out.Combined != nil && op.Kind.IsReduction() {
		(&opCtx{lowerer: l, job: job, op: op}).pendingReduction()
		return
	}
	if op.Kind != ir.OpSet && !op.Kind.IsReduction() {
		(&opCtx{lowerer: l, job: job, op: op}).lowerComputing()
		return
	}
	if l.alike != nil {
		l.alike.lower(job, op)
		return
	}
	job.Lower()
}

// fail reports that the op cannot be lowered under the policy.
func (c *opCtx) fail(reason, hint string) { c.job.Fail(reason, hint) }

// buffer names a new intermediate buffer of the op, "out/what".
func (c *opCtx) buffer(what string) string { return c.job.Buffer(what) }

// emitLocalOn appends a local step of the op run by devices.
func (c *opCtx) emitLocalOn(s plan.Step, devices []int, countIn, countOut int) {
	c.job.EmitLocal(s, devices, countIn, countOut)
}

// plan assembles the plan from the fusion and the emitted steps.
func (l *lowerer) plan() *plan.Plan {
	p := l.head()
	// Sized up front: a fusion may have 100k tensors and ops, and a
	// plan.Tensor is a few hundred bytes to copy at each growth. None
	// stays nil, which the plan writes as null.
	p.Tensors = sized[plan.Tensor](len(l.f.Tensors))
	for _, t := range l.f.Tensors {
		p.Tensors = append(p.Tensors, tensorOf(t))
	}
	p.Ops = sized[plan.Op](len(l.f.Ops))
	for _, op := range l.f.Ops {
		p.Ops = append(p.Ops, l.planOp(op))
	}
	p.Steps = l.ledger.Steps()
	if p.Steps == nil {
		p.Steps = []plan.Step{}
	}
	l.counts = newStepCounts()
	for i := range p.Steps {
		l.counts.add(&p.Steps[i])
	}
	p.Summary = l.summary()
	if p.Pipeline != nil || l.graph {
		// The stages run at once only as a graph (docs/pipeline.md), and
		// so do a decomposed collective's chunks (overlap.go).
		plan.ToGraph(p)
	}
	return p
}

// head is the plan's fields before its lists: format, fusion, policy,
// objective, and the meshes its tensors are on.
func (l *lowerer) head() *plan.Plan {
	p := &plan.Plan{
		Format: plan.Format,
		Fusion: l.f.Name,
		Policy: string(l.planner.Policy()),
		Meshes: map[string]plan.Mesh{},
	}
	used := map[*ir.Mesh]bool{}
	for _, t := range l.f.Tensors {
		used[t.Mesh] = true
	}
	for _, m := range l.f.Meshes {
		if used[m] {
			p.Meshes[m.Name] = plan.Mesh{Shape: slices.Clone(m.Shape), Devices: slices.Clone(m.Devices)}
		}
	}
	if l.planner.Policy() == PolicyOptimal && l.planner.Objective() != ObjectiveTime {
		p.Objective = string(l.planner.Objective()) // the default is left out
	}
	if pl := l.f.Pipeline; pl != nil {
		p.Pipeline = &plan.Pipeline{Microbatches: pl.Microbatches, Schedule: pl.Schedule}
		for _, m := range pl.Stages {
			p.Pipeline.Stages = append(p.Pipeline.Stages, m.Name)
		}
	}
	return p
}

// opOf describes op for the plan.
func opOf(op *ir.Op) plan.Op {
	o := plan.Op{Index: op.Index, Op: string(op.Kind), Output: op.Out.Name, Axes: slices.Clone(op.Axes), Attrs: op.Attrs.Clone(),
		Scalar: op.Scalar.Clone(), Of: ofPlan(op.Of)}
	for _, in := range op.Inputs {
		o.Inputs = append(o.Inputs, in.Name)
	}
	if len(o.Inputs) == 1 {
		o.Input, o.Inputs = o.Inputs[0], nil
	}
	if op.Kind.TakesAxis() {
		o.Axis = new(op.Axis)
	}
	if why := op.Inserted; why != nil {
		o.Inserted = &plan.Inserted{For: why.For.Index, Operands: slices.Clone(why.Operands), Output: why.Output}
	}
	return o
}

// ofPlan is the plan's record of composite op c, nil for nil.
func ofPlan(c *ir.Composite) *plan.Of {
	if c == nil {
		return nil
	}
	of := &plan.Of{Op: string(c.Kind), Inputs: slices.Clone(c.Inputs), Output: c.Output, Axes: slices.Clone(c.Axes), Grad: c.Grad}
	if c.Axis >= 0 {
		of.Axis = new(c.Axis)
	}
	if v, ok := c.Attrs.Get(ops.AttrEps); ok {
		of.Eps = new(v.Float)
	}
	if v, ok := c.Attrs.Get(ops.AttrReduction); ok {
		of.Reduction = v.Str
	}
	if v, ok := c.Attrs.Get(ops.AttrCausal); ok {
		of.Causal = v.Bool
	}
	if v, ok := c.Attrs.Get(ops.AttrCP); ok {
		of.CP = v.Str
	}
	if v, ok := c.Attrs.Get(ops.AttrGQA); ok {
		of.GQA = v.Bool
	}
	if v, ok := c.Attrs.Get(ops.AttrTopK); ok {
		of.TopK = v.Int
	}
	if v, ok := c.Attrs.Get(ops.AttrCapacity); ok {
		of.Capacity = v.Int
	}
	return of
}

// sized is an empty slice with room for n elements, nil when n is 0.
func sized[T any](n int) []T {
	if n == 0 {
		return nil
	}
	return make([]T, 0, n)
}

// stepCounts is a summary's counts of steps, kept as the steps go by.
type stepCounts plan.Summary

// newStepCounts counts no step yet.
func newStepCounts() *stepCounts { return &stepCounts{ByType: map[string]int{}} }

// add counts s.
func (c *stepCounts) add(s *plan.Step) {
	if s.Kind == plan.KindCollective {
		c.Collectives++
		c.ByType[s.Type]++
	} else {
		c.LocalSteps++
	}
}

// summary is the plan's summary: the steps counted in l.counts, and the
// ledger's bytes.
func (l *lowerer) summary() plan.Summary {
	s := plan.Summary(*l.counts)
	s.BytesReceivedMax = l.ledger.BusiestReceived()
	if !l.noBound {
		s.BytesLowerBound = l.ledger.LowerBound()
	}
	s.BytesRatio = plan.BytesRatio(s.BytesReceivedMax, s.BytesLowerBound)
	return s
}

// tensorOf describes t for the plan.
func tensorOf(t *ir.Tensor) plan.Tensor {
	pt := plan.Tensor{
		Name: t.Name, DType: string(t.DType), Mesh: t.Mesh.Name,
		Shape:       t.LogicalExtents(),
		Allocation:  slices.Clone(t.Allocation),
		Sharding:    make([]plan.Sharding, 0, len(t.Shardings())), // [] when none
		LocalShape:  t.LocalShape(),
		PaddedShape: paddedShape(t),
		Layout:      slices.Clone(t.Layout()),
		Partial:     string(t.Partial),
		Propagated:  t.Propagated,
	}
	if pt.LocalShape == nil {
		pt.LocalShape = []int{}
	}
	if pt.Layout == nil {
		pt.Layout = []int{}
	}
	for i, id := range t.Logical {
		if id.Reduction {
			pt.ReductionAxes = append(pt.ReductionAxes, i)
		}
	}
	if len(t.Schedule) > 0 {
		pt.Schedule = make([]plan.ScheduleStep, 0, len(t.Schedule))
	}
	for _, s := range t.Schedule {
		pt.Schedule = append(pt.Schedule, scheduleStep(s))
	}
	var valueAxes []int
	if len(t.Shardings()) > 0 {
		valueAxes = t.ValueAxes()
	}
	for _, s := range t.Shardings() {
		sh := plan.Sharding{Type: s.Type.String(), LogicalAxis: s.Axis(), Kind: string(s.Kind)}
		if at := valueAxes[s.Axis()]; at != s.Axis() {
			sh.ShapeAxis = new(at)
		}
		if s.Kind == ir.Merged {
			sh.LogicalAxes = s.Axes()
		}
		pt.Sharding = append(pt.Sharding, sh)
	}
	return pt
}

// paddedShape is t's padded shape when it is uneven, else nil.
func paddedShape(t *ir.Tensor) []int {
	if t.IsUneven() {
		return t.PaddedShape()
	}
	return nil
}

func scheduleStep(s ir.ScheduleStep) plan.ScheduleStep {
	switch s.Kind {
	case ir.StepSplit:
		return plan.ScheduleStep{Split: &plan.SplitArgs{Axis: s.Axis, Factor: s.Factor}}
	case ir.StepOuterSplit:
		return plan.ScheduleStep{OuterSplit: &plan.SplitArgs{Axis: s.Axis, Factor: s.Factor}}
	case ir.StepMerge:
		return plan.ScheduleStep{Merge: &plan.AxisArgs{Axis: s.Axis}}
	case ir.StepReorder:
		return plan.ScheduleStep{Reorder: slices.Clone(s.Order)}
	}
	return plan.ScheduleStep{Parallelize: &plan.ParallelizeArgs{Axis: s.Axis, Type: s.Type.String()}}
}
