package plan

import (
	"strconv"

	"github.com/nvcomm/nvcomm/internal/ops"
)

// The load-balanced (zigzag) chunk order of causal ring attention
// (Megatron-LM's and TransformerEngine's context parallelism; torch's
// _load_balancer and _RotateMethod in
// torch.distributed.tensor.experimental._attention): the sequence in 2c
// chunks of h, the device at ring position i holding chunks i and
// 2c − 1 − i of q, k, v and the output, in that order, as its block of 2h
// rows. With the plain order the last device computes every block of the
// ring and the first one block; in this order every device computes 2h²
// query-key pairs a round (Steps says which), so no round waits for one
// device. Each device keeps the running state of its two query chunks
// apart — A for its early chunk i, B for its late one — since its early
// queries see fewer keys: round r brings device i k's and v's block of
// position j = i − r (mod c), and
//
//	j = i: A: its early queries against the block's early keys, masked
//	       with diagonal 0; B: its late queries against the whole block,
//	       masked with diagonal h (they see the early chunk whole).
//	j < i: A and B against the block's early keys, unmasked (the late
//	       keys come after all of this device's queries but its late
//	       ones, which the late keys' own device covers).
//	j > i: B against the whole block, unmasked; A nothing.
//
// (torch's ring: rank > source computes every query against the first
// half of the keys, rank < source the second half of the queries against
// every key.) This is a schedule, not yet a sharding nvcomm plans: a
// fusion cannot yet say that a device holds two windows of the sequence.
// Priced by package cost at [1, 8, 4096, 128], float32, on 4 devices, it
// is 508 µs as a step graph against the plain ring's 439 µs: a device
// whose early chunk computes runs two kernels a round (one per stream),
// each paying a product's fixed cost, where torch runs one of every query
// against the early keys; one state of 2h rows would allow that.

// ZigzagSteps returns causal ring attention's steps in the load-balanced
// chunk order: g's devices hold their blocks of SB = TB = 2h rows as
// above (g.Causal is taken as set). The caller gives them their ids, op,
// expr and a collective's bytes. Per round, for each stream that
// computes, on each group of its devices that reads the same keys with
// the same mask: Concat (the block's early keys and values, where read),
// Matmul, Pointwise (scale), Tril (where masked), LocalReduce max; then
// per stream the running max and the online-softmax merge, as
// RingAttention.Steps; each stream's division after its last round, and
// the output block joined from the two by a Concat. It returns nil when
// the blocks are not of even and equal lengths.
func (g RingAttention) ZigzagSteps() []Step {
	c := len(g.Devices)
	if g.SB != g.TB || g.SB%2 != 0 || g.SB == 0 || c < 2 {
		return nil
	}
	h := g.SB / 2
	all := make([]int, c)
	for i := range all {
		all[i] = i
	}
	half := func(in, out string, bt, start, width int, on []int) Step {
		s := g.builder(on).local(Concat, out, [2]int{bt * 2 * h * width, bt * h * width}, []int{bt, h, width}, in)
		s.Windows = [][]int{{2 * h, start, h}}
		return s
	}
	steps := []Step{half(g.Q, g.Buffer("qA"), g.BT, 0, g.D, all), half(g.Q, g.Buffer("qB"), g.BT, h, g.D, all)}
	ring := make([][]int, c)
	for i := range ring {
		ring[i] = []int{g.Devices[i], g.Devices[(i+1)%c]}
	}
	for r := range c {
		k, v := g.Buffer("k/"+strconv.Itoa(r)), g.Buffer("v/"+strconv.Itoa(r))
		if r == 0 {
			k, v = g.K, g.V
		}
		var early []int // the positions that read the block's early keys: j ≤ i
		for i := range c {
			if r <= i {
				early = append(early, i)
			}
		}
		if len(early) > 0 {
			steps = append(steps, half(k, g.Buffer("k0/"+strconv.Itoa(r)), g.KVBT(), 0, g.D, early),
				half(v, g.Buffer("v0/"+strconv.Itoa(r)), g.KVBT(), 0, g.DV, early))
		}
		steps = append(steps, g.zigzagStream("A", r, k, v, h)...)
		steps = append(steps, g.zigzagStream("B", r, k, v, h)...)
		if r < c-1 {
			next := func(x string) string { return g.Buffer(x + "/" + strconv.Itoa(r+1)) }
			steps = append(steps, sendRecv(ring, k, next("k"), g.KVBT()*g.TB*g.D), sendRecv(ring, v, next("v"), g.KVBT()*g.TB*g.DV))
		}
	}
	odims := []int{g.BT, 2 * h, g.DV}
	join := g.builder(all).local(Concat, g.Out, [2]int{g.BT * h * g.DV, ops.Product(odims)}, odims, g.Buffer("A/out"), g.Buffer("B/out"))
	join.Windows = [][]int{{h, 0, h}, {h, 0, h}}
	return append(steps, join)
}

// zigzagKeys is what a stream's queries on one device read in a round of
// the zigzag ring: the block's early keys or all of them, masked with a
// diagonal or not.
type zigzagKeys struct {
	early  bool
	masked bool
	offset int
}

// zigzagRound is what stream ("A" or "B") of ring position i reads in
// round r, and whether it computes at all.
func (g RingAttention) zigzagRound(stream string, i, r, h int) (zigzagKeys, bool) {
	j := g.blockOf(i, r)
	switch {
	case stream == "A" && j == i:
		return zigzagKeys{early: true, masked: true}, true
	case stream == "A" && j < i, stream == "B" && j < i:
		return zigzagKeys{early: true}, true
	case stream == "B" && j == i:
		return zigzagKeys{masked: true, offset: h}, true
	case stream == "B":
		return zigzagKeys{}, true
	}
	return zigzagKeys{}, false
}

