package lower

import (
	"fmt"
	"slices"

	"github.com/nvcomm/nvcomm/internal/checked"
	"github.com/nvcomm/nvcomm/internal/cost"
	"github.com/nvcomm/nvcomm/internal/ir"
	"github.com/nvcomm/nvcomm/internal/plan"
)

// The optimal policy (docs/lowering.md) searches, per op, the sharding states
// between the producer's and the consumer's: a state is a mesh and, for each
// device type, the digits it selects. Each edge is one collective (or a local
// Slice) that changes one thing; Dijkstra finds the path that minimizes the
// bytes received by the busiest device, then the total bytes, then the
// number of steps.

// searchState is a node of the search.
type searchState struct {
	onDst bool   // on the consumer's mesh (else the producer's)
	pick  [3]int // per device type (DIDx, DIDy, DIDz): index into options
}

// cost orders paths: bytes received by the busiest device, then bytes that
// cross from one mesh to the other (each element should cross once and the
// rest happen inside the destination mesh), then the time the cost model
// predicts (byte ties are broken by time), then total bytes, then steps.
type pathCost struct {
	busiest, cross, total int64
	seconds               float64
	steps                 int
}

func (a pathCost) less(b pathCost) bool {
	switch {
	case a.busiest != b.busiest:
		return a.busiest < b.busiest
	case a.cross != b.cross:
		return a.cross < b.cross
	case a.seconds != b.seconds:
		return a.seconds < b.seconds
	case a.total != b.total:
		return a.total < b.total
	}
	return a.steps < b.steps
}

// plus adds two costs, and false when a byte count overflows: the path
// then costs more than nvcomm can count.
func (a pathCost) plus(b pathCost) (pathCost, bool) {
	busiest, ok1 := checked.Add(a.busiest, b.busiest)
	cross, ok2 := checked.Add(a.cross, b.cross)
	total, ok3 := checked.Add(a.total, b.total)
	return pathCost{busiest, cross, total, a.seconds + b.seconds, a.steps + b.steps}, ok1 && ok2 && ok3
}

// local is the cost of a step inside one mesh; crossing that of a step from
// one mesh to the other.
func local(busiest, total int64, steps int) pathCost {
	return pathCost{busiest: busiest, total: total, steps: steps}
}

func crossing(busiest, total int64, steps int) pathCost {
	return pathCost{busiest: busiest, cross: total, total: total, steps: steps}
}

// timed adds the predicted time of repeat collectives of type typ over n
// devices of link class link with message size msg bytes (nccl-tests' S),
// or of a local step over msg bytes when typ is Slice.
func (pl *planner) timed(c pathCost, link, typ string, msg int64, n, repeat int) pathCost {
	t := pl.c.topology
	if typ == plan.Slice {
		c.seconds = t.Memory.Seconds(2 * float64(msg)) // read and write; 2·msg may not fit in int64
		return c
	}
	c.seconds = float64(repeat) * t.Collective(link, typ, msg, n)
	return c
}

// linkAlong is the link class of the teams along device type t of mesh m:
// the network when any of them spans nodes (teams run at once; the step
// takes the slowest).
func (pl *planner) linkAlong(m *ir.Mesh, t ir.ParallelType) string {
	key := linkKey{m, t}
	if link, ok := pl.links[key]; ok {
		return link
	}
	link := cost.LinkNVLink
	for _, team := range m.Teams(t) {
		if pl.c.topology.LinkOf(team) == cost.LinkNetwork {
			link = cost.LinkNetwork
			break
		}
	}
	pl.links[key] = link
	return link
}

// linkKey names the teams of one device type of one mesh.
type linkKey struct {
	mesh *ir.Mesh
	typ  ir.ParallelType
}

// edgeKind names the step an edge emits.
type edgeKind int

const (
	edgeSlice edgeKind = iota
	edgeAllgather
	edgeAllToAll
	edgeSendRecv
	edgeBroadcast
	edgeScatter
	edgeGather
	edgeSwap
)

// edge is one transition of the search.
type edge struct {
	kind edgeKind
	typ  ir.ParallelType
	to   searchState
	cost pathCost
}

// planner holds one op's search space.
type planner struct {
	c        *opCtx
	src, dst *view
	options  [3][][]ir.Digit // per type: nil (replicated), then candidate digit groups
	order    []ir.Digit      // every stored-or-device digit, in the consumer's layout order
	elem     int64
	bySet    map[string][]searchState // valid states by mesh and selected digits
	// overflowed notes an edge or path left out because its cost in bytes
	// does not fit in int64.
	overflowed bool
	links      map[linkKey]string // linkAlong's results
}

// optimal lowers src (the producer, after any local reduction and partial
// resolution) to dst.
func (c *opCtx) optimal(src, dst *view) {
	pl := newPlanner(c, src, dst)
	path, ok := pl.search()
	if !ok && pl.overflowed {
		c.overflow("the bytes of every sequence of collectives from the producer's sharding to the consumer's")
		return
	}
	if !ok {
		c.fail("no sequence of collectives reaches the consumer's sharding from the producer's",
			"reshard within one mesh first, then move between meshes of the same shape")
		return
	}
	pl.emit(path)
}

func newPlanner(c *opCtx, src, dst *view) *planner {
	pl := &planner{c: c, src: src, dst: dst, elem: int64(src.dtype.Size()), links: map[linkKey]string{}}
	for i, t := range ir.DeviceTypes {
		pl.options[i] = [][]ir.Digit{nil}
		for _, v := range []*view{src, dst} {
			if d := v.did[t]; len(d) > 0 && !containsDigits(pl.options[i], d) {
				pl.options[i] = append(pl.options[i], d)
			}
		}
	}
	all := concat(dst.stored)
	for _, t := range ir.DeviceTypes {
		all = concat(all, src.did[t], dst.did[t])
	}
	pl.order = canonicalOrder(all, dst, c.fact)
	pl.addGroups()
	pl.indexStates()
	return pl
}

