package reshard

import (
	"math"
	"slices"

	"github.com/nvcomm/nvcomm/internal/checked"
	"github.com/nvcomm/nvcomm/internal/plan"
)

// A rooted gather replaces an Allgather of padded buffers when the last
// devices hold no real element (docs/lowering.md, "Uneven extents"). An
// Allgather makes every device receive T − 1 padded chunks, holes
// included: [5, 16] Shard(0) → Replicate() on 4 devices (rows 2, 2, 1, 0)
// receives 6 rows at every device where device 3, which holds none, needs
// 5. A Gather of the chunks that hold the real rows (devices 0, 1, 2) to
// one of them, an Unpad there and a Broadcast from it receive 4 rows at
// the root and 5 everywhere else: the bound. Collectives of equal buffers
// cannot do better in one step: an AllToAllV whose members send chunks of
// the real rows needs rows of split sizes that sum to one count.input,
// which the members' unequal rows do not.
//
// The Gather's team is the Allgather's first h members, in its order:
// their chunks, concatenated, are the first h chunks of the Allgather's
// output, so the root's buffer is a prefix of the padded consumer's
// buffer. It is used only where that prefix holds every real element of
// the consumer (its real box lies within the prefix's rows), so the
// root's Unpad, with the consumer's box, keeps what the consumer's Unpad
// would have, and the Broadcast gives every device the consumer.

// rootedGather lowers src, a padded producer, to the consumer cv (padded
// as dst) by a Gather, an Unpad and a Broadcast when the optimal search's
// path is a lone Allgather of one team and the rooted gather is better
// under the objective. It reports whether it did; if not, nothing was
// emitted.
func (c lowering) rootedGather(src, dst, cv *view, shape, axisMap []int) bool {
	found := c.searchFor(src, dst, 0)
	if !found.ok || len(found.path) != 1 {
		return false
	}
	e := found.path[0]
	teams := teamsAlong(src.mesh, e.mask)
	if e.kind != edgeAllgather || e.cost.steps != 1 || len(teams) != 1 {
		return false // a Permute around the Allgather, or several teams
	}
	r, ok := c.rooted(src, cv, teams[0], e.mask, shape, axisMap)
	if !ok || !c.planner.costOrder.Less(c.price(r.steps(), src), c.price(r.allgather(), src)) {
		return false
	}
	r.emit(c, src, dst, cv)
	return true
}

// rootedPlan is a rooted gather's steps: the Gather of the first h
// members' chunks of n elements to root, the root's Unpad of dims to box,
// the Broadcast to team.
type rootedPlan struct {
	team       []int
	h, n, root int
	dims, box  []int
	axis       *int // the axis the Allgather names
}

// rooted returns the rooted gather of src into cv over team, false when
// the consumer's real elements do not lie in fewer chunks than the team
// has members, or cv's boxes differ by device.
func (c lowering) rooted(src, cv *view, team []int, mask uint8, shape, axisMap []int) (*rootedPlan, bool) {
	dims, valid := c.validBoxes(cv, shape, axisMap)
	for _, b := range valid[1:] {
		if !slices.Equal(b, valid[0]) {
			return nil, false
		}
	}
	box, n := valid[0], src.size()
	inner := extentOfInts(dims[1:])
	need := box[0] * inner // the rows that hold every real element
	h := (need + n - 1) / n
	for h < len(team) && (h*n)%inner != 0 {
		h++
	}
	if h >= len(team) || h == 0 {
		return nil, false
	}
	rows := append([]int{h * n / inner}, dims[1:]...)
	return &rootedPlan{team: team, h: h, n: n, root: team[h-1], dims: rows, box: box, axis: axisAlong(src, mask)}, true
}

// allgather is the step the rooted gather replaces, for pricing.
func (r *rootedPlan) allgather() []plan.Step {
	t := len(r.team)
	return []plan.Step{{Kind: plan.KindCollective, Type: plan.Allgather, Teams: [][]int{r.team}, Count: plan.Count{Input: r.n, Output: t * r.n}}}
}

// steps are the rooted gather's steps, for pricing.
func (r *rootedPlan) steps() []plan.Step {
	real := extentOfInts(r.box)
	return []plan.Step{
		{Kind: plan.KindCollective, Type: plan.Gather, Teams: [][]int{r.team[:r.h]}, Root: new(r.root), Count: plan.Count{Input: r.n, Output: r.h * r.n}},
		{Kind: plan.KindLocal, Type: plan.Unpad, Devices: []int{r.root}, Count: plan.Count{Input: r.h * r.n, Output: real}, Dims: r.dims, Valid: [][]int{r.box}},
		{Kind: plan.KindCollective, Type: plan.Broadcast, Teams: [][]int{r.team}, Root: new(r.root), Count: plan.Count{Input: real, Output: real}},
	}
}

// emit writes the rooted gather: src gathered to the root into
// out/gathered, unpadded there into dst's buffer, broadcast into cv.
func (r *rootedPlan) emit(c lowering, src, dst, cv *view) {
	s := r.steps()
	gathered := c.buffer("gathered")
	g, u, b := s[0], s[1], s[2]
	g.Input, g.Output, g.Axis = src.name, gathered, r.axis
	c.emitCollective(g, g.Teams, src, dst, g.Count.Input, g.Count.Output)
	u.Input, u.Output = gathered, dst.name
	c.emitLocalOn(u, u.Devices, u.Count.Input, u.Count.Output)
	b.Input, b.Output = dst.name, cv.name
	c.emitCollective(b, b.Teams, src, dst, b.Count.Input, b.Count.Output)
}

// price is what steps cost under the planner's pricing: each step's time
// as cost.Predict gives it, in sequence, and the bytes each device
// receives as plan.Traffic books them (every device of src's mesh holds
// the steps' inputs), the busiest device's total counted once.
func (c lowering) price(steps []plan.Step, src *view) pathCost {
	elem := int64(src.dtype.Size())
	recv := map[int]int64{}
	p, ok := pathCost{steps: len(steps)}, true
	for i := range steps {
		st, err := c.planner.topology.StepOf(&steps[i], elem)
		ok = ok && err == nil
		p.ps = saturated(p.ps, picoseconds(st.Seconds))
		if steps[i].Kind != plan.KindCollective {
			continue
		}
		_, got, fits := plan.Traffic(&steps[i], elem, src.mesh.Contains)
		ok = ok && fits
		for d, n := range got {
			var a, b bool
			recv[d], a = checked.Add(recv[d], n)
			p.total, b = checked.Add(p.total, n)
			ok = ok && a && b
		}
	}
	if !ok { // costs more than nvcomm counts: never preferred
		return pathCost{ps: math.MaxInt64, busiest: math.MaxInt64, total: math.MaxInt64}
	}
	for _, n := range recv {
		p.busiest = max(p.busiest, n)
	}
	return p
}
