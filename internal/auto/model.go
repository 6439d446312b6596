package auto

import (
	"fmt"
	"math"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/nvcomm/nvcomm/internal/cost"
	"github.com/nvcomm/nvcomm/internal/diag"
	"github.com/nvcomm/nvcomm/internal/ir"
	"github.com/nvcomm/nvcomm/internal/lower"
)

// variable is a tensor of the fusion with the shardings it may take: one
// for a given tensor, the candidates for a decision.
// describe writes option o of v for the decisions' table.
func (v *variable) describe(o int) string { return v.options[o].describe(v.produced) }

type variable struct {
	t        *ir.Tensor
	options  []sharding
	bytes    []int64 // per option, what one device holds
	decision bool
	produced bool
	// decl is set for a given fusion input that its placements alone do
	// not declare (source.given): its shape, schedule or placements, and
	// allocation keys as written. Its ops' fusions build it with its own
	// schedule and allocation, and decl tells it apart in their prices'
	// keys (opKey).
	decl string
	// first and last are the ops during which the tensor is live: its
	// producer (0 for a fusion input) to its last reader (the last op for
	// an input or an output of the fusion).
	first, last int
}

// factor is an op's predicted time for every combination of the options
// of its tensors (vars, the output last), in picoseconds; infeasible
// combinations (the lowering rejects them) cost maxCost.
type factor struct {
	op    *ir.Op
	vars  []int
	table []int64
	// ends are, per entry of table, how the op's plan joins runs of local
	// steps with the ops before and after it (nil: it never does).
	ends []ends
	// vjp is set on the factor of an op's gradient in a training step
	// (vjp.go): its table is the gradient's price, and op the forward op
	// writing the output it differentiates.
	vjp *vjp
}

// ends is cost.Ends of an op's plan, its devices numbered by the
// evaluator (0: none) and its saving in picoseconds.
type ends struct {
	head, tail int32
	saving     int64
	empty      bool
}

const maxCost = math.MaxInt64

// model is the optimisation problem of one fusion.
type model struct {
	f       *ir.Fusion
	vars    []*variable
	index   map[*ir.Tensor]int
	factors []*factor
	// unpriced counts the gradients that lowered under no combination
	// of their tensors' shardings, left to the forward's price.
	unpriced int
}

// maxCombinations bounds the table of one op: the product of its tensors'
// option counts.
const maxCombinations = 1 << 16

// backward reports whether op is one of the ops a backward section
// appends (ir's gradients): the search prices them per op of the forward
// (vjp.go), not as ops of their own, and the tensors they write take
// their shardings by propagation from the forward's, as without --auto.
func backward(op *ir.Op) bool { return op.Of != nil && op.Of.Grad }

func newModel(f *ir.Fusion, src *source) (*model, error) {
	m := &model{f: f, index: map[*ir.Tensor]int{}}
	readers := map[*ir.Tensor]int{}
	lastOp := max(len(f.Ops)-1, 0)
	for i, op := range f.Ops {
		if backward(op) {
			i = lastOp // a tensor saved for the backward is held to the forward's end
		}
		for _, in := range op.Inputs {
			readers[in] = max(readers[in], i)
		}
	}
	for _, t := range f.Tensors {
		grad := t.Producer != nil && backward(t.Producer)
		if grad && t.Auto {
			return nil, diag.Diagnostic{File: f.File, Pos: t.Pos, Hint: "give it placements, or leave it undeclared",
				Message: fmt.Sprintf("tensor %q: placements: auto on a gradient; --auto chooses the forward's shardings, and a gradient takes its own by propagation from them", t.Name)}
		}
		v := &variable{t: t, produced: t.Producer != nil, decision: t.Auto || t.Propagated && !grad, last: lastOp}
		if v.produced {
			v.first = t.Producer.Index
			if r, ok := readers[t]; ok && !slices.Contains(f.Outputs, t) {
				v.last = r
			}
		}
		if grad {
			// Never read by a priced op: no options to search.
			v.options, v.bytes = []sharding{nil}, []int64{0}
			m.index[t] = len(m.vars)
			m.vars = append(m.vars, v)
			continue
		}
		if v.decision {
			v.options = candidates(t)
			for _, o := range v.options {
				v.bytes = append(v.bytes, localBytes(o, t.Shape(), t.Mesh.Shape, t.DType))
			}
		} else {
			s, decl, err := src.given(t)
			if err != nil {
				return nil, err
			}
			v.options, v.decl = []sharding{s}, decl
			v.bytes = []int64{int64(t.LocalSize()) * int64(t.DType.Size())}
		}
		if len(v.options) == 0 {
			return nil, fmt.Errorf("tensor %q has no sharding on mesh %q", t.Name, t.Mesh.Name)
		}
		m.index[t] = len(m.vars)
		m.vars = append(m.vars, v)
	}
	for _, op := range f.Ops {
		if backward(op) {
			continue // after every forward op (ir appends them)
		}
		fa := &factor{op: op}
		n := 1
		for _, t := range append(slices.Clone(op.Inputs), op.Out) {
			if k := m.index[t]; !slices.Contains(fa.vars, k) {
				fa.vars = append(fa.vars, k)
				n *= len(m.vars[k].options)
			}
		}
		if n > maxCombinations {
			return nil, fmt.Errorf("op %q: %d combinations of its tensors' shardings (at most %d); give some of its tensors placements", op.Expr(), n, maxCombinations)
		}
		fa.table = make([]int64, n)
		m.factors = append(m.factors, fa)
	}
	return m, nil
}

