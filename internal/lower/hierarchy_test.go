package lower_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nvcomm/nvcomm/internal/cost"
	"github.com/nvcomm/nvcomm/internal/lower"
	"github.com/nvcomm/nvcomm/internal/plan"
	"github.com/nvcomm/nvcomm/internal/sim"
	"github.com/nvcomm/nvcomm/internal/syntax"
)

// TestHierarchicalSums: a weight's gradient summed over a dim split along
// ep and then one split along dp (the batch written [dp, batch/dp], as
// nvcomm model writes it with expert parallelism inside data
// parallelism) moves Megatron-LM's one Allreduce over the dp × ep group,
// 2Ψ·(n−1)/n for n = 8: reduce-scattered along ep, its shard all-reduced
// along dp, gathered along ep — each op one change of device type, so
// nvFuser's policy lowers it. The optimal policy does so where the cost
// model prices it faster: not for a small gradient (three latencies
// where two Allreduces take two), for a larger one where the network is
// slow enough, and for any size under the bytes objective. The plan's
// bound is the least of both ways, whichever the policy takes. A sum whose intermediate the fusion declares, or that
// another op reads, is lowered as written. Every plan simulates PASS.
func TestHierarchicalSums(t *testing.T) {
	// m is 2 × 4 × 2 (dp, ep, tp); y is a column-parallel weight's
	// gradient [rows, cols], rows split along tp.
	const head = `format: 2
name: hierarchical_sums
meshes:
  m: [[[0, 1], [2, 3], [4, 5], [6, 7]], [[8, 9], [10, 11], [12, 13], [14, 15]]]
tensors:
  x: {mesh: m, shape: [2, 4, ROWS, 64], dtype: float32, placements: [Shard(0), Shard(1), Shard(2)]}
  y: {mesh: m, placements: [Replicate(), Replicate(), Shard(0)]}
`
	const chain = `ops:
  - {op: sum, in: x, out: y1, axis: 1}
  - {op: sum, in: y1, out: y, axis: 0}
`
	hier := []string{"Permute", "ReduceScatter", "Allreduce", "Allgather", "Permute"}
	two := []string{"Allreduce", "Allreduce"}
	tests := []struct {
		name      string
		rows      string
		extra     string // declarations after y's
		ops       string
		policy    lower.Policy
		objective lower.Objective
		// slow prices on the built-in topology with nodes of 2 devices
		// (the dp and ep teams cross nodes, as Mixtral's on
		// dp=2,ep=4,tp=8 do) and a network 16 times slower.
		slow  bool
		want  []string
		bytes int64 // received by the busiest device
		bound int64 // the plan's: the least of both ways where the chain applies
	}{
		// y: 64 × 64 float32 a tp rank's half of 128 rows, 16 KiB: Ψ·3/4
		// + 2(Ψ/4)·1/2 + Ψ·3/4 = 2Ψ·7/8 = 28 KiB, where two Allreduces
		// receive 2Ψ·3/4 + 2Ψ·1/2 = 40 KiB.
		{"nvfuser", "128", "", chain, lower.PolicyNvFuser, "", false, hier, 28 << 10, 28 << 10},
		{"optimal, small", "128", "", chain, lower.PolicyOptimal, lower.ObjectiveTime, false, two, 40 << 10, 28 << 10},
		{"optimal, bytes", "128", "", chain, lower.PolicyOptimal, lower.ObjectiveBytes, false, hier, 28 << 10, 28 << 10},
		// y: 1024 × 64 a tp rank, 256 KiB: across a slow network the
		// bytes saved cost more than a latency, on the built-in
		// topology (ep within a node) less.
		{"optimal, large", "2048", "", chain, lower.PolicyOptimal, lower.ObjectiveTime, true, hier, 2 * (256 << 10) * 7 / 8, 2 * (256 << 10) * 7 / 8},
		{"optimal, large, fast network", "2048", "", chain, lower.PolicyOptimal, lower.ObjectiveTime, false, two, 2 * (256 << 10) * 5 / 4, 2 * (256 << 10) * 7 / 8},
		{"declared y1", "128", "  y1: {mesh: m, placements: [Shard(0), Replicate(), Shard(1)]}\n", chain, lower.PolicyNvFuser, "", false, two, 40 << 10, 40 << 10},
		{"y1 read twice", "128", "", chain + "  - {op: neg, in: y1, out: z}\n", lower.PolicyNvFuser, "", false, two, 40 << 10, 40 << 10},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src := strings.Replace(head, "ROWS", tc.rows, 1) + tc.extra + tc.ops
			f, err := syntax.Parse("h.yaml", []byte(src))
			if err != nil {
				t.Fatal(err)
			}
			opts := lower.Options{Policy: tc.policy, Objective: tc.objective}
			if tc.slow {
				topo := cost.Default()
				topo.DevicesPerNode = 2
				topo.Network.Bandwidth /= 16
				opts.Topology = topo
			}
			p, err := lower.Lower(f, opts)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			var bytes int64
			for _, s := range p.Steps {
				if out := p.Ops[s.Op].Output; out != "y1" && out != "y" && out != "y/shard" {
					continue
				}
				got = append(got, s.Type)
				if s.Bytes != nil {
					bytes += s.Bytes.ReceivedPerDevice
				}
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("the sums' steps (-want +got):\n%s", d)
			}
			if bytes != tc.bytes {
				t.Errorf("the sums' bytes at the busiest device: %d, want %d", bytes, tc.bytes)
			}
			if b := p.Summary.BytesLowerBound; b != tc.bound {
				t.Errorf("the plan's bound: %d, want %d", b, tc.bound)
			}
			if problems := plan.Validate(p); len(problems) > 0 {
				t.Fatalf("Validate: %v", problems)
			}
			if res, err := sim.Run(p, sim.Options{}); err != nil || !res.Pass {
				t.Fatalf("simulate: %v, %+v", err, res)
			}
		})
	}
}
