// Package auto chooses the shardings of a layer (nvcomm lower --auto): every
// tensor of a format-2 fusion that is not given, and every tensor declared
// with `placements: auto`, is a decision; nvcomm picks for each the
// sharding that makes the whole layer fastest under the cost model, within
// a per-device memory budget (docs/auto.md).
//
// The cost of an assignment is the predicted time of the plan nvcomm
// lowers for it: each op's resharding sets, collectives and local compute
// (Matmul and Pointwise steps priced by the topology's roofline). Lowering
// is per op, so the time is a sum over ops, each depending only on the
// shardings of its own tensors: the solver tabulates every op's time for
// every combination of its tensors' candidate shardings, by lowering the op
// alone, and searches the assignments exactly (solve.go).
package auto

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/dustin/go-humanize"

	"github.com/nvcomm/nvcomm/internal/cost"
	"github.com/nvcomm/nvcomm/internal/ir"
	"github.com/nvcomm/nvcomm/internal/lower"
	"github.com/nvcomm/nvcomm/internal/syntax"
)

// GCPercent is the garbage collector's target (GOGC) that lower --auto
// runs with: pricing lowers thousands of small fusions, allocating much
// and keeping little. Pricing one MLP block on a 2×2×4 mesh, the
// collector ran 221 cycles at 200 rather than 525 at the default of 100,
// and its share of the CPU fell from 13% to 9% (runtime/metrics), for a
// peak of about 180 MB rather than 127 MB.
// The process sets it (debug.SetGCPercent) unless GOGC is set, not
// Solve: it is the program's, and Solve may run beside other work.
const GCPercent = 200

// Options configure Solve.
type Options struct {
	// Lowering is how each op is lowered and priced: the policy, the
	// objective of its resharding, the topology (nil: cost.Default()).
	Lowering lower.Options
	// MemoryBudget is the most bytes a device may hold at once (the
	// layer's inputs and weights, and its intermediates while live); 0
	// means no limit.
	MemoryBudget int64
	// TimeLimit stops the search (0: none): Solve then returns the best
	// assignment it completes, not proven the fastest (Result.Exact false,
	// Result.Gap its distance from the lower bound).
	TimeLimit time.Duration
	// Progress, when set, is told about once a second how far Solve is,
	// from a second after it starts.
	Progress func(Progress)
	// Optimizer is what a training step's memory counts for each
	// parameter besides it (countTraining): "none" (or ""), "sgd" (its
	// gradient) or "adam" (its gradient and two float32 moments).
	Optimizer string
	// StepGraph says that the caller lowers the chosen fusion as a step
	// graph (lower --step-graph), whose time is its makespan: the search
	// still prices each op's steps as a list, and then the assignment it
	// found and its best runner-ups (MaxReranked of them, the least slower
	// first) are each lowered as a step graph and the one whose makespan
	// is least is taken (rerank.go). Lowering.StepGraph must be false.
	StepGraph bool
	// NoRunnerUps leaves out each decision's runner-up (Decision.RunnerUp
	// empty): the programme's backward pass, about the search's work
	// again, for a caller that shows only the choices (model --auto).
	// Under a budget the search then first solves without it, and when
	// that choice does not fit, prices bytes to find shardings that fit
	// before it proves them the fastest (budget.go).
	NoRunnerUps bool
	// forwardOnly prices a training step's forward alone, as --auto did
	// before it priced the gradients (the tests' baseline).
	forwardOnly bool
}

// Progress is how far Solve is.
type Progress struct {
	// Stage is "pricing" (the ops' tables: Done of Total ops), "search"
	// (the best assignment: ops) or "runner-ups" (their backward pass:
	// ops).
	Stage       string
	Done, Total int
}

// reporter passes progress on at most once a second, the first a second
// after the start: a solve that takes less says nothing.
type reporter struct {
	f    func(Progress)
	last time.Time
}

func (r *reporter) report(stage string, done, total int) {
	if r.f == nil || time.Since(r.last) < time.Second {
		return
	}
	r.last = time.Now()
	r.f(Progress{Stage: stage, Done: done, Total: total})
}

// Decision is the sharding chosen for one tensor, and the best the layer
// could do with any other.
type Decision struct {
	Tensor string
	// Chosen is the placements, as a fusion file writes them, of what the
	// tensor holds; for an op that reduces across devices itself, followed
	// by the device types it reduces over ("[Replicate()] reduced over DIDx
	// by its op").
	Chosen string
	// RunnerUp is the best other sharding of the tensor, "" when there is
	// none within the budget; Slower is how much more the layer's
	// predicted time is with it, in seconds.
	RunnerUp string
	Slower   float64
	// ByMakespan says that the step graphs' ranking (rerank) changed the
	// search's choice of the tensor: RunnerUp is then the search's choice
	// and Slower how much longer its plan's makespan is.
	ByMakespan bool
}

