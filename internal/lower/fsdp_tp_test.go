package lower

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nvcomm/nvcomm/internal/plan"
	"github.com/nvcomm/nvcomm/internal/syntax"
)

// TestFSDPTPCounts lowers fsdp_tp_mlp_backward (FSDP2 along the rows of
// a 2x4 mesh, Megatron-LM's TP MLP along the columns: torchtitan's 2-D)
// at a realistic size — 8,192 tokens, hidden 4,096, ffn 16,384, bfloat16
// — and holds its collectives, by phase and mesh axis, and the bytes
// each device receives for them to the frameworks' counts
// (transformers.md §3, §4 of the references):
//
//   - FSDP2 along dp: one Allgather of each weight's TP shard before its
//     forward use, one ReduceScatter of each weight gradient into the
//     shard it keeps, each (dp−1)/dp of the TP shard's bytes; as the
//     example is written the backward reads the gathered copies the
//     forward saved, so it has no second Allgather (FSDP2's
//     reshard_after_forward=False), and with reshard_after_forward: true
//     it gathers each weight again before its backward use (FSDP2's
//     default): 3·(dp−1)/dp of the TP shards' bytes where the first has 2;
//   - Megatron-LM's TP MLP along tp: one Allreduce forward (g, after the
//     row-parallel linear) and one backward (f, the column-parallel
//     linear's input gradient), each 2(tp−1)/tp of the activation.
func TestFSDPTPCounts(t *testing.T) {
	const tokens, hidden, ffn, bf16, dp, tp = 8192, 4096, 16384, 2, 2, 4
	type counts map[string]map[string]int    // phase/axis -> collective type -> count
	shard := int64(hidden * ffn * bf16 / tp) // a weight's TP shard
	act := int64(tokens / dp * hidden * bf16)
	src, err := os.ReadFile("../../testdata/examples/fsdp_tp_mlp_backward.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, back string // back is added to the backward section
		backDP     counts // the backward's collectives along dp
		gathers    int64  // the weights' gathers of the step: their TP shards' bytes times (dp−1)/dp
	}{
		{"kept for the backward", "", counts{"backward/dp": {"ReduceScatter": 2}}, 2},
		{"reshard_after_forward", "  reshard_after_forward: true\n", counts{"backward/dp": {"Allgather": 2, "ReduceScatter": 2}}, 4},
	} {
		want := counts{
			"forward/dp":  {"Allgather": 2},
			"forward/tp":  {"Allreduce": 1},
			"backward/dp": tc.backDP["backward/dp"],
			"backward/tp": {"Allreduce": 1},
		}
		wantBytes := map[string]int64{
			"forward/dp":  2 * shard * (dp - 1) / dp,
			"forward/tp":  2 * act * (tp - 1) / tp,
			"backward/dp": tc.gathers * shard * (dp - 1) / dp,
			"backward/tp": 2 * act * (tp - 1) / tp,
		}
		sized := strings.NewReplacer(
			"shape: [256, 64]", fmt.Sprintf("dtype: bfloat16, shape: [%d, %d]", tokens, hidden),
			"shape: [128, 64]", fmt.Sprintf("dtype: bfloat16, shape: [%d, %d]", ffn, hidden),
			"shape: [64, 128]", fmt.Sprintf("dtype: bfloat16, shape: [%d, %d]", hidden, ffn),
		).Replace(string(src)) + tc.back
		f, err := syntax.Parse("fsdp_tp_mlp_backward.yaml", []byte(sized))
		if err != nil {
			t.Fatal(err)
		}
		for _, policy := range []Policy{PolicyOptimal, PolicyNvFuser} {
			t.Run(tc.name+"/"+string(policy), func(t *testing.T) {
				p, err := Lower(f, Options{Policy: policy})
				if err != nil {
					t.Fatal(err)
				}
				got, bytes := collectivesByAxis(p)
				if d := cmp.Diff(want, counts(got)); d != "" {
					t.Errorf("collectives by phase and mesh axis (-FSDP2 and Megatron-LM +nvcomm):\n%s", d)
				}
				if d := cmp.Diff(wantBytes, bytes); d != "" {
					t.Errorf("bytes received per device (-FSDP2 and Megatron-LM +nvcomm):\n%s", d)
				}
			})
		}
	}
}

