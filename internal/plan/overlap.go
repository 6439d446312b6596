package plan

import (
	"strconv"
)

// Decomposed collectives (docs/overlap.md, "Decomposed collectives"): an
// Allgather followed by the matmul that reads what it gathers (a
// column-parallel linear whose input arrives split along its rows, as
// under sequence parallelism), or a matmul whose partial sums a
// ReduceScatter splits along its rows (a row-parallel linear), computed
// in chunks so that each chunk's transfer runs beside another chunk's
// product: nvFuser's collective-based and ring-based overlap
// (tests/cpp/test_multidevice_host_ir_overlap.cpp) and PyTorch's async
// tensor parallelism (fused_all_gather_matmul, fused_matmul_reduce_scatter
// in torch/distributed/_symmetric_memory). The lowering (package lower)
// emits these steps for a linear or matmul it decomposes, and validate
// rebuilds them from the plan's tensors and requires the op's steps to be
// these, so that the steps proven by simulation are the ones planned.

// The kinds and forms of a decomposed collective, as the op's overlap
// attribute names the forms.
const (
	// OverlapAllgather is an Allgather + matmul (AG+GEMM).
	OverlapAllgather = "allgather"
	// OverlapReduceScatter is a matmul + ReduceScatter (GEMM+RS).
	OverlapReduceScatter = "reducescatter"
	// OverlapAllgatherWeight is an Allgather of a linear's weight along
	// its output rows + the linear that reads it: FSDP's (ZeRO-3's)
	// gathered weight, split by its rows into chunks whose products are
	// column blocks of the output.
	OverlapAllgatherWeight = "allgather-weight"
	// OverlapCollective is the collective-based form: k smaller
	// collectives, one per chunk of every device's rows.
	OverlapCollective = "collective"
	// OverlapRing is the ring-based form: one SendRecv ring shift per
	// round, T rounds on T devices.
	OverlapRing = "ring"
)

// Overlap is the geometry and the buffers of a decomposed collective on a
// 1-D mesh of T devices. Every device's block of the chunked rows holds
// Rows rows: for an Allgather + matmul, In is x, each device's block
// [Rows, K], and Out the product [T·Rows, N] of x gathered whole and W;
// for a matmul + ReduceScatter, In is [T·Rows, K], the product's partial
// sums [T·Rows, N] are summed over the devices and Out is each device's
// block of rows [Rows, N]; for an Allgather of the weight, W is each
// device's block of a linear's weight [Rows, K] (its output rows), In is
// the device's x [M, K], N is T·Rows and Out is x times the gathered
// weight, transposed: [M, N]. All are row-major.
type Overlap struct {
	// Devices are the mesh's devices, in order: Devices[t] holds block t
	// of the chunked rows, and a ring sends to Devices[t+1 mod T].
	Devices []int
	// Kind is OverlapAllgather or OverlapReduceScatter; Form is
	// OverlapCollective or OverlapRing.
	Kind, Form string
	// Chunks is the collective-based form's k, which divides Rows; the
	// ring has T rounds.
	Chunks int
	// Rows, K and N are the extents above; M is the first operand's rows
	// of an Allgather of the weight (0 otherwise).
	Rows, K, N, M int
	// TransposeB says W is stored [N, K] (a linear's weight).
	TransposeB bool
	// In, W and Out are the buffers of the operands and of the output.
	In, W, Out string
	// Bias, when not empty, is a linear's bias [N]: the form computes the
	// product into Buffer("product"), and one Pointwise add of the bias
	// (broadcast over the rows) writes Out, as the undecomposed linear
	// adds it after its Matmul (and after its ReduceScatter).
	Bias string
	// Buffer names an intermediate buffer ("xg/1": what, then the chunk
	// or round).
	Buffer func(what string) string
}

// OverlapBuffers names the intermediate buffers of the decomposed
// collective whose output is out, as the lowering names them:
// "out/overlap/what".
func OverlapBuffers(out string) func(what string) string {
	return func(what string) string { return out + "/overlap/" + what }
}