// Result is the chosen shardings and the fusion annotated with them.
type Result struct {
	// Fusion is the input file with every decision's placements written
	// (format 2: lowering it gives the chosen plan).
	Fusion    []byte
	Decisions []Decision
	// Seconds is the predicted time of the chosen plan; PeakBytes the
	// most bytes a device holds at once under it.
	Seconds   float64
	PeakBytes int64
	// Lowered counts the single-op fusions priced.
	Lowered int
	// Exact is false when the search stopped at its time limit or its
	// size limit: the shardings are then the best it found, not proven the
	// fastest, and Gap bounds how much faster the fastest could be, in
	// seconds (Seconds less a lower bound on the optimum). Runner-ups
	// are then not computed.
	Exact bool
	Gap   float64
	// BackwardOps counts the ops of the fusion's backward section: their
	// tensors take their shardings by propagation from the chosen ones,
	// and the search prices them per op of the forward, each op with its
	// own gradient (vjp.go). Searched is then the sum the search
	// minimised, which the runner-ups' Slower compare: the ops' forward
	// and gradient prices, not exactly the step's prediction (Seconds).
	BackwardOps int
	Searched    float64
	// Listed is, where the caller lowers the chosen fusion as a step
	// graph (lower --step-graph) and sets Seconds to its makespan, the
	// chosen shardings' time with each op's steps priced as a list,
	// which the search minimised; 0 otherwise.
	Listed float64
	// Ranked are, under Options.StepGraph after an exact search, the
	// search's assignment (first) and its best runner-ups with the
	// makespans of their plans as step graphs, the least of which the
	// result takes (rerank.go).
	Ranked []Ranked
	// summed is the sum of the ops' prices the search minimised; Seconds
	// differs from it by the Copy that ends an op moving a tensor to
	// another mesh when a later op reads it, which the op alone does not
	// know.
	summed float64
	// file and src are the user's fusion file, which Repoint points
	// errors at.
	file string
	src  []byte
}

// predictFusion is the predicted time of the plan lowered from the fusion
// src, so that the time Solve reports is the plan's; false when it does
// not lower (the caller reports why when it lowers it).
func predictFusion(file string, src []byte, opts lower.Options) (float64, bool) {
	f, err := syntax.Parse(file, src)
	if err != nil {
		return 0, false
	}
	p, err := lower.Lower(f, opts)
	if err != nil {
		return 0, false
	}
	pr, err := cost.Predict(opts.Topology, p)
	if err != nil {
		return 0, false
	}
	return pr.Total, true
}

// Solve chooses the shardings of the decisions of the fusion in src (file
// names it in messages) and returns the annotated fusion.
func Solve(file string, src []byte, opts Options) (*Result, error) {
	f, err := syntax.ParseAuto(file, src)
	if err != nil {
		return nil, err
	}
	if !slices.ContainsFunc(f.Tensors, func(t *ir.Tensor) bool { return t.Auto || t.Propagated }) {
		return &Result{Fusion: src, Exact: true, file: file, src: src}, nil // nothing to choose: the fusion as it is
	}
	tree, err := readSource(src)
	if err != nil {
		return nil, err
	}
	m, err := newModel(f, tree)
	if err != nil {
		return nil, err
	}
	if err := m.countTraining(tree, opts.Optimizer); err != nil {
		return nil, err
	}
	if opts.Lowering.Topology == nil {
		opts.Lowering.Topology = cost.Default()
	}
	rep := &reporter{f: opts.Progress, last: time.Now()}
	ev := newEvaluator(opts.Lowering)
	if fa := m.price(ev, tree, rep, !opts.forwardOnly); fa != nil {
		return nil, m.cannotLower(file, fa, opts.Lowering)
	}
	sv := newSolver(m, opts.MemoryBudget)
	if opts.TimeLimit > 0 {
		sv.deadline = time.Now().Add(opts.TimeLimit)
	}
	sv.progress = func(done, total int) { rep.report("search", done, total) }
	best, err := sv.solveFor(!opts.NoRunnerUps)
	if err != nil {
		return nil, fmt.Errorf("%w%s", err, budgetHint(opts.MemoryBudget, err))
	}
	res := &Result{Seconds: float64(best.cost) / 1e12, PeakBytes: best.peak, Lowered: ev.lowered, Exact: sv.exact, file: file, src: src}
	if !sv.exact {
		res.Gap = float64(best.cost-sv.lower) / 1e12
	}
	internal := map[string]bool{}
	for _, k := range sv.decisions {
		if v := m.vars[k]; v.t.Intermediate() {
			internal[v.t.Name] = true // a composite's: no file declares it, the lowering propagates it
		}
	}
	res.Decisions = decisions(sv, best, rep, !opts.NoRunnerUps)
	res.Decisions = slices.DeleteFunc(res.Decisions, func(d Decision) bool { return internal[d.Tensor] })
	if res.Fusion, err = annotateChoice(sv, tree, best.choice); err != nil {
		return nil, err
	}
	if opts.StepGraph && sv.exact {
		if err := rerank(res, sv, best, tree, file, opts); err != nil {
			return nil, err
		}
	}
	res.summed = res.Seconds
	if res.BackwardOps = len(slices.DeleteFunc(slices.Clone(f.Ops), func(op *ir.Op) bool { return !backward(op) })); res.BackwardOps > 0 {
		res.Searched = res.Seconds
	}
	if s, ok := predictFusion(file, res.Fusion, opts.Lowering); ok {
		res.Seconds = s
	}
	return res, nil
}

