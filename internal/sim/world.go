package sim

import (
	"fmt"
	"slices"

	"github.com/nvcomm/nvcomm/internal/plan"
)

// tensorInfo is what the simulation knows of one tensor of the plan.
type tensorInfo struct {
	t        plan.Tensor
	index    int // position in plan.Tensors: selects its input data
	mesh     plan.Mesh
	shard    *sharder
	elemSize int64
}

// world is a checked plan: its tensors with their shard geometry and which
// op produces each tensor.
type world struct {
	p        *plan.Plan
	tensors  map[string]*tensorInfo
	producer map[string]int
	// scratch holds the offsets of the shard being loaded or checked,
	// reused for every device and tensor.
	scratch []int
}

// dtypeSizes gives the bytes of an element of each dtype.
var dtypeSizes = map[string]int64{
	"float32": 4, "float16": 2, "bfloat16": 2, "float64": 8, "int64": 8, "int32": 4,
}

// newWorld checks p's tensors and ops and builds every tensor's sharder.
func newWorld(p *plan.Plan) (*world, error) {
	w := &world{p: p, tensors: map[string]*tensorInfo{}, producer: map[string]int{}}
	for i, t := range p.Tensors {
		if err := w.addTensor(i, t); err != nil {
			return nil, err
		}
	}
	for i, op := range p.Ops {
		if err := w.addOp(i, op); err != nil {
			return nil, err
		}
	}
	return w, nil
}

func (w *world) addTensor(i int, t plan.Tensor) error {
	if _, dup := w.tensors[t.Name]; dup {
		return fmt.Errorf("tensor %q is listed twice", t.Name)
	}
	size, ok := dtypeSizes[t.DType]
	if !ok {
		return fmt.Errorf("tensor %q: unknown dtype %q", t.Name, t.DType)
	}
	m, ok := w.p.Meshes[t.Mesh]
	if !ok {
		return fmt.Errorf("tensor %q: unknown mesh %q", t.Name, t.Mesh)
	}
	s, err := newSharder(t, m)
	if err != nil {
		return err
	}
	w.tensors[t.Name] = &tensorInfo{t: t, index: i, mesh: m, shard: s, elemSize: size}
	return nil
}

// addOp checks that op reads a tensor that exists by then and writes a
// tensor nothing else writes.
func (w *world) addOp(i int, op plan.Op) error {
	if op.Index != i {
		return fmt.Errorf("op at position %d has index %d", i, op.Index)
	}
	for _, name := range []string{op.Input, op.Output} {
		if _, ok := w.tensors[name]; !ok {
			return fmt.Errorf("op %d: unknown tensor %q", i, name)
		}
	}
	if op.Input == op.Output {
		return fmt.Errorf("op %d: reads and writes the same tensor %q", i, op.Input)
	}
	if _, dup := w.producer[op.Output]; dup {
		return fmt.Errorf("op %d: tensor %q is already produced by op %d", i, op.Output, w.producer[op.Output])
	}
	if _, later := w.producer[op.Input]; !later && w.producedLater(op.Input, i) {
		return fmt.Errorf("op %d: input %q is produced by a later op", i, op.Input)
	}
	w.producer[op.Output] = i
	return nil
}

func (w *world) producedLater(name string, i int) bool {
	for _, op := range w.p.Ops[i:] {
		if op.Output == name {
			return true
		}
	}
	return false
}

// isInput reports whether no op produces the tensor.
func (w *world) isInput(name string) bool {
	_, produced := w.producer[name]
	return !produced
}

// reference fills the fusion inputs and evaluates every op on unsharded
// tensors. Values are row-major over each tensor's non-reduction axes.
func (w *world) reference(seed uint64) (map[string][]float64, error) {
	ref := map[string][]float64{}
	small := hasProd(w.p)
	for _, t := range w.p.Tensors {
		if w.isInput(t.Name) {
			info := w.tensors[t.Name]
			ref[t.Name] = inputData(seed, info.index, product(info.shard.shape), small)
		}
	}
	for _, op := range w.p.Ops {
		in := w.tensors[op.Input].shard.shape
		out, err := evalOp(op, ref[op.Input], in)
		if err != nil {
			return nil, err
		}
		if err := w.checkOutputDomain(op, in); err != nil {
			return nil, err
		}
		ref[op.Output] = out
	}
	return ref, nil
}

// checkOutputDomain checks the logical domain of op's output against its
// input's non-reduction shape in: a set keeps it; a reduction keeps it with
// the reduced axis as its only reduction axis.
func (w *world) checkOutputDomain(op plan.Op, in []int) error {
	var want []int
	if op.Op != "set" {
		want = []int{*op.Axis}
	}
	out := w.tensors[op.Output].t
	if slices.Equal(out.Shape, in) && slices.Equal(out.ReductionAxes, want) {
		return nil
	}
	return fmt.Errorf("op %d (%s): output %q has logical shape %v with reduction axes %v, expected %v with reduction axes %v",
		op.Index, op.Op, op.Output, out.Shape, out.ReductionAxes, in, want)
}

// load writes every fusion input's shard onto each device of its mesh.
func (w *world) load(m *machine, ref map[string][]float64) {
	for _, t := range w.p.Tensors {
		if !w.isInput(t.Name) {
			continue
		}
		info := w.tensors[t.Name]
		for _, d := range info.mesh.Devices {
			w.scratch = info.shard.appendOffsets(w.scratch[:0], d)
			offs := w.scratch
			buf := make([]float64, len(offs))
			for i, off := range offs {
				buf[i] = ref[t.Name][off]
			}
			m.put(d, t.Name, buf)
		}
	}
}

// satAdd adds non-negative numbers, saturating instead of overflowing.
func satAdd(a, b int64) int64 {
	if s := a + b; s >= a {
		return s
	}
	return int64(^uint64(0) >> 1)
}

// satProduct multiplies extents, saturating instead of overflowing.
func satProduct(xs []int) int64 {
	n := int64(1)
	for _, x := range xs {
		n = satMul(n, int64(x))
	}
	return n
}
