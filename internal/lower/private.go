package lower

import (
	"slices"

	"github.com/nvcomm/nvcomm/internal/ir"
)

// This file says which operands of a contraction whose output splits its
// summed axis are private: read by that op alone. The optimal policy
// weighs gathering such a contraction's operands against summing its
// partial products only where every operand it would reshard is private
// (chooseGather), because a copy made for another op could serve an
// operand read more widely (reshardOperands's copyOf, transposedCopy), and
// what a plan then receives for the op would depend on the ways chosen for
// other ops, where the bound of the op's ways must not: it is the
// fusion's, whatever the policy (TestBoundsHold).
//
// The question is asked of three fusions that must answer alike: the
// caller's, as the resharding pass finds it (the choice); the fusion as
// lowered, whose operands are copies made by sets inserted for ops (the
// bound of the ways); and a plan's fusion, sets and all, which Certify
// lowers again. So a tensor is counted as the caller's fusion has it, its
// canonical tensor: a set inserted for an op stands for what it reads (a
// copy, which that op and any other reusing it read as the original), and
// so does one inserted after an op (its result before the resharding).
// And an op's readers are counted as ops of the caller's fusion: a set
// inserted for an op reads as that op.

// privacy is what privateOperands needs of a fusion, taken when it was
// counted: the resharding pass changes a permute of the caller's fusion in
// place when the lowerer owns it (transposedCopy).
type privacy struct {
	// canon maps each tensor a set inserted for an op made to its
	// canonical tensor; permuted maps each permute's output to its
	// operand's canonical tensor; readers counts the ops reading each
	// canonical tensor, as ops of the caller's fusion. All nil for a
	// fusion without such contractions.
	canon, permuted map[*ir.Tensor]*ir.Tensor
	readers         map[*ir.Tensor]int
}

// countReaders counts the readers of f's tensors for privateOperands,
// when f has a contraction whose output splits its summed axis.
func (tr *trials) countReaders(f *ir.Fusion) {
	tr.private = privacy{}
	if !slices.ContainsFunc(f.Ops, splitSum) {
		return
	}
	pr := privacy{canon: map[*ir.Tensor]*ir.Tensor{}, permuted: map[*ir.Tensor]*ir.Tensor{}, readers: map[*ir.Tensor]int{}}
	seen := map[*ir.Tensor][]int{} // the readers counted, by their index in the caller's fusion
	for _, op := range f.Ops {
		who := op.Index
		switch why := op.Inserted; {
		case op.Kind == ir.OpSet && why != nil:
			pr.canon[op.Out] = pr.canonical(op.In())
			if why.Output {
				continue // the op's own result, before its resharding
			}
			who = why.For.Index
		case op.Kind == ir.OpPermute:
			pr.permuted[op.Out] = pr.canonical(op.In())
		}
		for _, x := range op.Inputs {
			c := pr.canonical(x)
			if !slices.Contains(seen[c], who) {
				seen[c] = append(seen[c], who)
				pr.readers[c]++
			}
		}
	}
	tr.private = pr
}

// splitSum reports whether op is a contraction whose output splits its
// summed axis over devices.
func splitSum(op *ir.Op) bool {
	_, split := ContractedDevice(op.Result())
	return split && op.Kind.IsContraction()
}

// canonical is x as the caller's fusion has it: what the sets inserted to
// make it read.
func (pr *privacy) canonical(x *ir.Tensor) *ir.Tensor {
	if c, ok := pr.canon[x]; ok {
		return c
	}
	return x
}

// privateOperands reports whether every operand that w's op, a
// contraction whose output splits its summed axis, reshards to gather
// that axis is read by that op alone, and, where a permute made it, the
// permute's operand by the permute alone. A tensor made after the count
// (a copy the resharding pass made for an earlier op) counts no readers,
// and is not private.
func (tr *trials) privateOperands(w *ways) bool {
	pr := &tr.private
	for i, x := range w.op.Inputs {
		if !w.reshards[i] {
			continue
		}
		c := pr.canonical(x)
		if pr.readers[c] != 1 {
			return false
		}
		if y, ok := pr.permuted[c]; ok && pr.readers[y] != 1 {
			return false
		}
	}
	return true
}