// Steps returns the decomposed collective's steps, each with its kind,
// type, devices or teams, count and fields; the caller gives them their
// ids, op, expr and a collective's bytes and axis. With m = Rows/k rows a
// chunk, the collective-based Allgather + matmul is
//
//	x_j  = rows j·m… of each block         Concat ×k (all cuts first)
//	xg_j = Allgather(x_j)  [T·m, K]         then, per chunk,
//	y_j  = xg_j · W        [T·m, N]         Matmul
//	Out  = y_0…y_{k-1} interleaved by block Concat (dims [T, k·m, N])
//
// so that Allgather j + 1 runs beside Matmul j; the matmul +
// ReduceScatter is
//
//	a_j = rows j·m… of each block of In      Concat ×k (all cuts first)
//	p_j = a_j · W                            Matmul, then per chunk
//	y_j = ReduceScatter(p_j)  [m, N]         beside Matmul j + 1
//	Out = y_0…y_{k-1}                        Concat
//
// The ring-based forms are Ring's.
func (g Overlap) Steps() []Step {
	if g.Bias != "" {
		h := g
		h.Bias, h.Out = "", g.Buffer("product")
		rows := g.Rows
		switch g.Kind {
		case OverlapAllgather:
			rows *= len(g.Devices)
		case OverlapAllgatherWeight:
			rows = g.M
		}
		add := "add"
		return append(h.Steps(), Step{Kind: KindLocal, Type: Pointwise, Devices: append([]int(nil), g.Devices...),
			Inputs: []string{h.Out, g.Bias}, Output: g.Out, Count: Count{Input: rows * g.N, Output: rows * g.N},
			Dims: []int{rows, g.N}, Func: &add, InputDims: [][]int{{rows, g.N}, {1, g.N}}})
	}
	if g.Form == OverlapRing {
		return g.ring()
	}
	switch g.Kind {
	case OverlapReduceScatter:
		return g.collectiveRS()
	case OverlapAllgatherWeight:
		return g.collectiveAGW()
	}
	return g.collectiveAG()
}

// collectiveAGW is the collective-based Allgather of the weight + linear:
// with m = Rows/k,
//
//	w_j  = rows j·m… of each block of W      Concat ×k (all cuts first)
//	wg_j = Allgather(w_j)  [T·m, K]          then, per chunk,
//	y_j  = In · wg_jᵀ      [M, T·m]          Matmul
//	Out  = y_0…y_{k-1} interleaved           Concat (dims [M·T, k·m, 1])
//
// Column t·m + c of y_j is the weight's row t·Rows + j·m + c, so the last
// Concat puts, in each of Out's M·T blocks of Rows columns, the k chunks'
// m columns one after another.
func (g Overlap) collectiveAGW() []Step {
	t, m := len(g.Devices), g.Rows/g.Chunks
	return g.gatherChunks("w", g.W, overlapBuilder.matmulW, []int{g.M * t, g.Chunks * m, 1})
}

// gatherChunks is a collective-based decomposition of an Allgather of
// src's rows before a product: src cut into k chunks of m rows of each
// device's block (named what/j), chunk j gathered (what+"g"/j) and
// multiplied by product into y/j, and the k products interleaved into
// Out by a Concat of dims outDims.
func (g Overlap) gatherChunks(what, src string, product func(overlapBuilder, string, int, string) Step, outDims []int) []Step {
	t, k := len(g.Devices), g.Chunks
	m := g.Rows / k
	b := g.all()
	var steps []Step
	for j := range k {
		steps = append(steps, b.concat(g.chunk(what, j), []int{1, m, g.K}, [][]int{{g.Rows, j * m, m}}, src))
	}
	team := [][]int{append([]int(nil), g.Devices...)}
	var parts []string
	for j := range k {
		steps = append(steps,
			Step{Kind: KindCollective, Type: Allgather, Teams: team, Input: g.chunk(what, j), Output: g.chunk(what+"g", j),
				Count: Count{Input: m * g.K, Output: t * m * g.K}},
			product(b, g.chunk("y", j), t*m, g.chunk(what+"g", j)))
		parts = append(parts, g.chunk("y", j))
	}
	return append(steps, b.concat(g.Out, outDims, wholeWindows(k, m), parts...))
}

