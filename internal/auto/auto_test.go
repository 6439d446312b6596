package auto

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/nvcomm/nvcomm/internal/cost"
	"github.com/nvcomm/nvcomm/internal/lower"
	"github.com/nvcomm/nvcomm/internal/plan"
	"github.com/nvcomm/nvcomm/internal/scale"
	"github.com/nvcomm/nvcomm/internal/sim"
	"github.com/nvcomm/nvcomm/internal/syntax"
)

// mlp is Megatron-LM's MLP on a 1-D mesh of 4 with only its input given:
// tokens × hidden, ffn = 4 × hidden, the weights and every intermediate
// left to the auto-sharder.
func mlp(tokens, hidden int) string {
	return fmt.Sprintf(`format: 2
name: mlp
meshes:
  tp: [0, 1, 2, 3]
tensors:
  x:  {mesh: tp, shape: [%[1]d, %[2]d]}         # the input, replicated
  w1: {mesh: tp, shape: [%[3]d, %[2]d], placements: auto}
  w2: {mesh: tp, shape: [%[2]d, %[3]d], placements: auto}
  y:  {placements: [Replicate()]}               # the next layer wants it whole
ops:
  - {op: linear, in: [x, w1], out: h}
  - {op: relu, in: h, out: a}
  - {op: linear, in: [a, w2], out: y}
`, tokens, hidden, 4*hidden)
}

// chosen lists the decisions as "tensor placements".
func chosen(res *Result) []string {
	var out []string
	for _, d := range res.Decisions {
		out = append(out, d.Tensor+" "+d.Chosen)
	}
	return out
}

// TestMegatron checks the choices the issue names: under a budget below
// the replicated weights, column-parallel then row-parallel with one
// Allreduce (Megatron-LM's split); with room for the replicated weights and
// a tiny batch, replicated weights (no collective: each device computes the
// whole layer); with room but a large batch, the split again.
func TestMegatron(t *testing.T) {
	const hidden = 1024
	weights := int64(2 * 4 * hidden * hidden * 4) // both weights, float32: 32 MiB
	megatron := []string{"w1 [Shard(0)]", "w2 [Shard(1)]", "h [Shard(1)]", "a [Shard(1)]"}
	replicated := []string{"w1 [Replicate()]", "w2 [Replicate()]", "h [Replicate()]", "a [Replicate()]"}
	tests := map[string]struct {
		tokens int
		budget int64
		want   []string
		steps  []string
	}{
		"budget below the weights":          {tokens: 8, budget: weights / 2, want: megatron, steps: []string{"Matmul", "Pointwise", "Matmul", "Allreduce"}},
		"room for the weights, tiny batch":  {tokens: 8, budget: 2 * weights, want: replicated, steps: []string{"Matmul", "Pointwise", "Matmul"}},
		"room for the weights, large batch": {tokens: 8192, budget: 0, want: megatron, steps: []string{"Matmul", "Pointwise", "Matmul", "Allreduce"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			res, err := Solve("mlp.yaml", []byte(mlp(tc.tokens, hidden)), Options{MemoryBudget: tc.budget})
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, chosen(res)); d != "" {
				t.Errorf("decisions (-want +got):\n%s", d)
			}
			p := lowerChosen(t, res)
			var steps []string
			for _, s := range p.Steps {
				steps = append(steps, s.Type)
			}
			if d := cmp.Diff(tc.steps, steps); d != "" {
				t.Errorf("steps (-want +got):\n%s", d)
			}
			if tc.budget > 0 && res.PeakBytes > tc.budget {
				t.Errorf("peak %d bytes over the budget %d", res.PeakBytes, tc.budget)
			}
		})
	}
}

