package difftest

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/nvcomm/nvcomm/internal/plan"
	"github.com/nvcomm/nvcomm/internal/sim"
)

// mutant is a plan with one field changed.
type mutant struct {
	what string
	p    *plan.Plan
}

// TestMutantsAreCaught applies single-field mutations (team member, team
// order, root, type, axis, reduce op, step order) to every golden plan and
// requires each mutant to be rejected by validate or to fail simulation.
// Mutations that cannot change the result (reordering a commutative
// reduction's team, moving a broadcast's or scatter's root to another
// holder of the same replicated data, swapping independent steps) are not
// generated. With -short (the race job, where it took four minutes of
// the CI's fifteen) it mutates every third plan.
func TestMutantsAreCaught(t *testing.T) {
	files, _ := filepath.Glob("../../testdata/conformance/*.json")
	examples, _ := filepath.Glob("../../testdata/examples/*.json")
	files = append(files, examples...)
	if len(files) == 0 {
		t.Fatal("no golden plans found")
	}
	if testing.Short() {
		files = everyThird(files)
	}
	total := 0
	for _, file := range files {
		src, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		orig, err := plan.Decode(file, src)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range mutants(t, orig) {
			total++
			if verdict := judge(m.p); verdict == "" {
				t.Errorf("%s: mutant %q passed validate and simulate", filepath.Base(file), m.what)
			}
		}
	}
	t.Logf("%d mutants of %d plans, all caught", total, len(files))
}

// everyThird is files' first, fourth, seventh, ... entries.
func everyThird(files []string) []string {
	var some []string
	for i := 0; i < len(files); i += 3 {
		some = append(some, files[i])
	}
	return some
}

// judge returns how a mutant was caught, or "" when it was not.
func judge(p *plan.Plan) string {
	if stage, why := validatePlan(p); stage != "" {
		return "invalid (" + stage + "): " + why
	}
	res, err := sim.Run(p, sim.Options{Seed: 3})
	if err != nil {
		return "sim error: " + err.Error()
	}
	if !res.Pass {
		return "mismatch: " + res.Mismatch.Reason
	}
	return ""
}

// clone deep-copies a plan through its encoding.
func clone(t *testing.T, p *plan.Plan) *plan.Plan {
	b, err := plan.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	q, err := plan.Decode("clone", b)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

func mutants(t *testing.T, orig *plan.Plan) []mutant {
	var out []mutant
	add := func(what string, f func(p *plan.Plan) bool) {
		p := clone(t, orig)
		if f(p) {
			out = append(out, mutant{what, p})
		}
	}
	devices := allDevices(orig)
	for i, s := range orig.Steps {
		i := i
		if s.Kind == plan.KindCollective {
			add(fmt.Sprintf("step %d: team member replaced", i), func(p *plan.Plan) bool {
				team := p.Steps[i].Teams[0]
				for _, d := range devices {
					if !slices.Contains(team, d) {
						team[len(team)-1] = d
						return true
					}
				}
				return false
			})
			if len(s.Teams[0]) > 1 && orderMatters(s.Type) {
				add(fmt.Sprintf("step %d: team order swapped", i), func(p *plan.Plan) bool {
					team := p.Steps[i].Teams[0]
					team[0], team[1] = team[1], team[0]
					return team[0] != team[1]
				})
			}
			add(fmt.Sprintf("step %d: type changed", i), func(p *plan.Plan) bool {
				p.Steps[i].Type = nextType(p.Steps[i].Type)
				return true
			})
			add(fmt.Sprintf("step %d: axis changed", i), func(p *plan.Plan) bool {
				if p.Steps[i].Axis == nil {
					p.Steps[i].Axis = new(0)
				} else {
					p.Steps[i].Axis = new(*p.Steps[i].Axis + 1)
				}
				return true
			})
		}
		if s.Root != nil {
			add(fmt.Sprintf("step %d: root moved", i), func(p *plan.Plan) bool { return moveRoot(p, i) })
		}
		if s.ReduceOp != nil {
			add(fmt.Sprintf("step %d: reduce op changed", i), func(p *plan.Plan) bool {
				p.Steps[i].ReduceOp = new(map[string]string{"sum": "max", "max": "min", "min": "prod", "prod": "sum"}[*s.ReduceOp])
				return true
			})
		}
		if i+1 < len(orig.Steps) && orig.Steps[i+1].Input == s.Output {
			add(fmt.Sprintf("steps %d and %d swapped", i, i+1), func(p *plan.Plan) bool {
				p.Steps[i], p.Steps[i+1] = p.Steps[i+1], p.Steps[i]
				p.Steps[i].ID, p.Steps[i+1].ID = i, i+1
				return true
			})
		}
	}
	return out
}

// orderMatters reports whether a team's order changes a collective's result:
// not for commutative reductions and broadcasts.
func orderMatters(typ string) bool {
	switch typ {
	case plan.Allreduce, plan.Reduce, plan.Broadcast:
		return false
	}
	return true
}

// nextType cycles through the collective types.
func nextType(typ string) string {
	i := slices.Index(plan.CollectiveTypes, typ)
	return plan.CollectiveTypes[(i+1)%len(plan.CollectiveTypes)]
}

// moveRoot moves a rooted step's root to another team member. For Broadcast
// and Scatter, whose root is a source, only a member that does not hold the
// input is chosen: any holder of a replicated tensor is an equally good root.
func moveRoot(p *plan.Plan, i int) bool {
	s := &p.Steps[i]
	holders := holdersOf(p, i)
	for _, d := range s.Teams[0] {
		if d == *s.Root {
			continue
		}
		if (s.Type == plan.Broadcast || s.Type == plan.Scatter) && holders[d] {
			continue
		}
		s.Root = new(d)
		return true
	}
	return false
}

// holdersOf returns the devices that hold step i's input buffer.
func holdersOf(p *plan.Plan, i int) map[int]bool {
	in := p.Steps[i].Input
	held := map[int]bool{}
	for _, t := range p.Tensors {
		if t.Name == in {
			for _, d := range p.Meshes[t.Mesh].Devices {
				held[d] = true
			}
		}
	}
	for _, s := range p.Steps[:i] {
		if s.Output == in {
			for _, d := range s.Devices {
				held[d] = true
			}
			for _, team := range s.Teams {
				for _, d := range team {
					held[d] = true
				}
			}
		}
	}
	return held
}

func allDevices(p *plan.Plan) []int {
	var out []int
	for _, m := range p.Meshes {
		out = append(out, m.Devices...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}