// all is a builder on every device of the mesh.
func (g Overlap) all() overlapBuilder { return overlapBuilder{g: g, devices: g.Devices} }

// chunk names buffer what of chunk or round j.
func (g Overlap) chunk(what string, j int) string { return g.Buffer(what + "/" + strconv.Itoa(j)) }

// collectiveAG is the collective-based Allgather + matmul.
func (g Overlap) collectiveAG() []Step {
	t, m := len(g.Devices), g.Rows/g.Chunks
	return g.gatherChunks("x", g.In, overlapBuilder.matmul, []int{t, g.Chunks * m, g.N})
}

// collectiveRS is the collective-based matmul + ReduceScatter.
func (g Overlap) collectiveRS() []Step {
	t, k := len(g.Devices), g.Chunks
	m := g.Rows / k
	b := g.all()
	var steps []Step
	for j := range k {
		steps = append(steps, b.concat(g.chunk("a", j), []int{t, m, g.K}, [][]int{{g.Rows, j * m, m}}, g.In))
	}
	team := [][]int{append([]int(nil), g.Devices...)}
	sum := "sum"
	var parts []string
	for j := range k {
		steps = append(steps, b.matmul(g.chunk("p", j), t*m, g.chunk("a", j)),
			Step{Kind: KindCollective, Type: ReduceScatter, Teams: team, ReduceOp: &sum, Input: g.chunk("p", j), Output: g.chunk("y", j),
				Count: Count{Input: t * m * g.N, Output: m * g.N}})
		parts = append(parts, g.chunk("y", j))
	}
	return append(steps, b.concat(g.Out, []int{1, k * m, g.N}, wholeWindows(k, m), parts...))
}

// ring is the ring-based form (PyTorch's fused_all_gather_matmul and
// fused_matmul_reduce_scatter, nvFuser's ring-based overlap): T rounds on
// the ring of the mesh's devices. For an Allgather + matmul, in round r
// the device at ring position i holds x's block (i − r) mod T (its own
// first): it passes the block to the next device (a SendRecv of pairs,
// on every device at once) while it multiplies it by W; each device then
// puts its T products in the order of the blocks (a Concat of its own).
// For a matmul + ReduceScatter, in round r position i computes the
// partial sums of block (i − r − 1) mod T, its rows cut from In, adds
// those the previous device passed it (rounds after the first) and
// passes the sum on; in the last round the block is its own, and the sum
// is Out.
func (g Overlap) ring() []Step {
	t := len(g.Devices)
	pairs := make([][]int, t)
	for i := range pairs {
		pairs[i] = []int{g.Devices[i], g.Devices[(i+1)%t]}
	}
	if g.Kind == OverlapReduceScatter {
		return g.ringRS(pairs)
	}
	// The block passed round the ring: x's rows, or the weight's under an
	// Allgather of the weight, whose products are then column blocks of
	// Out ([M, T·Rows, 1]) rather than row blocks ([1, T·Rows, N]).
	weight := g.Kind == OverlapAllgatherWeight
	own, what, dims := g.In, "x", []int{1, t * g.Rows, g.N}
	if weight {
		own, what, dims = g.W, "w", []int{g.M, t * g.Rows, 1}
	}
	b := g.all()
	var steps []Step
	for r := range t {
		x := own
		if r > 0 {
			x = g.chunk(what, r)
		}
		if r < t-1 {
			n := g.Rows * g.K
			steps = append(steps, Step{Kind: KindCollective, Type: SendRecv, Teams: pairs, Input: x, Output: g.chunk(what, r+1),
				Count: Count{Input: n, Output: n}})
		}
		if weight {
			steps = append(steps, b.matmulW(g.chunk("y", r), g.Rows, x))
		} else {
			steps = append(steps, b.matmul(g.chunk("y", r), g.Rows, x))
		}
	}
	for i, d := range g.Devices {
		parts := make([]string, t)
		for blk := range t {
			parts[blk] = g.chunk("y", ((i-blk)%t+t)%t)
		}
		one := overlapBuilder{g: g, devices: []int{d}}
		steps = append(steps, one.concat(g.Out, dims, wholeWindows(t, g.Rows), parts...))
	}
	return steps
}

