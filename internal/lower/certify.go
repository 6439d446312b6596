package lower

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/nvcomm/nvcomm/internal/diag"
	"github.com/nvcomm/nvcomm/internal/ir"
	"github.com/nvcomm/nvcomm/internal/ops"
	"github.com/nvcomm/nvcomm/internal/plan"
	"github.com/nvcomm/nvcomm/internal/reshard"
)

// Certify checks that what a plan states about its fusion is what nvcomm
// computes: a plan is a certificate, and its analyses and numbers may not
// be edited. It rebuilds the fusion from the plan's meshes, tensors and ops
// (shapes, schedules and allocations, through ir.NewTensor, once per set
// of tensors alike), lowers it again under the plan's policy and objective (on
// the built-in topology: a plan lowered on another may differ in its
// steps, which are then unproven), and compares:
//
//   - every tensor's sharding, local_shape, padded_shape and layout with
//     the analyses of its schedule;
//   - summary.bytes_lower_bound with the bound of the lowering;
//   - for an op whose steps are nvcomm's steps for it but for their axis
//     and bytes, each step's axis and bytes.lower_bound with nvcomm's.
//
// An op whose steps differ otherwise is lowered another way: Certify
// cannot vouch that those steps compute the op, nor certify their axes and
// bounds (Validate only requires a bound between 0 and the step's received
// bytes). It returns such ops as unproven, for the caller to prove by
// running the plan (nvcomm's CLI simulates it). A fusion that nvcomm
// cannot lower under the plan's policy is a problem. The steps' own bytes
// and the summary's other numbers are plan.Validate's to check, from the
// steps alone. Certify expects a plan that Validate accepts; on any other
// it returns problems, and it never panics.
func Certify(p *plan.Plan) (problems []diag.Diagnostic, unproven []int) { return certify(p, true) }

// certify is Certify; alike lets it lower the sets and reductions alike
// once (opsAlike), which tests turn off to show that it changes nothing.
func certify(p *plan.Plan, alike bool) (problems []diag.Diagnostic, unproven []int) {
	ps := plan.NewProblems()
	f, tensors := rebuild(p, ps)
	if f == nil {
		return ps.All(), nil
	}
	checkAnalyses(p, f, tensors, ps)
	policy := Policy(p.Policy)
	if !slices.Contains(Policies, p.Policy) {
		ps.AddAbout("", "policy %q is not one of %v", p.Policy, Policies)
		return ps.All(), nil
	}
	switch {
	case p.Objective != "" && !slices.Contains(Objectives, p.Objective):
		ps.AddAbout("", "objective %q is not one of %v", p.Objective, Objectives)
		return ps.All(), nil
	case p.Objective != "" && policy != PolicyOptimal:
		ps.AddAbout("", "objective %q: only policy optimal has an objective", p.Objective)
		return ps.All(), nil
	}
	var ops *opsAlike
	if alike {
		ops = tensors.opsAlike(f, true)
	}
	// A plan of format 2 is lowered as one: its collectives may be
	// decomposed (overlap.go).
	again, err := lowerSteps(f, Options{Policy: policy, Objective: Objective(p.Objective), StepGraph: p.Graph()}, ops)
	if err != nil {
		addLowerErrors(ps, policy, err)
		return ps.All(), nil
	}
	unproven = checkSteps(p, again, ops.replays(len(p.Ops)), ps)
	return ps.All(), unproven
}

