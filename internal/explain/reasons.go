package explain

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/nvcomm/nvcomm/internal/ops"
	"github.com/nvcomm/nvcomm/internal/plan"
)

// why is the reason of step k of an op's steps, and, for a step that runs
// in the kernel an earlier step launches (a run of elementwise steps fused
// into one), which step that is: its time is its bytes alone.
func (e *explainer) why(op plan.Op, steps []*plan.Step, k int) string {
	r := e.reason(op, steps, k)
	if t, ok := e.times[steps[k].ID]; ok && t.FusedInto != nil {
		r += fmt.Sprintf(" (fused into step %d's kernel)", *t.FusedInto)
	}
	return r
}

// reason says why step k of an op's steps is there, from its type, its
// neighbours and the op's tensors.
func (e *explainer) reason(op plan.Op, steps []*plan.Step, k int) string {
	s := steps[k]
	switch s.Type {
	case plan.Permute:
		return e.permuteReason(op, steps, k)
	case plan.Matmul:
		return e.matmulReason(steps, k)
	case plan.Pointwise:
		return pointwiseReason(s)
	case plan.Lookup:
		return lookupReason(steps, k)
	case plan.ScatterAdd:
		return scatterReason(steps, k)
	case plan.LocalReduce:
		return fmt.Sprintf("each device first reduces, with %s, the part of the reduced dim it holds", reduceName(s))
	case plan.Pad:
		return "uneven split: each device pads its block to the largest, so the collectives run on equal buffers"
	case plan.Unpad:
		if s.HeadBoxes() {
			return "keeps each device's real elements of the padded buffer, its head: a view, no copy"
		}
		return "keeps each device's real elements of the padded buffer"
	case plan.Copy:
		return "each device copies its block; nothing moves"
	case plan.Concat:
		return concatReason(s)
	case plan.Tril:
		return trilReason(s)
	case plan.Slice:
		if s.ShortSlice() {
			return fmt.Sprintf("replicated -> unevenly split along %s: each device keeps its block, the last ones cut short and padded with zeros; nothing moves", e.along(s))
		}
		return fmt.Sprintf("replicated -> split along %s: each device keeps its block; nothing moves", e.along(s))
	}
	return e.collectiveReason(op, s)
}

// collectiveReason explains a collective step.
func (e *explainer) collectiveReason(op plan.Op, s *plan.Step) string {
	along, axis := e.along(s), axisText(s)
	switch s.Type {
	case plan.Allgather:
		return fmt.Sprintf("%s is split along %s and wanted whole: each device receives the %s of its team", axis, along, others(teamSize(s)-1))
	case plan.AllToAll:
		return fmt.Sprintf("the split along %s moves from %s to another dim: each device sends every other member one block", along, axis)
	case plan.AllToAllV:
		if sendsNothing(s) {
			return "the data moves to the output's devices: an all-to-all with split sizes over them and the devices that hold it, each of which sends each output device only what it keeps" + exchangePeers(s)
		}
		return fmt.Sprintf("the split along %s changes: an all-to-all with split sizes, each device sending each part only to the member that keeps it%s", along, exchangePeers(s))
	case plan.Allreduce, plan.ReduceScatter, plan.Reduce:
		return e.reductionReason(op, s, along)
	case plan.Broadcast:
		return fmt.Sprintf("device %s sends the whole buffer to every member of its team (the output's mesh)", rootText(s))
	case plan.Scatter:
		return fmt.Sprintf("device %s sends each member of its team its block along %s", rootText(s), along)
	case plan.Gather:
		return fmt.Sprintf("device %s collects the blocks of its team (the output's mesh wants them whole)", rootText(s))
	case plan.SendRecv:
		if e.computesWhole(s.Op) {
			return fmt.Sprintf("ring attention: %d pairs at once, each device passing the block it holds to the next device of the ring, for the next round; in a step graph it runs beside this round's attention", len(s.Teams))
		}
		if len(s.Teams) > 1 {
			return fmt.Sprintf("%d point-to-point pairs at once: each sender sends its block to the one device that holds it in the output (another mesh, or devices relabelled), as pipeline stages hand over activations", len(s.Teams))
		}
		return "each device sends its block to the device that holds it in the output (another mesh, or devices relabelled)"
	}
	return ""
}

// sendsNothing reports whether some member of an AllToAllV sends nothing
// (a row of zeros in send_counts): the step spans the devices that hold
// the data and others, that only receive.
func sendsNothing(s *plan.Step) bool {
	if s.Count.Input == 0 {
		return false
	}
	for _, row := range s.SendCounts {
		if !slices.ContainsFunc(row, func(n int) bool { return n != 0 }) {
			return true
		}
	}
	return false
}

