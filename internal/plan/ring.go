package plan

import (
	"cmp"
	"slices"
	"strconv"

	"github.com/nvcomm/nvcomm/internal/ops"
)

// Ring attention (Liu et al., 2023; Megatron-LM's cp_comm_type p2p;
// torch's _templated_ring_attention): a context-parallel sdpa computed in
// c rounds on a ring of c devices, q, k and v split on the sequence. In
// round r the device at ring position i holds k's and v's block
// j = i − r (mod c); it computes its q block's scores against them, and
// merges them into its running statistics and output by online softmax,
// while one SendRecv ring per tensor passes the blocks to the next device
// for round r + 1. Under the causal mask a device skips a block all of
// whose keys come after its queries (it computes nothing for it, and
// still passes it on), as torch's ring does. The lowering (package lower) emits these steps for an
// sdpa it computes as a ring, and the simulator's tests run the same
// builder on virtual devices, so that the steps proven there are the
// steps planned.

// RingAttention is the geometry and the buffers of ring attention's
// steps. Every device's q block is row-major [BT, SB, D] (BT the batch and
// heads, SB its queries), its k and v blocks [BT/G, TB, D] and
// [BT/G, TB, DV], and its output block [BT, SB, DV].
//
// With grouped-query attention (sdpa's enable_gqa, G query heads to a
// key/value head) q's block [B·H, SB, D] is, row-major, [B·Hkv, G·SB, D]:
// a group's G heads are consecutive, so each key/value head's block is
// read once by the G·SB rows of its group, unrepeated. The two products
// take those dims (qk = q·kᵀ of [B·Hkv, G·SB, D, TB], ob = e·v of
// [B·Hkv, G·SB, TB, DV]), whose outputs are [B·H, SB, ·] as they lie;
// every other step (the mask, the statistics, the merge) is per query
// row as without groups, and the k and v blocks that travel are the
// key/value heads' alone, 1/G of the repeated ones.
type RingAttention struct {
	// Devices is the ring, in order: Devices[i] holds the sequence's block
	// i of q, k, v and the output, and sends to Devices[i+1 mod c].
	Devices []int
	// BT, SB, TB, D, DV are the extents above.
	BT, SB, TB, D, DV int
	// G is the query heads that share a key/value head (sdpa's
	// enable_gqa: H/Hkv); 0 or 1 for attention of equal heads. BT is a
	// multiple of it.
	G int
	// Causal masks each round's scores with the diagonal of the block
	// they are: i·SB − j·TB on the device holding q's block i and k's
	// block j (torch's is_causal, top-left aligned); a block the mask
	// zeroes whole is skipped, one it leaves whole is not masked.
	Causal bool
	// Scale multiplies the scores (sdpa's 1/√d).
	Scale float64
	// Q, K, V and Out are the buffers of the operands and of the output.
	Q, K, V, Out string
	// Buffer names an intermediate buffer ("qk/1": what, then the round).
	Buffer func(what string) string
	// SendFirst puts each round's SendRecvs before its compute rather
	// than after it: the other order the step graph allows.
	SendFirst bool
}

// group is G, at least 1.
func (g RingAttention) group() int { return max(g.G, 1) }

// KVBT is the batch and key/value heads of a k or v block, BT/G.
func (g RingAttention) KVBT() int { return g.BT / g.group() }

// products returns the dims of the two products of a block of n keys,
// q·kᵀ [Bt, M, D, n] and e·v [Bt, M, n, DV], each key/value head's rows
// those of its group's G query heads (Bt = BT/G, M = G·SB).
func (g RingAttention) products(n int) (qk, ev []int) {
	bt, m := g.KVBT(), g.group()*g.SB
	return []int{bt, m, g.D, n}, []int{bt, m, n, g.DV}
}

// RingBuffers names the intermediate buffers of the ring attention whose
// output is out, as the lowering names them: "out/ring/what".
func RingBuffers(out string) func(what string) string {
	return func(what string) string { return out + "/ring/" + what }
}

