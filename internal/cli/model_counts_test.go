package cli_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nvcomm/nvcomm/internal/plan"
)

// TestDataParallelGradientBytes holds the data-parallel counts of a
// Llama-3 8B training step (docs/models.md, "Validation against
// Megatron-LM's closed forms") to ZeRO's and FSDP2's closed forms: Ψ
// bytes of parameters (per tensor-parallel rank), n devices along the
// axis, FSDP gathers Ψ·(n−1)/n before the forward, again before the
// backward (reshard_after_forward, the default: all but the parameters
// the backward does not read) and reduce-scatters Ψ·(n−1)/n, DP
// all-reduces 2Ψ·(n−1)/n, HSDP reduce-scatters within its group and
// all-reduces the shard across groups, FSDP over fsdp × cp (torchtitan's
// dp_shard × cp) gathers and reduce-scatters Ψ·(n−1)/n over both; and
// tensor parallelism's Allreduces to Megatron-LM's count. The loss's
// Allreduces are counted apart.
func TestDataParallelGradientBytes(t *testing.T) {
	if testing.Short() {
		t.Skip("lowers four whole Llama-3 8B steps")
	}
	const psi = 8_030_261_248 * 2   // every parameter, bfloat16
	const psiTP = 1_004_015_616 * 2 // a tp rank's share, of 8
	// The parameters the backward reads, which reshard_after_forward
	// gathers again: all but the embedding table (its gradient rule
	// reads only the ids and the output gradient) and the 65 norms'
	// weights (their rule reads the norm's saved broadcast of the
	// weight), 128256 · 4096 and 65 · 4096 parameters.
	const embed, norms = 128_256 * 4096 * 2, 65 * 4096 * 2
	const regathered, regatheredTP = psi - embed - norms, psiTP - embed/8 - norms
	const kvCP = 16 * 4096 * 128 * 2 // a layer's keys (or values) on a device, of cp=2
	tests := []struct {
		mesh string
		sp   bool // sequence parallelism: only the keys of want are compared
		// strides name the mesh axes by the distance of a team's first
		// two devices.
		strides map[int]string
		want    map[string]int64
	}{
		{"fsdp=64", false, map[int]string{1: "fsdp"}, map[string]int64{
			"Allgather fsdp":     psi*63/64 + regathered*63/64,
			"ReduceScatter fsdp": psi * 63 / 64,
		}},
		{"dp=8,tp=8", false, map[int]string{1: "tp", 8: "dp"}, map[string]int64{
			"Allreduce dp": 2 * psiTP * 7 / 8,
			// Megatron-LM's 4 a block (2 forward, 2 backward: the q, k and
			// v projections' input gradients are one sum, the gate and up
			// projections' another), the embedding's forward and the LM
			// head's input gradient: 130 of A = 8 · 8192 tokens · 4096 · 2
			// B on each dp rank, 2A·7/8 each.
			"Allreduce tp": 130 * 2 * (8 * 8192 * 4096 * 2) * 7 / 8,
		}},
		{"dp=8,tp=8", true, map[int]string{1: "tp", 8: "dp"}, map[string]int64{
			"Allreduce dp": 2 * psiTP * 7 / 8,
			// Megatron-LM's sequence parallelism: 4 Allgathers and 4
			// ReduceScatters of A a block (2 and 2 forward, 2 and 2
			// backward), A·7/8 each. Outside the blocks, ReduceScatters of
			// the embedding's output and of the LM head's input gradient,
			// an Allgather of the LM head's input and one of the embedding
			// output's gradient, whose rows each device adds into its
			// vocabulary range of the table's gradient (not a
			// ReduceScatter of the whole table).
			"Allgather tp":     130 * (8 * 8192 * 4096 * 2) * 7 / 8,
			"ReduceScatter tp": 130 * (8 * 8192 * 4096 * 2) * 7 / 8,
		}},
		{"dp=2,fsdp=4,tp=8", false, map[int]string{8: "fsdp", 32: "dp"}, map[string]int64{
			"Allgather fsdp":     psiTP*3/4 + regatheredTP*3/4,
			"ReduceScatter fsdp": psiTP * 3 / 4,
			"Allreduce dp":       2 * (psiTP / 4) / 2,
		}},
		// torchtitan's FSDP over dp_shard × cp: each weight gathered
		// and its gradient reduce-scattered over the 8 devices, Ψ·7/8
		// each way, here along cp (Ψ/8) and then fsdp (Ψ·3/4), and the
		// weights the backward reads gathered again the same two ways
		// (reshard_after_forward, FSDP2's default); and
		// context parallelism's Allgathers of each layer's keys and
		// values, b·(s/cp)·kv·d = 16 · 4096 · 1 · 128 elements, 16 MiB
		// each, 64 of them; and their gradients reduce-scattered back,
		// the same bytes: sdpa's enable_gqa sums each key/value head's
		// group of 4 query heads inside dK's and dV's contraction, so
		// that the unrepeated heads are reduced.
		{"fsdp=4,cp=2,tp=8", false, map[int]string{1: "tp", 8: "cp", 16: "fsdp"}, map[string]int64{
			"Allgather fsdp":     psiTP*3/4 + regatheredTP*3/4,
			"ReduceScatter fsdp": psiTP * 3 / 4,
			"Allgather cp":       psiTP/8 + regatheredTP/8 + 64*kvCP,
			"ReduceScatter cp":   psiTP/8 + 64*kvCP,
			// Megatron-LM's 4 a block and 2 more, as on dp=8,tp=8, of
			// A = 16 sequences · 4096 tokens · 4096 · 2 B.
			"Allreduce tp": 130 * 2 * (16 * 4096 * 4096 * 2) * 7 / 8,
		}},
	}
	for _, tc := range tests {
		name := tc.mesh
		args := []string{"../../testdata/models/llama3_8b/config.json", "--mesh", tc.mesh,
			"--batch", "64", "--seq", "8192", "--backward"}
		if tc.sp {
			name, args = name+" --sp", append(args, "--sp")
		}
		t.Run(name, func(t *testing.T) {
			p := modelPlan(t, args...)
			got := map[string]int64{}
			for i := range p.Steps {
				s := &p.Steps[i]
				axis, ok := axisOf(s, tc.strides)
				if _, wanted := tc.want[s.Type+" "+axis]; !ok || s.Bytes == nil || isLoss(p, s) || tc.sp && !wanted {
					continue
				}
				got[s.Type+" "+axis] += s.Bytes.ReceivedPerDevice
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("bytes received by the busiest device, by collective and axis (-closed form +nvcomm):\n%s", d)
			}
		})
	}
}

