package auto

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/nvcomm/nvcomm/internal/cost"
	"github.com/nvcomm/nvcomm/internal/ir"
	"github.com/nvcomm/nvcomm/internal/lower"
)

// Pricing an op by parts. nvcomm lowers a computing op of several operands
// as nvFuser's InsertReshardings does (docs/lowering.md): a set before the
// op for each operand not sharded as the op's output requires, into a
// tensor that is, then the op on operands so sharded. Its plan is the
// sets' steps, in operand order, then the op's own; its predicted time is
// the sum of those steps' times in that order (cost.Predict), and a step's
// time depends on the step alone and the dtype of its op's output. A set's
// steps depend only on the tensor it reads and the one it writes (the
// resharding planner searches from one to the other), and the op's own
// only on the tensors it reads and writes. So the op's price under a
// combination of its tensors' shardings is a sum of parts that each depend
// on fewer decisions: per operand, its sharding and the output's (the set,
// when one is needed), and the output's with the operands' as the op reads
// them (the op's own steps). An op of three tensors with 27, 27 and 54
// options has 39,366 combinations but 2 × 27 × 54 sets and a few dozen
// parts of its own; and a set priced once serves every op that needs it.
//
// The sum is exact only where the lowering is that simple, so an op is
// priced by parts only when (decompose):
//   - it computes (not a set or a reduction: the planner lowers those
//     whole), with two operands or more (a single operand is computed in
//     its own sharding and its result resharded after: nvFuser's rule for
//     unary ops);
//   - each of its tensors is a different one (a tensor read twice is read
//     through one set for both slots where both need the same sharding);
//   - every tensor is on one mesh (a set to another mesh ends with a Copy
//     or not depending on whether a later op reads its output), and no
//     operand is Partial;
// and a combination is priced by parts only when its contraction's
// factors do not both split the summed axis along one device type with
// the output not Partial (the optimal policy then chooses between
// gathering them and summing partial products, which depends on both at
// once), and when its op cannot be computed where its operands are with
// its result resharded after (lower.MayComputeAfter: the optimal policy
// then chooses between that and resharding them before). Every other
// combination is lowered whole. The rules of which sets
// the lowering inserts, and the tensors they write, are internal/lower's
// own (lower.BlockShards, OperandShards, BlockSchedule), for tensors
// without broadcast axes (an op's fusion's operands are its inputs, which
// have none); TestPricesByParts checks the parts' sums against the whole
// lowerings on every combination of the test layers and the MLP blocks.

// decomposition is what pricing fa's op by parts needs, per option of its
// tensors.
type decomposition struct {
	fa    *factor
	slots []int // per operand slot, the position of its tensor in fa.vars
	// specs, keys and tensors are, per position and option, the tensor
	// as the op's fusion declares it, that declaration as a key, and the
	// tensor built (nil when it cannot be: the combination then fails).
	specs   [][]ir.TensorSpec
	keys    [][]string
	tensors [][]*ir.Tensor
	// have and block are, per position and option, the tensor's block
	// splits and whether it has only such splits (blockShards).
	have  [][][]lower.Split
	block [][]bool
	outs  []*outSide // per option of the output
	opKey string     // the op's kind and attributes
}

// outSide is what one sharding of the output asks of the operands.
type outSide struct {
	ok     bool            // the op and its output build, in even block splits
	summed bool            // the output splits the summed axis: a Partial
	need   [][]lower.Split // per slot, the splits the operand must have
	// targets are, per slot, the tensor a set would write (its spec, and
	// whether it builds even), and its key.
	targets  []ir.TensorSpec
	targetOK []bool
	tkeys    []string
}

// recipe is how one combination is priced: fixed (maxCost: it cannot
// lower), by parts (their keys, in plan order), or whole (neither).
type recipe struct {
	fails bool
	parts []string
}

// part is a fusion priced alone, and its steps' times in plan order (ok
// false when it does not lower).
type part struct {
	build func() (*ir.Fusion, error)
	secs  []float64
	ends  cost.Ends // how its first and last steps join runs of local steps
	ok    bool
}

// decompose returns the decomposition of fa's op, nil when it is not
// priced by parts.
func (m *model) decompose(fa *factor) *decomposition {
	op := fa.op
	if op.Kind == ir.OpSet || op.Kind.IsReduction() || len(op.Inputs) < 2 || len(fa.vars) != len(op.Inputs)+1 {
		return nil // a tensor read twice has fewer vars than slots
	}
	d := &decomposition{fa: fa, opKey: fmt.Sprintf("%s %d %v%s", op.Kind, op.Axis, op.Axes, op.Attrs.Key())}
	for _, in := range op.Inputs {
		d.slots = append(d.slots, slices.Index(fa.vars, m.index[in]))
	}
	mesh := m.vars[fa.vars[0]].t.Mesh
	for j, k := range fa.vars {
		v := m.vars[k]
		if !v.t.Mesh.Equal(mesh) {
			return nil
		}
		d.specs, d.keys = append(d.specs, nil), append(d.keys, nil)
		d.tensors, d.have, d.block = append(d.tensors, nil), append(d.have, nil), append(d.block, nil)
		for o := range v.options {
			spec := m.tensorSpec(fa, j, o)
			t, err := ir.NewTensor(spec)
			if err != nil {
				t = nil
			} else if j < len(fa.vars)-1 && t.Partial != "" {
				return nil
			}
			d.specs[j], d.keys[j], d.tensors[j] = append(d.specs[j], spec), append(d.keys[j], specKey(spec)), append(d.tensors[j], t)
			var have []lower.Split
			ok := false
			if t != nil {
				have, ok = lower.BlockShards(t)
			}
			d.have[j], d.block[j] = append(d.have[j], have), append(d.block[j], ok)
		}
	}
	for y := range m.vars[fa.vars[len(fa.vars)-1]].options {
		d.outs = append(d.outs, d.sideOf(m, y))
	}
	return d
}