// ringRS is the ring-based matmul + ReduceScatter on the ring pairs.
func (g Overlap) ringRS(pairs [][]int) []Step {
	t := len(g.Devices)
	b := g.all()
	var steps []Step
	for r := range t {
		for i, d := range g.Devices {
			blk := ((i-r-1)%t + t) % t
			one := overlapBuilder{g: g, devices: []int{d}}
			steps = append(steps, one.concat(g.chunk("a", r), []int{1, g.Rows, g.K}, [][]int{{t * g.Rows, blk * g.Rows, g.Rows}}, g.In))
		}
		steps = append(steps, b.matmul(g.chunk("q", r), g.Rows, g.chunk("a", r)))
		sum := g.chunk("q", r)
		if r > 0 {
			sum = g.chunk("p", r)
			if r == t-1 {
				sum = g.Out
			}
			dims := []int{g.Rows, g.N}
			add := "add"
			steps = append(steps, Step{Kind: KindLocal, Type: Pointwise, Devices: g.Devices, Inputs: []string{g.chunk("recv", r), g.chunk("q", r)},
				Output: sum, Count: Count{Input: g.Rows * g.N, Output: g.Rows * g.N}, Dims: dims, Func: &add, InputDims: [][]int{dims, dims}})
		}
		if r < t-1 {
			n := g.Rows * g.N
			steps = append(steps, Step{Kind: KindCollective, Type: SendRecv, Teams: pairs, Input: sum, Output: g.chunk("recv", r+1),
				Count: Count{Input: n, Output: n}})
		}
	}
	return steps
}

// wholeWindows are the windows of a Concat of n inputs of m entries each,
// every one whole.
func wholeWindows(n, m int) [][]int {
	w := make([][]int, n)
	for i := range w {
		w[i] = []int{m, 0, m}
	}
	return w
}

// overlapBuilder writes the local steps of a decomposed collective on
// some of its devices.
type overlapBuilder struct {
	g       Overlap
	devices []int
}

// concat is a Concat of ins into out, of dims [outer, N, inner] and one
// window per input.
func (b overlapBuilder) concat(out string, dims []int, windows [][]int, ins ...string) Step {
	s := Step{Kind: KindLocal, Type: Concat, Devices: b.devices, Output: out, Dims: dims, Windows: windows,
		Count: Count{Input: dims[0] * windows[0][0] * dims[2], Output: dims[0] * dims[1] * dims[2]}}
	if len(ins) == 1 {
		s.Input = ins[0]
	} else {
		s.Inputs = ins
	}
	return s
}

// matmul is rows rows of a times W into out: dims [1, rows, K, N].
func (b overlapBuilder) matmul(out string, rows int, a string) Step {
	g := b.g
	return Step{Kind: KindLocal, Type: Matmul, Devices: b.devices, Inputs: []string{a, g.W}, Output: out,
		Count: Count{Input: rows * g.K, Output: rows * g.N}, Dims: []int{1, rows, g.K, g.N}, TransposeB: g.TransposeB}
}

// matmulW is In times rows rows of the weight w, transposed, into out:
// dims [1, M, K, rows], a column block of an Allgather of the weight's
// output.
func (b overlapBuilder) matmulW(out string, rows int, w string) Step {
	g := b.g
	return Step{Kind: KindLocal, Type: Matmul, Devices: b.devices, Inputs: []string{g.In, w}, Output: out,
		Count: Count{Input: g.M * g.K, Output: g.M * rows}, Dims: []int{1, g.M, g.K, rows}, TransposeB: true}
}