// lowerChosen lowers the annotated fusion and checks what Solve claims of
// it: its predicted time is the sum Solve computed from single ops, each
// less its first step's latency where it continues a run of local steps
// of the op before.
func lowerChosen(t *testing.T, res *Result) *plan.Plan {
	t.Helper()
	f, err := syntax.Parse("chosen.yaml", res.Fusion)
	if err != nil {
		t.Fatalf("the annotated fusion does not parse: %v\n%s", err, res.Fusion)
	}
	p, err := lower.Lower(f, lower.Options{})
	if err != nil {
		t.Fatal(err)
	}
	pr, err := cost.Predict(cost.Default(), p)
	if err != nil {
		t.Fatal(err)
	}
	if pr.Total != res.Seconds {
		t.Errorf("the chosen plan is predicted %.6g s; Solve says %.6g s", pr.Total, res.Seconds)
	}
	if res.BackwardOps == 0 && math.Abs(pr.Total-res.summed) > 1e-12*float64(len(f.Ops)) { // a training step's sum is not exact (TestTrainingObjective)
		t.Errorf("the chosen plan is predicted %.6g s; Solve summed %.6g s from its ops", pr.Total, res.summed)
	}
	return p
}

// layers are small fusions with decisions of every kind: intermediates, a
// residual add (a DAG), weights marked auto, a 2-D mesh, a reduction.
var layers = map[string]string{
	"mlp":              mlp(8, 16),
	"mlp, output free": strings.Replace(mlp(16, 8), "  y:  {placements: [Replicate()]}               # the next layer wants it whole\n", "", 1),
	"residual": `format: 2
meshes:
  tp: [0, 1]
tensors:
  x: {mesh: tp, shape: [8, 6], placements: [Shard(0)]}
  w: {mesh: tp, shape: [6, 6], placements: auto}
ops:
  - {op: linear, in: [x, w], out: h}
  - {op: relu, in: h, out: a}
  - {op: add, in: [a, x], out: y}
`,
	"2-D mesh": `format: 2
meshes:
  g: [[0, 1], [2, 3]]
tensors:
  x: {mesh: g, shape: [4, 8], placements: [Shard(0), Replicate()]}
  w: {mesh: g, shape: [8, 8], placements: auto}
ops:
  - {op: matmul, in: [x, w], out: y}
  - {op: neg, in: y, out: z}
`,
	"reduction": `format: 2
meshes:
  m: [0, 1, 2, 3]
tensors:
  x: {mesh: m, shape: [8, 12], placements: [Shard(1)]}
ops:
  - {op: abs, in: x, out: a}
  - {op: sum, in: a, axis: 1, out: s}
  - {op: relu, in: s, out: r}
`,
	// An input of partial terms, read by a set that sums them: auto once
	// built that op as the sum the parser makes of it, which only a set
	// may read, and found no assignment.
	// An input declared without a mesh, which propagation gives its
	// reader's: the annotated fusion must declare it.
	"mesh-less input": `format: 2
meshes:
  tp: [0, 1, 2, 3]
tensors:
  x: {shape: [8, 16]}
  w: {mesh: tp, shape: [32, 16], placements: auto}
  y: {placements: [Replicate()]}
ops:
  - {op: linear, in: [x, w], out: h}
  - {op: relu, in: h, out: y}
`,
	// Two pipeline stages on meshes that share no device: the activation
	// crosses in a Broadcast rooted outside stage 1 and is read there
	// only, so the whole plan has no Copy the set alone lacks, and the
	// search's sum is the plan's prediction.
	"two-stage pipeline": `format: 2
meshes:
  s0: [0, 1, 2, 3]
  s1: [4, 5, 6, 7]
tensors:
  x:  {mesh: s0, shape: [8, 16], placements: [Replicate()]}
  w1: {mesh: s0, shape: [16, 16], placements: auto}
  b:  {mesh: s1, shape: [8, 16], placements: auto}
  w2: {mesh: s1, shape: [16, 16], placements: auto}
  y:  {mesh: s1, placements: [Replicate()]}
ops:
  - {op: linear, in: [x, w1], out: h}
  - {op: relu, in: h, out: a}
  - {op: set, in: a, out: b}
  - {op: linear, in: [b, w2], out: y}
`,
	// A composite op: its intermediate (m/mean_sum) is priced with the
	// rest, but no file can declare it, and the chosen fusion does not.
	"composite": `format: 2
meshes:
  tp: [0, 1]
tensors:
  x: {mesh: tp, shape: [4, 8, 6], placements: [Shard(2)]}
  w: {mesh: tp, shape: [6, 6], placements: auto}
ops:
  - {op: mean, in: x, out: m, axis: 0}
  - {op: linear, in: [m, w], out: y}
`,
	// Training steps: the search prices each op with its gradient (its
	// training price, vjp.go), a primitive op's added into its table, a
	// composite's a factor of its own after its last op.
	"training MLP": trainingMLP(""),
	"training norm": `format: 2
meshes:
  tp: [0, 1]
tensors:
  x:  {mesh: tp, shape: [4, 8]}
  g:  {mesh: tp, shape: [8]}
  w:  {mesh: tp, shape: [8, 8], placements: auto}
  y:  {placements: [Replicate()]}
  dy: {mesh: tp, shape: [4, 8]}
ops:
  - {op: rms_norm, in: [x, g], out: n, axes: [-1], eps: 1.0e-6}
  - {op: linear, in: [n, w], out: y}
backward:
  seeds: {y: dy}
  wrt: [x, g, w]
`,
	"partial input, linear": `format: 2
meshes:
  tp: [0, 1, 2, 3]
tensors:
  p: {mesh: tp, shape: [4, 8, 16], placements: [Partial(sum)]}
  w: {mesh: tp, shape: [32, 16], placements: auto}
  y: {placements: [Replicate()]}
ops:
  - {op: set, in: p, out: x}
  - {op: linear, in: [x, w], out: y}
`,
}