// zigzagStream is round r's steps of stream on the positions where it
// computes, one group of positions reading the same keys after another,
// each group's steps consecutive on its devices (one attention kernel in
// the cost model): the block's scores, mask, row max, the running max,
// exponentials, row sums and products with v, the online-softmax merge
// into the stream's state of round r − 1 (both streams compute in
// consecutive rounds: A in rounds 0 to i, B in all), and the stream's
// division after its last round (A's is round i on position i, B's the
// last).
func (g RingAttention) zigzagStream(stream string, r int, k, v string, h int) []Step {
	c := len(g.Devices)
	var groups []zigzagKeys
	members := map[zigzagKeys][]int{}
	for i := range c {
		keys, ok := g.zigzagRound(stream, i, r, h)
		if !ok {
			continue
		}
		if members[keys] == nil {
			groups = append(groups, keys)
		}
		members[keys] = append(members[keys], i)
	}
	var steps []Step
	for _, keys := range groups {
		steps = append(steps, g.zigzagBlock(stream, r, k, v, h, keys, members[keys])...)
	}
	return steps
}

// zigzagBlock is round r's steps of stream on positions on, which read
// keys: attention on the block, merged into the stream's state, and the
// division on those whose last round of the stream it is.
func (g RingAttention) zigzagBlock(stream string, r int, k, v string, h int, keys zigzagKeys, on []int) []Step {
	c := len(g.Devices)
	// The block's intermediates are named for the keys the group reads
	// ("B/early/s/1"), so that no other group's steps read a buffer of
	// this name: a kernel's intermediates stay inside it. The stream's
	// state (m, l, o) is named for the round alone, which the next round
	// reads whatever group a device falls in.
	group := "all/"
	if keys.early {
		group = "early/"
	}
	name := func(x string) string { return g.Buffer(stream + "/" + group + x + "/" + strconv.Itoa(r)) }
	state := func(x string) string { return g.Buffer(stream + "/" + x + "/" + strconv.Itoa(r)) }
	rows := g.BT * h
	rdims, odims, cdims := []int{g.BT, h}, []int{g.BT, h, g.DV}, []int{g.BT, h, 1}
	b := g.builder(on)
	kb, vb, t := k, v, 2*h
	if keys.early {
		kb, vb, t = g.Buffer("k0/"+strconv.Itoa(r)), g.Buffer("v0/"+strconv.Itoa(r)), h
	}
	sdims := []int{g.BT, h, t}
	diagonals := func() []int {
		d := make([]int, len(on))
		for n := range d {
			d[n] = keys.offset
		}
		return d
	}
	bt, m := g.KVBT(), g.group()*h // a key/value head's rows: its group's query heads'
	qk := b.local(Matmul, name("qk"), [2]int{rows * g.D, rows * t}, []int{bt, m, g.D, t}, g.Buffer("q"+stream), kb)
	qk.TransposeB = true
	scaled := b.pointwise("mul", name("s"), sdims, [][]int{sdims}, name("qk"))
	scaled.Scalar = &ops.Scalar{Slot: 1, Value: g.Scale}
	steps := []Step{qk, scaled}
	s := name("s")
	if keys.masked {
		steps = append(steps, b.trilAt(name("sm"), s, sdims, diagonals()))
		s = name("sm")
	}
	steps = append(steps, b.reduce("max", name("mb"), s, sdims))
	prev := func(x string) string { return g.Buffer(stream + "/" + x + "/" + strconv.Itoa(r-1)) }
	if r == 0 {
		steps = append(steps, b.pointwise("copy", state("m"), rdims, [][]int{rdims}, name("mb")))
	} else {
		steps = append(steps, b.pointwise("maximum", state("m"), rdims, [][]int{rdims, rdims}, prev("m"), name("mb")))
	}
	steps = append(steps,
		b.pointwise("sub", name("x"), sdims, [][]int{sdims, cdims}, s, state("m")),
		b.pointwise("exp", name("e"), sdims, [][]int{sdims}, name("x")))
	e := name("e")
	if keys.masked {
		steps = append(steps, b.trilAt(name("ek"), e, sdims, diagonals()))
		e = name("ek")
	}
	steps = append(steps, b.reduce("sum", name("lb"), e, sdims),
		b.local(Matmul, name("ob"), [2]int{rows * t, rows * g.DV}, []int{bt, m, t, g.DV}, e, vb))
	if r == 0 {
		steps = append(steps, b.pointwise("copy", state("l"), rdims, [][]int{rdims}, name("lb")),
			b.pointwise("copy", state("o"), odims, [][]int{odims}, name("ob")))
	} else {
		steps = append(steps,
			b.pointwise("sub", name("dm"), rdims, [][]int{rdims, rdims}, prev("m"), state("m")),
			b.pointwise("exp", name("a"), rdims, [][]int{rdims}, name("dm")),
			b.pointwise("mul", name("la"), rdims, [][]int{rdims, rdims}, prev("l"), name("a")),
			b.pointwise("add", state("l"), rdims, [][]int{rdims, rdims}, name("la"), name("lb")),
			b.pointwise("mul", name("oa"), odims, [][]int{odims, cdims}, prev("o"), name("a")),
			b.pointwise("add", state("o"), odims, [][]int{odims, odims}, name("oa"), name("ob")))
	}
	var done []int
	for _, i := range on {
		if stream == "B" && r == c-1 || stream == "A" && r == i {
			done = append(done, i)
		}
	}
	if len(done) > 0 {
		steps = append(steps, g.builder(done).pointwise("div", g.Buffer(stream+"/out"), odims, [][]int{odims, cdims}, state("o"), state("l")))
	}
	return steps
}