// sideOf works out, for option y of the output, the splits each operand
// must have and the tensor its set would write (lower's outputShards,
// operandShards and newTensor).
func (d *decomposition) sideOf(m *model, y int) *outSide {
	fa := d.fa
	var inputs []*ir.Tensor
	for _, j := range d.slots {
		t := slices.DeleteFunc(slices.Clone(d.tensors[j]), func(t *ir.Tensor) bool { return t == nil })
		if len(t) == 0 {
			return &outSide{}
		}
		inputs = append(inputs, t[0]) // shapes alike whatever the sharding
	}
	op, err := ir.NewOp(ir.OpSpec{Kind: fa.op.Kind, Axis: fa.op.Axis, Axes: fa.op.Axes, Attrs: fa.op.Attrs, Scalar: fa.op.Scalar, Out: m.tensorSpec(fa, len(fa.vars)-1, y), Inputs: inputs})
	if err != nil {
		return &outSide{}
	}
	want, ok := lower.BlockShards(op.Out)
	if !ok {
		return &outSide{}
	}
	s := &outSide{ok: true}
	if t, ok := lower.ContractedDevice(op.Out); ok {
		s.summed = true
		want = append(want, lower.Split{Axis: -1, Type: t})
	}
	for i, j := range d.slots {
		x := inputs[i]
		need := lower.OperandShards(op, i, want)
		spec := ir.TensorSpec{Name: d.specs[j][0].Name + "/resharded", Mesh: op.Out.Mesh, DType: x.DType, Shape: x.Shape(), Schedule: lower.BlockSchedule(op.Out.Mesh, need)}
		t, err := ir.NewTensor(spec)
		s.need = append(s.need, need)
		s.targets, s.targetOK = append(s.targets, spec), append(s.targetOK, err == nil && !t.IsUneven())
		s.tkeys = append(s.tkeys, specKey(spec))
	}
	return s
}

// recipeFor says how combo is priced; whole when by parts it cannot be.
func (d *decomposition) recipeFor(combo []int) (r recipe, byParts bool) {
	out := d.outs[combo[len(combo)-1]]
	if !out.ok {
		return recipe{fails: true}, true
	}
	for _, j := range d.slots {
		if d.tensors[j][combo[j]] == nil {
			return recipe{fails: true}, true
		}
	}
	if d.fa.op.Kind.IsContraction() && !out.summed && d.commonKSplit(combo) {
		return recipe{}, false // the optimal policy's choice between gathering and summing
	}
	if d.mayComputeAfter(combo) {
		return recipe{}, false // the optimal policy's choice between resharding before and after
	}
	var own strings.Builder
	fmt.Fprintf(&own, "op %s\x00%s", d.opKey, d.keys[len(combo)-1][combo[len(combo)-1]])
	for i, j := range d.slots {
		o := combo[j]
		if d.block[j][o] && lower.SameSplits(d.have[j][o], out.need[i]) {
			fmt.Fprintf(&own, "\x00%s", d.keys[j][o]) // read as it is
			continue
		}
		if !out.targetOK[i] {
			return recipe{fails: true}, true
		}
		r.parts = append(r.parts, "set\x00"+d.keys[j][o]+"\x00"+out.tkeys[i])
		fmt.Fprintf(&own, "\x00%s", out.tkeys[i])
	}
	r.parts = append(r.parts, own.String())
	return r, true
}

// mayComputeAfter reports whether the optimal policy may compute combo's
// op where its operands are and reshard the result after
// (lower.MayComputeAfter).
func (d *decomposition) mayComputeAfter(combo []int) bool {
	op := *d.fa.op
	op.Inputs = make([]*ir.Tensor, len(d.slots))
	for i, j := range d.slots {
		op.Inputs[i] = d.tensors[j][combo[j]]
	}
	op.Out = d.tensors[len(combo)-1][combo[len(combo)-1]]
	return op.Out != nil && lower.MayComputeAfter(&op)
}

