package difftest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nvcomm/nvcomm/internal/diag"
	"github.com/nvcomm/nvcomm/internal/ir"
	"github.com/nvcomm/nvcomm/internal/lower"
	"github.com/nvcomm/nvcomm/internal/ops"
	"github.com/nvcomm/nvcomm/internal/plan"
	"github.com/nvcomm/nvcomm/internal/sim"
	"github.com/nvcomm/nvcomm/internal/syntax"
)

// outcome classifies one generated fusion under one policy.
type outcome struct {
	kind   string // "pass", "rejected", "too-large", or a failure kind
	reason string // normalized rejection reason or failure detail
}

// failed reports whether o is a failure: anything but a pass, a clear
// rejection, or a refusal of the simulator's memory guard.
func (o outcome) failed() bool {
	return o.kind != "pass" && o.kind != "rejected" && o.kind != "too-large"
}

// verdict is what became of one case under each policy. A case the parser
// rejects has no nvfuser outcome (kind ""): parsing does not depend on the
// policy; nor has a case checked under the optimal policy alone.
type verdict struct {
	optimal, nvfuser outcome
	// features names what the optimal plan exercises, for the coverage
	// check of TestDifferential; nil unless the case passed.
	features []string
}

// check runs one case through parse, then, under each policy, lower,
// validate, certify and simulate (lowering does not change the fusion, so
// one parse serves both). The optimal policy lowers every valid
// fusion, so its rejection of a case with nothing deliberately invalid
// is a failure; the nvfuser policy rejects what nvFuser rejects, which is
// counted, not failed. The nvfuser plan is certified and simulated only
// where it differs from the optimal one: the same steps on the same
// tensors compute the same numbers, and certifying them again would redo
// the optimal plan's checks. Without nvfuser, the nvfuser policy is left
// out (its outcome has kind "").
func check(c Case, seed uint64, nvfuser bool) verdict {
	var v verdict
	f, o := parse(c)
	if f == nil {
		v.optimal = o
		return v
	}
	var po *plan.Plan
	v.optimal, po = lowerAndRun(f, lower.PolicyOptimal, seed, nil)
	if v.optimal.kind == "rejected" && len(c.Deliberate) == 0 {
		v.optimal = outcome{"unexpected-rejection", v.optimal.reason}
	}
	if v.optimal.kind == "pass" && po.SumsLate() {
		v.optimal = sameAsWritten(c, po, seed)
	}
	if v.optimal.kind == "pass" {
		v.features = features(po)
		for _, d := range c.Deliberate {
			// Not every deliberate break is one: a merge whose split falls
			// on a whole axis is a block split. Counted, to be seen.
			v.features = append(v.features, "deliberately invalid, lowered anyway: "+d)
		}
	}
	if nvfuser {
		v.nvfuser, _ = lowerAndRun(f, lower.PolicyNvFuser, seed, po)
	}
	return v
}

// sameAsWritten compares the program of p, a case's optimal plan whose
// sums are computed late, with the case's program as written
// (sim.CheckSameProgram): the simulation proves p's steps against p's
// program, and this proves that program the file's.
func sameAsWritten(c Case, p *plan.Plan, seed uint64) outcome {
	f, err := syntax.ParseWith("gen.yaml", []byte(c.Src), syntax.Options{SumsAsWritten: true})
	if err != nil {
		return outcome{"late-sums", "the fusion as written does not parse: " + err.Error()}
	}
	written, err := lower.Lower(f, lower.Options{})
	if err != nil {
		return outcome{"late-sums", "the fusion as written does not lower: " + err.Error()}
	}
	check, err := sim.CheckSameProgram(written, p, seed)
	switch {
	case err != nil:
		return outcome{"late-sums", err.Error()}
	case len(check.Differ) > 0:
		return outcome{"late-sums", "differs from the fusion as written in " + strings.Join(check.Differ, ", ")}
	}
	return outcome{kind: "pass"}
}

