package lower

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nvcomm/nvcomm/internal/plan"
	"github.com/nvcomm/nvcomm/internal/scale"
	"github.com/nvcomm/nvcomm/internal/syntax"
)

// alikePlans are certifiedPlans and the plans of the generated families
// at 300 ops under the nvfuser policy (where it lowers them) and the bytes
// objective.
func alikePlans(t *testing.T) map[string]*plan.Plan {
	t.Helper()
	plans := certifiedPlans(t)
	for _, fam := range scale.Families {
		f, err := syntax.Parse(fam.Name+".yaml", fam.Gen(300))
		if err != nil {
			t.Fatal(err)
		}
		for _, opts := range []Options{{Policy: PolicyNvFuser}, {Objective: ObjectiveBytes}} {
			if p, err := Lower(f, opts); err == nil {
				plans[fmt.Sprintf("%s %s %s", fam.Name, opts.Policy, opts.Objective)] = p
			}
		}
	}
	return plans
}

// TestLowerAlikeAsFresh lowers the fusion of every plan of alikePlans
// with its sets and reductions alike lowered once (opsAlike) and each
// lowered afresh: the same steps, bounds, bytes and errors; and ops are
// replayed.
func TestLowerAlikeAsFresh(t *testing.T) {
	replayed := 0
	for name, p := range alikePlans(t) {
		ps := plan.NewProblems()
		f, tensors := rebuild(p, ps)
		if f == nil {
			t.Fatalf("%s: rebuild: %v", name, ps.All())
		}
		opts := Options{Policy: Policy(p.Policy), Objective: Objective(p.Objective)}
		fresh, freshErr := lowerSteps(f, opts, nil)
		ops := tensors.opsAlike(f, false)
		again, err := lowerSteps(f, opts, ops)
		replayed += ops.memo.Replayed()
		if fmt.Sprint(err) != fmt.Sprint(freshErr) {
			t.Errorf("%s: lowering alike fails with %v, afresh with %v", name, err, freshErr)
			continue
		}
		if err != nil {
			continue
		}
		if d := cmp.Diff(fresh.ledger.Steps(), again.ledger.Steps()); d != "" {
			t.Errorf("%s: steps lowered alike differ from those lowered afresh (-fresh +alike):\n%s", name, d)
		}
		if a, b := fresh.ledger.LowerBound(), again.ledger.LowerBound(); a != b {
			t.Errorf("%s: lower bound %d alike, %d afresh", name, b, a)
		}
		if a, b := fresh.ledger.BusiestReceived(), again.ledger.BusiestReceived(); a != b {
			t.Errorf("%s: busiest device receives %d alike, %d afresh", name, b, a)
		}
	}
	if replayed == 0 {
		t.Error("no op was replayed: the test proves nothing")
	}
}

// stepEdits change one step of a plan; each makes it one that Certify
// must not certify.
var stepEdits = []struct {
	name string
	edit func(s *plan.Step)
}{
	{"lower bound", func(s *plan.Step) {
		if s.Bytes != nil {
			s.Bytes.LowerBound++
		}
	}},
	{"axis", func(s *plan.Step) {
		a := 7
		if s.Axis != nil {
			a = *s.Axis + 1
		}
		s.Axis = &a
	}},
	{"count", func(s *plan.Step) { s.Count.Output++ }},
	{"output", func(s *plan.Step) { s.Output += "x" }},
	{"input", func(s *plan.Step) {
		if s.Input != "" {
			s.Input += "x"
		}
		for i := range s.Inputs {
			s.Inputs[i] += "x"
		}
	}},
	{"devices", func(s *plan.Step) {
		switch {
		case len(s.Devices) > 0:
			s.Devices = s.Devices[1:]
		case len(s.Teams) > 0 && len(s.Teams[0]) > 1:
			s.Teams = append([][]int{{s.Teams[0][1], s.Teams[0][0]}}, s.Teams[1:]...)
		default:
			s.Count.Input++
		}
	}},
}