// exchangePeers says, from an AllToAllV's split sizes, to how many other
// members of its team a device sends at most (its own part stays): ", to
// at most 1 of the 7 others". It says nothing of split sizes that are not
// a matrix of the team's size.
func exchangePeers(s *plan.Step) string {
	t := teamSize(s)
	if len(s.SendCounts) != t || t < 2 {
		return ""
	}
	most := 0
	for k, row := range s.SendCounts {
		if len(row) != t {
			return ""
		}
		peers := 0
		for r, n := range row {
			if r != k && n > 0 {
				peers++
			}
		}
		most = max(most, peers)
	}
	switch {
	case most == 0:
		return "; here every part stays where it is"
	case most == t-1 && t == 2:
		return ", to the other member"
	case most == t-1:
		return fmt.Sprintf(", to each of the %d others", t-1)
	}
	return fmt.Sprintf(", to at most %d of the %d others", most, t-1)
}

// reductionReason explains an Allreduce, a ReduceScatter or a Reduce: the
// partial products of a contraction, the partial results of a reduction,
// or the terms of a Partial input.
func (e *explainer) reductionReason(op plan.Op, s *plan.Step, along string) string {
	var what string
	switch {
	case op.Op == "matmul" || op.Op == "linear":
		what = fmt.Sprintf("k is split along %s: the partial products are summed", along)
	case isLookup(op.Op):
		what = fmt.Sprintf("the table's rows (the vocabulary) are split along %s: the partial rows are summed", along)
	case op.Op == "scatter_add":
		what = fmt.Sprintf("the indices are split along %s: the partial tables are summed", along)
	case op.Input != "" && e.sh[op.Input] != nil && e.sh[op.Input].Partial != nil:
		what = fmt.Sprintf("%s's dim 0 holds one term per device along %s: the terms are reduced with %s", op.Input, along, reduceName(s))
	default:
		what = fmt.Sprintf("the reduced %s is split along %s: the partial results are reduced with %s", axisText(s), along, reduceName(s))
	}
	switch s.Type {
	case plan.ReduceScatter:
		return what + ", and each device keeps its block of the result"
	case plan.Reduce:
		return what + " onto device " + rootText(s)
	}
	return what + " on every device"
}

// permuteReason explains a Permute: one before a collective puts the dims
// in the order the collective needs, one after it puts the received
// blocks, which a collective lays outermost, where the output's layout
// wants them; one of a layer op puts an operand in the order Matmul reads.
func (e *explainer) permuteReason(op plan.Op, steps []*plan.Step, k int) string {
	s := steps[k]
	if n, ok := operandIndex(s.Output); ok {
		return fmt.Sprintf("Matmul reads operand %d (%s) as [K, N]: its buffer %s is permuted by %s", n, operandName(op, n, s.Input), intList(s.Dims), intList(s.Perm))
	}
	for j := k - 1; j >= 0; j-- {
		if c := steps[j]; c.Output == s.Input && c.Kind == plan.KindCollective {
			return fmt.Sprintf("the %s lays the received blocks outermost, but %s is not outermost in %s's layout -> Permute", c.Type, axisText(c), op.Output)
		}
	}
	for _, c := range steps[k+1:] {
		if slices.Contains(c.Operands(), s.Output) && c.Kind == plan.KindCollective {
			return fmt.Sprintf("the %s needs the blocks it exchanges outermost in its buffer, and %s is not -> Permute first", c.Type, axisText(c))
		}
	}
	return "puts the buffer in " + op.Output + "'s layout"
}

// matmulReason explains a Matmul, and whether it leaves partial products.
func (e *explainer) matmulReason(steps []*plan.Step, k int) string {
	s := steps[k]
	why := "each device multiplies its blocks locally"
	if len(s.Dims) == 4 {
		why += fmt.Sprintf(", [Bt, M, K, N] = %s", intList(s.Dims))
	}
	if sumsPartials(steps, k) {
		return why + ": partial products over its slice of k"
	}
	return why
}

// lookupReason explains a Lookup, and whether it leaves partial rows.
func lookupReason(steps []*plan.Step, k int) string {
	s := steps[k]
	why := "each device copies the table's rows at the indices it holds"
	if len(s.Dims) == 4 {
		why += fmt.Sprintf(", [Bt, N, V, E] = %s", intList(s.Dims))
	}
	if sumsPartials(steps, k) {
		return why + ", zero rows for the others: partial rows over its slice of the vocabulary"
	}
	return why
}

// scatterReason explains a ScatterAdd, and whether it leaves partial
// tables.
func scatterReason(steps []*plan.Step, k int) string {
	s := steps[k]
	why := "each device adds the values' rows at the indices within its block of rows, into zeros"
	if len(s.Dims) == 4 {
		why += fmt.Sprintf(", [Bt, N, V, E] = %s", intList(s.Dims))
	}
	if sumsPartials(steps, k) {
		return why + ": a partial table over its slice of the indices"
	}
	return why
}

// sumsPartials reports whether a later collective of the op combines the
// output of step k: its partial results.
func sumsPartials(steps []*plan.Step, k int) bool {
	s := steps[k]
	for _, c := range steps[k+1:] {
		if slices.Contains(c.Operands(), s.Output) && plan.IsReduction(c.Type) && c.Kind == plan.KindCollective {
			return true
		}
	}
	return false
}

