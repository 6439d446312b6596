// Package reshard is nvcomm's resharding planner: it turns a change of
// sharding — a producer tensor to a consumer tensor, a copy or a reduction
// over one axis, on one mesh or between two — into collectives and the
// local steps that make flat-buffer collectives correct (docs/lowering.md).
//
// A Planner follows a policy: nvFuser's lowering table, or a search over
// sharding states for the plan that is best under an Objective on a
// topology. It writes steps to a Ledger, which also keeps each device's
// bytes, the lower bounds and the errors of a whole fusion; a Job is the
// lowering of one op within it.
//
// Files:
//
//   - reshard.go: Planner, Ledger, Job, and the pair lowering (factor, pad,
//     rule table or search, unpad);
//   - pairing.go: a pair's axes paired along its op's factor rule;
//   - views.go, padding.go, shortslice.go: buffers as digits; uneven
//     shards, and the Pad + Slice of an uneven Replicate → Shard as one
//     Slice of a short input;
//   - rules.go, collectives.go: nvFuser's lowering table;
//   - objective.go: path costs and the objectives' orders of them;
//   - optimal.go, optimal_edges.go, optimal_swap.go, optimal_cross.go,
//     optimal_partial.go, optimal_price.go, optimal_search.go,
//     optimal_reduce.go, cross_collectives.go: the optimal policy's search
//     over sharding states, its edges, their prices and their steps;
//   - memo.go, replay.go: searches kept by what they depend on, and their
//     emissions replayed with other names;
//   - bound.go: lower bounds, per device and in all;
//   - emit.go, sizes.go, steps.go: steps, bytes and overflow; the ledger's
//     list of steps.
package reshard

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

// Planner plans reshardings under a policy, an objective and a topology.
type Planner struct {
	policy    Policy
	objective Objective
	costOrder costOrder // the objective's
	topology  *cost.Topology
	debug     Debug
	// searches, when set, keeps searches across lowerings (Share).
	searches *Searches
	// readers is readLater's index of a fusion, shared by every
	// lowering of the planner (nil: each lowering indexes its own).
	readers *readerIndex
}

// Debug is what tests may ask of a planner besides its plans. Nothing in
// it changes a plan: a test that turns replays off checks exactly that.
type Debug struct {
	// NoReplay turns off the replay of recorded emissions (replay.go):
	// every op is searched and emitted afresh.
	NoReplay bool
	// Searched, when set, is told the cost (picoseconds and steps) of
	// every path the search finds and the steps its emission appended (as
	// emitted: a later pass may fuse them), which must be what the search
	// priced.
	Searched func(ps int64, steps int, emitted []plan.Step)
}

// NewPlanner returns a planner; empty policy and objective mean the
// defaults, a nil topology cost.Default(). debug is for tests; the zero
// Debug plans as nvcomm does.
func NewPlanner(policy Policy, objective Objective, topology *cost.Topology, debug Debug) (*Planner, error) {
	if policy == "" {
		policy = PolicyOptimal
	}
	if !slices.Contains(Policies, string(policy)) {
		return nil, fmt.Errorf("unknown policy %q (expected one of %v)", policy, Policies)
	}
	if objective == "" {
		objective = ObjectiveTime
	}
	if !slices.Contains(Objectives, string(objective)) {
		return nil, fmt.Errorf("unknown objective %q (expected one of %v)", objective, Objectives)
	}
	if topology == nil {
		topology = cost.Default()
	}
	return &Planner{policy: policy, objective: objective, costOrder: costOrders[objective], topology: topology, debug: debug,
		readers: &readerIndex{}}, nil
}

// Policy is the planner's policy.
func (p *Planner) Policy() Policy { return p.policy }

// Objective is what the planner minimizes under the optimal policy.
func (p *Planner) Objective() Objective { return p.objective }

// Topology is the topology the planner prices steps on.
func (p *Planner) Topology() *cost.Topology { return p.topology }