// parse parses a case, or returns its outcome: a rejection, a rejection
// that nothing deliberate explains (see unexpectedParse), or a panic.
func parse(c Case) (f *ir.Fusion, o outcome) {
	defer func() {
		if r := recover(); r != nil {
			f, o = nil, panicked("parse", r)
		}
	}()
	f, err := syntax.Parse("gen.yaml", []byte(c.Src))
	if err == nil {
		return f, outcome{}
	}
	o = rejected("parse", err)
	if unexpectedParse(c, err) {
		o.kind = "unexpected-rejection"
	}
	return nil, o
}

// subject is what a diagnostic is about, as nvcomm's messages begin.
var subject = regexp.MustCompile(`^(ops\[\d+\]|tensor "[^"]+")`)

// unexpectedParse reports whether every error of a parse rejection is
// about a tensor or an op that the generator built valid by construction,
// in a case with nothing deliberately invalid: such a rejection is a bug of
// the generator or of the parser. Errors about the random schedules,
// which the generator does not track, are expected.
func unexpectedParse(c Case, err error) bool {
	if len(c.Deliberate) > 0 || len(c.Sure) == 0 {
		return false
	}
	var dl *diag.List
	if !errors.As(err, &dl) || len(dl.Items) == 0 {
		return true // not a positioned error at all
	}
	for _, it := range dl.Items {
		if s := subject.FindString(it.Message); s == "" || !c.Sure[s] {
			return false
		}
	}
	return true
}

// lowerAndRun lowers f under policy, then validates, certifies and
// simulates the plan; a plan with the same tensors and steps as same (the
// other policy's plan, already checked) is validated only. A panic
// anywhere is an outcome.
func lowerAndRun(f *ir.Fusion, policy lower.Policy, seed uint64, same *plan.Plan) (o outcome, p *plan.Plan) {
	defer func() {
		if r := recover(); r != nil {
			o, p = panicked(string(policy), r), nil
		}
	}()
	p, err := lower.Lower(f, lower.Options{Policy: policy})
	if err != nil {
		return rejected("lower", err), nil
	}
	if problems := plan.Validate(p); len(problems) > 0 {
		return outcome{"invalid-plan", fmt.Sprint(problems)}, p
	}
	if same != nil && reflect.DeepEqual(same.Steps, p.Steps) && reflect.DeepEqual(same.Tensors, p.Tensors) {
		return outcome{kind: "pass"}, p
	}
	if problems, unproven := lower.Certify(p); len(problems) > 0 || len(unproven) > 0 {
		return outcome{"uncertified-plan", fmt.Sprint(problems, " unproven ops ", unproven)}, p
	}
	res, err := sim.Run(p, sim.Options{Seed: seed, MaxBytes: 64 << 20})
	if errors.Is(err, sim.ErrTooLarge) {
		return outcome{"too-large", ""}, p // the memory guard refused it, as designed
	}
	if err != nil {
		return outcome{"sim-error", err.Error()}, p
	}
	if !res.Pass {
		return outcome{"mismatch", fmt.Sprintf("%+v", *res.Mismatch)}, p
	}
	return outcome{kind: "pass"}, p
}

// panicked is the outcome of a panic in phase, with the top of its stack.
func panicked(phase string, r any) outcome {
	stack := strings.SplitN(string(debug.Stack()), "\n", 24)
	return outcome{"panic", fmt.Sprintf("%s: %v\n%s", phase, r, strings.Join(stack[:len(stack)-1], "\n"))}
}