// pointwiseReason explains a Pointwise step.
func pointwiseReason(s *plan.Step) string {
	f := ops.CopyFunc
	if s.Func != nil {
		f = *s.Func
	}
	if f == ops.CopyFunc {
		return "each device copies its block, broadcast to the output's shape"
	}
	if s.Scalar != nil {
		return fmt.Sprintf("each device applies %s to its blocks and %s locally", f, s.Scalar.Text())
	}
	return fmt.Sprintf("each device applies %s to its blocks locally", f)
}

// along names the device types along which a step's teams run: the mesh
// axes that vary within a team (the changed mesh axes).
func (e *explainer) along(s *plan.Step) string {
	teams := s.Teams
	if len(teams) == 0 {
		return "the mesh"
	}
	for _, name := range slices.Sorted(maps.Keys(e.p.Meshes)) {
		m := e.p.Meshes[name]
		if dims, ok := varyingDims(m, teams[0]); ok && len(dims) > 0 {
			parts := make([]string, len(dims))
			for i, d := range dims {
				parts[i] = fmt.Sprintf("%s (mesh %s axis %d)", typeOfDim(m, d), name, d)
			}
			return strings.Join(parts, " and ")
		}
	}
	return "the team " + fmt.Sprint(teams[0])
}

// varyingDims lists the mesh axes along which the devices of team differ,
// or reports that the mesh does not hold them all.
func varyingDims(m plan.Mesh, team []int) ([]int, bool) {
	var first []int
	vary := make([]bool, len(m.Shape))
	for _, id := range team {
		k := slices.Index(m.Devices, id)
		if k < 0 {
			return nil, false
		}
		c := coords(m, k)
		if first == nil {
			first = c
		}
		for d := range c {
			vary[d] = vary[d] || c[d] != first[d]
		}
	}
	var dims []int
	for d, v := range vary {
		if v {
			dims = append(dims, d)
		}
	}
	return dims, true
}

// axisText names a step's axis: "dim 0", or "the dim" without one.
func axisText(s *plan.Step) string {
	if s.Axis == nil {
		return "the dim"
	}
	return fmt.Sprintf("dim %d", *s.Axis)
}

// rootText is a step's root device id.
func rootText(s *plan.Step) string {
	if s.Root == nil {
		return "?"
	}
	return fmt.Sprint(*s.Root)
}

// others words the blocks of a team's n other members.
func others(n int) string {
	if n == 1 {
		return "other block"
	}
	return fmt.Sprintf("%d other blocks", n)
}

// teamSize is the size of a step's first team.
func teamSize(s *plan.Step) int {
	if len(s.Teams) == 0 {
		return 1
	}
	return len(s.Teams[0])
}

// reduceName is a step's reduce op: sum, prod, max or min.
func reduceName(s *plan.Step) string {
	if s.ReduceOp == nil {
		return "its op"
	}
	return *s.ReduceOp
}

// operandIndex reads the n of a buffer named "out/operandN".
func operandIndex(buf string) (int, bool) {
	_, after, ok := strings.Cut(buf, "/operand")
	var n int
	if !ok || after == "" {
		return 0, false
	}
	if _, err := fmt.Sscanf(after, "%d", &n); err != nil || fmt.Sprint(n) != after {
		return 0, false
	}
	return n, true
}

// operandName is the op's operand n, or the buffer when the op has fewer.
func operandName(op plan.Op, n int, buf string) string {
	if ins := op.Operands(); n < len(ins) {
		return ins[n]
	}
	return buf
}

// isLookup reports whether op reads rows of a table at indices (the
// registry's Indexed: embedding, gather).
func isLookup(op string) bool {
	e := ops.Lookup(op)
	return e != nil && e.Indexed != nil
}

// concatReason explains a Concat: a slice's window of its input, or a
// cat's join of its inputs, on each device's block.
func concatReason(s *plan.Step) string {
	if len(s.Windows) == 1 && len(s.Windows[0]) == 3 {
		w := s.Windows[0]
		return fmt.Sprintf("each device keeps entries %d to %d of the %d its block holds along the sliced dim; nothing moves", w[1], w[1]+w[2], w[0])
	}
	return fmt.Sprintf("each device joins its blocks of the %d inputs along the joined dim; nothing moves", len(s.Windows))
}

// trilReason explains a Tril: each device masks its block with the
// diagonal of where its block lies; nothing moves.
func trilReason(s *plan.Step) string {
	if len(s.Offsets) > 0 && !slices.ContainsFunc(s.Offsets, func(d int) bool { return d != s.Offsets[0] }) {
		return fmt.Sprintf("each device zeroes the entries of its block above diagonal %d; nothing moves", s.Offsets[0])
	}
	return fmt.Sprintf("each device zeroes the entries of its block above its own diagonal (%s: the diagonal shifted by the block's first row less its first column); nothing moves", intList(s.Offsets))
}
