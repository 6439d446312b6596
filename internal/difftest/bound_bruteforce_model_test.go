package difftest

import (
	"fmt"
	"math/bits"
	"slices"

	"github.com/nvcomm/nvcomm/internal/checked"
	"github.com/nvcomm/nvcomm/internal/cost"
	"github.com/nvcomm/nvcomm/internal/plan"
	"github.com/nvcomm/nvcomm/internal/shard"
	"github.com/nvcomm/nvcomm/internal/sim"
)

// This file is the symbolic model of the brute-force bound test
// (bound_bruteforce_test.go): what every buffer of a plan holds, as sets of
// the input's elements, so that the search can tell equal states apart
// without running the simulator on every prefix. The simulator stays the
// oracle: every plan the model calls correct is simulated, and a sample of
// those it calls wrong too.

// bfVal is one element of a buffer: the set of the input's elements (atoms)
// that it sums, one bit each. A set op's output element is one atom; a
// reduction's the atoms its reduced axis combines. A hole of a padded
// buffer is the empty set, the identity its fill is.
type bfVal uint64

// bfPoison marks a value that counts an atom twice: a sum that no later step
// can make right.
const bfPoison bfVal = 1 << 63

// bfCombine is the value of a reduction of a and b: a sum counts an atom
// once, an idempotent op (max, min) may see it twice.
func bfCombine(a, b bfVal, idem bool) bfVal {
	if !idem && a&b != 0 {
		return a | b | bfPoison
	}
	return a | b
}

// bfWorld is what one case fixes: the op, the devices, the input's
// shards, what the output must hold, and the bytes a plan may receive.
// Devices are numbered by their position in devs; masks have a bit per
// position.
type bfWorld struct {
	p        *plan.Plan // nvcomm's plan: meshes, tensors, op, bound
	op       plan.Op
	expr     string
	reduceOp *string // the op's reduce op; nil for a set
	idem     bool
	devs     []int       // every device of the plan, ascending
	pos      map[int]int // device → position
	elem     int64       // bytes per element
	xCount   int         // elements of one device's input buffer (padded)
	x        [][]bfVal   // the input's shard per position; nil outside its mesh
	xMask    uint64      // the devices that could make their output from every shard of the input (see poolMask)
	// want and care are what the buffer the last step reads must hold on
	// each device of the output's mesh (consumers): the output, or its
	// padded buffer before an Unpad (care false on holes).
	want      [][]bfVal
	care      [][]bool
	owner     [][64]int8 // see owners
	consumers uint64
	finCount  int
	// pad and unpad are nvcomm's Pad of the input and Unpad into the
	// output, when the tensors are uneven: the local steps uneven shards
	// need, taken as they are.
	pad, unpad *plan.Step
	// own are nvcomm's plans of the case, whose AllToAllVs the search
	// tries besides its own family (bfTeams.addOwn).
	own []*plan.Plan
	// cap is the most bytes a device may receive in a plan the search
	// keeps (see TestBoundBruteForce).
	cap int64
	// maxColls and maxLocals bound the collectives and the local steps
	// (Permute, Slice, LocalReduce, Pad) of a plan; the Copy or Unpad
	// into the output is not counted.
	maxColls, maxLocals int
	// topo prices plans; seconds is the time bound on it.
	topo    *cost.Topology
	seconds float64
	teams   *bfTeams
	// views caches the Permute and LocalReduce views of n elements, by
	// step type and n.
	views map[string][]*bfView
	// moves and exchangeMoves count the collectives booked, AllToAllVs
	// apart; trafficErrs are the disagreements with plan.Traffic found
	// (checkTraffic).
	moves, exchangeMoves int
	trafficErrs          []string
	scratch              []bfVal
	acc                  [64]bfVal // missing's scratch
}