// rebuild makes the fusion a plan describes, with the classes of its
// tensors alike, or nil after adding why it cannot.
func rebuild(p *plan.Plan, ps *diag.List) (*ir.Fusion, *alikeTensors) {
	f := &ir.Fusion{Name: p.Fusion}
	meshes := map[string]*ir.Mesh{}
	names := make([]string, 0, len(p.Meshes))
	for name := range p.Meshes {
		names = append(names, name)
	}
	slices.Sort(names) // lower's own package has a function named maps
	for _, name := range names {
		m := p.Meshes[name]
		im, err := ir.NewMesh(name, m.Shape, m.Devices)
		if err != nil {
			ps.AddAbout("", "%v", err)
			continue
		}
		meshes[name] = im
		f.Meshes = append(f.Meshes, im)
	}
	if ps.Count() > 0 {
		return nil, nil // tensors on a broken mesh would only repeat it
	}
	index := make(map[string]int, len(p.Tensors)) // a name's position in f.Tensors
	f.Tensors = sized[*ir.Tensor](len(p.Tensors))
	alike := newAlikeTensors(len(p.Tensors))
	for k := range p.Tensors {
		t := &p.Tensors[k] // not copied: a plan tensor is a few hundred bytes
		it := alike.tensor(k, t, meshes, ps)
		if it == nil {
			continue
		}
		index[t.Name] = len(f.Tensors)
		f.Tensors = append(f.Tensors, it)
	}
	if ps.Count() > 0 {
		return nil, nil // ops on a broken tensor would only repeat it
	}
	b := newOpBuilder(p.Ops, f.Tensors, index)
	f.Ops = sized[*ir.Op](len(p.Ops))
	for i, op := range p.Ops {
		if o := b.op(i, op, ps); o != nil {
			f.Ops = append(f.Ops, o)
		}
	}
	if ps.Count() > 0 {
		return nil, nil
	}
	f.Inputs, f.Outputs = endpoints(f, b.read)
	alike.opEnds = b.ends
	return f, alike
}

// compositeOf is the composite a plan's record names, as the builder
// records it (ofPlan's inverse).
func compositeOf(of *plan.Of) *ir.Composite {
	c := &ir.Composite{Kind: ir.OpKind(of.Op), Inputs: slices.Clone(of.Inputs), Output: of.Output, Axis: -1,
		Axes: slices.Clone(of.Axes), Grad: of.Grad}
	if of.Axis != nil {
		c.Axis = *of.Axis
	}
	if of.Eps != nil {
		c.Attrs = append(c.Attrs, ops.Value{Key: ops.AttrEps, Float: *of.Eps})
	}
	if of.Reduction != "" {
		c.Attrs = append(c.Attrs, ops.Value{Key: ops.AttrReduction, Str: of.Reduction})
	}
	if of.Causal {
		c.Attrs = append(c.Attrs, ops.Value{Key: ops.AttrCausal, Bool: true})
	}
	if of.CP != "" {
		c.Attrs = append(c.Attrs, ops.Value{Key: ops.AttrCP, Str: of.CP})
	}
	if of.GQA {
		c.Attrs = append(c.Attrs, ops.Value{Key: ops.AttrGQA, Bool: true})
	}
	return c
}

// specOf is a plan tensor as ir.NewTensor takes it, its schedule written
// over steps (nil when it has none).
func specOf(t *plan.Tensor, mesh *ir.Mesh, steps []ir.ScheduleStep) ir.TensorSpec {
	spec := ir.TensorSpec{
		Name: t.Name, Mesh: mesh, DType: ir.DType(t.DType),
		Shape: t.Shape, ReductionAxes: t.ReductionAxes, Allocation: t.Allocation,
		Partial: ir.OpKind(t.Partial), Propagated: t.Propagated,
	}
	steps = steps[:0]
	for _, s := range t.Schedule {
		steps = append(steps, irStep(s))
	}
	if len(steps) > 0 {
		spec.Schedule = steps
	}
	return spec
}

// irStep is a plan schedule step as ir writes it. A step that sets no
// transform, or a parallel type ir does not know, becomes a step that
// ir.NewTensor rejects.
func irStep(s plan.ScheduleStep) ir.ScheduleStep {
	switch {
	case s.Split != nil:
		return ir.ScheduleStep{Kind: ir.StepSplit, Axis: s.Split.Axis, Factor: s.Split.Factor}
	case s.OuterSplit != nil:
		return ir.ScheduleStep{Kind: ir.StepOuterSplit, Axis: s.OuterSplit.Axis, Factor: s.OuterSplit.Factor}
	case s.Merge != nil:
		return ir.ScheduleStep{Kind: ir.StepMerge, Axis: s.Merge.Axis}
	case s.Reorder != nil:
		return ir.ScheduleStep{Kind: ir.StepReorder, Order: s.Reorder}
	case s.Parallelize != nil:
		typ, ok := ir.ParseParallelType(s.Parallelize.Type)
		if !ok {
			typ = ir.ParallelType(-1) // named "ParallelType(-1)" in ir's error
		}
		return ir.ScheduleStep{Kind: ir.StepParallelize, Axis: s.Parallelize.Axis, Type: typ}
	}
	return ir.ScheduleStep{Kind: "(none)"}
}