// Steps returns ring attention's steps, each with its kind, type,
// devices or teams, count and fields; the caller gives them their ids,
// op, expr and a collective's bytes. Per round r, on every device that
// computes the block it holds (blocks):
//
//	qk  = q · k_rᵀ                    Matmul (transpose_b)
//	s   = qk · scale                  Pointwise
//	sm  = tril(s, block's diagonal)   Tril (a round whose block the diagonal cuts)
//	mb  = max_t sm                    LocalReduce
//	m   = maximum(m_p, mb)            Pointwise (a copy in a device's first round)
//	e   = exp(sm − m)                 Pointwise ×2
//	ek  = tril(e, block's diagonal)   Tril (as sm)
//	lb  = Σ_t ek; ob = ek · v_r       LocalReduce, Matmul
//	a   = exp(m_p − m)                the rescaling (rounds after a device's first)
//	l   = l_p·a + lb; o = o_p·a + ob
//
// (the products of G·SB rows per key/value head under grouped-query
// attention), where p is the device's previous round that computed, and Out = o / l
// on each device after its last; then, in rounds before the last, k_{r+1}
// and v_{r+1} from the previous device, on every device whether it
// computed or not (the next ones need the block). The causal mask's
// zeros take part in the row max, so the shift m is at least 0 in a
// masked row: softmax is the same for any shift (exp is a homomorphism
// in the simulator, and in real numbers), and the masked exponentials
// are zeroed after. A merge reads the state of a device's previous round
// by its name, so a round's merge is one group of steps for each
// previous round among its devices (mergeGroups).
func (g RingAttention) Steps() []Step {
	c := len(g.Devices)
	ring := make([][]int, c)
	for i := range ring {
		ring[i] = []int{g.Devices[i], g.Devices[(i+1)%c]}
	}
	final := make([]int, c) // each position's last round that computes
	for i := range c {
		for r := range c {
			if g.blockMask(i, r) != blockSkipped {
				final[i] = r
			}
		}
	}
	prev := make([]int, c) // each position's last round that computed so far, −1 for none
	for i := range prev {
		prev[i] = -1
	}
	var steps []Step
	for r := range c {
		k, v := g.Buffer("k/"+strconv.Itoa(r)), g.Buffer("v/"+strconv.Itoa(r))
		if r == 0 {
			k, v = g.K, g.V
		}
		var send []Step
		if r < c-1 {
			next := func(x string) string { return g.Buffer(x + "/" + strconv.Itoa(r+1)) }
			send = []Step{sendRecv(ring, k, next("k"), g.KVBT()*g.TB*g.D), sendRecv(ring, v, next("v"), g.KVBT()*g.TB*g.DV)}
		}
		if g.SendFirst {
			steps = append(steps, send...)
		}
		steps = append(steps, g.round(r, k, v, prev, final)...)
		if !g.SendFirst {
			steps = append(steps, send...)
		}
	}
	return steps
}

// blockMask is how a causal mask covers a block of the scores.
type blockMask int

const (
	// blockSeen: every key of the block is at or before every query: no
	// mask (every block when not causal).
	blockSeen blockMask = iota
	// blockCut: the diagonal crosses the block: a Tril masks it.
	blockCut
	// blockSkipped: every key is after every query: the mask zeroes the
	// whole block, whose scores are not computed (torch's
	// _is_causal_behavior: SKIP).
	blockSkipped
)

// blockMask is how the causal mask covers the block that ring position i
// holds in round r, k's and v's block j = i − r (mod c): its queries are
// i·SB to (i+1)·SB − 1, its keys j·TB to (j+1)·TB − 1 (top-left aligned,
// as torch's is_causal).
func (g RingAttention) blockMask(i, r int) blockMask {
	if !g.Causal {
		return blockSeen
	}
	j := g.blockOf(i, r)
	switch {
	case j*g.TB > (i+1)*g.SB-1:
		return blockSkipped
	case (j+1)*g.TB-1 <= i*g.SB:
		return blockSeen
	}
	return blockCut
}

// blockOf is the block of k and v that ring position i holds in round r.
func (g RingAttention) blockOf(i, r int) int {
	c := len(g.Devices)
	return ((i-r)%c + c) % c
}