// combination decodes entry i of a factor's table: the option of each of
// its vars, mixed radix with the first var most significant.
func (m *model) combination(fa *factor, i int, out []int) []int {
	out = out[:0]
	for range fa.vars {
		out = append(out, 0)
	}
	for j := len(fa.vars) - 1; j >= 0; j-- {
		n := len(m.vars[fa.vars[j]].options)
		out[j], i = i%n, i/n
	}
	return out
}

// evaluator prices an op under given shardings of its tensors: it lowers
// the op alone, its operands and output built with those shardings, and
// predicts the plan's time. Plans of a fusion are the concatenation of its
// ops' plans, and their times add up (steps run one after another), so a
// fusion's time is the sum of its ops'.
type evaluator struct {
	lowering lower.Options // its Topology, SkipBounds and Searches set
	cache    map[string]int64
	// parts holds the parts of ops priced by parts (parts.go), by key:
	// a set priced once serves every op that needs it.
	parts map[string]*part
	// tables holds the table of every op filled, by tableKey: identical
	// ops (a model's repeated blocks) are tabulated once.
	tables  map[string][]int64
	lowered int
	// endsOf, endTables and runs are ends' counterparts of cache and
	// tables, and the numbers of the device sets of runs.
	endsOf    map[string]ends
	endTables map[string][]ends
	runs      map[string]int32
	// grads holds the price of each gradient's fusion (vjp.go), by its
	// source.
	grads map[string]int64
}

// newEvaluator prices under lowering, leaving out the plans' bounds,
// which a price does not read, and keeping the resharding planner's
// searches across the fusions it lowers: a set between two shardings of
// one shape recurs in many of them (before one op, after another).
func newEvaluator(lowering lower.Options) *evaluator {
	lowering.SkipBounds, lowering.Searches = true, lower.NewSearches()
	return &evaluator{lowering: lowering, cache: map[string]int64{}, tables: map[string][]int64{}, parts: map[string]*part{},
		endsOf: map[string]ends{}, endTables: map[string][]ends{}, runs: map[string]int32{}, grads: map[string]int64{}}
}

// ends numbers the devices of c.
func (e *evaluator) ends(c cost.Ends) ends {
	return ends{head: e.run(c.Head), tail: e.run(c.Tail), saving: picoseconds(c.Saving), empty: c.Empty}
}

// run numbers a device set of runs, from 1; "" (none) is 0.
func (e *evaluator) run(key string) int32 {
	if key == "" {
		return 0
	}
	if _, ok := e.runs[key]; !ok {
		e.runs[key] = int32(len(e.runs) + 1)
	}
	return e.runs[key]
}