// opBuilder makes a plan's ops as ir writes them, from slabs: an op and
// its list of operands were two allocations of each of 100k ops.
type opBuilder struct {
	tensors []*ir.Tensor
	index   map[string]int // a tensor's position in tensors, by name
	ops     []ir.Op
	inputs  []*ir.Tensor // the operands of the ops not yet built
	// read marks the tensors an op reads, by position.
	read []bool
	// ends are the positions of each op's first operand and of its output
	// (opsAlike).
	ends [][2]int32
}

func newOpBuilder(ops []plan.Op, tensors []*ir.Tensor, index map[string]int) *opBuilder {
	n := 0
	for k := range ops {
		n += len(ops[k].Operands())
	}
	return &opBuilder{tensors: tensors, index: index, ops: make([]ir.Op, len(ops)), inputs: make([]*ir.Tensor, n),
		read: make([]bool, len(tensors)), ends: make([][2]int32, len(ops))}
}

// tensor returns the tensor called name and its position, or nil.
func (b *opBuilder) tensor(name string) (*ir.Tensor, int) {
	k, ok := b.index[name]
	if !ok {
		return nil, -1
	}
	return b.tensors[k], k
}

// op makes op i of the plan, or returns nil after adding why not.
func (b *opBuilder) op(i int, op plan.Op, ps *diag.List) *ir.Op {
	out, outAt := b.tensor(op.Output)
	names := op.Operands()
	inputs := b.inputs[:len(names):len(names)] // its own: insertReshardings rewrites slots
	b.inputs = b.inputs[len(names):]
	ok := out != nil && ir.OpKind(op.Op).Entry() != nil
	for k, name := range names {
		in, at := b.tensor(name)
		if in == nil {
			ok = false
			continue
		}
		inputs[k] = in
		b.read[at] = true
		if k == 0 {
			b.ends[i] = [2]int32{int32(at), int32(outAt)}
		}
	}
	if !ok {
		ps.AddAbout("", "op %d: not an op between tensors of the plan", i)
		return nil
	}
	o := &b.ops[i]
	*o = ir.Op{Index: i, Kind: ir.OpKind(op.Op), Inputs: inputs, Out: out, Axis: -1, Axes: slices.Clone(op.Axes), Attrs: op.Attrs.Clone(),
		Scalar: op.Scalar.Clone()}
	if o.Kind.TakesAxis() {
		if op.Axis == nil || *op.Axis < 0 || *op.Axis >= inputs[0].NumValueAxes() {
			ps.AddAbout("", "op %d: %s needs an axis among the input's non-reduction axes", i, op.Op)
			return nil
		}
		o.Axis = *op.Axis
	}
	if op.Of != nil {
		// The composite it is of: the lowering may compute a composite
		// whole (ring.go).
		o.Of = compositeOf(op.Of)
	}
	if why := op.Inserted; why != nil && o.Kind == ir.OpSet && why.For != i && why.For >= 0 && why.For < len(b.ops) {
		// A set inserted to reshard an operand or a result: its op's
		// bound may stand for the set's (ways.go).
		o.Inserted = &ir.Insertion{For: &b.ops[why.For], Operands: slices.Clone(why.Operands), Output: why.Output}
	}
	if out.Partial != "" {
		// Its pending terms: what the op computes is their Combined.
		if err := o.Pend(); err != nil {
			ps.AddAbout("", "op %d: %v", i, err)
			return nil
		}
	}
	return o
}

// endpoints returns the tensors no op produces and those no op reads
// (read marks, by position, those an op reads).
func endpoints(f *ir.Fusion, read []bool) (ins, outs []*ir.Tensor) {
	for k, t := range f.Tensors {
		if t.Producer == nil {
			ins = append(ins, t)
		}
		if !read[k] {
			outs = append(outs, t)
		}
	}
	return ins, outs
}

