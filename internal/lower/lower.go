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
//   - lower.go: Lower, the per-op context, plan assembly, the resharding
//     planner's entry (lowerPair);
//   - reshard_insert.go, choose.go: the pass that inserts resharding sets
//     around layer ops, and the optimal policy's rFactor choice;
//   - views.go, padding.go: buffers as digits; uneven shards;
//   - rules.go, collectives.go: nvFuser's lowering table;
//   - objective.go: path costs and the objectives' orders of them;
//   - optimal.go, optimal_edges.go, optimal_swap.go, optimal_cross.go,
//     optimal_partial.go, optimal_price.go, optimal_search.go,
//     optimal_reduce.go, cross_collectives.go: the optimal policy's search
//     over sharding states, its edges, their prices and their steps;
//   - bound.go: lower bounds, per device and in all;
//   - compute.go: Matmul and Pointwise steps of layer ops;
//   - emit.go: steps, bytes and bounds;
//   - certify.go: a plan's numbers recomputed (validate).
package lower

import (
	"fmt"
	"slices"

	"github.com/nvcomm/nvcomm/internal/cost"
	"github.com/nvcomm/nvcomm/internal/diag"
	"github.com/nvcomm/nvcomm/internal/ir"
	"github.com/nvcomm/nvcomm/internal/plan"
)

// Policy names a lowering policy.
type Policy string

// The policies. PolicyOptimal, the default, searches for the best plan under
// an Objective; PolicyNvFuser follows nvFuser's lowering table.
const (
	PolicyOptimal Policy = "optimal"
	PolicyNvFuser Policy = "nvfuser"
)

// Policies lists the accepted policy names, the default first.
var Policies = []string{string(PolicyOptimal), string(PolicyNvFuser)}

// Options configure Lower.
type Options struct {
	Policy Policy // empty means PolicyOptimal
	// Objective is what the optimal policy minimizes; empty means
	// ObjectiveTime. The nvfuser policy has none.
	Objective Objective
	// Topology prices steps for the optimal policy; nil means
	// cost.Default().
	Topology *cost.Topology
}

// Lower compiles f into a plan. Ops the policy cannot lower correctly are
// errors (a *diag.List) naming the op, its YAML position and the reason.
func Lower(f *ir.Fusion, opts Options) (*plan.Plan, error) {
	if opts.Policy == "" {
		opts.Policy = PolicyOptimal
	}
	if !slices.Contains(Policies, string(opts.Policy)) {
		return nil, fmt.Errorf("unknown policy %q (expected one of %v)", opts.Policy, Policies)
	}
	if opts.Objective == "" {
		opts.Objective = ObjectiveTime
	}
	if !slices.Contains(Objectives, string(opts.Objective)) {
		return nil, fmt.Errorf("unknown objective %q (expected one of %v)", opts.Objective, Objectives)
	}
	if opts.Topology == nil {
		opts.Topology = cost.Default()
	}
	l := &lowerer{f: f, policy: opts.Policy, objective: opts.Objective, costOrder: costOrders[opts.Objective], topology: opts.Topology,
		errs: &diag.List{File: f.File}, received: map[int]int64{}, bound: map[int]int64{}}
	var ins *inserter
	l.f, ins = insertReshardings(f, l)
	l.sumTypes, l.failed = ins.sumTypes, ins.failed
	for _, op := range l.f.Ops {
		l.lowerOp(op)
	}
	if err := l.errs.Err(); err != nil {
		return nil, err
	}
	return l.plan(), nil
}

// lowerer accumulates the steps of a plan.
type lowerer struct {
	f         *ir.Fusion
	policy    Policy
	objective Objective
	costOrder costOrder // the objective's
	topology  *cost.Topology
	errs      *diag.List
	steps     []plan.Step
	received  map[int]int64 // bytes each device receives over the whole plan
	bound     map[int]int64 // bytes each device must receive, whatever the plan
	// aggregates are what the devices of some ops must receive between
	// them beyond bound (bound.go).
	aggregates []aggregate
	// sumTypes are the contractions the optimal policy rFactors although
	// their outputs do not split the summed axis (choose.go).
	sumTypes map[*ir.Op]ir.ParallelType
	// failed are the ops the resharding pass reported errors for.
	failed map[*ir.Op]bool
}

// opCtx is the lowering of one op, or of one pair of tensors within it (a
// half of a lowering through a replicated copy, or the sum of a
// contraction's partial products): such a part copies the context, with
// its own axis map, and shares the op's state.
type opCtx struct {
	*lowerer
	*opState
	op *ir.Op
	// fact is the pair's common factoring.
	fact *factoring
	// toOpAxis maps the axes of the pair being lowered to the op input's,
	// when they differ; steps name axes of the op's input.
	toOpAxis []int
	// expr, when set, is the op steps are booked under: the computing op
	// whose partial products this context sums.
	expr string
}

// opState is what every part of one op's lowering shares.
type opState struct {
	names map[string]int // intermediate buffer names used so far
	// overflowed is set once the op failed for a count beyond int64.
	overflowed bool
}

