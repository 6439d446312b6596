package sim

import (
	"fmt"
	"math"
	"slices"

	"github.com/nvcomm/nvcomm/internal/ops"
	"github.com/nvcomm/nvcomm/internal/plan"
)

// This file gives the lookups (embedding) their exact semantics: an index
// is data, an integer, and a lookup copies the table's row at it — a zero
// row for an index outside the rows, as a device that does not own an
// index writes in a Lookup step (Megatron-LM's VocabParallelEmbedding).
// Summed over the devices that split the rows, exactly one of them
// contributes each row, so the plan's sum is the reference's row exactly.
// Simulate fills the inputs a lookup indexes with with valid indices
// (IndexBounds), so that every row is read.

// indexOf maps the high 32 bits h of a SplitMix64 output to an index
// below bound: h mod bound.
func indexOf(h uint64, bound int) float64 { return float64(h % uint64(bound)) }

// IndexBounds returns, for every fusion input of p that a lookup reads as
// its indices (directly, or through sets and data movement ops), the
// number of rows it indexes: simulate fills it with indices below that,
// the least over its lookups (docs/simulate.md, "Data").
func IndexBounds(p *plan.Plan) map[string]int {
	var bounds map[string]int
	producer := make(map[string]int, len(p.Ops))
	for i, op := range p.Ops {
		producer[op.Output] = i
	}
	tensors := make(map[string]*plan.Tensor, len(p.Tensors))
	for i := range p.Tensors {
		tensors[p.Tensors[i].Name] = &p.Tensors[i]
	}
	for _, op := range p.Ops {
		rows, ok := indexedRows(op, tensors)
		if !ok {
			continue
		}
		name := indexSource(op.Operands()[indicesOperand(op)], p.Ops, producer)
		if _, produced := producer[name]; produced {
			continue // computed indices: out-of-range ones give zero rows
		}
		if bounds == nil {
			bounds = map[string]int{}
		}
		if b, seen := bounds[name]; !seen || rows < b {
			bounds[name] = rows
		}
	}
	return bounds
}

// indicesOperand is the position of the indices among op's operands, op
// a lookup or a scatter.
func indicesOperand(op plan.Op) int {
	if e := ops.Lookup(op.Op); e.Scatters != nil {
		return e.Scatters.Indices
	}
	return ops.Lookup(op.Op).Indexed.Indices
}

// indexedRows is the number of rows lookup op indexes: the extent of its
// table's rows dim; a scatter's, its rows.
func indexedRows(op plan.Op, tensors map[string]*plan.Tensor) (int, bool) {
	e := ops.Lookup(op.Op)
	if e != nil && e.Scatters != nil {
		rows := op.Attrs.Int(ops.AttrRows)
		return rows, rows > 0
	}
	names := op.Operands()
	if e == nil || e.Indexed == nil || len(names) != 2 || tensors[names[e.Indexed.Table]] == nil {
		return 0, false
	}
	table := valueShapeOf(tensors[names[e.Indexed.Table]])
	if d := e.Indexed.RowsDim(len(table)); d >= 0 && d < len(table) && table[d] > 0 {
		return table[d], true
	}
	return 0, false
}

// indexSource follows name back through the ops that move data without
// computing (sets, views, broadcasts: cross_entropy's labels given gather's
// axis of extent 1) to the tensor its values come from.
func indexSource(name string, all []plan.Op, producer map[string]int) string {
	for range len(all) {
		i, ok := producer[name]
		if !ok {
			break
		}
		if f := family(all[i]); f != ops.Copy && f != ops.View && f != ops.Broadcast {
			break
		}
		name = all[i].Operands()[0]
	}
	return name
}

// valueShapeOf is t's non-reduction shape.
func valueShapeOf(t *plan.Tensor) []int {
	var shape []int
	for k, e := range t.Shape {
		if !slices.Contains(t.ReductionAxes, k) {
			shape = append(shape, e)
		}
	}
	return shape
}

// embeddingDomain is ids [...] looking up rows of table [vocab, e]:
// [..., e, vocab], vocab a trailing reduction axis.
func embeddingDomain(op plan.Op, ins []operand) (logicalDomain, error) {
	ids, table := ins[0], ins[1]
	if len(table.shape) != 2 {
		return logicalDomain{}, fmt.Errorf("op %d (embedding): table %q %v has %d axes, want 2 ([vocab, e])", op.Index, table.name, table.shape, len(table.shape))
	}
	shape := slices.Concat(ids.shape, []int{table.shape[1], table.shape[0]})
	return logicalDomain{shape: shape, reduction: []int{len(ids.shape) + 1}}, nil
}

// embeddingReference is the rows of table at ids on unsharded values,
// from the definition: out[n, j] = table[ids[n], j], 0 for an index
// outside the table's rows. It is written apart from the Lookup step's
// kernel so that the two do not share a mistake.
func embeddingReference(ids, table operand) []float64 {
	vocab, e := table.shape[0], table.shape[1]
	out := make([]float64, 0, len(ids.vals)*e)
	for _, id := range ids.vals {
		for j := range e {
			v := 0.0
			if id >= 0 && id < float64(vocab) {
				v = table.vals[int(id)*e+j]
			}
			out = append(out, v)
		}
	}
	return out
}