// TestCertifyAlikeAsFull certifies every plan of alikePlans, and each
// with one of its middle step, of the steps of the op before its last and
// of the last set the resharding pass inserted before it (x/resharded)
// edited by stepEdits, with ops alike lowered once and with every op
// lowered afresh: the same problems and unproven ops, and no edited plan
// certified. The op before the last of a generated chain is one that
// lowering alike replays.
func TestCertifyAlikeAsFull(t *testing.T) {
	for name, p := range alikePlans(t) {
		src, err := plan.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		check := func(what string, p *plan.Plan, edited bool) {
			certifiedAlikeAsFull(t, name+what, p, edited)
		}
		check("", p, false)
		if len(p.Steps) == 0 {
			continue
		}
		// The last op's output is read by none: its key is not the ops'
		// before it, which the lowering alike replays.
		at := []int{len(p.Steps) / 2}
		last := p.Steps[len(p.Steps)-1].Op
		for i := range p.Steps {
			if p.Steps[i].Op == last-1 {
				at = append(at, i) // every step of the op before the last
			}
		}
		at = append(at, stepsOfLastInserted(p, last)...)
		for _, at := range at {
			for _, e := range stepEdits {
				q, err := plan.Decode(name, src)
				if err != nil {
					t.Fatal(err)
				}
				check(fmt.Sprintf(": step %d's %s edited", at, e.name), q, edited(&q.Steps[at], e.edit))
			}
		}
	}
}

// TestCertifyAlikeAsFullOnPlans is TestCertifyAlikeAsFull's check on the
// plans (*.json) of the directory $NVCOMM_PLANS, such as those of the
// generated 100k-op families (skipped without it): each plan, and each
// with the steps of one of its middle ops edited by stepEdits, is
// certified alike as afresh, and no edited plan is certified.
func TestCertifyAlikeAsFullOnPlans(t *testing.T) {
	dir := os.Getenv("NVCOMM_PLANS")
	if dir == "" {
		t.Skip("NVCOMM_PLANS names no directory of plans")
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no plans in %s (%v)", dir, err)
	}
	for _, file := range files {
		src, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		decode := func() *plan.Plan {
			p, err := plan.Decode(file, src)
			if err != nil {
				t.Fatal(err)
			}
			return p
		}
		p := decode()
		certifiedAlikeAsFull(t, file, p, false)
		middle := p.Steps[len(p.Steps)/2].Op
		for i := range p.Steps {
			if p.Steps[i].Op != middle {
				continue
			}
			for _, e := range stepEdits[:3] { // bound, axis, count: a 100k-op plan certifies in seconds
				q := decode()
				certifiedAlikeAsFull(t, fmt.Sprintf("%s: step %d's %s edited", file, i, e.name), q, edited(&q.Steps[i], e.edit))
			}
		}
	}
}

// stepsOfLastInserted returns the steps of the last op before op last
// whose output the resharding pass named (x/resharded): a set replayed
// under a name with a "/" (reshard.OpMemo).
func stepsOfLastInserted(p *plan.Plan, last int) []int {
	op := -1
	for k := range p.Ops {
		if p.Ops[k].Index < last && strings.Contains(p.Ops[k].Output, "/") {
			op = p.Ops[k].Index
		}
	}
	var at []int
	for i := range p.Steps {
		if p.Steps[i].Op == op {
			at = append(at, i)
		}
	}
	return at
}

// certifiedAlikeAsFull certifies p with ops alike lowered once and with
// every op lowered afresh, and fails unless both give the same problems
// and unproven ops, and, when p is edited, unless it is not certified.
func certifiedAlikeAsFull(t *testing.T, name string, p *plan.Plan, edited bool) {
	t.Helper()
	probs, unproven := certify(p, true)
	wantProbs, wantUnproven := certify(p, false)
	if d := cmp.Diff(wantProbs, probs); d != "" {
		t.Errorf("%s: problems alike differ from afresh (-afresh +alike):\n%s", name, d)
	}
	if d := cmp.Diff(wantUnproven, unproven); d != "" {
		t.Errorf("%s: unproven ops alike differ from afresh (-afresh +alike):\n%s", name, d)
	}
	if edited && len(probs) == 0 && len(unproven) == 0 {
		t.Errorf("%s: certified", name)
	}
}

// edited edits s and reports whether that changed it (an edit of a field
// the step lacks does not).
func edited(s *plan.Step, edit func(*plan.Step)) bool {
	before := fmt.Sprintf("%+v %v", *s, s.Bytes)
	edit(s)
	return fmt.Sprintf("%+v %v", *s, s.Bytes) != before
}