// newBfWorld builds a case's world from nvcomm's plan of it.
func newBfWorld(p *plan.Plan) (*bfWorld, error) {
	if len(p.Ops) != 1 {
		return nil, fmt.Errorf("want one op, got %d", len(p.Ops))
	}
	w := &bfWorld{p: p, op: p.Ops[0], elem: int64(plan.DTypeSize(p.Tensors[0].DType)), pos: map[int]int{}, views: map[string][]*bfView{}}
	w.expr = w.op.Expr()
	if w.op.Op != "set" {
		w.reduceOp, w.idem = &w.op.Op, w.op.Op == "max" || w.op.Op == "min"
	}
	for _, m := range p.Meshes {
		w.devs = append(w.devs, m.Devices...)
	}
	slices.Sort(w.devs)
	w.devs = slices.Compact(w.devs)
	for i, d := range w.devs {
		w.pos[d] = i
	}
	w.pad, w.unpad = bfFindStep(p, plan.Pad, w.op.Input), bfUnpadOf(p)
	if err := w.loadInput(); err != nil {
		return nil, err
	}
	return w, w.loadOutput()
}

// bfUnpadOf returns the Unpad step of p that writes the op's output on
// every device of its mesh, or nil.
func bfUnpadOf(p *plan.Plan) *plan.Step {
	for i := range p.Steps {
		if s := &p.Steps[i]; s.Type == plan.Unpad && s.Output == p.Ops[0].Output {
			return s
		}
	}
	return nil
}

// bfWorldPlan is the plan of a case whose Pad and Unpad the search takes:
// the bytes objective's, or the time objective's when only it unpads into
// the output (a rooted gather unpads at its root, then broadcasts).
func bfWorldPlan(few, fast *plan.Plan) *plan.Plan {
	if bfFindStep(few, plan.Unpad, "") != nil && bfUnpadOf(few) == nil {
		return fast
	}
	return few
}

// bfFindStep returns the first step of p of type typ that reads input (any
// input when ""), or nil.
func bfFindStep(p *plan.Plan, typ, input string) *plan.Step {
	for i := range p.Steps {
		if s := &p.Steps[i]; s.Type == typ && (input == "" || s.Input == input) {
			return s
		}
	}
	return nil
}

// tensor returns the plan's tensor named name and its mesh.
func (w *bfWorld) tensor(name string) (plan.Tensor, plan.Mesh) {
	for _, t := range w.p.Tensors {
		if t.Name == name {
			return t, w.p.Meshes[t.Mesh]
		}
	}
	return plan.Tensor{}, plan.Mesh{}
}

// loadInput gives every device of the input's mesh its shard as atoms:
// the row-major index of each element in the input's non-reduction shape.
func (w *bfWorld) loadInput() error {
	x, m := w.tensor(w.op.Input)
	w.xCount = bfProduct(x.LocalShape)
	shape := bfNonReduction(x)
	if bfProduct(shape) >= 63 {
		return fmt.Errorf("input %v has more than 62 elements", shape)
	}
	w.x = make([][]bfVal, len(w.devs))
	for _, d := range m.Devices {
		idx, err := sim.Shard(x, m, d)
		if err != nil {
			return err
		}
		w.x[w.pos[d]] = []bfVal{}
		for _, ix := range idx {
			w.x[w.pos[d]] = append(w.x[w.pos[d]], 1<<shard.Index(ix, shape))
		}
	}
	return nil
}

// loadOutput computes what every device of the output's mesh must hold:
// an element of a set is the input's element at its index; one of a
// reduction combines the input's elements along the reduced axis.
func (w *bfWorld) loadOutput() error {
	x, _ := w.tensor(w.op.Input)
	y, m := w.tensor(w.op.Output)
	xShape := bfNonReduction(x)
	w.want, w.care, w.finCount = make([][]bfVal, len(w.devs)), make([][]bool, len(w.devs)), bfProduct(y.LocalShape)
	if w.unpad != nil {
		w.finCount = w.unpad.Count.Input
	}
	for _, d := range m.Devices {
		idx, err := sim.Shard(y, m, d)
		if err != nil {
			return err
		}
		vals := make([]bfVal, len(idx))
		for i, ix := range idx {
			vals[i] = w.outputValue(ix, xShape)
		}
		p := w.pos[d]
		w.want[p], w.care[p] = w.padded(d, vals)
		w.consumers |= 1 << p
	}
	if w.finCount > 64 {
		return fmt.Errorf("output shards of %d elements, more than 64", w.finCount)
	}
	w.owners()
	if w.pad != nil {
		w.xMask = w.deriveMask(slices.Concat(w.x...))
	}
	return nil
}