// builders returns, for each part of combo's recipe, the fusion it
// prices: a set from the operand to its target, then the op on the
// operands as it reads them.
func (d *decomposition) builders(m *model, combo []int) []func() (*ir.Fusion, error) {
	fa := d.fa
	out := d.outs[combo[len(combo)-1]]
	var fs []func() (*ir.Fusion, error)
	operands := make([]ir.TensorSpec, len(d.slots))
	for i, j := range d.slots {
		o := combo[j]
		operands[i] = d.specs[j][o]
		if d.block[j][o] && lower.SameSplits(d.have[j][o], out.need[i]) {
			continue
		}
		src, dst := d.specs[j][o], out.targets[i]
		fs = append(fs, func() (*ir.Fusion, error) { return setFusion(src, dst) })
		operands[i] = dst
	}
	outSpec := m.tensorSpec(fa, len(fa.vars)-1, combo[len(combo)-1])
	return append(fs, func() (*ir.Fusion, error) { return computeFusion(fa.op, operands, outSpec) })
}

// setFusion is the fusion of the set from src to dst, as the lowering
// inserts it.
func setFusion(src, dst ir.TensorSpec) (*ir.Fusion, error) {
	x, err := ir.NewTensor(src)
	if err != nil {
		return nil, err
	}
	r, err := ir.NewTensor(dst)
	if err != nil {
		return nil, err
	}
	return ir.NewFusion("auto_op", []*ir.Tensor{x, r}, []*ir.Op{{Kind: ir.OpSet, Inputs: []*ir.Tensor{x}, Out: r, Axis: -1}})
}

// computeFusion is the fusion of like's op alone on operands sharded as
// it reads them.
func computeFusion(like *ir.Op, operands []ir.TensorSpec, out ir.TensorSpec) (*ir.Fusion, error) {
	var inputs []*ir.Tensor
	for _, spec := range operands {
		t, err := ir.NewTensor(spec)
		if err != nil {
			return nil, err
		}
		inputs = append(inputs, t)
	}
	op, err := ir.NewOp(ir.OpSpec{Kind: like.Kind, Axis: like.Axis, Axes: like.Axes, Attrs: like.Attrs, Scalar: like.Scalar, Out: out, Inputs: inputs})
	if err != nil {
		return nil, err
	}
	return ir.NewFusion("auto_op", append(inputs, op.Out), []*ir.Op{op})
}

// commonKSplit reports whether both of a contraction's factors, under
// combo, split their summed axis along one device type (lower's
// commonKSplit).
func (d *decomposition) commonKSplit(combo []int) bool {
	var found []ir.ParallelType
	factors := 0
	for i, j := range d.slots[:2] {
		if !d.block[j][combo[j]] {
			return false
		}
		if d.fa.op.ContractedAxis(i) >= 0 {
			factors++ // not a lookup's indices
		}
		for _, s := range d.have[j][combo[j]] {
			if s.Axis == d.fa.op.ContractedAxis(i) {
				found = append(found, s.Type)
			}
		}
	}
	return len(found) > 0 && len(found) == factors && found[0] == found[len(found)-1]
}

// price lowers the part's fusion and sets its steps' predicted times in
// plan order and its ends; ok false when it does not lower.
func (pt *part) price(f *ir.Fusion, err error, opts lower.Options) {
	pt.secs, pt.ends, pt.ok = nil, cost.Ends{}, false
	if err != nil {
		return
	}
	p, err := lower.Lower(f, opts)
	if err != nil {
		return
	}
	pr, err := cost.Predict(opts.Topology, p)
	if err != nil {
		return
	}
	pt.secs = make([]float64, len(pr.Steps))
	for i, st := range pr.Steps {
		pt.secs[i] = st.Seconds
	}
	pt.ends, pt.ok = opts.Topology.PlanEnds(p, pr), true
}

// joinEnds is how the plan of the parts, run one after another, joins
// runs of local steps: its head is its first step's (the first part with
// steps), its tail its last step's.
func joinEnds(parts []*part) cost.Ends {
	out := cost.Ends{Empty: true}
	for _, p := range parts {
		if p.ends.Empty {
			continue
		}
		if out.Empty {
			out.Head, out.Saving = p.ends.Head, p.ends.Saving
		}
		out.Tail, out.Empty = p.ends.Tail, false
	}
	return out
}

// sumParts adds the parts' step times in plan order, as cost.Predict adds
// the whole plan's, and returns the total in picoseconds (maxCost when a
// part does not lower).
func sumParts(parts []*part) int64 {
	total := 0.0
	for _, p := range parts {
		if !p.ok {
			return maxCost
		}
		for _, s := range p.secs {
			total += s
		}
	}
	return picoseconds(total)
}

// picoseconds rounds a predicted time to the tables' unit.
func picoseconds(s float64) int64 { return int64(math.Round(s * 1e12)) }

// specKey writes a tensor's declaration as a key.
func specKey(s ir.TensorSpec) string {
	return fmt.Sprintf("%s|%s|%s|%v|%v|%v|%v|%v|%s", s.Name, s.Mesh.Name, s.DType, s.Shape, s.ReductionAxes, s.Schedule, s.Placements, s.Allocation, s.Partial)
}