// TestExactSearch checks the dynamic programme against every assignment
// and against the branch and bound auto had before, with and without a
// memory budget: the same cost, peak and choice (the first of the
// cheapest in search order).
func TestExactSearch(t *testing.T) {
	for name, src := range exactLayers(t) {
		t.Run(name, func(t *testing.T) {
			compareSolvers(t, buildModel(t, src))
		})
	}
}

// TestExactSearchTies is TestExactSearch with every table filled with
// small random times, some ops unable to run, and random ends of runs of
// local steps (ops that continue the run of the op before, or have no
// steps): many ties, which the programme must break as the search order
// does.
func TestExactSearchTies(t *testing.T) {
	for name, src := range exactLayers(t) {
		t.Run(name, func(t *testing.T) {
			m := unpricedModel(t, src)
			tree, err := readSource([]byte(src))
			if err != nil {
				t.Fatal(err)
			}
			m.addGradients(tree) // a training step's gradients: factors of their own, all empty
			rng := rand.New(rand.NewPCG(1, 2))
			for range 8 {
				for _, fa := range m.factors {
					fa.ends = make([]ends, len(fa.table))
					for i := range fa.table {
						fa.table[i] = int64(rng.IntN(3))
						fa.ends[i] = ends{head: int32(rng.IntN(3)), tail: int32(rng.IntN(3)), empty: rng.IntN(6) == 0}
						fa.ends[i].saving = min(fa.table[i], int64(rng.IntN(2)))
						if rng.IntN(10) == 0 {
							fa.table[i] = maxCost
						}
					}
				}
				compareSolvers(t, m)
			}
		})
	}
}

// exactLayers are the layers, the price tests' fusions and the examples
// with few enough assignments to enumerate.
func exactLayers(t *testing.T) map[string]string {
	srcs := map[string]string{}
	for name, src := range layers {
		srcs[name] = src
	}
	for name, src := range priceFusions {
		srcs[name] = src
	}
	return srcs
}

