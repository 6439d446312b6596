package cost

import (
	"github.com/nvcomm/nvcomm/internal/plan"
)

// The attention kernel: a run of consecutive local steps that compute one
// sdpa's expansion (or its gradient) on one set of devices is one kernel,
// as FlashAttention computes attention (Dao et al., 2022; FlashAttention-2,
// Dao, 2023; torch's scaled_dot_product_attention runs it): the scores,
// the softmax's statistics and the probabilities stay in on-chip memory,
// so the kernel reads and writes only the buffers that cross the run's
// boundary — q, k and v in, the output out, and any intermediate a later
// step reads — once each. It pays one latency, and takes the longer of
// that memory traffic and its matrix products' arithmetic on the compute
// line. For a causal sdpa the kernel skips the tiles above the diagonal
// that the mask zeroes, so its arithmetic is the share of each device's
// block of the scores that the mask keeps, on the busiest device (the
// step ends when its last device does): the area below the diagonal its
// Tril states for that device (visibleShare). A device of the heads'
// split holds the square scores whole: half. One of the all-gather form
// holds its queries against every key, the last device nearly all of them
// seen ((2c − 1)/2c of c devices); one of the expansion split on the keys,
// every query against its keys, the first device nearly all seen too. A
// ring attention's round (an op that computes its sdpa whole) is a
// kernel of one block of the scores, priced by the round's mask alike:
// half on the diagonal's square block, all of it where the round does not
// mask (the block lies wholly below the diagonal; the blocks wholly above
// are not computed at all, plan.RingAttention).
//
// The plan still lists every step of the expansion, and simulate proves
// each; only the price is the kernel's. A collective inside the expansion
// (context parallelism's statistics) ends the run: the kernel before it
// and the one after are priced apart. A backward that reads the forward's
// probabilities makes the forward's kernel write them (FlashAttention's
// backward recomputes them instead: a refinement to come).

// attentionKernels prices every run of an sdpa's local steps in p as one
// kernel: the run's first step carries the kernel's time, the others run
// inside it (FusedInto). It returns which steps it priced so, which the
// fused runs of kernels.go leave alone.
func (t *Topology) attentionKernels(p *plan.Plan, times []StepTime) []bool {
	in := make([]bool, len(p.Steps))
	var readers map[string][]int
	var shares map[sdpaID]float64 // each causal sdpa's Trils' share, found when first needed
	for i := 0; i < len(p.Steps); {
		end := attentionRun(p, i)
		if end == i {
			i++
			continue
		}
		if readers == nil {
			readers = bufferReaders(p)
		}
		t.priceKernel(p, times, i, end, readers, &shares)
		for k := i; k < end; k++ {
			in[k] = true
		}
		i = end
	}
	return in
}

// attentionRun returns the end (exclusive) of the run of one sdpa's local
// steps that starts at step i, or i when step i starts none.
func attentionRun(p *plan.Plan, i int) int {
	of := attentionOf(p, &p.Steps[i])
	if of == nil {
		return i
	}
	end := i + 1
	for end < len(p.Steps) {
		s := &p.Steps[end]
		o := attentionOf(p, s)
		if o == nil || o.Output != of.Output || o.Grad != of.Grad || !sameDevices(&p.Steps[i], s) {
			break
		}
		end++
	}
	return end
}

// attentionOf is the sdpa whose expansion (or gradient) local step s
// computes, nil when it computes none. The steps that compute are the
// products, the elementwise and reduction steps, the masks and the
// expansion's own transpositions and regroupings (a `permute` op's
// Permute, a `reshape` op's Copy: grouped-query attention's heads
// repeated for the forward, and merged with the queries for the
// gradients of the keys and values, which the kernel indexes in place,
// as FlashAttention reads a key/value head for each query head of its
// group); a layout step
// that reshards an op's operand or output (a Permute before a
// ReduceScatter, a Slice) is not the kernel's: the resharding planner
// chose it at its own price, which the kernel must not hide from it.
func attentionOf(p *plan.Plan, s *plan.Step) *plan.Of {
	if s.Kind != plan.KindLocal || s.Op < 0 || s.Op >= len(p.Ops) {
		return nil
	}
	op := &p.Ops[s.Op]
	if op.Of == nil || op.Of.Op != "sdpa" {
		return nil
	}
	switch {
	case s.Type == plan.Matmul, s.Type == plan.Pointwise, s.Type == plan.LocalReduce, s.Type == plan.Tril,
		s.Type == plan.Permute && op.Op == "permute", s.Type == plan.Copy && op.Op == "reshape":
		return op.Of
	}
	return nil
}

// priceKernel prices steps i to end of p as one attention kernel.
func (t *Topology) priceKernel(p *plan.Plan, times []StepTime, i, end int, readers map[string][]int, shares *map[sdpaID]float64) {
	inside := map[string]bool{}
	var bytes int64
	var flops float64
	dtype := ""
	masks := -1.0 // the share its Trils keep on the busiest device, −1 for none
	for k := i; k < end; k++ {
		s := &p.Steps[k]
		if s.Type == plan.Tril {
			masks = max(masks, trilShare(s))
		}
		size, err := elemSize(p, s)
		if err != nil {
			return // priced step by step, as Step could
		}
		for j, b := range stepInputs(s) {
			if !inside[b] {
				bytes += size * inputElements(s, j)
				inside[b] = true // read once
			}
		}
		inside[s.Output] = true
		if crossesOut(s.Output, end, readers) {
			bytes += size * int64(s.Count.Output)
		}
		if s.Type == plan.Matmul && len(s.Dims) == 4 {
			f := 2.0
			for _, d := range s.Dims {
				f *= float64(d)
			}
			flops += f
			dtype = stepDType(p, s)
		}
	}
	flops *= visibleShare(p, i, masks, shares)
	seconds := t.Local(bytes)
	if t.Compute != nil && dtype != "" {
		seconds = max(seconds, t.Compute.Seconds(dtype, flops))
	}
	times[i].Seconds, times[i].Bytes = seconds, bytes
	id := p.Steps[i].ID
	for k := i + 1; k < end; k++ {
		times[k].Seconds = 0
		times[k].FusedInto = &id
	}
}