// features names what a passing plan exercises: each op kind (a
// composite by the ops of its expansion; a binary op of a number), a set
// named x/resharded was inserted before a multi-operand op, one from
// x/<op> after a single-operand op), a contraction whose partial products
// are summed (by which collective), a Matmul sharing b across batches,
// the rank of the meshes of layer ops, and a sharding that format 2
// propagated.
func features(p *plan.Plan) []string {
	var fs []string
	layer := false
	if p.SumsLate() {
		fs = append(fs, "sums computed late")
		if slices.ContainsFunc(p.Steps, func(s plan.Step) bool {
			return s.Type == plan.ReduceScatter && strings.HasSuffix(s.Input, "/terms")
		}) {
			fs = append(fs, "sums computed late, reduce-scattered")
		}
	}
	for _, op := range p.Ops {
		fs = append(fs, "op "+op.Op)
		switch {
		case op.Of != nil && op.Of.Grad && strings.Contains(op.Output, ".grad/recomputed_"):
			fs = append(fs, "backward", "backward of "+op.Of.Op, "backward recompute")
		case op.Of != nil && op.Of.Grad:
			fs = append(fs, "backward", "backward of "+op.Of.Op)
		case op.Of != nil:
			fs = append(fs, "op "+op.Of.Op) // a composite, by its expansion
		}
		if op.Scalar != nil {
			fs = append(fs, "number operand")
		}
		switch {
		case op.Op == "set" && strings.Contains(op.Output, "/resharded"):
			fs = append(fs, "resharding set before an op")
		case op.Op == "set" && strings.Contains(op.Input, "/"):
			fs = append(fs, "resharding set after an op")
		case op.Op != "set" && op.Op != "sum" && op.Op != "prod" && op.Op != "max" && op.Op != "min":
			layer = true
			for _, t := range p.Tensors {
				if t.Name == op.Output {
					fs = append(fs, fmt.Sprintf("layer op on a %d-D mesh", len(p.Meshes[t.Mesh].Shape)))
				}
			}
		}
	}
	for _, s := range p.Steps {
		contraction := strings.Contains(s.Expr, "= matmul(") || strings.Contains(s.Expr, "= linear(")
		switch {
		case contraction && s.Kind == plan.KindCollective:
			fs = append(fs, "contraction summed by "+s.Type)
		case strings.Contains(s.Expr, "= embedding(") && s.Kind == plan.KindCollective:
			fs = append(fs, "lookup summed by "+s.Type)
		case s.Type == plan.Matmul && s.BroadcastB:
			fs = append(fs, "Matmul with b shared by batches")
		}
	}
	if layer {
		fs = append(fs, "layer case")
	}
	for _, t := range p.Tensors {
		if t.Propagated {
			fs = append(fs, "format 2: a propagated sharding")
			break
		}
	}
	if gatheredInsteadOfSum(p) {
		fs = append(fs, "propagated sum, operands gathered instead")
	}
	return fs
}

// gatheredInsteadOfSum reports whether a contraction of p whose
// propagated output splits its summed axis over devices has no step that
// sums across them: the optimal policy gathered its operands instead.
func gatheredInsteadOfSum(p *plan.Plan) bool {
	splitSum := map[string]bool{}
	for _, t := range p.Tensors {
		for k, st := range t.Schedule {
			if t.Propagated && t.Partial == "" && k > 0 && st.Parallelize != nil && slices.Contains(t.ReductionAxes, st.Parallelize.Axis) &&
				t.Schedule[k-1].OuterSplit != nil && t.Schedule[k-1].OuterSplit.Axis == st.Parallelize.Axis {
				splitSum[t.Name] = true
			}
		}
	}
	summed := map[int]bool{}
	for _, s := range p.Steps {
		if s.Type == plan.Allreduce || s.Type == plan.ReduceScatter || s.Type == plan.Reduce {
			summed[s.Op] = true
		}
	}
	for k, op := range p.Ops {
		if splitSum[op.Output] && ops.Is(op.Op, ops.Contraction) && !summed[k] {
			return true
		}
	}
	return false
}

var numbers = regexp.MustCompile(`-?\d+`)
var quoted = regexp.MustCompile(`"[^"]*"`)

// rejected normalizes a compiler error into a reason: the first message
// with names and numbers blanked, so reasons can be counted. A later
// message that calls itself nvcomm's bug ("please report") is marked in
// the reason, so that it shows in the counts: the lowering of layer ops
// adds one after a clear error when it cannot reshard an operand.
func rejected(phase string, err error) outcome {
	var dl *diag.List
	msg := err.Error()
	suffix := ""
	if errors.As(err, &dl) && len(dl.Items) > 0 {
		msg = dl.Items[0].Message
		for _, it := range dl.Items[1:] {
			if strings.Contains(it.Message+it.Hint, "please report") {
				suffix = " [then: " + it.Message + "]"
				break
			}
		}
	}
	msg += suffix
	msg = quoted.ReplaceAllString(msg, "_")
	msg = numbers.ReplaceAllString(msg, "N")
	return outcome{"rejected", phase + ": " + msg}
}

