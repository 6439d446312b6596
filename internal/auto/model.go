package auto

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/nvcomm/nvcomm/internal/cost"
	"github.com/nvcomm/nvcomm/internal/ir"
	"github.com/nvcomm/nvcomm/internal/lower"
	"github.com/nvcomm/nvcomm/internal/shard"
)

// variable is a tensor of the fusion with the shardings it may take: one
// for a given tensor, the candidates for a decision.
type variable struct {
	t        *ir.Tensor
	options  []sharding
	bytes    []int64 // per option, what one device holds
	decision bool
	produced bool
	// decl declares a given fusion input in its ops' fusions when its
	// placements alone do not (source.given): its shape, schedule or
	// placements, and allocation keys as written.
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
}

const maxCost = math.MaxInt64

// model is the optimisation problem of one fusion.
type model struct {
	f       *ir.Fusion
	vars    []*variable
	index   map[*ir.Tensor]int
	factors []*factor
}

// maxCombinations bounds the table of one op: the product of its tensors'
// option counts.
const maxCombinations = 1 << 16

func newModel(f *ir.Fusion, src *source) (*model, error) {
	m := &model{f: f, index: map[*ir.Tensor]int{}}
	readers := map[*ir.Tensor]int{}
	for i, op := range f.Ops {
		for _, in := range op.Inputs {
			readers[in] = i
		}
	}
	lastOp := max(len(f.Ops)-1, 0)
	for _, t := range f.Tensors {
		v := &variable{t: t, produced: t.Producer != nil, decision: t.Auto || t.Propagated, last: lastOp}
		if v.produced {
			v.first = t.Producer.Index
			if r, ok := readers[t]; ok && !slices.Contains(f.Outputs, t) {
				v.last = r
			}
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
// the op alone, its operands and output declared with those shardings, and
// predicts the plan's time. Plans of a fusion are the concatenation of its
// ops' plans, and their times add up (steps run one after another), so a
// fusion's time is the sum of its ops'.
type evaluator struct {
	lowering lower.Options // its Topology set
	cache    map[string]int64
	lowered  int
}

func (e *evaluator) fill(m *model, fa *factor) {
	var combo []int
	for i := range fa.table {
		combo = m.combination(fa, i, combo)
		fa.table[i] = e.price(opFusion(m, fa, combo))
	}
}

// price is the predicted time of the fusion src in picoseconds, maxCost
// when nvcomm cannot lower it.
func (e *evaluator) price(src string) int64 {
	if c, ok := e.cache[src]; ok {
		return c
	}
	c := int64(maxCost)
	if f, err := ir.Parse("auto.yaml", []byte(src)); err == nil {
		if p, err := lower.Lower(f, e.lowering); err == nil {
			if pr, err := cost.Predict(e.lowering.Topology, p); err == nil {
				c = int64(math.Round(pr.Total * 1e12))
			}
		}
	}
	e.lowered++
	e.cache[src] = c
	return c
}

// opFusion writes the fusion of fa's op alone, its tensors sharded as
// combo chooses: operands as their consumers read them, the output as
// chosen.
func opFusion(m *model, fa *factor, combo []int) string {
	var b strings.Builder
	b.WriteString("format: 2\nname: auto_op\nmeshes:\n")
	var meshes []*ir.Mesh
	for _, k := range fa.vars {
		if mesh := m.vars[k].t.Mesh; !slices.Contains(meshes, mesh) {
			meshes = append(meshes, mesh)
			fmt.Fprintf(&b, "  %s: %s\n", mesh.Name, meshYAML(mesh))
		}
	}
	b.WriteString("tensors:\n")
	for j, k := range fa.vars {
		v := m.vars[k]
		s := v.options[combo[j]]
		shape := v.t.Shape()
		if k != m.index[fa.op.Out] {
			s = s.held(v.produced)
		}
		if !v.produced && slices.ContainsFunc(s, func(p shard.Placement) bool { return p.Kind == shard.Partial }) {
			shape = shape[1:] // a Partial input's terms axis is not declared
		}
		keys := fmt.Sprintf("shape: %s, placements: %s", intList(shape), s)
		if v.decl != "" {
			keys = v.decl
		}
		fmt.Fprintf(&b, "  %s: {mesh: %s, dtype: %s, %s}\n", m.name(fa, k), v.t.Mesh.Name, v.t.DType, keys)
	}
	b.WriteString("ops:\n  - " + opYAML(fa.op, func(t *ir.Tensor) string { return m.name(fa, m.index[t]) }) + "\n")
	return b.String()
}

// name is the name of var k in the fusion of fa's op alone: its position
// among the op's tensors, so that ops alike but for their tensors' names
// write the same fusion and are priced once.
func (m *model) name(fa *factor, k int) string {
	return fmt.Sprintf("t%d", slices.Index(fa.vars, k))
}

// opYAML writes an op as a fusion file does, its tensors named by name.
func opYAML(op *ir.Op, name func(*ir.Tensor) string) string {
	names := make([]string, len(op.Inputs))
	for i, in := range op.Inputs {
		names[i] = name(in)
	}
	s := fmt.Sprintf("{op: %s, in: [%s], out: %s", op.Kind, strings.Join(names, ", "), name(op.Out))
	switch {
	case op.Kind.IsReduction():
		s += fmt.Sprintf(", axis: %d", op.Axis)
	case op.Kind == ir.OpBroadcast:
		s += ", axes: " + intList(op.Axes)
	}
	return s + "}"
}

func intList(xs []int) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = fmt.Sprint(x)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}
