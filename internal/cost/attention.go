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
// line; for a causal sdpa half the arithmetic, as the kernel skips the
// blocks above the diagonal that the mask zeroes. A ring attention's
// round (an op that computes its sdpa whole) is a kernel of one block of
// the scores, whose mask the round states: half where it masks (a Tril:
// the diagonal cuts the block), all of it where it does not (the block
// lies wholly below the diagonal; the blocks wholly above are not
// computed at all, plan.RingAttention).
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
	for i := 0; i < len(p.Steps); {
		end := attentionRun(p, i)
		if end == i {
			i++
			continue
		}
		if readers == nil {
			readers = bufferReaders(p)
		}
		t.priceKernel(p, times, i, end, readers)
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
// expansion's own transpositions (a `permute` op's Permute); a layout step
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
		s.Type == plan.Permute && op.Op == "permute":
		return op.Of
	}
	return nil
}

// priceKernel prices steps i to end of p as one attention kernel.
func (t *Topology) priceKernel(p *plan.Plan, times []StepTime, i, end int, readers map[string][]int) {
	inside := map[string]bool{}
	var bytes int64
	var flops float64
	dtype := ""
	masks := false // a Tril in the run: the diagonal cuts its blocks
	for k := i; k < end; k++ {
		s := &p.Steps[k]
		masks = masks || s.Type == plan.Tril
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
	if attentionOf(p, &p.Steps[i]).Causal && (masks || !computedWhole(p, p.Steps[i].Op)) {
		flops /= 2
	}
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