// checkAnalyses compares each tensor's sharding, local_shape,
// padded_shape and layout with those of its rebuilt tensor (computed once
// for tensors alike).
func checkAnalyses(p *plan.Plan, f *ir.Fusion, alike *alikeTensors, ps *diag.List) {
	for k := range p.Tensors {
		t, want := &p.Tensors[k], alike.analyses(k, f.Tensors[k])
		if slices.EqualFunc(t.Sharding, want.Sharding, samePlanSharding) && slices.Equal(t.LocalShape, want.LocalShape) &&
			slices.Equal(t.PaddedShape, want.PaddedShape) && slices.Equal(t.Layout, want.Layout) {
			continue
		}
		what := fmt.Sprintf("tensor %q", t.Name)
		if !slices.EqualFunc(t.Sharding, want.Sharding, samePlanSharding) {
			ps.AddAbout("", "%s: sharding is %s, but its schedule gives %s", what, jsonText(t.Sharding), jsonText(want.Sharding))
		}
		for _, c := range []struct {
			field     string
			got, want []int
		}{
			{"local_shape", t.LocalShape, want.LocalShape},
			{"padded_shape", t.PaddedShape, want.PaddedShape},
			{"layout", t.Layout, want.Layout},
		} {
			if !slices.Equal(c.got, c.want) {
				ps.AddAbout("", "%s: %s is %s, but its schedule gives %s", what, c.field, jsonText(c.got), jsonText(c.want))
			}
		}
	}
}

func samePlanSharding(a, b plan.Sharding) bool {
	return a.Type == b.Type && a.LogicalAxis == b.LogicalAxis && a.Kind == b.Kind && slices.Equal(a.LogicalAxes, b.LogicalAxes)
}

// jsonText renders v as the plan writes it; nil slices as absent ones.
func jsonText(v any) string {
	b, err := json.Marshal(v)
	if err != nil || string(b) == "null" {
		return "absent"
	}
	return string(b)
}

// checkSteps compares the plan's lower bound with that of nvcomm's own
// lowering of its fusion, and each op's steps with nvcomm's: where they
// are nvcomm's but for axes and bytes, the axes and bounds must be
// nvcomm's too. The steps of an op replayed aside (replays, by op) are
// those of the op it replays, renamed. It returns the ops lowered
// another way.
func checkSteps(p *plan.Plan, again *lowerer, replays []*reshard.Replay, ps *diag.List) (unproven []int) {
	if got, want := p.Summary.BytesLowerBound, again.ledger.LowerBound(); got != want {
		ps.AddAbout("", "summary: bytes_lower_bound is %d, but nvcomm computes %d for the plan's fusion (policy %s)", got, want, p.Policy)
	}
	mine, theirs := p.Steps, again.ledger.Steps()
	byMine, byTheirs := groupByOp(mine, len(p.Ops)), groupByOp(theirs, len(p.Ops))
	for op := range len(p.Ops) {
		a := byMine.of(op)
		if r := replays[op]; r != nil {
			replayed := r.Steps()
			if !sameReplayed(mine, a, replayed, r) {
				unproven = append(unproven, op)
				continue
			}
			for k, i := range a {
				checkStep(&mine[i], &replayed[k], op, ps)
			}
			continue
		}
		b := byTheirs.of(op)
		if !slices.EqualFunc(a, b, func(i, j int) bool { return sameStep(&mine[i], &theirs[j]) }) {
			unproven = append(unproven, op)
			continue
		}
		for k, i := range a {
			checkStep(&mine[i], &theirs[b[k]], op, ps)
		}
	}
	return unproven
}

// sameReplayed reports whether the plan's steps at positions are, by
// sameStep, the steps of an op replayed aside as they would be written
// for that op: with its index, its expression and its names.
func sameReplayed(steps []plan.Step, positions []int, replayed []plan.Step, r *reshard.Replay) bool {
	if len(positions) != len(replayed) {
		return false
	}
	for k, i := range positions {
		a := &steps[i]
		if a.Op != r.Op || a.Expr != r.Expr || !sameStepNamed(a, &replayed[k], r.SameName) {
			return false
		}
	}
	return true
}

// checkStep compares the axis and lower bound of a step with those of
// nvcomm's step for it.
func checkStep(s, want *plan.Step, op int, ps *diag.List) {
	if !plan.SameAxis(s.Axis, want.Axis) {
		plan.AddStep(ps, s.ID, s.Type, "axis is %s, but nvcomm's lowering of op %d, whose steps these are, gives %s", plan.AxisText(s.Axis), op, plan.AxisText(want.Axis))
	}
	if s.Bytes != nil && want.Bytes != nil && s.Bytes.LowerBound != want.Bytes.LowerBound {
		plan.AddStep(ps, s.ID, s.Type, "lower_bound is %d, but nvcomm's lowering of op %d, whose steps these are, bounds this step at %d",
			s.Bytes.LowerBound, op, want.Bytes.LowerBound)
	}
}