// compareSolvers solves m by brute force (when it has at most
// maxBrute assignments), by the branch and bound and by the programme,
// under no budget, a budget just above the smallest peak and one midway.
func compareSolvers(t *testing.T, m *model) {
	t.Helper()
	lo, hi := minPeak(m), maxPeak(m)
	for _, budget := range []int64{0, lo + 1, (lo + hi) / 2} {
		want, _, wantErr := newBnB(m, budget).solve()
		if n := assignments(m); n <= maxBrute {
			brute, ok := bruteForce(m, budget)
			if d := cmp.Diff(brute, want, cmp.AllowUnexported(solution{})); d != "" || ok != (wantErr == nil) {
				t.Fatalf("budget %d: branch and bound (%v) and brute force disagree (-brute force +branch and bound):\n%s", budget, wantErr, d)
			}
		}
		s := newSolver(m, budget)
		got, err := s.solve()
		if wantErr != nil {
			if err != errInfeasible {
				t.Errorf("budget %d: %v, want %v (branch and bound: %v)", budget, err, errInfeasible, wantErr)
			}
			continue
		}
		if err != nil || !s.exact {
			t.Fatalf("budget %d: %v (exact %v)", budget, err, s.exact)
		}
		if d := cmp.Diff(want, got, cmp.AllowUnexported(solution{})); d != "" {
			t.Errorf("budget %d (-branch and bound +programme):\n%s", budget, d)
		}
	}
}

// maxBrute bounds the assignments bruteForce enumerates.
const maxBrute = 1 << 16

// assignments counts the assignments of m's decisions.
func assignments(m *model) int {
	n := 1
	for _, v := range m.vars {
		if n *= len(v.options); n > maxBrute {
			return n
		}
	}
	return n
}

// maxPeak is the largest peak any assignment could have.
func maxPeak(m *model) int64 {
	s := newBnB(m, 0)
	for k, v := range m.vars {
		s.choice[k] = slices.Index(v.bytes, slices.Max(v.bytes))
	}
	return s.peak()
}

