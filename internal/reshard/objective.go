package reshard

import (
	"math"
	"slices"

	"github.com/nvcomm/nvcomm/internal/checked"
	"github.com/nvcomm/nvcomm/internal/cost"
	"github.com/nvcomm/nvcomm/internal/ir"
	"github.com/nvcomm/nvcomm/internal/plan"
)

// Objective names what the optimal policy minimizes (docs/lowering.md,
// "The objective").
type Objective string

// The objectives. ObjectiveTime, the default, minimizes the time the cost
// model predicts on the topology (steps in sequence, the teams of one step
// at once), bytes breaking ties; ObjectiveBytes minimizes the bytes the
// busiest device receives, time breaking ties.
const (
	ObjectiveTime  Objective = "time"
	ObjectiveBytes Objective = "bytes"
)

// Objectives lists the accepted objective names, the default first.
var Objectives = []string{string(ObjectiveTime), string(ObjectiveBytes)}

// pathCost is the cost of a sequence of steps: the predicted time in
// picoseconds, the bytes received by the busiest device (each step's
// busiest, summed: at least the busiest device's total), the bytes that
// cross from one mesh to the other (each element should cross once and
// the rest happen inside the destination mesh), the bytes received by all
// devices, and the number of steps.
//
// Time is an integer so that sums are exact and associative: two paths
// with the same steps in another order cost the same, and ties are ties.
type pathCost struct {
	ps                    int64
	busiest, cross, total int64
	steps                 int
}

// costOrder ranks path costs for an objective. Its Add is the same for
// every objective: what differs is which part of a cost counts first.
type costOrder interface {
	// Less reports whether a path of cost a is preferred to one of cost b.
	Less(a, b pathCost) bool
	// Add is the cost of two paths one after the other, false when a byte
	// count overflows: the path then costs more than nvcomm can count.
	Add(a, b pathCost) (pathCost, bool)
}

// costOrders maps each objective to its order.
var costOrders = map[Objective]costOrder{ObjectiveTime: fastest{}, ObjectiveBytes: fewestBytes{}}

// sum is the Add shared by the orders.
type sum struct{}

// Add adds component-wise; time saturates (a time past 106 days is as good
// as infinite and must not wrap), bytes must fit.
func (sum) Add(a, b pathCost) (pathCost, bool) {
	busiest, ok1 := checked.Add(a.busiest, b.busiest)
	cross, ok2 := checked.Add(a.cross, b.cross)
	total, ok3 := checked.Add(a.total, b.total)
	return pathCost{saturated(a.ps, b.ps), busiest, cross, total, a.steps + b.steps}, ok1 && ok2 && ok3
}

// saturated adds two non-negative times, the largest int64 when the sum
// does not fit.
func saturated(a, b int64) int64 {
	if s, ok := checked.Add(a, b); ok {
		return s
	}
	return math.MaxInt64
}

// fastest orders by predicted time, then bytes of the busiest device,
// bytes crossing meshes, all bytes, and steps.
type fastest struct{ sum }

// Less implements costOrder.
func (fastest) Less(a, b pathCost) bool {
	return slices.Compare(
		[]int64{a.ps, a.busiest, a.cross, a.total, int64(a.steps)},
		[]int64{b.ps, b.busiest, b.cross, b.total, int64(b.steps)}) < 0
}

// fewestBytes orders by bytes of the busiest device, then bytes crossing
// meshes, predicted time, all bytes, and steps: the policy's order before
// time became the objective.
type fewestBytes struct{ sum }

// Less implements costOrder.
func (fewestBytes) Less(a, b pathCost) bool {
	return slices.Compare(
		[]int64{a.busiest, a.cross, a.ps, a.total, int64(a.steps)},
		[]int64{b.busiest, b.cross, b.ps, b.total, int64(b.steps)}) < 0
}

// picoseconds converts a predicted time to the integer the search adds,
// saturating where it does not fit.
func picoseconds(seconds float64) int64 {
	ps := math.Round(seconds * 1e12)
	if ps >= math.MaxInt64 || math.IsNaN(ps) {
		return math.MaxInt64
	}
	return int64(max(ps, 0))
}

// Cost is the price of a sequence of steps under the planner's objective:
// compare costs with Planner.Less, add them with Planner.Add.
type Cost struct{ c pathCost }

// TeamCost prices one collective of typ run at once by the teams along t
// on m, count elements of elem bytes per device, of which the busiest
// device receives busiest bytes; false when the time does not fit.
func (p *Planner) TeamCost(m *ir.Mesh, t ir.ParallelType, typ string, count plan.Count, elem, busiest int64) (Cost, bool) {
	link := cost.LinkNVLink
	for _, team := range m.Teams(t) {
		if p.topology.LinkOf(team) == cost.LinkNetwork {
			link = cost.LinkNetwork // the teams run at once: the step takes the slowest
			break
		}
	}
	s, _, ok := p.topology.TeamSeconds(link, typ, count, m.Size(t), elem)
	return Cost{pathCost{ps: picoseconds(s), busiest: busiest, steps: 1}}, ok
}

// LocalCost prices a local step of typ on each device, count elements
// of elem bytes in and out, as cost.Predict prices it in a plan; false
// when it does not fit.
func (p *Planner) LocalCost(typ string, count plan.Count, elem int64) (Cost, bool) {
	c, ok := p.stepCost(&plan.Step{Kind: plan.KindLocal, Type: typ, Count: count}, elem)
	return Cost{c}, ok
}

// Add is the cost of a then b, false when a byte count overflows.
func (p *Planner) Add(a, b Cost) (Cost, bool) {
	c, ok := p.costOrder.Add(a.c, b.c)
	return Cost{c}, ok
}

// stepCost prices step s, which a trial wrote, of elements of elem bytes,
// as cost.Predict prices it
// in a plan (a Matmul's arithmetic aside: a trial writes none): its time,
// and the bytes its busiest device receives and all its devices do.
func (p *Planner) stepCost(s *plan.Step, elem int64) (pathCost, bool) {
	st, err := p.topology.StepOf(s, elem)
	if err != nil {
		return pathCost{}, false
	}
	c := pathCost{ps: picoseconds(st.Seconds), steps: 1}
	if s.Bytes != nil {
		c.busiest = s.Bytes.ReceivedPerDevice
		c.total = s.Bytes.ReceivedPerDevice
	}
	return c, true
}

// Less reports whether the objective prefers cost a to cost b.
func (p *Planner) Less(a, b Cost) bool { return p.costOrder.Less(a.c, b.c) }