// Ledger is what lowering a fusion writes: its steps in order, the bytes
// each device receives, the lower bounds and the errors. Step ids and byte
// totals run across the ops of the fusion.
type Ledger struct {
	steps    stepList
	received map[int]int64 // bytes each device receives over the whole plan
	bound    map[int]int64 // bytes each device must receive, whatever the plan
	// aggregates are what the devices of some ops must receive between
	// them beyond bound, by device set (bound.go).
	aggregates aggregates
	errs       *diag.List
	// memo keeps the optimal policy's searches (memo.go).
	memo memo
	// pairings keeps the pairings of the ops' axes (pairing.go).
	pairings pairings
	// trial is set while Trial runs: what is written is then forgotten.
	trial bool
}

// NewLedger returns an empty ledger whose errors name file.
func NewLedger(file string) *Ledger {
	return &Ledger{received: map[int]int64{}, bound: map[int]int64{}, errs: &diag.List{File: file}}
}

// Reserve makes room for n steps in all: a fusion's steps then need no
// copy into the plan when they are no more (reserved but unused steps
// take address space, not memory, until written). Steps written so far
// are moved.
func (l *Ledger) Reserve(n int) { l.steps.reserve(n) }

// NumSteps is the number of steps written so far.
func (l *Ledger) NumSteps() int { return l.steps.len() }

// Steps are the steps written so far and not flushed.
func (l *Ledger) Steps() []plan.Step { return l.steps.all() }

// Flush hands each step written since the last flush to each, in order,
// and forgets them, so that a plan can be written op by op without
// holding its steps: call it between ops (an op's steps may change until
// it is lowered). each must copy what it keeps of a step. Step ids go on
// counting the steps flushed.
func (l *Ledger) Flush(each func(*plan.Step)) { l.steps.flush(each) }

// Errs is the fusion's error list, which every pass of a lowering adds to.
func (l *Ledger) Errs() *diag.List { return l.errs }

// Err is the errors reported so far, or nil.
func (l *Ledger) Err() error { return l.errs.Err() }

// BusiestReceived is the most bytes one device receives over the steps.
func (l *Ledger) BusiestReceived() int64 {
	most := int64(0)
	for _, b := range l.received {
		most = max(most, b)
	}
	return most
}

// Job is the lowering of one op of a fusion: the reshardings within it
// share its buffer names and write their steps under it.
type Job struct {
	planner *Planner // the policy, objective and topology
	ledger  *Ledger  // the fusion's steps, bytes, bounds, errors and searches
	f       *ir.Fusion
	op      *ir.Op
	// names counts the intermediate buffer names used so far; nil until
	// the first (most ops name none).
	names map[string]int
	// overflowed is set once the op failed for a count beyond int64.
	overflowed bool
	// opExpr is op.Expr(), which every step of the op repeats: built once.
	opExpr string
	// rec, while an emission is recorded, is its template (replay.go).
	rec *template
	// opRec, while LowerAlike records the job, is its record (opmemo.go).
	opRec *opRecord
	// later is readLater's answer for op laterOf.
	laterOf *ir.Op
	later   bool
}

// Job starts the lowering of op, an op of f, into led.
func (p *Planner) Job(led *Ledger, f *ir.Fusion, op *ir.Op) *Job {
	return &Job{planner: p, ledger: led, f: f, op: op}
}

// expr is the job's op as its steps name it (ir.Op.Expr).
func (j *Job) expr() string {
	if j.opExpr == "" {
		j.opExpr = j.op.Expr()
	}
	return j.opExpr
}

// Lower lowers the job's op, a set or a reduction, and adds its lower
// bound.
func (j *Job) Lower() {
	c := j.ctx(j.op, nil)
	producer, consumer := j.op.In(), j.op.Out
	if j.planner.policy == PolicyNvFuser && !c.nvfuserAccepts(producer, consumer) {
		return
	}
	c.reshard(producer, consumer, changeOf(j.op))
}

// Reshard lowers op, a reduction or a set within the job's op (such as
// the sum of a contraction's partial products), and adds its lower bound.
// toOpAxis maps op's producer axes to the job's op's first input's, which
// the steps name; nil when they are the same.
func (j *Job) Reshard(op *ir.Op, toOpAxis []int) {
	j.ctx(op, toOpAxis).reshard(op.In(), op.Out, changeOf(op))
}