// outputValue is the value of the output's element at logical index ix.
func (w *bfWorld) outputValue(ix, xShape []int) bfVal {
	if w.op.Axis == nil {
		return 1 << shard.Index(ix, xShape)
	}
	k := *w.op.Axis
	var v bfVal
	for i := range xShape[k] {
		full := slices.Insert(slices.Clone(ix), k, i)
		v |= 1 << shard.Index(full, xShape)
	}
	return v
}

// padded places a device's output in the padded buffer an Unpad reads,
// when the output is uneven; holes may hold anything.
func (w *bfWorld) padded(d int, vals []bfVal) ([]bfVal, []bool) {
	care := make([]bool, len(vals))
	for i := range care {
		care[i] = true
	}
	if w.unpad == nil {
		return vals, care
	}
	k := slices.Index(w.unpad.Devices, d)
	return bfPadBox(vals, w.unpad.Dims, w.unpad.Valid[k]), bfBoxMask(w.unpad.Dims, w.unpad.Valid[k])
}

// matches reports whether v is what the output buffer at position p must
// hold.
func (w *bfWorld) matches(p int, v []bfVal) bool {
	if len(v) != w.finCount {
		return false
	}
	for i, x := range v {
		if w.care[p][i] && x != w.want[p][i] {
			return false
		}
	}
	return true
}

// derivable reports whether local steps could make, from v, what the
// output at position p must hold: local steps read one buffer and move,
// keep or combine its elements, so every element the output needs must
// be the union of elements of v that it contains.
func (w *bfWorld) derivable(p int, v []bfVal) bool { return w.missing(p, v) == 0 }

// missing counts the elements the output at position p needs that are not
// the union of elements of v they contain. The output's elements are
// disjoint sets of atoms, so an element of v is part of at most one: the
// one that owns its lowest atom.
func (w *bfWorld) missing(p int, v []bfVal) int {
	want, owner := w.want[p], w.owner[p]
	acc := w.acc[:len(want)]
	clear(acc)
	for _, x := range v {
		if x == 0 || x&bfPoison != 0 {
			continue
		}
		if i := owner[bits.TrailingZeros64(uint64(x))]; i >= 0 && x&^want[i] == 0 {
			acc[i] |= x
		}
	}
	n := 0
	for i, m := range want {
		if w.care[p][i] && acc[i] != m {
			n++
		}
	}
	return n
}

// owners maps, for every device of the output's mesh, each atom to the
// element of its output that contains it (-1: none).
func (w *bfWorld) owners() {
	w.owner = make([][64]int8, len(w.devs))
	for p, want := range w.want {
		for a := range w.owner[p] {
			w.owner[p][a] = -1
		}
		for i, m := range want {
			for a := m; w.care[p][i] && a != 0; a &= a - 1 {
				w.owner[p][bits.TrailingZeros64(uint64(a))] = int8(i)
			}
		}
	}
}

// bfPadBox writes a box's elements (row-major in box) at the low corner of
// a row-major array of shape dims, holes empty.
func bfPadBox(vals []bfVal, dims, box []int) []bfVal {
	out := make([]bfVal, bfProduct(dims))
	i := 0
	for o := range out {
		if bfInBox(shard.Coords(o, dims), box) {
			out[o] = vals[i]
			i++
		}
	}
	return out
}

// bfBoxMask marks the positions of a row-major array of shape dims inside
// the box at its low corner.
func bfBoxMask(dims, box []int) []bool {
	out := make([]bool, bfProduct(dims))
	for o := range out {
		out[o] = bfInBox(shard.Coords(o, dims), box)
	}
	return out
}

// bfInBox reports whether coordinates c are inside the box at the low
// corner.
func bfInBox(c, box []int) bool {
	for k := range c {
		if c[k] >= box[k] {
			return false
		}
	}
	return true
}

// bfNonReduction is t's shape without its reduction axes.
func bfNonReduction(t plan.Tensor) []int {
	var s []int
	for k, e := range t.Shape {
		if !slices.Contains(t.ReductionAxes, k) {
			s = append(s, e)
		}
	}
	return s
}

// bfProduct is the product of xs, which tiny tensors keep far from
// overflowing.
func bfProduct(xs []int) int {
	n, _ := checked.Product(xs...)
	return n
}
