package ir

import (
	"slices"
	"strings"

	"github.com/nvcomm/nvcomm/internal/diag"
)

// A contraction whose operand is sharded otherwise than the op reads it
// — sequence parallelism's norm output, split by sequence, read whole by
// the column-parallel linear after it — has that operand resharded
// before it in the forward (an Allgather, the set the lowering inserts).
// The weight gradient reads the same operand, and reading it as the
// fusion names it would make the gradient a sum of partial products over
// the split (a ReduceScatter, and an AllToAll of the other factor, where
// Megatron-LM gathers the operand again). So the rule reads it as the
// forward did: a saved activation, the tensor "y.grad/saved_x" that a set
// of the backward makes with the splits the forward op reads x in.
// Lowered alone that set is Megatron's second Allgather of the input
// (layers.py, LinearWithGradAccumulationAndAsyncCommunication.backward);
// under the optimal policy, which keeps one copy per mesh and target, it
// is the forward's gathered copy itself, kept for the backward: the
// memory of one collective's output instead of a collective.

// savedPrefix names the saved copy of operand x of the op whose output is
// y: y.grad/saved_x.
const savedPrefix = "saved_"

// readSplits returns the device splits in which contraction op reads its
// operand i, from its output's (what it computes): an output axis split
// maps to the operand's axis of the same factor, a split of the summed
// axis to the operand's contracted axis; an output axis split by the
// type the sum is over is a ReduceScatter's, not a factor's. ok is false
// where an output split is one propagation does not replay.
func readSplits(op *Op, i int) (need []deviceSplit, ok bool) {
	out := op.Result()
	splits := out.deviceSplits()
	if len(splits) != deviceAxes(out)+reducedDeviceAxes(out) {
		return nil, false
	}
	summed := map[ParallelType]bool{}
	for _, s := range splits {
		if s.reduction {
			summed[s.typ] = true
		}
	}
	x := op.Inputs[i]
	for _, s := range splits {
		a := -1
		switch {
		case s.reduction:
			a = op.ContractedAxis(i)
		case summed[s.typ]:
		default:
			a = op.Rule().OperandSplit(i, valueIndex(out, s.pos), out.Mesh.Size(s.typ))
		}
		if pos := logicalPos(x, a); pos >= 0 {
			need = append(need, deviceSplit{pos: pos, typ: s.typ, split: true})
		}
	}
	return need, true
}

// reducedDeviceAxes counts t's device-parallel reduction loop axes.
func reducedDeviceAxes(t *Tensor) int {
	n := 0
	for _, id := range t.Loop {
		if id.Parallel.IsDevice() && id.Reduction {
			n++
		}
	}
	return n
}

// gathered reports whether contraction op reads operand i gathered
// along some of the splits the operand has (and split along no other),
// none of them a split of the summed axis, and returns the splits it
// reads it in: the splits of the copy the forward reads. Only such a copy
// is saved: it makes the backward's reads of the operand more local,
// never less (a copy that splits the operand further, a local Slice,
// would turn the weight gradient into a sum of partial products), and
// the forward must make it (an operand split along the summed axis may
// instead be multiplied as it is and the partial products summed, a
// row-parallel linear's way, which the optimal policy may take). A
// Partial operand, one on another mesh and one with splits propagation
// does not replay are left as they are.
func gathered(op *Op, i int) ([]deviceSplit, bool) {
	x := op.Inputs[i]
	if x.Partial != "" || x.Mesh == nil || op.Out.Mesh == nil || !x.Mesh.Equal(op.Out.Mesh) {
		return nil, false
	}
	have := x.deviceSplits()
	if len(have) != deviceAxes(x) {
		return nil, false
	}
	need, ok := readSplits(op, i)
	if !ok {
		return nil, false
	}
	kept := !slices.ContainsFunc(need, func(n deviceSplit) bool {
		return !slices.ContainsFunc(have, func(h deviceSplit) bool { return h.pos == n.pos && h.typ == n.typ })
	})
	k := logicalPos(x, op.ContractedAxis(i))
	summed := slices.ContainsFunc(have, func(h deviceSplit) bool { return h.pos == k })
	return need, kept && !summed && len(need) < len(have)
}

// savedOperand returns the name of the copy of forward op ro's operand k
// that its gradient rule reads, emitting the set that makes it the first
// time; the operand itself where the forward reads it as it is, or reads
// it in two slots (matmul(x, x), which may read it two ways).
func (g *gradGen) savedOperand(ro *rawOp, k int, of *Composite, made map[int]string) string {
	if name, ok := made[k]; ok {
		return name
	}
	name := ro.ins[k]
	read := g.reading(name, ro, of) // the forward's tensor, or the backward's copy of it
	y := g.tensors.lookup(ro.out)
	if op := y.Producer; op != nil && op.Kind.IsContraction() && op.Kind.Entry().Indexed == nil &&
		k < len(op.Inputs) && op.Inputs[k].Name == name && op.ContractedAxis(k) >= 0 &&
		readOnce(ro.ins, name) {
		if splits, ok := gathered(op, k); ok {
			saved := ro.out + gradSuffix + "/" + savedPrefix + name
			if g.regathers(name) {
				saved = ro.out + gradSuffix + "/" + regatheredPrefix + name // its own set: no copy stands for it
			}
			if g.b.saved == nil {
				g.b.saved = map[string]savedCopy{}
			}
			g.b.saved[saved] = savedCopy{splits: splits, at: ro.pos}
			read = g.emit(&rawOp{kind: OpSet, ins: []string{read}, out: saved}, ro.pos, of, nil)
		}
	}
	made[k] = read
	return read
}

// readOnce reports whether name is one of ins once only.
func readOnce(ins []string, name string) bool {
	n := 0
	for _, in := range ins {
		if in == name {
			n++
		}
	}
	return n == 1
}

// savedCopy is the sharding of a saved copy: the splits the forward op
// reads its operand in, and where that op is written.
type savedCopy struct {
	splits []deviceSplit
	at     diag.Pos
}

// savedShards gives out, the saved copy of an operand (savedOperand),
// the splits the forward read it in, and builds it. It is no longer
// propagated: the backward sweep leaves it as the forward read it.
func (pr *propagator) savedShards(op *Op) (handled, ok bool) {
	b := pr.p.back
	if b == nil || op.Kind != OpSet {
		return false, false
	}
	s, found := b.saved[op.Out.Name]
	if !found {
		return false, false
	}
	out := op.Out
	out.Mesh = op.In().Mesh
	for _, d := range s.splits {
		d.at = s.at
		pr.splits[out] = append(pr.splits[out], d)
	}
	ok = pr.build(out)
	out.Propagated = false
	return true, ok
}

// IsSavedCopy reports whether name is a saved copy of an operand that a
// gradient rule reads as the forward read it (y.grad/saved_x): the set of
// the backward that makes it moves what the forward's resharding moved
// already, so that it bounds nothing (internal/lower).
func IsSavedCopy(name string) bool {
	i := strings.Index(name, gradSuffix+"/"+savedPrefix)
	return i > 0 && !strings.Contains(name[i+len(gradSuffix)+1:], "/")
}
