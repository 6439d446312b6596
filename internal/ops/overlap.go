package ops

import "strconv"

// AttrOverlap is a linear's or a matmul's decomposed collective
// (docs/overlap.md, "Decomposed collectives"): where its operand (the
// first, or a linear's weight as FSDP gathers it) is gathered along its
// rows just before it (Allgather + matmul) or its partial sums are
// reduce-scattered along them (matmul + ReduceScatter), the optimal
// policy may compute it in chunks whose transfers overlap the other
// chunks' products. collective (k smaller collectives) and ring (a
// SendRecv ring shift per round) force that form, none the undecomposed
// one, and auto lets the makespan choose; any value but none makes the
// plan a step graph (format 2), as lower --step-graph does, since only a
// graph overlaps the chunks. nvFuser's policy ignores it.
const AttrOverlap Attr = "overlap"

// AttrChunks is the number of chunks k of a collective-based decomposed
// collective, which must divide every device's rows; left out, the
// makespan chooses it among every k from 2 to MaxChunks that divides them.
const AttrChunks Attr = "chunks"

// MaxChunks is the most chunks the makespan tries for a collective-based
// decomposed collective left to choose its k. Every chunk's collective
// pays a launch floor (27 to 38 µs on the bundled topology), so 16 chunks
// already pay about half a millisecond of floors, more than they hide at
// the sizes where decomposing wins at all (on 8 devices at hidden 8192,
// 16 chunks lose to 8 up to sequence 32768); PyTorch's async tensor
// parallelism uses as many chunks as the group's devices.
const MaxChunks = 16

// The values of AttrOverlap.
const (
	OverlapAuto       = "auto"
	OverlapCollective = "collective"
	OverlapRing       = "ring"
	OverlapNone       = "none"
)

// overlapAttrSpecs are the specs of the attributes of a decomposed
// collective.
var overlapAttrSpecs = []AttrSpec{
	{Key: AttrOverlap, Kind: NameAttr, Names: []string{OverlapAuto, OverlapCollective, OverlapRing, OverlapNone}, Optional: true, Planning: true,
		Doc: "a linear's or matmul's decomposed collective, policy optimal: collective (k chunks, k smaller Allgathers or ReduceScatters), ring (a SendRecv ring shift per round), none, or auto (the makespan chooses); any but none makes the plan a step graph"},
	{Key: AttrChunks, Kind: IntAttr, Optional: true, Planning: true, Check: checkChunks,
		Doc: "the chunks k of overlap: collective, dividing every device's rows; left out, the makespan chooses among every such k up to " + strconv.Itoa(MaxChunks)},
}

// checkChunks checks a decomposed collective's chunks: 2 or more.
func checkChunks(v Value) (string, string) {
	if v.Int < 2 {
		return strconv.Itoa(v.Int) + " chunks decompose nothing", "chunks is 2 or more, and divides every device's rows"
	}
	return "", ""
}