// fill tabulates fa's op: the table of an identical op when there was
// one, else every combination priced, those not priced before lowered in
// parallel.
func (e *evaluator) fill(m *model, fa *factor) {
	tk := m.tableKey(fa)
	if t, ok := e.tables[tk]; ok {
		fa.table, fa.ends = t, e.endTables[tk]
		return
	}
	keys := make([]string, len(fa.table))
	var todo []int // entries whose key is new, the first of each
	seen := map[string]bool{}
	var combo []int
	key := m.opKeyer(fa)
	for i := range fa.table {
		combo = m.combination(fa, i, combo)
		keys[i] = key(combo)
		if _, ok := e.cache[keys[i]]; !ok && !seen[keys[i]] {
			seen[keys[i]] = true
			todo = append(todo, i)
		}
	}
	prices, joins := e.priceAll(m, fa, todo)
	for j, price := range prices {
		e.cache[keys[todo[j]]] = price
		e.endsOf[keys[todo[j]]] = e.ends(joins[j])
	}
	fa.ends = make([]ends, len(fa.table))
	for i, key := range keys {
		fa.table[i], fa.ends[i] = e.cache[key], e.endsOf[key]
	}
	e.tables[tk], e.endTables[tk] = fa.table, fa.ends
}

// parallel calls f(0), …, f(n-1) on as many goroutines as there are
// processors.
func parallel(n int, f func(int)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), n) {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
				f(i)
			}
		})
	}
	wg.Wait()
}

// priceAll prices the combinations todo of fa's table, and says how
// their plans join runs of local steps: by parts where the op decomposes
// (parts.go), the parts not priced before lowered in parallel, and the
// other combinations lowered whole, in parallel.
func (e *evaluator) priceAll(m *model, fa *factor, todo []int) ([]int64, []cost.Ends) {
	d := m.decompose(fa)
	recipes := make([]*recipe, len(todo)) // nil: lowered whole
	var whole []int
	var fresh []*part
	for j, i := range todo {
		combo := m.combination(fa, i, nil)
		r, byParts := recipe{}, false
		if d != nil {
			r, byParts = d.recipeFor(combo)
		}
		if !byParts {
			whole = append(whole, j)
			continue
		}
		recipes[j] = &r
		var builders []func() (*ir.Fusion, error)
		for n, key := range r.parts {
			if _, ok := e.parts[key]; ok {
				continue
			}
			if builders == nil {
				builders = d.builders(m, combo)
			}
			p := &part{build: builders[n]}
			e.parts[key] = p
			fresh = append(fresh, p)
		}
	}
	prices, joins := make([]int64, len(todo)), make([]cost.Ends, len(todo))
	parallel(len(fresh), func(n int) {
		p := fresh[n]
		f, err := p.build()
		p.price(f, err, e.lowering)
	})
	parallel(len(whole), func(n int) {
		f, err := m.opFusion(fa, m.combination(fa, todo[whole[n]], nil))
		p := &part{}
		p.price(f, err, e.lowering)
		prices[whole[n]], joins[whole[n]] = sumParts([]*part{p}), p.ends
	})
	e.lowered += len(fresh) + len(whole)
	for j, r := range recipes {
		switch {
		case r == nil:
		case r.fails:
			prices[j] = maxCost
		default:
			parts := make([]*part, len(r.parts))
			for n, key := range r.parts {
				parts[n] = e.parts[key]
			}
			prices[j], joins[j] = sumParts(parts), joinEnds(parts)
		}
	}
	return prices, joins
}

// tableKey says what fa's table holds: the op's kind, attributes and
// operands, and per tensor its mesh, dtype, shape, declaration and every
// option as the op sees it (opKey of each combination follows from it).
func (m *model) tableKey(fa *factor) string {
	var b strings.Builder
	for j, k := range fa.vars {
		v := m.vars[k]
		fmt.Fprintf(&b, "%s %s %v decl %s:", v.t.Mesh.Name, v.t.DType, v.t.Shape(), v.decl)
		for o := range v.options {
			b.WriteString(" " + m.sharding(fa, j, o).String())
		}
		b.WriteByte(0)
	}
	fmt.Fprintf(&b, "%s %d %v%s", fa.op.Kind, fa.op.Axis, fa.op.Axes, fa.op.Attrs.Key())
	for _, in := range fa.op.Inputs {
		fmt.Fprintf(&b, " %d", slices.Index(fa.vars, m.index[in]))
	}
	return b.String()
}

// opKey says what opFusion builds of fa's op under combo: per tensor its
// mesh, dtype and sharding (a given fusion input's declaration as
// written, when it has one), and the op's kind, attributes and operands,
// each tensor named by its position among the op's.
func (m *model) opKey(fa *factor, combo []int) string { return m.opKeyer(fa)(combo) }