// axisOf names the mesh axis of collective s by its first team's stride.
func axisOf(s *plan.Step, strides map[int]string) (string, bool) {
	if s.Kind != "collective" || len(s.Teams) == 0 || len(s.Teams[0]) < 2 {
		return "", false
	}
	axis, ok := strides[s.Teams[0][1]-s.Teams[0][0]]
	return axis, ok
}

// isLoss reports whether step s serves the loss (its op's output is the
// loss or one of its parts), which the closed forms leave out.
func isLoss(p *plan.Plan, s *plan.Step) bool {
	out := p.Ops[s.Op].Output
	return len(out) >= 4 && out[:4] == "loss"
}

// TestExpertParallelDispatchBytes holds the expert-parallel counts of a
// Mixtral 8×7B training step (ep=8,tp=8, batch 8 of 4096 tokens,
// bfloat16; docs/models.md, "Mixture of experts") to GShard's and
// Megatron-LM's MoE closed form: each layer's dispatch and combine are an
// AllToAll along ep each, forward, and their gradients an AllToAll back
// each, backward, of the same bytes: (ep−1)/ep · (b/ep) · E·C · hidden ·
// 2 B = 7/8 · 8 · 1280 · 4096 · 2 B, 4 a layer, 128 in all. The experts'
// weights' gradients stay on their devices; the other weights' (Ψ per tp
// rank) are all-reduced along ep, 2Ψ·7/8. The optimal policy sends 1/8 of
// the slots across ep×tp and gathers the rest within tp, the same
// forward and backward too. The loss's Allreduces are counted apart.
func TestExpertParallelDispatchBytes(t *testing.T) {
	if testing.Short() {
		t.Skip("lowers two whole Mixtral 8x7B steps")
	}
	const alltoall = 7 * 8 * 1280 * 4096 * 2 / 8 // 73,400,320 B
	// A tp rank's parameters outside the experts: per layer wq, wk, wv
	// and wo split along tp, the router and two norms whole; the
	// vocabulary-parallel embedding and LM head, and the final norm.
	const attention = (2*4096*4096 + 2*4096*1024) / 8
	const psi = (32*(attention+8*4096+2*4096) + 2*32000*4096/8 + 4096) * 2
	type count struct{ Steps, Bytes int64 }
	tests := []struct {
		policy string
		want   map[string]count
	}{
		{"nvfuser", map[string]count{
			"AllToAll ep":  {128, 128 * alltoall},
			"Allreduce ep": {227, 2 * psi * 7 / 8},
		}},
		{"optimal", map[string]count{
			"AllToAllV ep×tp": {128, 128 * alltoall / 7},
			"Allgather tp":    {128, 128 * alltoall},
			"Allreduce ep":    {227, 2 * psi * 7 / 8},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.policy, func(t *testing.T) {
			p := modelPlan(t, "../../testdata/models/mixtral_8x7b/config.json", "--mesh", "ep=8,tp=8",
				"--batch", "8", "--seq", "4096", "--backward", "--policy", tc.policy)
			got := map[string]count{}
			for i := range p.Steps {
				s := &p.Steps[i]
				axis, ok := axisOf(s, map[int]string{1: "tp", 8: "ep"})
				if len(s.Teams) > 0 && len(s.Teams[0]) == 64 {
					axis, ok = "ep×tp", true
				}
				key := s.Type + " " + axis
				// Every collective along ep is counted, so that a
				// ReduceScatter of the dispatch's gradient fails.
				if _, wanted := tc.want[key]; !ok || s.Bytes == nil || isLoss(p, s) || !wanted && axis == "tp" {
					continue
				}
				c := got[key]
				got[key] = count{c.Steps + 1, c.Bytes + s.Bytes.ReceivedPerDevice}
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("steps and bytes received by the busiest device, by collective and axis (-closed form +nvcomm):\n%s", d)
			}
		})
	}
}

// TestExpertDataParallelGradients holds the gradient reductions of a
// Mixtral 8×7B step with expert parallelism inside data parallelism
// (dp=2,ep=4,tp=8, Megatron-LM's expert-data-parallel groups) and inside
// FSDP (fsdp=2,ep=4,tp=8): each device's experts' gradients (Ψ_E bytes
// a device) are reduced along dp or fsdp only — the devices that hold
// the same experts — never along ep; the other weights' (Ψ a tp rank)
// over dp × ep with Megatron-LM's bytes, 2Ψ·7/8 (reduce-scattered
// along ep, the shard all-reduced along dp and gathered along ep), or
// reduce-scattered along fsdp and the shard all-reduced along ep
// (HSDP's order). The dispatch and combine are 4 AllToAlls
// a layer along ep, each 3/4 · (8/8 sequences) · 8 · 1280 · 4096 · 2 B.
// In a pipeline (pp=2,dp=2,ep=4,tp=8, 2 micro-batches of 8 sequences,
// under the optimal policy, which moves data between 2-D stage meshes)
// the two stages together reduce each gradient once a step, along the
// same axes and of the same bytes: the micro-batches' partial sums are
// accumulated first. Under context parallelism (cp=2,ep=4,tp=8, 8
// sequences of 8192 tokens) cp's devices hold the same weights, as dp's
// do: the experts' gradients are all-reduced along cp, the others' over
// ep × cp as over dp × ep above; each layer gathers its keys and values along cp (b/ep ·
// s/cp · kv_heads/tp · head_dim elements each, and their gradients
// reduce-scattered back), and its AllToAlls carry each device's cp slice
// of its 2 sequences: 3/4 · 2 · 8 · 1280 · 4096 · 2 B, the capacity
// ⌈2·4096/8 · 1.25⌉ of a slice of 4096 tokens.
func TestExpertDataParallelGradients(t *testing.T) {
	if testing.Short() {
		t.Skip("lowers four whole Mixtral 8x7B steps")
	}
	const alltoall = 3 * 8 * 1280 * 4096 * 2 / 4 // 62,914,560 B
	const psi = 201_854_976 * 2                  // the non-expert weights, a tp rank's (TestExpertParallelDispatchBytes)
	const psiE = 96 * 2 * 4096 * 14336 / 8 * 2   // 3 expert weights a layer, 2 experts of 8 a device, ffn over tp
	// The weights the backward reads, gathered again under FSDP: all
	// but the embedding table's eighth and the 65 norms' weights.
	const regathered = psi + psiE - 32000*4096/8*2 - 65*4096*2
	const kvCP = 2 * 4096 * 1 * 128 * 2 // a layer's keys (or values) on a device of cp=2,ep=4,tp=8: 2 sequences' 4096 tokens, 1 head
	type count struct{ Steps, Bytes int64 }
	tests := []struct {
		mesh    string
		strides map[int]string
		want    map[string]count
		flags   []string // after the others: the last of a flag given twice counts
	}{
		// The non-expert gradients summed over the dp × ep group of 8 in
		// three collectives, one mesh axis each: reduce-scattered along
		// ep, the shard all-reduced along dp, gathered along ep:
		// Ψ·3/4 + 2(Ψ/4)·1/2 + Ψ·3/4 = 2Ψ·7/8, Megatron-LM's one
		// Allreduce over the data-parallel group.
		{"dp=2,ep=4,tp=8", map[int]string{1: "tp", 8: "ep", 32: "dp"}, map[string]count{
			"AllToAll ep":      {128, 128 * alltoall},
			"ReduceScatter ep": {227, psi * 3 / 4},
			"Allgather ep":     {227, psi * 3 / 4},
			"Allreduce dp":     {96 + 227, 2*psiE/2 + 2*(psi/4)/2},
		}, nil},
		{"fsdp=2,ep=4,tp=8", map[int]string{1: "tp", 8: "ep", 32: "fsdp"}, map[string]count{
			"AllToAll ep":        {128, 128 * alltoall},
			"Allreduce ep":       {227, 2 * (psi / 2) * 3 / 4}, // of the shard, as HSDP's
			"Allgather fsdp":     {323 + 257, (psi+psiE)/2 + regathered/2},
			"ReduceScatter fsdp": {96 + 227, (psiE + psi) / 2},
		}, nil},
		// The optimal policy's AllToAllVs span a stage's 64 devices
		// (their first team's stride 1, tp's: left out).
		{"pp=2,dp=2,ep=4,tp=8", map[int]string{1: "tp", 8: "ep", 32: "dp"}, map[string]count{
			"Allreduce ep": {227, 2 * psi * 3 / 4},
			"Allreduce dp": {96 + 227, 2*psiE/2 + 2*psi/2},
		}, []string{"--batch", "16", "--microbatches", "2", "--policy", "optimal"}},
		{"cp=2,ep=4,tp=8", map[int]string{1: "tp", 8: "ep", 32: "cp"}, map[string]count{
			"AllToAll ep":      {128, 128 * 2 * alltoall},
			"ReduceScatter ep": {227, psi * 3 / 4},
			"Allgather ep":     {227, psi * 3 / 4},
			"Allreduce cp":     {96 + 227, 2*psiE/2 + 2*(psi/4)/2},
			"Allgather cp":     {64, 64 * kvCP},
			"ReduceScatter cp": {64, 64 * kvCP},
		}, []string{"--seq", "8192"}},
	}
	for _, tc := range tests {
		t.Run(tc.mesh, func(t *testing.T) {
			p := modelPlan(t, append([]string{"../../testdata/models/mixtral_8x7b/config.json", "--mesh", tc.mesh,
				"--batch", "8", "--seq", "4096", "--backward", "--policy", "nvfuser"}, tc.flags...)...)
			got := map[string]count{}
			for i := range p.Steps {
				s := &p.Steps[i]
				axis, ok := axisOf(s, tc.strides)
				if !ok || axis == "tp" || s.Bytes == nil || isLoss(p, s) {
					continue
				}
				key := s.Type + " " + axis
				c := got[key]
				got[key] = count{c.Steps + 1, c.Bytes + s.Bytes.ReceivedPerDevice}
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("steps and bytes received by the busiest device, by collective and axis (-closed form +nvcomm):\n%s", d)
			}
		})
	}
}