// round returns round r's local steps: the attention of every position
// that computes its block against k and v (the round's buffers), its
// merge into the running state of the position's previous round (prev,
// which it advances), and Out on the positions whose final round is r.
func (g RingAttention) round(r int, k, v string, prev, final []int) []Step {
	var on []int // the positions that compute
	masks := false
	for i := range g.Devices {
		switch g.blockMask(i, r) {
		case blockSkipped:
			continue
		case blockCut:
			masks = true
		}
		on = append(on, i)
	}
	if len(on) == 0 {
		return nil
	}
	name := func(x string) string { return g.Buffer(x + "/" + strconv.Itoa(r)) }
	rows, scores := g.BT*g.SB, g.BT*g.SB*g.TB
	sdims, rdims := []int{g.BT, g.SB, g.TB}, []int{g.BT, g.SB}
	b := g.builder(on)
	qkDims, evDims := g.products(g.TB)
	qk := b.local(Matmul, name("qk"), [2]int{rows * g.D, scores}, qkDims, g.Q, k)
	qk.TransposeB = true
	scaled := b.pointwise("mul", name("s"), sdims, [][]int{sdims}, name("qk"))
	scaled.Scalar = &ops.Scalar{Slot: 1, Value: g.Scale}
	steps := []Step{qk, scaled}
	s := name("s")
	if masks {
		steps = append(steps, b.tril(name("sm"), s, on, r, sdims))
		s = name("sm")
	}
	steps = append(steps, b.reduce("max", name("mb"), s, sdims))
	groups := mergeGroups(on, prev)
	for _, grp := range groups {
		gb := g.builder(grp.on)
		if grp.prev < 0 {
			steps = append(steps, gb.pointwise("copy", name("m"), rdims, [][]int{rdims}, name("mb")))
			continue
		}
		m := g.Buffer("m/" + strconv.Itoa(grp.prev))
		steps = append(steps, gb.pointwise("maximum", name("m"), rdims, [][]int{rdims, rdims}, m, name("mb")))
	}
	steps = append(steps,
		b.pointwise("sub", name("x"), sdims, [][]int{sdims, {g.BT, g.SB, 1}}, s, name("m")),
		b.pointwise("exp", name("e"), sdims, [][]int{sdims}, name("x")))
	e := name("e")
	if masks {
		steps = append(steps, b.tril(name("ek"), e, on, r, sdims))
		e = name("ek")
	}
	steps = append(steps, b.reduce("sum", name("lb"), e, sdims),
		b.local(Matmul, name("ob"), [2]int{scores, rows * g.DV}, evDims, e, v))
	for _, grp := range groups {
		steps = append(steps, g.merge(r, grp)...)
	}
	var done []int
	for _, i := range on {
		prev[i] = r
		if final[i] == r {
			done = append(done, i)
		}
	}
	if len(done) > 0 {
		odims := []int{g.BT, g.SB, g.DV}
		steps = append(steps, g.builder(done).pointwise("div", g.Out, odims, [][]int{odims, {g.BT, g.SB, 1}}, name("o"), name("l")))
	}
	return steps
}

// mergeGroup is the positions of a round whose previous round that
// computed is prev (−1: none, the round is their first).
type mergeGroup struct {
	prev int
	on   []int
}

// mergeGroups splits the positions on by their previous round, in the
// order of those rounds (none first), each group's positions in ring
// order. Without the causal mask, or with blocks of equal length, a
// round has one group: every device that computes in round r computed
// in round r − 1.
func mergeGroups(on, prev []int) []mergeGroup {
	var groups []mergeGroup
	for _, i := range on {
		k := slices.IndexFunc(groups, func(m mergeGroup) bool { return m.prev == prev[i] })
		if k < 0 {
			groups = append(groups, mergeGroup{prev: prev[i]})
			k = len(groups) - 1
		}
		groups[k].on = append(groups[k].on, i)
	}
	slices.SortStableFunc(groups, func(a, b mergeGroup) int { return cmp.Compare(a.prev, b.prev) })
	return groups
}