// stepGroups are the positions of steps grouped by the op (of n) they
// implement, each group in the steps' order: a counting sort, where a
// list per op was a sixth of certifying a plan of 100k ops.
type stepGroups struct {
	start []int // op's group is at[start[op]:start[op+1]]
	at    []int
}

// groupByOp groups steps by op, leaving out those of no op of n.
func groupByOp(steps []plan.Step, n int) stepGroups {
	// Steps are read by index: ranging over their values copied every
	// step, a few hundred bytes, to read its op (a sixth of the cache
	// misses of validating a plan).
	g := stepGroups{start: make([]int, n+1)}
	for i := range steps {
		if op := steps[i].Op; op >= 0 && op < n {
			g.start[op+1]++
		}
	}
	for op := range n {
		g.start[op+1] += g.start[op]
	}
	g.at = make([]int, g.start[n])
	next := slices.Clone(g.start[:n])
	for i := range steps {
		if op := steps[i].Op; op >= 0 && op < n {
			g.at[next[op]] = i
			next[op]++
		}
	}
	return g
}

// of returns the positions of op's steps.
func (g stepGroups) of(op int) []int { return g.at[g.start[op]:g.start[op+1]] }

// sameStep compares two steps but for their ids, axes and bytes, and their
// place in a step graph (stream and after: any order the graph allows
// computes what the list's does, which plan.Validate checks), as their
// JSON would compare: a list that the plan omits when empty is the same
// nil or empty, an inner list is not (null against []). It compares field
// by field (marshalling both steps was a third of certifying a plan);
// TestSameStepFields keeps it to the fields Step has.
func sameStep(a, b *plan.Step) bool {
	return a.Op == b.Op && a.Expr == b.Expr && sameStepNamed(a, b, equalNames)
}

func equalNames(a, b string) bool { return a == b }

// sameStepNamed is sameStep but for the op and its expression, and with
// b's buffers named a's when same(a's, b's) reports so.
func sameStepNamed(a, b *plan.Step, same func(a, b string) bool) bool {
	return a.Kind == b.Kind && a.Type == b.Type &&
		slices.EqualFunc(a.Teams, b.Teams, sameList) && slices.Equal(a.Devices, b.Devices) &&
		samePtr(a.Root, b.Root) && samePtr(a.ReduceOp, b.ReduceOp) &&
		same(a.Input, b.Input) && slices.EqualFunc(a.Inputs, b.Inputs, same) && same(a.Output, b.Output) &&
		a.Count == b.Count && slices.Equal(a.Dims, b.Dims) && slices.Equal(a.Perm, b.Perm) &&
		slices.Equal(a.ReduceDims, b.ReduceDims) && slices.EqualFunc(a.Valid, b.Valid, sameList) &&
		samePtr(a.Fill, b.Fill) && samePtr(a.Func, b.Func) && a.Scalar.Equal(b.Scalar) && slices.EqualFunc(a.InputDims, b.InputDims, sameList) &&
		a.BroadcastB == b.BroadcastB && a.TransposeB == b.TransposeB && slices.EqualFunc(a.SendCounts, b.SendCounts, sameList) &&
		slices.Equal(a.Offsets, b.Offsets) && slices.EqualFunc(a.Windows, b.Windows, sameList)
}

// sameList compares inner lists as JSON does: nil (null) is not empty ([]).
func sameList(a, b []int) bool { return (a == nil) == (b == nil) && slices.Equal(a, b) }

// samePtr compares optional values: both absent, or both present and equal.
func samePtr[T comparable](a, b *T) bool {
	return (a == nil) == (b == nil) && (a == nil || *a == *b)
}

// addLowerErrors reports that the plan's fusion cannot be lowered.
func addLowerErrors(ps *diag.List, policy Policy, err error) {
	addErrors(ps, fmt.Sprintf("nvcomm cannot lower the plan's fusion (policy %s): ", policy), err)
}

// addErrors adds each diagnostic of err (or err itself) as a problem
// outside the steps, after prefix.
func addErrors(ps *diag.List, prefix string, err error) {
	var dl *diag.List
	if !errors.As(err, &dl) {
		ps.AddAbout("", "%s%v", prefix, err)
		return
	}
	for _, d := range dl.Items {
		ps.AddAbout("", "%s%s", prefix, d.Text())
	}
	if dl.Dropped > 0 {
		ps.AddAbout("", "%s%d more errors", prefix, dl.Dropped)
	}
}