// visibleShare is the share of its products' arithmetic that the kernel
// of steps i onwards computes on its busiest device: all of it for an sdpa
// without a mask; for a causal one, masks, the share its own Trils keep
// (trilShare), where it has any. A run without a Tril is a ring's round
// whose block lies wholly below the diagonal (all of it), or a run of the
// expansion planned op by op that a collective cut from its masks (the
// products before the statistics' Allreduces, or after): the share the
// sdpa's Trils keep (each device's block of the scores is the same
// through the expansion), half where it has none.
func visibleShare(p *plan.Plan, i int, masks float64, shares *map[sdpaID]float64) float64 {
	of := attentionOf(p, &p.Steps[i])
	switch {
	case !of.Causal:
		return 1
	case masks >= 0:
		return masks
	case computedWhole(p, p.Steps[i].Op):
		return 1
	}
	if *shares == nil {
		*shares = trilShares(p)
	}
	if share, ok := (*shares)[sdpaKey(of)]; ok {
		return share
	}
	return 0.5
}

// sdpaID identifies an sdpa's expansion, or its gradient's, among a
// plan's ops: by its output.
type sdpaID struct {
	output string
	grad   bool
}

// sdpaKey is of's sdpaID.
func sdpaKey(of *plan.Of) sdpaID { return sdpaID{of.Output, of.Grad} }

// trilShares maps each sdpa of p with Trils to the largest share they
// keep.
func trilShares(p *plan.Plan) map[sdpaID]float64 {
	shares := map[sdpaID]float64{}
	for k := range p.Steps {
		s := &p.Steps[k]
		if s.Type != plan.Tril {
			continue
		}
		if of := attentionOf(p, s); of != nil {
			key := sdpaKey(of)
			shares[key] = max(shares[key], trilShare(s))
		}
	}
	return shares
}

// trilShare is the largest share of a block of the scores that Tril step
// s keeps on one of its devices: of the block [R, C] (its dims' last
// two), the area on or below the diagonal j − i ≤ offset, as a kernel
// that skips the tiles above it computes (tiles much smaller than the
// block: the diagonal's square block is half, 1/2 rather than the
// (R + 1)/2R of its entries). 1 when the dims are not a block.
func trilShare(s *plan.Step) float64 {
	if len(s.Dims) < 2 {
		return 1
	}
	r, c := float64(s.Dims[len(s.Dims)-2]), float64(s.Dims[len(s.Dims)-1])
	if r <= 0 || c <= 0 {
		return 1
	}
	share := 0.0
	for _, o := range s.Offsets {
		share = max(share, (belowArea(float64(o)+r, c)-belowArea(float64(o), c))/(r*c))
	}
	return share
}

// belowArea is ∫₀ᵘ clamp(w, 0, c) dw: with u = x + offset, the area of
// columns 0 to c that rows 0 to x of a block keep on or below the
// diagonal, less that of the rows before (trilShare).
func belowArea(u, c float64) float64 {
	switch {
	case u <= 0:
		return 0
	case u <= c:
		return u * u / 2
	}
	return c*c/2 + c*(u-c)
}

// computedWhole reports whether op k of p computes its composite whole:
// other ops are computed within its steps (plan.Op.Within).
func computedWhole(p *plan.Plan, k int) bool {
	for i := range p.Ops {
		if w := p.Ops[i].Within; w != nil && *w == k {
			return true
		}
	}
	return false
}

// stepInputs are the buffers step s reads, in order.
func stepInputs(s *plan.Step) []string {
	if len(s.Inputs) == 0 && s.Input != "" {
		return []string{s.Input}
	}
	return s.Inputs
}

// inputElements is the elements one device reads of input j of local
// step s: a Matmul's A [Bt, M, K] and B [Bt, K, N] (one [K, N] for every
// batch when BroadcastB), a Pointwise's input as its InputDims view it,
// and otherwise the step's input count.
func inputElements(s *plan.Step, j int) int64 {
	switch {
	case s.Type == plan.Matmul && len(s.Dims) == 4:
		bt, m, k, n := int64(s.Dims[0]), int64(s.Dims[1]), int64(s.Dims[2]), int64(s.Dims[3])
		if j == 0 {
			return bt * m * k
		}
		if s.BroadcastB {
			bt = 1
		}
		return bt * k * n
	case j < len(s.InputDims):
		n := int64(1)
		for _, d := range s.InputDims[j] {
			n *= int64(d)
		}
		return n
	}
	return int64(s.Count.Input)
}

// crossesOut reports whether buffer b, written inside a run that ends
// before step end, is read by a step at or after end or by none (an
// output of the plan): the kernel writes it to memory.
func crossesOut(b string, end int, readers map[string][]int) bool {
	rs := readers[b]
	return len(rs) == 0 || rs[len(rs)-1] >= end
}

// bufferReaders lists, for each buffer of p, the steps that read it, in
// order.
func bufferReaders(p *plan.Plan) map[string][]int {
	r := map[string][]int{}
	for k := range p.Steps {
		s := &p.Steps[k]
		if s.Input != "" {
			r[s.Input] = append(r[s.Input], k)
		}
		for _, b := range s.Inputs {
			r[b] = append(r[b], k)
		}
	}
	return r
}