// merge is round r's online-softmax merge on group grp: l and o copied
// from the round's block in a device's first round, else the previous
// round's state rescaled by a = exp(m_p − m) and the block's added.
func (g RingAttention) merge(r int, grp mergeGroup) []Step {
	name := func(x string) string { return g.Buffer(x + "/" + strconv.Itoa(r)) }
	rdims, odims, cdims := []int{g.BT, g.SB}, []int{g.BT, g.SB, g.DV}, []int{g.BT, g.SB, 1}
	b := g.builder(grp.on)
	if grp.prev < 0 {
		return []Step{b.pointwise("copy", name("l"), rdims, [][]int{rdims}, name("lb")),
			b.pointwise("copy", name("o"), odims, [][]int{odims}, name("ob"))}
	}
	prev := func(x string) string { return g.Buffer(x + "/" + strconv.Itoa(grp.prev)) }
	return []Step{
		b.pointwise("sub", name("dm"), rdims, [][]int{rdims, rdims}, prev("m"), name("m")),
		b.pointwise("exp", name("a"), rdims, [][]int{rdims}, name("dm")),
		b.pointwise("mul", name("la"), rdims, [][]int{rdims, rdims}, prev("l"), name("a")),
		b.pointwise("add", name("l"), rdims, [][]int{rdims, rdims}, name("la"), name("lb")),
		b.pointwise("mul", name("oa"), odims, [][]int{odims, cdims}, prev("o"), name("a")),
		b.pointwise("add", name("o"), odims, [][]int{odims, odims}, name("oa"), name("ob"))}
}

// sendRecv is one ring shift of n elements per device: every pair of
// ring passes in to its next device's out.
func sendRecv(ring [][]int, in, out string, n int) Step {
	return Step{Kind: KindCollective, Type: SendRecv, Teams: ring, Input: in, Output: out, Count: Count{Input: n, Output: n}}
}

// builder writes local steps on the devices at ring positions on.
func (g RingAttention) builder(on []int) ringBuilder {
	devices := make([]int, len(on))
	for k, i := range on {
		devices[k] = g.Devices[i]
	}
	return ringBuilder{g: g, devices: devices}
}

// ringBuilder writes the local steps of a ring attention on some of its
// devices.
type ringBuilder struct {
	g       RingAttention
	devices []int
}

// local is a local step of type typ reading in, writing out, of counts n
// and dims.
func (b ringBuilder) local(typ, out string, n [2]int, dims []int, in ...string) Step {
	s := Step{Kind: KindLocal, Type: typ, Devices: b.devices, Output: out, Count: Count{Input: n[0], Output: n[1]}, Dims: dims}
	if len(in) == 1 {
		s.Input = in[0]
	} else {
		s.Inputs = in
	}
	return s
}

// pointwise is a Pointwise of f with the inputs viewed as inDims.
func (b ringBuilder) pointwise(f, out string, dims []int, inDims [][]int, in ...string) Step {
	s := b.local(Pointwise, out, [2]int{ops.Product(inDims[0]), ops.Product(dims)}, dims, in...)
	s.Func, s.InputDims = &f, inDims
	return s
}

// reduce is a row reduction (op over the keys) of the scores' dims.
func (b ringBuilder) reduce(op, out, in string, sdims []int) Step {
	s := b.local(LocalReduce, out, [2]int{ops.Product(sdims), sdims[0] * sdims[1]}, sdims, in)
	s.ReduceDims, s.ReduceOp = []int{2}, &op
	return s
}

// tril masks round r's scores on positions on, each with its block's
// diagonal.
func (b ringBuilder) tril(out, in string, on []int, r int, sdims []int) Step {
	offsets := make([]int, len(on))
	for k, i := range on {
		offsets[k] = i*b.g.SB - b.g.blockOf(i, r)*b.g.TB
	}
	return b.trilAt(out, in, sdims, offsets)
}

// trilAt masks scores of dims sdims with the diagonals offsets, one per
// device of b.
func (b ringBuilder) trilAt(out, in string, sdims, offsets []int) Step {
	s := b.local(Tril, out, [2]int{ops.Product(sdims), ops.Product(sdims)}, sdims, in)
	s.Offsets = offsets
	return s
}

// The all-gather form of context-parallel attention (Llama 3's context
// parallelism; torch's _RotateMethod.ALL_GATHER): the same geometry, k
// and v gathered whole along the sequence by one Allgather each, then
// every device attends its own queries to every key, locally, in one
// pass (softmax needs no merge: the device holds every key of its rows).
// Under the causal mask each device masks its block of the scores with
// its own diagonal, i·SB (its first query; the keys start at 0), and no
// device skips anything: key 0 is seen by every query. A kernel computes
// only the tiles on or below the diagonal, so device i's arithmetic is
// its share of them, (2i + 1)/2c of its block (package cost prices the
// busiest, the last).

// GatherBuffers names the intermediate buffers of the all-gather form of
// the sdpa whose output is out, as the lowering names them:
// "out/gather/what".
func GatherBuffers(out string) func(what string) string {
	return func(what string) string { return out + "/gather/" + what }
}

