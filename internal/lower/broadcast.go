package lower

import (
	"slices"

	"github.com/nvcomm/nvcomm/internal/ir"
	"github.com/nvcomm/nvcomm/internal/ops"
)

// This file finds the broadcast axes of a fusion's tensors: the axes along
// which every value is the same, because broadcast added them (or an
// operand of extent 1 was repeated along them). Such an axis never needs
// communication: nvFuser's pairwise maps between an op's operands and its
// output skip broadcast axes (PairwiseLogicalDomainMap with
// mapBroadcast(false) in haveDifferentShardings, csrc/multidevice/
// resharding.cpp), so a split of the output along one asks nothing of the
// operand. An operand that holds a broadcast axis whole, under an output
// split along it, is read as it is: each device keeps its block of the axis
// locally (a Slice), which holds the values the output's block needs.

// bcastAxes records, for each tensor that has any, which of its value axes
// (non-reduction positions) are broadcast axes. Tensors without are absent.
type bcastAxes map[*ir.Tensor][]bool

// of reports whether value axis a of x is a broadcast axis.
func (b bcastAxes) of(x *ir.Tensor, a int) bool {
	axes := b[x]
	return a >= 0 && a < len(axes) && axes[a]
}

// record finds the broadcast axes of op's output from its operands': the
// new axes of a broadcast, and every output axis that each operand either
// lacks (an extent-1 axis repeated, a contraction's other factor) or has
// as a broadcast axis, when at least one has it — but for the axes along
// which the op's output varies with position (tril's mask). A set, a
// reduction's kept axes and elementwise ops so keep their operands'
// broadcast axes.
func (b bcastAxes) record(op *ir.Op) {
	if op.Kind != ir.OpBroadcast && !slices.ContainsFunc(op.Inputs, func(x *ir.Tensor) bool { return b[x] != nil }) {
		return // the common case: nothing upstream was broadcast
	}
	if op.Out.Partial != "" || slices.ContainsFunc(op.Inputs, func(x *ir.Tensor) bool { return x.Partial != "" }) {
		// Pending terms add a leading terms axis that the op's axis map
		// does not count: recording none is safe (a broadcast axis only
		// spares communication) where a shifted one is wrong.
		return
	}
	rank := len(op.Out.Shape())
	var positional []int
	if f := op.Kind.Entry().Positional; f != nil {
		positional = f(rank)
	}
	var axes []bool
	for j := range rank {
		if !slices.Contains(positional, j) && b.outputAxis(op, j) {
			if axes == nil {
				axes = make([]bool, rank)
			}
			axes[j] = true
		}
	}
	if axes != nil {
		b[op.Out] = axes
	}
}

// outputAxis reports whether output axis j of op is a broadcast axis.
func (b bcastAxes) outputAxis(op *ir.Op, j int) bool {
	if op.Kind == ir.OpBroadcast && slices.Contains(op.Axes, j) {
		return true
	}
	mapped := false
	for i, x := range op.Inputs {
		a := op.InputAxis(i, j)
		if a < 0 {
			continue // the operand does not vary along j
		}
		if !b.of(x, a) {
			return false
		}
		mapped = true
	}
	return mapped
}

// operandAxis reports whether value axis a of operand i of op is a
// broadcast axis for op: one of the operand's, but for a lookup's table
// along its rows, whose split says which rows a device looks up — their
// offsets — whatever their values.
func (b bcastAxes) operandAxis(op *ir.Op, i, a int) bool {
	if x := op.Kind.Entry().Indexed; x != nil && i == x.Table && a == op.ContractedAxis(i) {
		return false
	}
	return b.of(op.Inputs[i], a)
}

// fit is how an operand that needs no resharding set is read.
type fit struct {
	// missing are splits of the operand's broadcast axes that the output
	// asks for and the operand, whole along their device types, lacks:
	// the op slices them locally.
	missing []Split
	// repeated is set when the operand holds a broadcast axis with a local
	// extent of 1 that the output's block spans otherwise: the op repeats
	// that one slice, as a Pointwise broadcasts its inputs (a contraction
	// first copies its factor into the block it multiplies).
	repeated bool
}

// fits reports whether operand i of op can be read as it is: on the
// output's mesh, with the splits need lists on every axis but its
// broadcast axes. On a broadcast axis the operand may hold the axis whole
// where need splits it (fit.missing), and an axis of local extent 1 fits
// however either side splits it (fit.repeated): its one slice holds every
// value the output's block reads. Any other difference, or another mesh,
// means a resharding set.
func (b bcastAxes) fits(op *ir.Op, i int, need []Split) (fit, bool) {
	x := op.Inputs[i]
	if !x.Mesh.Equal(op.Out.Mesh) {
		return fit{}, false
	}
	have, ok := BlockShards(x)
	if !ok {
		return fit{}, false
	}
	var local []int
	if b[x] != nil {
		local = x.LocalShape()
	}
	one := func(a int) bool { return local != nil && b.operandAxis(op, i, a) && local[a] == 1 && !copiesBlocks(op) }
	for _, s := range have {
		if !slices.Contains(need, s) && !one(s.Axis) {
			return fit{}, false
		}
	}
	var f fit
	for _, s := range need {
		switch {
		case slices.Contains(have, s), one(s.Axis):
		case b.operandAxis(op, i, s.Axis) && !slices.ContainsFunc(have, func(h Split) bool { return h.Type == s.Type }):
			f.missing = append(f.missing, s)
		default:
			return fit{}, false
		}
	}
	for a := range local {
		f.repeated = f.repeated || one(a) && blockExtent(x.Shape()[a], x.Mesh, need, a) > 1
	}
	return f, true
}

// blockExtent is the extent of a block of an axis a of extent n that the
// splits need cut along their device types of mesh.
func blockExtent(n int, mesh *ir.Mesh, need []Split, a int) int {
	for _, s := range need {
		if s.Axis == a {
			n /= mesh.Size(s.Type)
		}
	}
	return n
}

// setTarget is the splits nvFuser's resharding set gives operand x when x
// does not fit need: need's, but for splits of x's broadcast axes that x
// does not have already, which the op then slices locally. nvFuser shards
// the set's output from the op's output through the same pairwise maps,
// which skip broadcast axes; so the set changes one device type where
// need's splits would change two. (The optimal policy's set takes all of
// need: its search finds the best way there, a Slice among them.)
func (b bcastAxes) setTarget(op *ir.Op, i int, need []Split) []Split {
	x := op.Inputs[i]
	if b[x] == nil {
		return need
	}
	have, _ := BlockShards(x)
	var target []Split
	for _, s := range need {
		if !b.operandAxis(op, i, s.Axis) || slices.Contains(have, s) {
			target = append(target, s)
		}
	}
	return target
}

// copiesBlocks reports whether op copies its operands' blocks as they are
// into its output's (slice, cat: a Concat): an operand's broadcast axis
// of local extent 1 cannot then stand for the output's longer block, as a
// Pointwise repeats it.
func copiesBlocks(op *ir.Op) bool {
	return op.Kind.TakesAxis() && op.Kind.Entry().Family == ops.View
}
