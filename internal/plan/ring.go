package plan

import (
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
// for round r + 1. The lowering (package lower) emits these steps for an
// sdpa it computes as a ring, and the simulator's tests run the same
// builder on virtual devices, so that the steps proven there are the
// steps planned.

// RingAttention is the geometry and the buffers of ring attention's
// steps. Every device's q block is row-major [BT, SB, D] (BT the batch and
// heads, SB its queries), its k and v blocks [BT, TB, D] and [BT, TB, DV],
// and its output block [BT, SB, DV].
type RingAttention struct {
	// Devices is the ring, in order: Devices[i] holds the sequence's block
	// i of q, k, v and the output, and sends to Devices[i+1 mod c].
	Devices []int
	// BT, SB, TB, D, DV are the extents above.
	BT, SB, TB, D, DV int
	// Causal masks each round's scores with the diagonal of the block
	// they are: i·SB − j·TB on the device holding q's block i and k's
	// block j (torch's is_causal, top-left aligned).
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

// RingBuffers names the intermediate buffers of the ring attention whose
// output is out, as the lowering names them: "out/ring/what".
func RingBuffers(out string) func(what string) string {
	return func(what string) string { return out + "/ring/" + what }
}

// Steps returns ring attention's steps, each with its kind, type,
// devices or teams, count and fields; the caller gives them their ids,
// op, expr and a collective's bytes. Per round r, on every device:
//
//	qk  = q · k_rᵀ                    Matmul (transpose_b)
//	s   = qk · scale                  Pointwise
//	sm  = tril(s, block's diagonal)   Tril (causal)
//	mb  = max_t sm                    LocalReduce
//	m   = maximum(m_{r−1}, mb)        Pointwise (a copy in round 0)
//	e   = exp(sm − m)                 Pointwise ×2
//	ek  = tril(e, block's diagonal)   Tril (causal)
//	lb  = Σ_t ek; ob = ek · v_r       LocalReduce, Matmul
//	a   = exp(m_{r−1} − m)            the rescaling (rounds after 0)
//	l   = l_{r−1}·a + lb; o = o_{r−1}·a + ob
//
// then k_{r+1} and v_{r+1} from the previous device (rounds before the
// last), and Out = o / l. The causal mask's zeros take part in the row max,
// so the shift m is at least 0 in a masked row: softmax is the same for
// any shift (exp is a homomorphism in the simulator, and in real numbers),
// and the masked exponentials are zeroed after.
func (g RingAttention) Steps() []Step {
	c := len(g.Devices)
	ring := make([][]int, c)
	for i := range ring {
		ring[i] = []int{g.Devices[i], g.Devices[(i+1)%c]}
	}
	rows, scores := g.BT*g.SB, g.BT*g.SB*g.TB
	sdims, rdims, cdims := []int{g.BT, g.SB, g.TB}, []int{g.BT, g.SB}, []int{g.BT, g.SB, 1}
	odims := []int{g.BT, g.SB, g.DV}
	b := ringBuilder{g: g}
	var steps []Step
	for r := range c {
		name := func(x string) string { return g.Buffer(x + "/" + strconv.Itoa(r)) }
		prev := func(x string) string { return g.Buffer(x + "/" + strconv.Itoa(r-1)) }
		k, v := name("k"), name("v")
		if r == 0 {
			k, v = g.K, g.V
		}
		var send []Step
		if r < c-1 {
			next := func(x string) string { return g.Buffer(x + "/" + strconv.Itoa(r+1)) }
			send = []Step{sendRecv(ring, k, next("k"), g.BT*g.TB*g.D), sendRecv(ring, v, next("v"), g.BT*g.TB*g.DV)}
		}
		if g.SendFirst {
			steps = append(steps, send...)
		}
		qk := b.local(Matmul, name("qk"), [2]int{rows * g.D, scores}, []int{g.BT, g.SB, g.D, g.TB}, g.Q, k)
		qk.TransposeB = true
		scaled := b.pointwise("mul", name("s"), sdims, [][]int{sdims}, name("qk"))
		scaled.Scalar = &ops.Scalar{Slot: 1, Value: g.Scale}
		steps = append(steps, qk, scaled)
		s := name("s")
		if g.Causal {
			steps = append(steps, b.tril(name("sm"), s, r, sdims))
			s = name("sm")
		}
		steps = append(steps, b.reduce("max", name("mb"), s, sdims))
		if r > 0 {
			steps = append(steps, b.pointwise("maximum", name("m"), rdims, [][]int{rdims, rdims}, prev("m"), name("mb")))
		} else {
			steps = append(steps, b.pointwise("copy", name("m"), rdims, [][]int{rdims}, name("mb")))
		}
		steps = append(steps,
			b.pointwise("sub", name("x"), sdims, [][]int{sdims, cdims}, s, name("m")),
			b.pointwise("exp", name("e"), sdims, [][]int{sdims}, name("x")))
		e := name("e")
		if g.Causal {
			steps = append(steps, b.tril(name("ek"), e, r, sdims))
			e = name("ek")
		}
		steps = append(steps, b.reduce("sum", name("lb"), e, sdims),
			b.local(Matmul, name("ob"), [2]int{scores, rows * g.DV}, []int{g.BT, g.SB, g.TB, g.DV}, e, v))
		if r == 0 {
			steps = append(steps, b.pointwise("copy", name("l"), rdims, [][]int{rdims}, name("lb")),
				b.pointwise("copy", name("o"), odims, [][]int{odims}, name("ob")))
		} else {
			steps = append(steps,
				b.pointwise("sub", name("dm"), rdims, [][]int{rdims, rdims}, prev("m"), name("m")),
				b.pointwise("exp", name("a"), rdims, [][]int{rdims}, name("dm")),
				b.pointwise("mul", name("la"), rdims, [][]int{rdims, rdims}, prev("l"), name("a")),
				b.pointwise("add", name("l"), rdims, [][]int{rdims, rdims}, name("la"), name("lb")),
				b.pointwise("mul", name("oa"), odims, [][]int{odims, cdims}, prev("o"), name("a")),
				b.pointwise("add", name("o"), odims, [][]int{odims, odims}, name("oa"), name("ob")))
		}
		if !g.SendFirst {
			steps = append(steps, send...)
		}
	}
	last := func(x string) string { return g.Buffer(x + "/" + strconv.Itoa(c-1)) }
	return append(steps, b.pointwise("div", g.Out, odims, [][]int{odims, cdims}, last("o"), last("l")))
}

// sendRecv is one ring shift of n elements per device: every pair of
// ring passes in to its next device's out.
func sendRecv(ring [][]int, in, out string, n int) Step {
	return Step{Kind: KindCollective, Type: SendRecv, Teams: ring, Input: in, Output: out, Count: Count{Input: n, Output: n}}
}

// ringBuilder writes the local steps of a ring attention, on every device
// of its ring.
type ringBuilder struct{ g RingAttention }

// local is a local step of type typ reading in, writing out, of counts n
// and dims.
func (b ringBuilder) local(typ, out string, n [2]int, dims []int, in ...string) Step {
	s := Step{Kind: KindLocal, Type: typ, Devices: b.g.Devices, Output: out, Count: Count{Input: n[0], Output: n[1]}, Dims: dims}
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

// tril masks round r's scores with each device's block diagonal.
func (b ringBuilder) tril(out, in string, r int, sdims []int) Step {
	s := b.local(Tril, out, [2]int{ops.Product(sdims), ops.Product(sdims)}, sdims, in)
	c := len(b.g.Devices)
	for i := range c {
		j := ((i-r)%c + c) % c
		s.Offsets = append(s.Offsets, i*b.g.SB-j*b.g.TB)
	}
	return s
}