// annotateChoice is the fusion source of tree with the decisions'
// placements of assignment choice written.
func annotateChoice(sv *solver, tree *source, choice []int) ([]byte, error) {
	chosen, meshes, produced := map[string]sharding{}, map[string]string{}, map[string]*ir.Tensor{}
	var order []string
	for _, k := range sv.decisions {
		v := sv.m.vars[k]
		if v.t.Intermediate() {
			continue
		}
		chosen[v.t.Name] = v.options[choice[k]]
		order = append(order, v.t.Name)
		if !v.produced {
			meshes[v.t.Name] = v.t.Mesh.Name
		} else {
			produced[v.t.Name] = v.t
		}
	}
	return tree.annotate(order, chosen, meshes, produced)
}

// price adds the ops' gradients of a training step to m (vjp.go) when
// gradients is set, tabulates every op, and adds each gradient's table into its op's where
// it can; it returns an op that no combination lets lower, nil when
// none.
func (m *model) price(ev *evaluator, tree *source, rep *reporter, gradients bool) *factor {
	if gradients {
		m.addGradients(tree)
	}
	meshes := "{}"
	if n := lookup(tree.root(), "meshes"); n != nil {
		meshes = flowYAML(n)
	}
	for i, fa := range m.factors {
		rep.report("pricing", i, len(m.factors))
		if fa.vjp != nil {
			ev.fillGradient(m, meshes, fa)
			continue
		}
		ev.fill(m, fa)
	}
	if fa := m.unrunnable(); fa != nil {
		return fa
	}
	m.foldGradients()
	return nil
}

// runnerUps lists each decision's choice and, after an exact search, its
// runner-up: the best assignment in which the tensor takes any other
// option, the first in search order of the cheapest. The programme's
// backward pass gives them all at once (solver.backward; under a budget,
// from the partial assignments no other dominates).
func runnerUps(sv *solver, best *solution, rep *reporter) []Decision {
	return decisions(sv, best, rep, true)
}

// decisions lists each decision's choice, with its runner-up (runnerUps)
// when withRunnerUps is set.
func decisions(sv *solver, best *solution, rep *reporter, withRunnerUps bool) []Decision {
	var marg [][]int64
	var other []int
	if sv.exact && !sv.noRunnerUps && withRunnerUps {
		marg, other = sv.backward(best.choice, func(done, total int) { rep.report("runner-ups", done, total) })
	}
	var out []Decision
	for _, k := range sv.decisions {
		v := sv.m.vars[k]
		d := Decision{Tensor: v.t.Name, Chosen: v.describe(best.choice[k])}
		if other != nil && other[k] >= 0 {
			d.RunnerUp, d.Slower = v.describe(other[k]), float64(marg[k][other[k]]-best.cost)/1e12
		}
		out = append(out, d)
	}
	return out
}

// otherBest is the option of variable k, other than chosen, with the
// cheapest marginal, and how many options share that cost (0 when none
// can run).
func otherBest(marg [][]int64, k, chosen int) (best, ties int) {
	if marg == nil {
		return 0, 0
	}
	for o, c := range marg[k] {
		switch {
		case o == chosen || c == maxCost:
		case ties == 0 || c < marg[k][best]:
			best, ties = o, 1
		case c == marg[k][best]:
			ties++
		}
	}
	return best, ties
}

// tied is which options of variable k other than chosen have marginal
// marg[k][o]: the runner-up is one of them, whatever the others are.
func tied(marg [][]int64, k, o, chosen int) []bool {
	out := make([]bool, len(marg[k]))
	for i, c := range marg[k] {
		out[i] = i != chosen && c == marg[k][o]
	}
	return out
}

// budgetHint is what an error of the search under budget (0: none) adds:
// the budget, and how far the shardings tried were from it when the
// search knows (tightError).
func budgetHint(budget int64, err error) string {
	if budget <= 0 {
		return ""
	}
	var tight *tightError
	if errors.As(err, &tight) {
		return fmt.Sprintf(" within a memory budget of %s per device; the shardings it tried hold %s a device at the least: raise --memory-budget, or give some tensors placements", humanize.IBytes(uint64(budget)), humanize.IBytes(uint64(tight.least)))
	}
	return fmt.Sprintf(" within a memory budget of %s per device; raise --memory-budget or give some tensors placements", humanize.IBytes(uint64(budget)))
}