// maxSubsetDigits bounds the digits whose subsets become candidate groups,
// so the search stays small.
const maxSubsetDigits = 10

// addGroups adds, per device type, every set of digits (in canonical order)
// whose extents multiply to the type's mesh size: the intermediate
// shardings a device permutation may need.
func (pl *planner) addGroups() {
	if len(pl.order) > maxSubsetDigits {
		return
	}
	for i, t := range ir.DeviceTypes {
		sizes := []int{pl.src.mesh.Size(t), pl.dst.mesh.Size(t)}
		for mask := 1; mask < 1<<len(pl.order); mask++ {
			var g []ir.Digit
			for k, d := range pl.order {
				if mask&(1<<k) != 0 {
					g = append(g, d)
				}
			}
			if e := extentOf(g); (e == sizes[0] || e == sizes[1]) && e > 1 && !containsDigits(pl.options[i], g) {
				pl.options[i] = append(pl.options[i], g)
			}
		}
	}
}

// indexStates groups the valid states of each mesh by the set of digits
// they select: a device permutation moves between states of one group.
func (pl *planner) indexStates() {
	pl.bySet = map[string][]searchState{}
	for _, onDst := range []bool{false, true} {
		var s searchState
		s.onDst = onDst
		for a := range pl.options[0] {
			for b := range pl.options[1] {
				for c := range pl.options[2] {
					s.pick = [3]int{a, b, c}
					if pl.valid(s) {
						k := pl.setKey(s)
						pl.bySet[k] = append(pl.bySet[k], s)
					}
				}
			}
		}
	}
}

// setKey names the mesh and the set of digits a state selects.
func (pl *planner) setKey(s searchState) string {
	var sel []ir.Digit
	for i := range ir.DeviceTypes {
		sel = append(sel, pl.options[i][s.pick[i]]...)
	}
	slices.SortFunc(sel, func(a, b ir.Digit) int {
		if a.Axis != b.Axis {
			return a.Axis - b.Axis
		}
		return b.Stride - a.Stride
	})
	return fmt.Sprint(s.onDst, sel)
}

func containsDigits(list [][]ir.Digit, d []ir.Digit) bool {
	return slices.ContainsFunc(list, func(x []ir.Digit) bool { return slices.Equal(x, d) })
}

// canonicalOrder lists the distinct digits of ds in the consumer's layout
// order, each axis most significant first.
func canonicalOrder(ds []ir.Digit, dst *view, f *factoring) []ir.Digit {
	var axes []int
	for _, d := range dst.stored {
		if !slices.Contains(axes, d.Axis) {
			axes = append(axes, d.Axis)
		}
	}
	for _, d := range ds {
		if !slices.Contains(axes, d.Axis) {
			axes = append(axes, d.Axis)
		}
	}
	var out []ir.Digit
	for _, a := range axes {
		for _, d := range f.fine(a, 1, f.extents[a]) {
			if slices.Contains(ds, d) {
				out = append(out, d)
			}
		}
	}
	return out
}

// stateOf returns the search state a view is in.
func (pl *planner) stateOf(v *view, onDst bool) searchState {
	s := searchState{onDst: onDst}
	for i, t := range ir.DeviceTypes {
		for k, o := range pl.options[i] {
			if slices.Equal(o, v.did[t]) {
				s.pick[i] = k
			}
		}
	}
	return s
}

func (pl *planner) mesh(s searchState) *ir.Mesh {
	if s.onDst {
		return pl.dst.mesh
	}
	return pl.src.mesh
}

// valid reports whether every type's digits fit its mesh axis and no digit
// is selected twice.
func (pl *planner) valid(s searchState) bool {
	m := pl.mesh(s)
	var used []ir.Digit
	for i, t := range ir.DeviceTypes {
		d := pl.options[i][s.pick[i]]
		if d == nil {
			continue
		}
		if extentOf(d) != m.Size(t) || m.Size(t) == 1 {
			return false
		}
		for _, x := range d {
			if slices.Contains(used, x) {
				return false
			}
			used = append(used, x)
		}
	}
	return true
}

func extentOf(ds []ir.Digit) int {
	n := 1
	for _, d := range ds {
		n *= d.Extent
	}
	return n
}

// view builds the (flexible) intermediate view of a state.
func (pl *planner) view(s searchState) *view {
	v := &view{name: pl.c.buffer("step"), mesh: pl.mesh(s), dtype: pl.src.dtype, did: map[ir.ParallelType][]ir.Digit{}, flexible: true}
	var sel []ir.Digit
	for i, t := range ir.DeviceTypes {
		if d := pl.options[i][s.pick[i]]; d != nil {
			v.did[t] = d
			sel = append(sel, d...)
		}
	}
	v.stored = without(pl.order, sel)
	return v
}

// size is the bytes per device in state s: one buffer of the op, so no
// overflow (sizes.go).
func (pl *planner) size(s searchState) int64 {
	n := int64(1)
	for _, d := range pl.order {
		n *= int64(d.Extent)
	}
	for i := range ir.DeviceTypes {
		n /= int64(extentOf(pl.options[i][s.pick[i]]))
	}
	return n * pl.elem
}

func (pl *planner) isReplicated(s searchState) bool { return s.pick == [3]int{} }

// fits reports ok, noting in pl when a cost overflowed.
func (pl *planner) fits(ok bool) bool {
	pl.overflowed = pl.overflowed || !ok
	return ok
}

// product multiplies byte counts of an edge's cost; ok is false when the
// product overflows, and the edge is then left out.
func product(xs ...int64) (int64, bool) { return checked.Product(xs...) }