// collectivesByAxis counts the collectives of p, a plan on the 2x4 mesh
// of fsdp_tp_mlp_backward, by "phase/axis" (forward or backward; dp for
// the teams of a column, [0 4] ..., tp for those of a row, [0 1 2 3] ...)
// and type, with the bytes the busiest device receives for each key.
func collectivesByAxis(p *plan.Plan) (map[string]map[string]int, map[string]int64) {
	first := slices.IndexFunc(p.Ops, func(o plan.Op) bool { return o.Of != nil && o.Of.Grad })
	got, bytes := map[string]map[string]int{}, map[string]int64{}
	for _, s := range p.Steps {
		if slices.Contains(plan.LocalTypes, s.Type) {
			continue
		}
		key := "forward/"
		if first >= 0 && s.Op >= first {
			key = "backward/"
		}
		axis := "tp"
		if len(s.Teams) > 0 && len(s.Teams[0]) == 2 {
			axis = "dp"
		}
		key += axis
		if got[key] == nil {
			got[key] = map[string]int{}
		}
		got[key][string(s.Type)]++
		bytes[key] += s.Bytes.ReceivedPerDevice
	}
	return got, bytes
}

// TestFSDPReshardAfterForward lowers fsdp_mlp_backward_reshard (FSDP2's
// default step on 4 devices) and its variant that keeps the gathered
// copies, under both policies, and holds them to FSDP2's counts: with
// reshard_after_forward each weight is gathered once before the forward
// and again in the backward, just before the first op that reads the
// backward's copy, 3·(n−1)/n of the parameter bytes a step against 2·(n−1)/n;
// and no backward op reads the forward's gathered copies, whose lifetime
// ends with the forward (the optimal policy does not stand them in for
// the backward's).
func TestFSDPReshardAfterForward(t *testing.T) {
	const n, params = 4, 2 * 128 * 64 * 4 // two float32 weights
	src, err := os.ReadFile("../../testdata/examples/fsdp_mlp_backward_reshard.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, src string
		gathers   []string // the backward's Allgathers, in order: what they read, then their next op
		received  int64
	}{
		{"reshard_after_forward", string(src), []string{
			"w2 -> y.grad/recomputed_w2_full, then a.grad = matmul(y.grad, y.grad/recomputed_w2_full)",
			"w1 -> h.grad/recomputed_w1_full, then x.grad = matmul(h.grad, h.grad/recomputed_w1_full)"}, 3 * params * (n - 1) / n},
		{"kept", strings.Replace(string(src), "\n  reshard_after_forward: true", "", 1), nil, 2 * params * (n - 1) / n},
	} {
		f, err := syntax.Parse("fsdp_mlp_backward_reshard.yaml", []byte(tc.src))
		if err != nil {
			t.Fatal(err)
		}
		for _, policy := range []Policy{PolicyOptimal, PolicyNvFuser} {
			t.Run(tc.name+"/"+string(policy), func(t *testing.T) {
				p, err := Lower(f, Options{Policy: policy})
				if err != nil {
					t.Fatal(err)
				}
				first := slices.IndexFunc(p.Ops, func(o plan.Op) bool { return o.Of != nil && o.Of.Grad })
				var gathers []string
				var received int64
				for _, s := range p.Steps {
					if s.Bytes != nil {
						received += s.Bytes.ReceivedPerDevice
					}
					if s.Type == plan.Allgather && s.Op >= first {
						gathers = append(gathers, fmt.Sprintf("%s -> %s, then %s", s.Input, s.Output, p.Ops[s.Op+1].Expr()))
					}
				}
				if d := cmp.Diff(tc.gathers, gathers); d != "" {
					t.Errorf("the backward's Allgathers (-FSDP2 +nvcomm):\n%s", d)
				}
				if received != tc.received {
					t.Errorf("received %d bytes per device, want %d", received, tc.received)
				}
				for _, o := range p.Ops[first:] {
					if tc.gathers != nil && slices.ContainsFunc(o.Operands(), func(in string) bool { return in == "w1_full" || in == "w2_full" }) {
						t.Errorf("backward op %s reads the forward's gathered copy", o.Expr())
					}
				}
			})
		}
	}
}