// GatherSteps returns the all-gather form's steps, each with its kind,
// type, devices or team, count and fields; the caller gives them their
// ids, op, expr and a collective's bytes and axis:
//
//	kg, vg = Allgather(k), Allgather(v)  [c, BT/G, TB, ·], device blocks in turn
//	k', v' = Permute(kg), Permute(vg)    [BT/G, c·TB, ·], the sequence whole
//	                                     (none when BT/G is 1: kg is k')
//	qk = q · k'ᵀ                         Matmul (transpose_b)
//	s  = qk · scale                      Pointwise
//	sm = tril(s, i·SB)                   Tril (causal)
//	m  = max_t sm                        LocalReduce
//	e  = exp(sm − m)                     Pointwise ×2
//	ek = tril(e, i·SB)                   Tril (causal)
//	l  = Σ_t ek; o = ek · v'             LocalReduce, Matmul
//	Out = o / l                          Pointwise
//
// As in the ring, the mask's zeros take part in the row max (the shift is
// at least 0 in a masked row), which changes no softmax.
func (g RingAttention) GatherSteps() []Step {
	c := len(g.Devices)
	all := make([]int, c)
	for i := range all {
		all[i] = i
	}
	b := g.builder(all)
	team := [][]int{slices.Clone(g.Devices)}
	t := c * g.TB
	gather := func(in, what string, width int) (Step, []Step) {
		n := g.KVBT() * g.TB * width
		whole := g.Buffer(what)
		if g.KVBT() == 1 { // [c, 1, TB, ·] is [1, c·TB, ·]
			return Step{Kind: KindCollective, Type: Allgather, Teams: team, Input: in, Output: whole, Count: Count{Input: n, Output: c * n}}, nil
		}
		blocks := g.Buffer(what + "g")
		perm := b.local(Permute, whole, [2]int{c * n, c * n}, []int{c, g.KVBT(), g.TB * width}, blocks)
		perm.Perm = []int{1, 0, 2}
		return Step{Kind: KindCollective, Type: Allgather, Teams: team, Input: in, Output: blocks, Count: Count{Input: n, Output: c * n}}, []Step{perm}
	}
	agK, permK := gather(g.K, "k", g.D)
	agV, permV := gather(g.V, "v", g.DV)
	steps := append(append([]Step{agK, agV}, permK...), permV...)
	k, v := g.Buffer("k"), g.Buffer("v")
	rows, scores := g.BT*g.SB, g.BT*g.SB*t
	sdims, odims, cdims := []int{g.BT, g.SB, t}, []int{g.BT, g.SB, g.DV}, []int{g.BT, g.SB, 1}
	var diagonals []int
	for i := range c {
		diagonals = append(diagonals, i*g.SB)
	}
	qkDims, evDims := g.products(t)
	qk := b.local(Matmul, g.Buffer("qk"), [2]int{rows * g.D, scores}, qkDims, g.Q, k)
	qk.TransposeB = true
	scaled := b.pointwise("mul", g.Buffer("s"), sdims, [][]int{sdims}, g.Buffer("qk"))
	scaled.Scalar = &ops.Scalar{Slot: 1, Value: g.Scale}
	steps = append(steps, qk, scaled)
	s := g.Buffer("s")
	if g.Causal {
		steps = append(steps, b.trilAt(g.Buffer("sm"), s, sdims, diagonals))
		s = g.Buffer("sm")
	}
	steps = append(steps, b.reduce("max", g.Buffer("m"), s, sdims),
		b.pointwise("sub", g.Buffer("x"), sdims, [][]int{sdims, cdims}, s, g.Buffer("m")),
		b.pointwise("exp", g.Buffer("e"), sdims, [][]int{sdims}, g.Buffer("x")))
	e := g.Buffer("e")
	if g.Causal {
		steps = append(steps, b.trilAt(g.Buffer("ek"), e, sdims, slices.Clone(diagonals)))
		e = g.Buffer("ek")
	}
	return append(steps, b.reduce("sum", g.Buffer("l"), e, sdims),
		b.local(Matmul, g.Buffer("o"), [2]int{scores, rows * g.DV}, evDims, e, v),
		b.pointwise("div", g.Out, odims, [][]int{odims, cdims}, g.Buffer("o"), g.Buffer("l")))
}