// Fail reports that the job's op cannot be lowered under the policy.
func (j *Job) Fail(reason, hint string) {
	j.ledger.errs.AddHint(j.op.Pos, hint, "op %q cannot be lowered (policy %s): %s", j.op.Expr(), j.planner.policy, reason)
}

// ctx returns the lowering of op's pair within the job.
func (j *Job) ctx(op *ir.Op, toOpAxis []int) lowering {
	return lowering{planner: j.planner, ledger: j.ledger, job: j, op: op, toOpAxis: toOpAxis}
}

// lowering is the lowering of one pair of tensors within a job: the job's op,
// a half of its lowering through a replicated copy, or a sum of partial
// products. It is a value, passed to what lowers the pair: each pair gets
// its own (part, factored), and what outlives the pair — the fusion's
// steps and bytes, the op's buffer names — lives in the ledger and the
// job it names.
type lowering struct {
	planner *Planner // the policy, objective, topology and shared searches: read only
	ledger  *Ledger  // the fusion's steps, bytes, bounds, errors and searches
	job     *Job     // the op's buffer names, recording and overflow
	op      *ir.Op
	// fact is the pair's common factoring.
	fact *factoring
	// real counts the real elements of its padded blocks: nil when it
	// pads nothing.
	real *realBlocks
	// toOpAxis maps the axes of the pair being lowered to the op input's,
	// when they differ; steps name axes of the op's input.
	toOpAxis []int
}

// part returns the lowering of a pair within c's op whose axes map to the
// op input's through toOpAxis (nil: they are the op input's).
func (c lowering) part(toOpAxis []int) lowering {
	return c.job.ctx(c.op, toOpAxis)
}

