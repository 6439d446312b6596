package model

// ScaleDown returns a model of c's structure small enough to simulate
// under p, and the step's options for it: the same architecture, norms,
// activation, tied or untied head, grouped-query attention (a group of up
// to 2 query heads per key/value head) and vocabulary padding, and the
// same sharding of every weight and activation over the same mesh, but
// 2 layers (or o.Layers, when fewer; a block a pipeline stage, when more;
// with uneven stages, the first and last stages' blocks and one on each
// stage between), one key/value head per tp device,
// heads of width 4 (or the least even width that the weights' shards,
// fsdp's and with it cp's, split evenly), an
// MLP of the same ratio to the hidden size, a vocabulary of 16 rows per
// device that splits it, one sequence per dp and fsdp device (and
// micro-batch), of 2 tokens per tp and cp device (at least 8 a cp device for a
// mixture of experts, whose experts and top_k it keeps). Simulation
// proves that plan; the full model's is
// the same program at larger extents (docs/models.md).
func ScaleDown(c *Config, p Parallel, o Options) (*Config, Options) {
	tp, shards := p.size(TP), p.weightShards()
	ffn := tp * p.size(FSDP)
	if tp == 1 {
		ffn = shards // the weights' shards split the MLP's width too
	}
	s := *c
	s.Layers = min(c.Layers, max(2, withDefaults(c, p, o).stages(p)))
	if o.FirstStageBlocks > 0 || o.LastStageBlocks > 0 {
		// Uneven stages keep their first and last stages' blocks, and
		// one block on each stage between.
		given := min(o.FirstStageBlocks, 1) + min(o.LastStageBlocks, 1)
		s.Layers = o.FirstStageBlocks + o.LastStageBlocks + withDefaults(c, p, o).stages(p) - given
	}
	s.KVHeads = tp
	s.Heads = tp * min(c.Heads/c.KVHeads, 2)
	for s.HeadDim = 4; ; s.HeadDim += 2 {
		s.Hidden = s.Heads * s.HeadDim
		s.FFN = roundUp(max(s.Hidden*c.FFN/c.Hidden, 1), ffn)
		if Check(&s, p) == nil || s.HeadDim >= 2*shards {
			break // a width of 2·shards always shards evenly
		}
	}
	n := p.vocabSplit()
	s.Vocab = 16 * n
	if c.Vocab%n != 0 {
		s.Vocab-- // padded, as the full model's is
	}
	o.Batch, o.Seq = p.split(batchSplit)*max(o.Microbatches, 1), 2*tp*p.size(CP)
	if p.stageGroups() > 1 && o.Microbatches == 0 {
		o.Batch *= p.stageGroups() // withDefaults's micro-batches: one per stage group
	}
	if c.Experts > 0 {
		// A sequence (its cp slice under cp) is a group of the
		// routing: at least 8 tokens, so that the experts' queues
		// fill and overflow.
		o.Seq = roundUp(8*p.size(CP), o.Seq)
	}
	return &s, o
}

// roundUp rounds n up to a multiple of m.
func roundUp(n, m int) int { return (n + m - 1) / m * m }
