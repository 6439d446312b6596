package lower_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nvcomm/nvcomm/internal/cost"
	"github.com/nvcomm/nvcomm/internal/diag"
	"github.com/nvcomm/nvcomm/internal/lower"
	"github.com/nvcomm/nvcomm/internal/ops"
	"github.com/nvcomm/nvcomm/internal/plan"
	"github.com/nvcomm/nvcomm/internal/syntax"
)

// corpus lowers every example, conformance and regression fusion that
// parses under each policy and objective, calling check with the plans
// (nil where the policy rejects the fusion).
func corpus(t *testing.T, check func(file string, plans map[string]*plan.Plan)) {
	t.Helper()
	for _, dir := range goldenDirs {
		files, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
		for _, file := range files {
			src, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			f, err := syntax.Parse(file, src)
			if err != nil {
				continue
			}
			plans := map[string]*plan.Plan{}
			for name, opts := range map[string]lower.Options{
				"time":    {},
				"bytes":   {Objective: lower.ObjectiveBytes},
				"nvfuser": {Policy: lower.PolicyNvFuser},
			} {
				if p, err := lower.Lower(f, opts); err == nil {
					plans[name] = p
				}
			}
			check(filepath.Base(file), plans)
		}
	}
}

// TestBoundsHold checks on the corpus that every bound nvcomm reports is at
// most what its plan achieves (bytes, and the predicted time on the
// built-in topology), whatever the policy and objective, and that the
// plan's bound does not depend on them: it is a bound of the fusion.
func TestBoundsHold(t *testing.T) {
	topo := cost.Default()
	corpus(t, func(file string, plans map[string]*plan.Plan) {
		bound := int64(-1)
		for name, p := range plans {
			if bound >= 0 && p.Summary.BytesLowerBound != bound {
				t.Errorf("%s: the %s plan's bound is %d, another's %d", file, name, p.Summary.BytesLowerBound, bound)
			}
			bound = p.Summary.BytesLowerBound
			if bound > p.Summary.BytesReceivedMax {
				t.Errorf("%s: the %s plan receives %d bytes, its bound is %d", file, name, p.Summary.BytesReceivedMax, bound)
			}
			for _, s := range p.Steps {
				if s.Bytes != nil && s.Bytes.LowerBound > s.Bytes.ReceivedPerDevice {
					t.Errorf("%s: the %s plan's step %d (%s) receives %d bytes, its bound is %d", file, name, s.ID, s.Type, s.Bytes.ReceivedPerDevice, s.Bytes.LowerBound)
				}
			}
			pr, err := cost.Predict(topo, p)
			if err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			if pr.LowerBound > pr.Total {
				t.Errorf("%s: the %s plan is predicted %g s, its time bound is %g s", file, name, pr.Total, pr.LowerBound)
			}
			if (pr.LowerBound > 0) != (bound > 0) {
				t.Errorf("%s: the %s plan's time bound is %g s for a bytes bound of %d", file, name, pr.LowerBound, bound)
			}
		}
	})
}

// TestObjectivesWin checks on the corpus that the time objective's plan is
// predicted no slower than the bytes objective's and nvFuser's, and the
// bytes objective's receives no more bytes than nvFuser's (the busiest
// device); but for a fusion that fixes an sdpa's form (cp: ring), which
// the objectives then do not choose.
func TestObjectivesWin(t *testing.T) {
	topo := cost.Default()
	seconds := func(p *plan.Plan) float64 {
		pr, err := cost.Predict(topo, p)
		if err != nil {
			t.Fatal(err)
		}
		return pr.Total
	}
	corpus(t, func(file string, plans map[string]*plan.Plan) {
		fast, few, nv := plans["time"], plans["bytes"], plans["nvfuser"]
		if fast == nil || few == nil {
			t.Errorf("%s: the optimal policy rejects it", file)
			return
		}
		slack := 1e-12 * float64(len(fast.Steps)+len(few.Steps))
		if seconds(fast) > seconds(few)+slack {
			t.Errorf("%s: the time objective's plan takes %g s, the bytes objective's %g s", file, seconds(fast), seconds(few))
		}
		if nv == nil || fixesForm(fast) {
			return
		}
		if seconds(fast) > seconds(nv)+slack {
			t.Errorf("%s: the time objective's plan takes %g s, nvFuser's %g s", file, seconds(fast), seconds(nv))
		}
		if few.Summary.BytesReceivedMax > nv.Summary.BytesReceivedMax {
			t.Errorf("%s: the bytes objective's plan receives %d bytes, nvFuser's %d", file, few.Summary.BytesReceivedMax, nv.Summary.BytesReceivedMax)
		}
	})
}

// fixesForm reports whether p's fusion fixes an sdpa's form with cp: ring,
// or a decomposed collective's with overlap: collective or ring.
func fixesForm(p *plan.Plan) bool {
	for _, op := range p.Ops {
		if op.Of != nil && op.Of.CP == "ring" {
			return true
		}
		if v, ok := op.Attrs.Get(ops.AttrOverlap); ok && (v.Str == ops.OverlapCollective || v.Str == ops.OverlapRing) {
			return true // a decomposed collective forced where it is slower
		}
	}
	return false
}

// scatterAcross moves a replicated tensor to the chunks of 3 devices of
// another mesh: the objectives disagree (a Broadcast then a Slice is
// faster, a padded Scatter moves a third of the bytes).
const scatterAcross = `format: 1
meshes: {a: [0, 1], b: [2, 3, 4]}
tensors:
  x: {mesh: a, shape: [6, 4], placements: [Replicate()]}
  y: {mesh: b, placements: [Shard(0)]}
ops:
  - {op: set, in: x, out: y}
`

// TestObjectiveRecorded checks that a plan records a bytes objective and
// leaves the default out; that validate and Certify accept it (and the
// default written out, which means the same) and reject objectives and
// policies nvcomm does not have; and that Certify lowers the plan's fusion
// again under its objective.
func TestObjectiveRecorded(t *testing.T) {
	f, err := syntax.Parse("f.yaml", []byte(scatterAcross))
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		Objective string
		Problems  []string
		Unproven  []int
	}
	tests := map[string]struct {
		opts lower.Options
		edit func(*plan.Plan)
		want result
	}{
		"time, left out":  {lower.Options{}, nil, result{}},
		"bytes, recorded": {lower.Options{Objective: lower.ObjectiveBytes}, nil, result{Objective: "bytes"}},
		"bytes plan, edited to the default": {lower.Options{Objective: lower.ObjectiveBytes}, func(p *plan.Plan) { p.Objective = "" },
			result{Unproven: []int{0}}},
		"the default written out": {lower.Options{}, func(p *plan.Plan) { p.Objective = "time" },
			result{Objective: "time"}},
		"nvfuser with an objective": {lower.Options{}, func(p *plan.Plan) { p.Policy, p.Objective = "nvfuser", "bytes" },
			result{Objective: "bytes", Problems: []string{`objective "bytes": only policy optimal has an objective`}}},
		"an unknown policy": {lower.Options{}, func(p *plan.Plan) { p.Policy = "greedy" },
			result{Problems: []string{`policy "greedy" is not one of [optimal nvfuser]`}}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			p, err := lower.Lower(f, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			if tc.edit != nil {
				tc.edit(p)
			}
			got := result{Objective: p.Objective}
			for _, pr := range plan.Validate(p) {
				got.Problems = append(got.Problems, pr.Text())
			}
			if got.Problems == nil {
				var problems []diag.Diagnostic
				problems, got.Unproven = lower.Certify(p)
				for _, pr := range problems {
					got.Problems = append(got.Problems, pr.Text())
				}
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
}