// opKeyer returns opKey of fa for any combination, each tensor's part of
// the key written once per option (a table has up to 65,536 entries).
func (m *model) opKeyer(fa *factor) func(combo []int) string {
	parts := make([][]string, len(fa.vars))
	for j, k := range fa.vars {
		v := m.vars[k]
		for o := range v.options {
			if v.decl != "" {
				parts[j] = append(parts[j], fmt.Sprintf("%s %s decl %s\x00", v.t.Mesh.Name, v.t.DType, v.decl))
				continue
			}
			parts[j] = append(parts[j], fmt.Sprintf("%s %s %v %s\x00", v.t.Mesh.Name, v.t.DType, v.t.Shape(), m.sharding(fa, j, o)))
		}
	}
	tail := fmt.Sprintf("%s %d %v%s", fa.op.Kind, fa.op.Axis, fa.op.Axes, fa.op.Attrs.Key())
	for _, in := range fa.op.Inputs {
		tail += fmt.Sprintf(" %d", slices.Index(fa.vars, m.index[in]))
	}
	return func(combo []int) string {
		var b strings.Builder
		for j, o := range combo {
			b.WriteString(parts[j][o])
		}
		b.WriteString(tail)
		return b.String()
	}
}

// sharding is the sharding of var j of fa under option o: as its
// consumer reads it for an operand, as chosen for the output.
func (m *model) sharding(fa *factor, j, o int) sharding {
	k := fa.vars[j]
	v := m.vars[k]
	if k == m.index[fa.op.Out] {
		return v.options[o]
	}
	return v.options[o].held(v.produced)
}

// opFusion builds the fusion of fa's op alone, its tensors sharded as
// combo chooses, as a format-2 fusion file declaring them would give it:
// each tensor named by its position among the op's (t0, t1, ...), so
// that the plans of ops alike but for their names are alike.
func (m *model) opFusion(fa *factor, combo []int) (*ir.Fusion, error) {
	built := make([]*ir.Tensor, len(fa.vars))
	out := m.index[fa.op.Out]
	for j, k := range fa.vars {
		if k == out {
			continue
		}
		t, err := ir.NewTensor(m.tensorSpec(fa, j, combo[j]))
		if err != nil {
			return nil, err
		}
		built[j] = t
	}
	spec := ir.OpSpec{Kind: fa.op.Kind, Axis: fa.op.Axis, Axes: fa.op.Axes, Attrs: fa.op.Attrs, Scalar: fa.op.Scalar, Out: m.tensorSpec(fa, len(fa.vars)-1, combo[len(fa.vars)-1])}
	for _, in := range fa.op.Inputs {
		spec.Inputs = append(spec.Inputs, built[slices.Index(fa.vars, m.index[in])])
	}
	if len(spec.Inputs) == 1 && spec.Inputs[0].Partial != "" {
		// The file's set from a Partial tensor, which the parser made the
		// reduction of its terms: built again as the set it was.
		spec.Kind, spec.Axis = ir.OpSet, -1
	}
	op, err := ir.NewOp(spec)
	if err != nil {
		return nil, err
	}
	return ir.NewFusion("auto_op", append(slices.DeleteFunc(built, func(t *ir.Tensor) bool { return t == nil }), op.Out), []*ir.Op{op})
}

// tensorSpec declares var j of fa under option o: its value shape and
// sharding, or a given fusion input's schedule or placements and
// allocation, which decide its layout and so its ops' steps.
func (m *model) tensorSpec(fa *factor, j, o int) ir.TensorSpec {
	v := m.vars[fa.vars[j]]
	spec := ir.TensorSpec{Name: fmt.Sprintf("t%d", j), Mesh: v.t.Mesh, DType: v.t.DType}
	if v.decl != "" {
		spec.Shape, spec.Schedule, spec.Allocation, spec.Partial = v.t.LogicalExtents(), v.t.Schedule, v.t.Allocation, v.t.Partial
		return spec
	}
	// A produced tensor's Partial is the op's sum across the devices, its
	// values complete (held).
	spec.Shape, spec.Placements, spec.Combine = v.t.Shape(), m.sharding(fa, j, o), true
	return spec
}