// tally is the counts of run: cases by outcome (and rejection reason)
// under each policy, and passing cases by feature.
type tally struct {
	optimal, nvfuser, features map[string]int
}

func newTally() tally {
	return tally{map[string]int{}, map[string]int{}, map[string]int{}}
}

// key is how an outcome is counted: its kind, with the reason of a
// rejection.
func key(o outcome) string {
	if o.kind == "rejected" {
		return o.kind + " | " + o.reason
	}
	return o.kind
}

// add counts v.
func (t tally) add(v verdict) {
	t.optimal[key(v.optimal)]++
	if v.nvfuser.kind != "" {
		t.nvfuser[key(v.nvfuser)]++
	}
	for _, f := range slices.Compact(slices.Sorted(slices.Values(v.features))) {
		t.features[f]++
	}
}

// merge adds u's counts to t.
func (t tally) merge(u tally) {
	for _, p := range [][2]map[string]int{{t.optimal, u.optimal}, {t.nvfuser, u.nvfuser}, {t.features, u.features}} {
		for k, v := range p[1] {
			p[0][k] += v
		}
	}
}

// sumsEvery is how often run draws a chain of sums (Generator.sumsChain)
// instead of a Case: every sumsEvery-th case, the others as they were.
const sumsEvery = 10

// run checks n generated cases, spread over the CPUs, and returns their
// counts; failures are reported through t with the fusion as YAML (the
// first three; all of them are written to $NVCOMM_FAILDIR when it is set).
// Case i is always the same fusion, whatever the number of workers. The
// nvfuser policy checks every nvfuserEvery-th case.
func run(t *testing.T, n int, seed uint64, nvfuserEvery int, shapeOps bool) tally {
	workers := runtime.GOMAXPROCS(0)
	results := make([]tally, workers)
	var mu sync.Mutex
	failures := 0
	var wg sync.WaitGroup
	for w := range workers {
		results[w] = newTally()
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += workers {
				g := NewGenerator(seed*1_000_003 + uint64(i))
				g.ShapeOps = shapeOps
				c := g.Case()
				if i%sumsEvery == sumsEvery-1 {
					c = g.sumsChain()
				}
				v := check(c, uint64(i), i%nvfuserEvery == 0)
				results[w].add(v)
				for _, o := range []struct {
					policy string
					outcome
				}{{"optimal", v.optimal}, {"nvfuser", v.nvfuser}} {
					if !o.failed() || o.kind == "" {
						continue
					}
					if dir := os.Getenv("NVCOMM_FAILDIR"); dir != "" {
						// Keep every failing fusion, to reduce to a reproducer.
						os.WriteFile(filepath.Join(dir, fmt.Sprintf("case_%d_%s.yaml", i, o.policy)),
							[]byte(fmt.Sprintf("# %s: %s\n%s", o.kind, strings.ReplaceAll(o.reason, "\n", "\n# "), c.Src)), 0o644)
					}
					mu.Lock()
					failures++
					if failures <= 3 {
						t.Errorf("case %d (policy %s): %s: %s\ndeliberate: %q\nfusion:\n%s", i, o.policy, o.kind, o.reason, c.Deliberate, c.Src)
					}
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	total := newTally()
	for _, r := range results {
		total.merge(r)
	}
	if failures > 3 {
		t.Errorf("%d failures in all (the first 3 shown)", failures)
	}
	return total
}

// required are the features that TestDifferential's cases must exercise,
// each in at least minFeature passing cases: every op of the registry,
// the backward of random chains (docs/training.md), and the generator's
// coverage of the layer ops, which a change to it
// could otherwise lose silently.
var required = append(opFeatures(), "resharding set before an op", "resharding set after an op",
	"contraction summed by Allreduce", "contraction summed by ReduceScatter",
	"lookup summed by Allreduce", "Matmul with b shared by batches",
	"layer op on a 1-D mesh", "layer op on a 2-D mesh", "layer op on a 3-D mesh",
	"format 2: a propagated sharding", "number operand", "backward", "backward of linear", "backward of matmul",
	"backward recompute", "sums computed late", "sums computed late, reduce-scattered", "propagated sum, operands gathered instead")

// opFeatures are the features "op NAME" of every op of the registry but
// the data movement ops, which the generator draws only when asked
// (TestDifferentialShapeOps requires those).
func opFeatures() []string {
	var fs []string
	for _, name := range ops.Names() {
		if ops.Lookup(name).Family != ops.View {
			fs = append(fs, "op "+name)
		}
	}
	return fs
}

const minFeature = 10

// TestDifferential lowers and simulates a few thousand random fusions: each
// must be rejected with a clear error or simulate PASS, and together they
// must cover every op and the ways layer ops are lowered.
func TestDifferential(t *testing.T) {
	n := 3000
	if testing.Short() {
		n = 300
	}
	// The nvfuser policy on every other case keeps make test fast; the
	// soak checks it on all.
	counts := run(t, n, 1, 2, false)
	t.Logf("policy optimal:\n%s\npolicy nvfuser:\n%s\npassing cases by feature:\n%s", report(counts.optimal), report(counts.nvfuser), report(counts.features))
	if counts.optimal["pass"] < n/3 {
		t.Errorf("only %d of %d cases passed; the generator produces too few lowerable fusions:\n%s", counts.optimal["pass"], n, report(counts.optimal))
	}
	if testing.Short() {
		return
	}
	for _, f := range required {
		if counts.features[f] < minFeature {
			t.Errorf("only %d passing cases exercise %q (want at least %d):\n%s", counts.features[f], f, minFeature, report(counts.features))
		}
	}
	// The deliberately invalid layer outputs must be rejected, clearly.
	refused := 0
	for k, v := range counts.optimal {
		if strings.Contains(k, "layer ops take even block splits only") {
			refused += v
		}
	}
	if refused < minFeature {
		t.Errorf("only %d cases rejected for a layer op's output sharding (want at least %d)", refused, minFeature)
	}
}

// TestDifferentialShapeOps is TestDifferential with the generator drawing
// permute, reshape and cast too, under both policies on every case: each
// case is rejected with a clear error or simulates PASS.
func TestDifferentialShapeOps(t *testing.T) {
	n := 600
	if testing.Short() {
		n = 300 // enough that each of the view ops, tril among them, passes 10 times
	}
	counts := run(t, n, 11, 1, true)
	t.Logf("policy optimal:\n%s\npolicy nvfuser:\n%s\npassing cases by feature:\n%s", report(counts.optimal), report(counts.nvfuser), report(counts.features))
	for _, name := range ops.FamilyNames(ops.View) {
		if f := "op " + name; counts.features[f] < minFeature {
			t.Errorf("only %d passing cases use %s (want at least %d):\n%s", counts.features[f], f, minFeature, report(counts.features))
		}
	}
}

// TestSoak runs NVCOMM_SOAK cases (make soak) and prints counts by outcome
// and rejection reason, under each policy, and passing cases by feature;
// NVCOMM_SOAK_SHAPEOPS=1 draws permute, reshape, cast, slice and cat too.
func TestSoak(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("NVCOMM_SOAK"))
	if n == 0 {
		t.Skip("set NVCOMM_SOAK=N to run N cases")
	}
	start := time.Now()
	counts := run(t, n, 7, 1, os.Getenv("NVCOMM_SOAK_SHAPEOPS") == "1")
	fmt.Printf("soak: %d cases, %d workers, %s\npolicy optimal:\n%s\npolicy nvfuser (cases the parser accepted):\n%s\npassing cases (optimal) by feature:\n%s",
		n, runtime.GOMAXPROCS(0), time.Since(start).Round(time.Second), report(counts.optimal), report(counts.nvfuser), report(counts.features))
}

func report(counts map[string]int) string {
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int {
		if c := counts[b] - counts[a]; c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%9d  %s\n", counts[k], k)
	}
	return b.String()
}