// lookupStep checks a Lookup: inputs [indices, table], dims [Bt, N, V, E],
// Bt·N indices (count.input), a table of Bt·V·E elements, an output of
// Bt·N·E (count.output), and one offset per device: device k's table
// holds rows offsets[k] to offsets[k] + V - 1.
func lookupStep(s *plan.Step) (computeStep, error) {
	return indexedStep(s, indexed{step: "Lookup", second: "table", gathers: true, kernel: lookupKernel})
}

// indexed is what tells the two steps indexed by rows apart: a Lookup
// gathers rows (its output has the indices' N rows and its table V), a
// ScatterAdd adds them (its output has V rows and its values N).
type indexed struct {
	step, second string // the step's type, its second input's name
	gathers      bool
	kernel       func(ids, second []float64, bt, n, v, e, off int) []float64
}

// indexedStep checks the form a Lookup and a ScatterAdd share: inputs
// [indices, second], dims [Bt, N, V, E], Bt·N indices (count.input), one
// offset per device, and the output's and second input's sizes, Bt·N·E and
// Bt·V·E, the one way round or the other.
func indexedStep(s *plan.Step, ix indexed) (computeStep, error) {
	if n := len(s.Operands()); n != 2 {
		return computeStep{}, stepError(s, "a %s reads 2 buffers (inputs [indices, %s]), got %d", ix.step, ix.second, n)
	}
	if len(s.Dims) != 4 || !nonNegative(s.Dims) {
		return computeStep{}, stepError(s, "dims %v must be [Bt, N, V, E], four non-negative extents", s.Dims)
	}
	if len(s.Offsets) != len(s.Devices) {
		return computeStep{}, stepError(s, "offsets has %d entries for %d devices", len(s.Offsets), len(s.Devices))
	}
	bt, n, v, e := s.Dims[0], s.Dims[1], s.Dims[2], s.Dims[3]
	if got := satProduct([]int{bt, n}); got != int64(s.Count.Input) {
		return computeStep{}, stepError(s, "count.input is %d, dims %v give Bt·N = %d", s.Count.Input, s.Dims, got)
	}
	outRows, secondRows, outName, secondName := n, v, "N", "V"
	if !ix.gathers {
		outRows, secondRows, outName, secondName = v, n, "V", "N"
	}
	if got := satProduct([]int{bt, outRows, e}); got != int64(s.Count.Output) {
		return computeStep{}, stepError(s, "count.output is %d, dims %v give Bt·%s·E = %d", s.Count.Output, s.Dims, outName, got)
	}
	size := satProduct([]int{bt, secondRows, e})
	if size > math.MaxInt {
		return computeStep{}, stepError(s, "dims %v give the %s more elements than a buffer holds", s.Dims, ix.second)
	}
	sizes := []inputSize{counted(s), {int(size), fmt.Sprintf("want %d (Bt·%s·E of dims %v)", size, secondName, s.Dims)}}
	offsets := slices.Clone(s.Offsets)
	return computeStep{sizes, func(k int, ins [][]float64) []float64 {
		return ix.kernel(ins[0], ins[1], bt, n, v, e, offsets[k])
	}}, nil
}

// lookupKernel is a device's Lookup: out[b, i, j] = table[b, ids[b, i] −
// off, j] where that row is the device's, else 0.
func lookupKernel(ids, table []float64, bt, n, v, e, off int) []float64 {
	out := make([]float64, bt*n*e)
	for b := range bt {
		for i := range n {
			r := ids[b*n+i] - float64(off)
			if r < 0 || r >= float64(v) {
				continue // not this device's row: zeros
			}
			copy(out[(b*n+i)*e:(b*n+i+1)*e], table[(b*v+int(r))*e:])
		}
	}
	return out
}

// gatherDomain is x [..., v] at index [..., 1] along the last dim: [..., 1,
// v], v a trailing reduction axis.
func gatherDomain(op plan.Op, ins []operand) (logicalDomain, error) {
	x, index := ins[0], ins[1]
	r := len(x.shape)
	switch {
	case r == 0 || op.Axis == nil || *op.Axis != r-1:
		return logicalDomain{}, fmt.Errorf("op %d (gather): axis must be the last dim of %q (%d)", op.Index, x.name, r-1)
	case len(index.shape) != r || index.shape[r-1] != 1 || !slices.Equal(index.shape[:r-1], x.shape[:r-1]):
		return logicalDomain{}, fmt.Errorf("op %d (gather): index %q %v is not x's shape %v with extent 1 on the last dim", op.Index, index.name, index.shape, x.shape)
	}
	return logicalDomain{shape: slices.Concat(index.shape, x.shape[r-1:]), reduction: []int{r}}, nil
}

// gatherReference is x at index along the last dim on unsharded values,
// from the definition: out[..., 0] = x[..., index[..., 0]], 0 for an index
// outside [0, v).
func gatherReference(x, index operand) []float64 {
	v := x.shape[len(x.shape)-1]
	out := make([]float64, len(index.vals))
	for b, i := range index.vals {
		if i >= 0 && i < float64(v) {
			out[b] = x.vals[b*v+int(i)]
		}
	}
	return out
}