// part returns a context for a pair within c's op whose axes map to the
// op input's through toOpAxis (nil: they are the op input's).
func (c *opCtx) part(op *ir.Op, toOpAxis []int) *opCtx {
	return &opCtx{lowerer: c.lowerer, opState: c.opState, op: op, toOpAxis: toOpAxis, expr: c.expr}
}

// exprText is the op that the steps of c implement, for the plan and for
// messages.
func (c *opCtx) exprText() string {
	if c.expr != "" {
		return c.expr
	}
	return c.op.Expr()
}

func (l *lowerer) lowerOp(op *ir.Op) {
	if l.failed[op] {
		return
	}
	producer, consumer := op.In(), op.Out
	ctx := &opCtx{lowerer: l, op: op, opState: &opState{names: map[string]int{}}}
	if op.Kind != ir.OpSet && !op.Kind.IsReduction() {
		ctx.lowerComputing()
		return
	}
	if l.policy == PolicyNvFuser && !ctx.nvfuserAccepts(producer, consumer) {
		return
	}
	ctx.reshard(producer, consumer, op.Kind.IsReduction())
}

// nvfuserAccepts reports (after saying why not) whether nvFuser can lower
// the op at all: even shards, meshes of one size, no merged device axes.
func (c *opCtx) nvfuserAccepts(p, t *ir.Tensor) bool {
	if p.IsUneven() || t.IsUneven() {
		c.fail("a sharded axis does not divide evenly among its devices, which nvFuser rejects (\"Sharded axis must be evenly divisible by mesh\")",
			"use --policy optimal, which pads uneven shards")
		return false
	}
	if reason, bad := meshSizeMismatch(c.op); bad {
		c.fail(reason, "use meshes of the same size, or gather on one mesh and scatter on the other")
		return false
	}
	for _, x := range []*ir.Tensor{p, t} {
		if pt, ok := x.MergedDeviceAxis(); ok {
			c.fail(fmt.Sprintf("the %s axis of %q derives from a merge; nvFuser needs exactly one logical axis producing each device dimension (\"Expected exactly one logical ID producing the device dimension\")", pt, x.Name),
				"shard the logical axis with a split instead of merging first, or use --policy optimal, which lowers merged device axes")
			return false
		}
	}
	return true
}

// reshard lowers producer to consumer — a reduction over the op's axis
// when reduce, else a copy — and adds the op's lower bound. When the two
// cut an axis at strides that do not divide each other, the optimal policy
// goes through a replicated copy on the producer's mesh: each side then
// factors on its own.
func (c *opCtx) reshard(producer, consumer *ir.Tensor, reduce bool) {
	fact, ok := c.factor(producer, consumer, reduce)
	switch {
	case ok:
		src, dst := c.lowerFactored(fact, producer, consumer, reduce)
		if src != nil {
			c.addBound(src, dst)
		}
	case c.policy == PolicyOptimal:
		mid := ir.NewReplicated(c.buffer("replicated"), producer.Mesh, producer.DType, consumer.Shape())
		c.lowerPair(producer, mid, reduce)
		c.part(c.op, c.axisMaps(producer, reduce).consumer).lowerPair(mid, consumer, false) // mid's axes are the consumer's
		c.addSizeBound(producer, consumer)
	default:
		c.fail("producer and consumer cut a logical axis at strides that do not divide each other",
			"shard both tensors with splits whose factors divide one another, or use --policy optimal")
	}
}

// lowerPair lowers producer to consumer within the op, with no bound: the
// two must factor.
func (c *opCtx) lowerPair(producer, consumer *ir.Tensor, reduce bool) {
	fact, ok := c.factor(producer, consumer, reduce)
	if !ok {
		c.fail("producer and consumer cut a logical axis at strides that do not divide each other",
			"shard both tensors with splits whose factors divide one another, or use --policy optimal")
		return
	}
	c.lowerFactored(fact, producer, consumer, reduce)
}

// pairAxes maps a pair's value axes to the producer's.
type pairAxes struct{ producer, consumer []int }

// axisMaps returns the maps of a pair whose producer is producer: the
// identity, and for a reduction the producer's axes without the op's.
func (c *opCtx) axisMaps(producer *ir.Tensor, reduce bool) pairAxes {
	m := identity(len(producer.ValueAxes()))
	if reduce {
		return pairAxes{m, without1(m, c.op.Axis)}
	}
	return pairAxes{m, m}
}

// factor refines the axes of producer and consumer at both tensors' cuts;
// false when they cut an axis at strides that do not divide each other.
func (c *opCtx) factor(producer, consumer *ir.Tensor, reduce bool) (*factoring, bool) {
	m := c.axisMaps(producer, reduce)
	f, ok := newFactoring(paddedExtents(producer, consumer, m.consumer), []*ir.Tensor{producer, consumer}, [][]int{m.producer, m.consumer})
	if ok && reduce && c.policy == PolicyOptimal && len(consumer.Layout()) > 0 {
		f.cutForScatter(producer, c.op.Axis, m.consumer[consumer.Layout()[0]])
	}
	return f, ok
}