// nvfuserAccepts reports (after saying why not) whether nvFuser can lower
// the op at all: even shards, meshes of one size, no merged device axes.
func (c lowering) nvfuserAccepts(p, t *ir.Tensor) bool {
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

// Change is what lowering a pair of tensors does to the values: a copy,
// or a reduction over one of the producer's value axes.
type Change struct {
	// Reduce is the op that reduces, empty for a copy.
	Reduce ir.OpKind
	// Axis is the reduced axis among the producer's value axes; -1 for a
	// copy.
	Axis int
}

// copyChange is the change of a set: the values as they are.
var copyChange = Change{Axis: -1}

// Reduces reports whether the change reduces an axis.
func (ch Change) Reduces() bool { return ch.Reduce != "" }

// changeOf is op's change: a reduction's over its axis, a set's a copy.
func changeOf(op *ir.Op) Change {
	if op.Kind.IsReduction() {
		return Change{Reduce: op.Kind, Axis: op.Axis}
	}
	return copyChange
}

// reshard lowers producer to consumer, the op's operand and result, under
// change ch and adds the op's lower bound. Their axes pair as the op's
// sharding rule says (opPairing). When the two cut an axis at strides
// that do not divide each other, the optimal policy goes through a
// replicated copy on the producer's mesh: each side then factors on its
// own.
func (c lowering) reshard(producer, consumer *ir.Tensor, ch Change) {
	m, ok := c.ledger.pairings.of(c.op)
	if !ok {
		c.fail("its sharding rule places a dimension of the result across several of the operand's",
			"reshard the operand so that each result dimension lies within one of its dimensions")
		return
	}
	fact, ok := c.factor(producer, consumer, m, ch)
	switch {
	case ok:
		f := c.factored(fact, producer)
		src, dst := f.lowerFactored(producer, consumer, ch)
		if src != nil {
			f.addBound(src, dst)
		}
	case c.planner.policy == PolicyOptimal && c.intervalExchange(producer, consumer, ch):
		c.addSizeBound(producer, consumer)
	case c.planner.policy == PolicyOptimal:
		mid := ir.NewReplicated(c.buffer("replicated"), producer.Mesh, producer.DType, consumer.Shape())
		c.lowerPair(producer, mid, m, ch)
		c.part(m.consumer.to).lowerPair(mid, consumer, copyPairing(consumer), copyChange) // mid's axes are the consumer's
		c.addSizeBound(producer, consumer)
	default:
		c.fail("producer and consumer cut a logical axis at strides that do not divide each other",
			"shard both tensors with splits whose factors divide one another, or use --policy optimal")
	}
}

// lowerPair lowers producer to consumer, paired by m, within the op, with
// no bound: the two must factor.
func (c lowering) lowerPair(producer, consumer *ir.Tensor, m pairAxes, ch Change) {
	fact, ok := c.factor(producer, consumer, m, ch)
	if !ok {
		c.fail("producer and consumer cut a logical axis at strides that do not divide each other",
			"shard both tensors with splits whose factors divide one another, or use --policy optimal")
		return
	}
	c.factored(fact, producer).lowerFactored(producer, consumer, ch)
}

// factor refines the axes of producer and consumer, paired by m, at both
// tensors' cuts; false when they cut an axis at strides that do not
// divide each other, or when a pair of axes that are parts of others is
// split unevenly.
func (c lowering) factor(producer, consumer *ir.Tensor, m pairAxes, ch Change) (*factoring, bool) {
	if m.consumer.at != nil && (producer.IsUneven() || consumer.IsUneven()) {
		return nil, false
	}
	f, ok := newFactoring(paddedExtents(producer, consumer, m.consumer), []*ir.Tensor{producer, consumer}, []valueAxes{m.producer, m.consumer})
	if ok {
		f.maps = m
	}
	if ok && !ch.Reduces() && c.planner.policy == PolicyOptimal {
		f.cutForReplicas([2]*ir.Tensor{producer, consumer}, [2]valueAxes{m.producer, m.consumer})
	}
	if ok && ch.Reduces() && c.planner.policy == PolicyOptimal && len(consumer.Layout()) > 0 {
		f.cutForScatter(producer, ch.Axis, m.consumer.to[consumer.Layout()[0]])
	}
	return f, ok
}

// factored returns c for a pair, of the given producer, whose common
// factoring is fact.
func (c lowering) factored(fact *factoring, producer *ir.Tensor) lowering {
	c.fact = fact
	c.real = c.realBlocksOf(producer)
	return c
}

// lowerFactored lowers the pair c's factoring is of: pads uneven shards,
// follows the policy's rule table or search, fuses a Pad into the Slice
// after it, and unpads. It returns the views the bound compares, or nils
// after a failure.
func (c lowering) lowerFactored(producer, consumer *ir.Tensor, ch Change) (src, dst *view) {
	fact := c.fact
	if !c.factoringFits(fact, producer.DType) {
		return nil, nil
	}
	m := fact.maps
	pv, tv := fact.tensorView(producer, m.producer), fact.tensorView(consumer, m.consumer)
	padAt := c.ledger.steps.len()
	src, dst = c.pad(pv, producer.Shape(), m.producer.to), c.padded(tv, consumer.Shape(), m.consumer.to)
	switch {
	case c.planner.policy == PolicyOptimal && ch.Reduces():
		c.optimalReduction(src, dst)
	case c.planner.policy == PolicyOptimal && src != pv && dst != tv && c.rootedGather(src, dst, tv, consumer.Shape(), m.consumer.to):
		return src, dst // the Broadcast wrote the consumer
	case c.planner.policy == PolicyOptimal:
		c.optimal(src, dst, 0)
	case ch.Reduces():
		c.lowerReduction(src, dst)
	default:
		c.lowerSet(src, dst)
	}
	if src != pv {
		c.fusePadSlice(padAt)
	}
	if dst != tv {
		c.unpad(dst, tv, consumer.Shape(), m.consumer.to)
	}
	return src, dst
}

// paddedExtents returns, per producer axis, the extent both tensors' shards
// tile: the true extent, or more where an uneven split pads it. A consumer
// whose axes are parts of the producer's (cMap.at) pads none.
func paddedExtents(p, c *ir.Tensor, cMap valueAxes) []int {
	ext := p.PaddedShape()
	if cMap.at != nil {
		return ext
	}
	for j, e := range c.PaddedShape() {
		ext[cMap.to[j]] = max(ext[cMap.to[j]], e)
	}
	return ext
}

// fail reports that the op cannot be lowered under the policy.
func (c lowering) fail(reason, hint string) { c.job.Fail(reason, hint) }