func buildModel(t *testing.T, src string) *model {
	t.Helper()
	f, err := syntax.ParseAuto("layer.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	tree, err := readSource([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	m, err := newModel(f, tree)
	if err != nil {
		t.Fatal(err)
	}
	if fa := m.price(newEvaluator(lower.Options{Topology: cost.Default()}), tree, &reporter{}, true); fa != nil {
		t.Fatalf("op %q lowers under no combination", fa.op.Expr())
	}
	return m
}

// unpricedModel is the model of the fusion src, its tables not filled.
func unpricedModel(t *testing.T, src string) *model {
	t.Helper()
	f, err := syntax.ParseAuto("layer.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	tree, err := readSource([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	m, err := newModel(f, tree)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// bruteForce enumerates every assignment in search order and keeps the
// first cheapest within the budget.
func bruteForce(m *model, budget int64) (*solution, bool) {
	s := newBnB(m, budget)
	var best *solution
	var walk func(depth int)
	walk = func(depth int) {
		if depth == len(s.decisions) {
			total := int64(0)
			var combo []int
			for _, fa := range m.factors {
				combo = combo[:0]
				for _, k := range fa.vars {
					combo = append(combo, s.choice[k])
				}
				c := fa.table[tableEntry(m, fa, combo)]
				if c == maxCost {
					return
				}
				total += c
				if fa.ends != nil && fa.ends[tableEntry(m, fa, combo)].head != 0 {
					total -= fa.ends[tableEntry(m, fa, combo)].saving
				}
			}
			total += m.joinedRuns(s.choice)
			peak := s.peak()
			if budget > 0 && peak > budget || best != nil && total >= best.cost {
				return
			}
			best = &solution{choice: slices.Clone(s.choice), cost: total, peak: peak}
			return
		}
		k := s.decisions[depth]
		for o := range m.vars[k].options {
			s.choice[k] = o
			walk(depth + 1)
		}
		s.choice[k] = -1
	}
	walk(0)
	return best, best != nil
}

// tableEntry is the table index of a combination: combination's inverse.
func tableEntry(m *model, fa *factor, combo []int) int {
	i := 0
	for j, k := range fa.vars {
		i = i*len(m.vars[k].options) + combo[j]
	}
	return i
}

// minPeak is the smallest peak any assignment could have, so that a budget
// just above it binds.
func minPeak(m *model) int64 { return newBnB(m, 0).peak() }

// TestChosenPlansSimulate lowers the fusion each layer's choice writes and
// runs it on virtual devices against the unsharded program.
func TestChosenPlansSimulate(t *testing.T) {
	for name, src := range layers {
		t.Run(name, func(t *testing.T) {
			res, err := Solve("layer.yaml", []byte(src), Options{})
			if err != nil {
				t.Fatal(err)
			}
			p := lowerChosen(t, res)
			out, err := sim.Run(p, sim.Options{Seed: 1})
			if err != nil {
				t.Fatal(err)
			}
			if !out.Pass {
				t.Errorf("simulation mismatch: %+v\n%s", out.Mismatch, res.Fusion)
			}
		})
	}
}

// TestSearchLimit checks the search past its limits: the best
// assignment found greedily, not proven, no better than the optimum and
// no better than its lower bound says the optimum could be.
func TestSearchLimit(t *testing.T) {
	m := buildModel(t, layers["2-D mesh"])
	full, err := newSolver(m, 0).solve()
	if err != nil {
		t.Fatal(err)
	}
	tests := map[string]func(s *solver){
		"size":     func(s *solver) { s.maxScope = 1 },
		"memory":   func(s *solver) { s.maxBytes = 1 },
		"deadline": func(s *solver) { s.deadline = time.Now().Add(-time.Second) },
	}
	for name, limit := range tests {
		t.Run(name, func(t *testing.T) {
			s := newSolver(m, 0)
			limit(s)
			got, err := s.solve()
			if err != nil {
				t.Fatal(err)
			}
			if s.exact {
				t.Error("a search stopped at its limit says it is exact")
			}
			if got.cost < full.cost || s.lower > full.cost {
				t.Errorf("the stopped search found %d ps with a lower bound of %d, the optimum is %d", got.cost, s.lower, full.cost)
			}
		})
	}
}

// TestRunnerUps checks the runner-ups read off the tables by the
// backward pass against solving again with each choice barred (the way
// auto found them before), on the exact-search layers, the examples and
// blocks of each family (runnerUpLayers): priced, and with random
// tables full of ties, some ops unable to run and random ends of runs of
// local steps; with no budget, a budget just above the smallest peak and
// one midway, and a time limit the solve meets. On random tables a budget
// keeps many partial assignments per state, which the largest fusions
// cannot afford (heavyRunnerUps, up to a minute a solve): they are checked
// under a budget with their prices only.
func TestRunnerUps(t *testing.T) {
	for name, src := range runnerUpLayers(t) {
		t.Run(name, func(t *testing.T) {
			m := buildModel(t, src)
			rng := rand.New(rand.NewPCG(3, 4))
			_, heavy := heavyRunnerUps[name]
			for round := range 6 {
				if round > 0 {
					randomTables(m, rng, 3+round%2)
				}
				lo, hi := minPeak(m), maxPeak(m)
				for _, budget := range []int64{0, lo + 1, (lo + hi) / 2} {
					if round > 0 && budget > 0 && heavy {
						continue
					}
					s := newSolver(m, budget)
					if round%2 == 1 {
						s.deadline = time.Now().Add(time.Hour)
					}
					best, err := s.solve()
					if err == errInfeasible {
						continue // nothing fits the budget, or an op of the random tables cannot run
					}
					if err != nil || !s.exact {
						t.Fatalf("round %d, budget %d: %v (exact %v)", round, budget, err, s.exact)
					}
					got := runnerUps(s, best, &reporter{})
					var want []Decision
					for _, k := range s.decisions {
						d, err := runnerUp(s, k, best)
						if err != nil {
							t.Fatal(err)
						}
						want = append(want, d)
					}
					if d := cmp.Diff(want, got); d != "" {
						t.Errorf("round %d, budget %d (-solved again +from the tables):\n%s", round, budget, d)
					}
				}
			}
		})
	}
}

// TestRunnerUpSearchOrder checks a tie for the runner-up that the
// search order decides against the order in which the backward pass
// meets the tied assignments: p is forgotten after the first op, f is on
// the frontier, k is first seen at the second op. The best assignment is
// p=1, f=0, k=0 (0 ps); with k barred from 0, p=1, f=0, k=1 and p=0,
// f=1, k=2 both take 1 ps: the pass meets the first first (its state,
// f=0, comes first), but the second comes first in search order (p=0), so
// the runner-up is k=2, as solving again finds.
func TestRunnerUpSearchOrder(t *testing.T) {
	m := unpricedModel(t, `format: 2
meshes:
  m: [0, 1]
tensors:
  p: {mesh: m, shape: [4, 4], placements: auto}
ops:
  - {op: relu, in: p, out: f}
  - {op: relu, in: f, out: k}
`)
	// Entries by the options of the op's tensors (input, output), 9 where
	// unset.
	prices := []map[[2]int]int64{
		{{0, 0}: 1, {1, 0}: 0, {0, 1}: 0, {1, 1}: 1},
		{{0, 0}: 0, {0, 1}: 1, {1, 2}: 1},
	}
	for i, fa := range m.factors {
		n := len(m.vars[fa.vars[1]].options)
		for e := range fa.table {
			fa.table[e] = 9
			if c, ok := prices[i][[2]int{e / n, e % n}]; ok {
				fa.table[e] = c
			}
		}
	}
	s := newSolver(m, 0)
	best, err := s.solve()
	if err != nil {
		t.Fatal(err)
	}
	got := runnerUps(s, best, &reporter{})
	var want []Decision
	for _, k := range s.decisions {
		d, err := runnerUp(s, k, best)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, d)
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("(-solved again +from the tables):\n%s", d)
	}
	if last := got[len(got)-1]; last.Tensor != "k" || last.RunnerUp != m.vars[s.decisions[2]].describe(2) {
		t.Errorf("runner-up of %s: %s, want k's option 2", last.Tensor, last.RunnerUp)
	}
}

// runnerUpLayers are exactLayers, the examples of --auto, two blocks of
// each family on a 1-D mesh and MLP blocks on a 2-D one, and one
// transformer-like block on it (two take half a minute).
func runnerUpLayers(t *testing.T) map[string]string {
	srcs := exactLayers(t)
	files, err := filepath.Glob("../../testdata/examples/auto_*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples: %v", err)
	}
	for _, file := range files {
		src, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		srcs[filepath.Base(file)] = string(src)
	}
	for _, mesh := range [][]int{{4}, {2, 2}} {
		srcs[fmt.Sprintf("2 MLP blocks on %v", mesh)] = string(scale.MLPBlocks(2, mesh))
	}
	srcs["2 transformer-like blocks on [4]"] = string(scale.TransformerBlocks(2, []int{4}))
	srcs["1 transformer-like block on [2 2]"] = string(scale.TransformerBlocks(1, []int{2, 2}))
	return srcs
}

// heavyRunnerUps are the fusions of runnerUpLayers that TestRunnerUps
// solves under a budget with their prices only.
var heavyRunnerUps = map[string]bool{
	"auto_tp_block_backward.yaml":       true,
	"2 MLP blocks on [2 2]":             true,
	"1 transformer-like block on [2 2]": true,
}

// randomTables fills m's tables with random times below n, some entries
// unable to run (maxCost), and random ends of runs of local steps.
func randomTables(m *model, rng *rand.Rand, n int) {
	for _, fa := range m.factors {
		fa.ends = make([]ends, len(fa.table))
		for i := range fa.table {
			fa.table[i] = int64(rng.IntN(n))
			fa.ends[i] = ends{head: int32(rng.IntN(3)), tail: int32(rng.IntN(3)), empty: rng.IntN(6) == 0}
			fa.ends[i].saving = min(fa.table[i], int64(rng.IntN(2)))
			if rng.IntN(20) == 0 {
				fa.table[i] = maxCost
			}
		}
	}
}

// TestResolveFrom checks a solve again from the step that first sees a
// barred decision (the runner-ups' way) against a full solve with the same
// bar by a fresh solver: the same assignment, cost and peak, on the layers
// priced and on random tables (ties), with and without a budget.
func TestResolveFrom(t *testing.T) {
	for name, src := range exactLayers(t) {
		t.Run(name, func(t *testing.T) {
			m := buildModel(t, src)
			rng := rand.New(rand.NewPCG(5, 6))
			for round := range 4 {
				if round > 0 {
					for _, fa := range m.factors {
						for i := range fa.table {
							fa.table[i] = int64(rng.IntN(4))
						}
					}
				}
				for _, budget := range []int64{0, (minPeak(m) + maxPeak(m)) / 2} {
					s := newSolver(m, budget)
					best, err := s.solve()
					if err != nil {
						continue // infeasible within the budget: nothing to bar
					}
					for _, k := range s.decisions {
						bar := make([]bool, len(m.vars[k].options))
						for o := range bar {
							bar[o] = o != best.choice[k]
						}
						fresh := newSolver(m, budget)
						fresh.allowed[k] = bar
						want, wantErr := fresh.solve()
						layers, layerBytes := s.layers, s.layerBytes
						s.allowed[k] = bar
						got, gotErr := s.resolveFrom(s.firstSeen(k))
						s.allowed[k], s.layers, s.layerBytes = nil, layers, layerBytes
						if gotErr != wantErr {
							t.Fatalf("round %d, budget %d, %s barred: error %v, a full solve's %v", round, budget, m.vars[k].t.Name, gotErr, wantErr)
						}
						if d := cmp.Diff(want, got, cmp.AllowUnexported(solution{})); d != "" {
							t.Errorf("round %d, budget %d, %s barred (-full solve +from its first step):\n%s", round, budget, m.vars[k].t.Name, d)
						}
					}
				}
			}
		})
	}
}

// TestTimeLimit checks Solve past its time limit: the best assignment
// found, not exact, its gap bounding its distance from the optimum.
func TestTimeLimit(t *testing.T) {
	src := scale.MLPBlocks(2, []int{2, 2})
	full, err := Solve("blocks.yaml", src, Options{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := Solve("blocks.yaml", src, Options{TimeLimit: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	if got.Exact || got.Gap < 0 || got.Seconds < full.Seconds || got.Seconds-got.Gap > full.Seconds+1e-12 {
		t.Errorf("stopped: %.6g s, gap %.6g s, exact %v; the optimum is %.6g s", got.Seconds, got.Gap, got.Exact, full.Seconds)
	}
	for _, d := range got.Decisions {
		if d.RunnerUp != "" {
			t.Errorf("%s: a runner-up after a stopped search", d.Tensor)
		}
	}
	lowerChosen(t, got)
}

// TestRunnerUpPastDeadline checks that the runner-ups of an exact solve
// do not depend on the time limit: they are read off its tables, proven,
// even when the limit has passed since (solving again, auto showed none
// then).
func TestRunnerUpPastDeadline(t *testing.T) {
	m := buildModel(t, layers["2-D mesh"])
	s := newSolver(m, 0)
	best, err := s.solve()
	if err != nil {
		t.Fatal(err)
	}
	want := runnerUps(s, best, &reporter{})
	s.deadline = time.Now().Add(-time.Second)
	got := runnerUps(s, best, &reporter{})
	if !slices.ContainsFunc(want, func(d Decision) bool { return d.RunnerUp != "" }) {
		t.Fatal("no runner-up to compare")
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("(-within the limit +past it):\n%s", d)
	}
}
