package lower

import (
	"fmt"
	"slices"

	"github.com/nvcomm/nvcomm/internal/ir"
)

// alongAxis inserts the sets a slice or a cat needs, then the op. Along
// the op's axis a block of the output is no block of an operand's (the
// rule's NeedReplication factor, as Shardy marks the sliced and joined
// dims), so the op computes with that axis whole on every device: an
// operand split along it is resharded first by a set (the planner
// chooses the collective: an Allgather along that axis), and an output
// split along it is computed whole along it into a new tensor, which a
// set after the op splits (a local Slice). Along every other axis the
// operands are sharded as the output, as an elementwise op's are. Under
// nvFuser's rules (nvFuserAlongAxis) what nvFuser cannot lower is an
// error in its words.
func (ins *inserter) alongAxis(op *ir.Op, want []Split) {
	if ins.planner.Policy() == PolicyNvFuser && !ins.nvFuserAlongAxis(op, want) {
		ins.addFailed(op)
		return
	}
	kept := slices.DeleteFunc(slices.Clone(want), func(s Split) bool { return s.Axis == op.Axis })
	y := op.Out
	if len(kept) < len(want) {
		mid, ok := ins.newTensor(op, op.In().Name+"/"+string(op.Kind), y.Mesh, y.DType, y.Shape(), kept)
		if !ok {
			ins.addFailed(op)
			return
		}
		op.Out = mid
	}
	if !ins.reshardOperands(op, kept) {
		return
	}
	ins.add(op)
	if op.Out != y {
		ins.add(&ir.Op{Kind: ir.OpSet, Inputs: []*ir.Tensor{op.Out}, Out: y, Axis: -1, Pos: op.Pos, Inserted: &ir.Insertion{For: op, Output: true}})
	}
}

// nvFuserAlongAxis reports (after saying why not) whether nvFuser lowers
// a slice or a cat whose output is split as want. nvFuser's slice and
// pad (each operand of its cat is padded to the output's extent along the
// axis, csrc/ops/alias.cpp) make the axis of their output a Resize of
// their input's. Its resharding check computes a device's index along the
// output's axis from that Resize and has no rule for one
// (csrc/multidevice/resharding.cpp, computeLoopIndex: "Unexpected
// transform"), so a slice whose output is split along the sliced axis is
// rejected; its sharding propagation cannot carry a split through one
// (csrc/multidevice/propagation.cpp, transformLoopDomain), so a cat of an
// operand split along the joined axis (the pads' outputs are always
// propagated), and a slice of one into an output left to propagation,
// are rejected. What it lowers — a slice of an operand split along the
// axis into an output the fusion shards, whole along it — gets a set
// before the op, as nvFuser's InsertReshardings gives an op of several
// inputs (the slice's bounds are inputs of its SliceOp:
// csrc/preseg_passes/decompose_reshardings.cpp), which alongAxis inserts.
func (ins *inserter) nvFuserAlongAxis(op *ir.Op, want []Split) bool {
	onAxis := func(s Split) bool { return s.Axis == op.Axis }
	if k := slices.IndexFunc(want, onAxis); k >= 0 && op.Kind == "slice" {
		ins.errs.AddHint(op.Pos, "split the output along another axis, or slice into an output whole along the axis and split it with a set after",
			"op %q cannot be lowered under nvFuser's rules: its output %q splits the sliced axis %d along %s, an axis nvFuser derives by a Resize (nvFuser: \"Unexpected transform: Resize\")",
			op.Expr(), op.Out.Name, op.Axis, want[k].Type)
		return false
	}
	if op.Kind == "slice" && !op.Out.Propagated {
		return true
	}
	for _, x := range op.Inputs {
		have, _ := BlockShards(x)
		if k := slices.IndexFunc(have, onAxis); k >= 0 {
			ins.errs.AddHint(op.Pos, fmt.Sprintf("reshard the operand with a set before the %s, or %s along an axis that is not split, as nvFuser's tests do", op.Kind, op.Kind),
				"op %q cannot be lowered under nvFuser's rules: operand %q splits axis %d along %s, and nvFuser's sharding propagation cannot carry the split through the %s's Resize of that axis (nvFuser: \"Expected the target ID ... to be in the loop domain\")",
				op.Expr(), x.Name, op.Axis, have[k].Type, op.Kind)
			return false
		}
	}
	return true
}