// lowerFactored lowers a pair that factors: pads uneven shards, follows the
// policy's rule table or search, and unpads. It returns the views the
// bound compares, or nils after a failure.
func (c *opCtx) lowerFactored(fact *factoring, producer, consumer *ir.Tensor, reduce bool) (src, dst *view) {
	if !c.factoringFits(fact, producer.DType) {
		return nil, nil
	}
	m := c.axisMaps(producer, reduce)
	c.fact = fact
	pv, tv := fact.tensorView(producer, m.producer), fact.tensorView(consumer, m.consumer)
	src, dst = c.pad(pv, producer.Shape(), m.producer), c.padded(tv, consumer.Shape(), m.consumer)
	switch {
	case c.policy == PolicyOptimal && reduce:
		c.optimalReduction(src, dst)
	case c.policy == PolicyOptimal:
		c.optimal(src, dst, 0)
	case reduce:
		c.lowerReduction(src, dst)
	default:
		c.lowerSet(src, dst)
	}
	if dst != tv {
		c.unpad(dst, tv, consumer.Shape(), m.consumer)
	}
	return src, dst
}

// paddedExtents returns, per producer axis, the extent both tensors' shards
// tile: the true extent, or more where an uneven split pads it.
func paddedExtents(p, c *ir.Tensor, cMap []int) []int {
	ext := p.PaddedShape()
	for j, e := range c.PaddedShape() {
		ext[cMap[j]] = max(ext[cMap[j]], e)
	}
	return ext
}

// fail reports that the op cannot be lowered under the policy.
func (c *opCtx) fail(reason, hint string) {
	c.errs.AddHint(c.op.Pos, hint, "op %q cannot be lowered (policy %s): %s", c.exprText(), c.policy, reason)
}

func identity(n int) []int {
	m := make([]int, n)
	for i := range m {
		m[i] = i
	}
	return m
}

// without1 maps the consumer axes of a reduction over axis r to producer
// axes: consumer value axis j is producer axis j, or j+1 from r on.
func without1(m []int, r int) []int {
	return slices.Delete(slices.Clone(m), r, r+1)
}

// plan assembles the plan from the fusion and the emitted steps.
func (l *lowerer) plan() *plan.Plan {
	p := &plan.Plan{
		Format: plan.Format,
		Fusion: l.f.Name,
		Policy: string(l.policy),
		Meshes: map[string]plan.Mesh{},
		Steps:  l.steps,
	}
	used := map[*ir.Mesh]bool{}
	for _, t := range l.f.Tensors {
		used[t.Mesh] = true
		p.Tensors = append(p.Tensors, tensorOf(t))
	}
	for _, m := range l.f.Meshes {
		if used[m] {
			p.Meshes[m.Name] = plan.Mesh{Shape: slices.Clone(m.Shape), Devices: slices.Clone(m.Devices)}
		}
	}
	for _, op := range l.f.Ops {
		o := plan.Op{Index: op.Index, Op: string(op.Kind), Output: op.Out.Name, Axes: slices.Clone(op.Axes)}
		for _, in := range op.Inputs {
			o.Inputs = append(o.Inputs, in.Name)
		}
		if len(o.Inputs) == 1 {
			o.Input, o.Inputs = o.Inputs[0], nil
		}
		if op.Kind.IsReduction() {
			o.Axis = ptr(op.Axis)
		}
		p.Ops = append(p.Ops, o)
	}
	if p.Steps == nil {
		p.Steps = []plan.Step{}
	}
	if l.policy == PolicyOptimal && l.objective != ObjectiveTime {
		p.Objective = string(l.objective) // the default is left out
	}
	p.Summary = l.summary()
	return p
}

func (l *lowerer) summary() plan.Summary {
	s := plan.Summary{ByType: map[string]int{}}
	for _, st := range l.steps {
		if st.Kind == plan.KindCollective {
			s.Collectives++
			s.ByType[st.Type]++
		} else {
			s.LocalSteps++
		}
	}
	for _, b := range l.received {
		s.BytesReceivedMax = max(s.BytesReceivedMax, b)
	}
	s.BytesLowerBound = l.lowerBound()
	s.BytesRatio = plan.BytesRatio(s.BytesReceivedMax, s.BytesLowerBound)
	return s
}

// tensorOf describes t for the plan.
func tensorOf(t *ir.Tensor) plan.Tensor {
	pt := plan.Tensor{
		Name: t.Name, DType: string(t.DType), Mesh: t.Mesh.Name,
		Shape:       t.LogicalExtents(),
		Allocation:  slices.Clone(t.Allocation),
		Sharding:    []plan.Sharding{},
		LocalShape:  t.LocalShape(),
		PaddedShape: paddedShape(t),
		Layout:      slices.Clone(t.Layout()),
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
	for _, s := range t.Schedule {
		pt.Schedule = append(pt.Schedule, scheduleStep(s))
	}
	for _, s := range t.Shardings() {
		sh := plan.Sharding{Type: s.Type.String(), LogicalAxis: s.Axis(), Kind: string(s.Kind)}
		if at := t.ValueAxes()[s.Axis()]; at != s.Axis() {
			sh.ShapeAxis = ptr(at)
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

func ptr[T any](v T) *T { return &v }
