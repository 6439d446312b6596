package lower

import (
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nvcomm/nvcomm/internal/ops"
	"github.com/nvcomm/nvcomm/internal/plan"
	"github.com/nvcomm/nvcomm/internal/syntax"
)

// TestMegatronBlockCounts lowers the GPT-3 blocks of testdata/examples at
// a realistic size — b 1, s 2048, e 12288, 96 heads, bfloat16, nvFuser's
// test_transformer.py — on 4 and 8 devices, and checks each block's
// forward collectives against Megatron-LM's per layer (Shoeybi et al.,
// 2019; Korthikanti et al., 2022): tensor parallelism 2 Allreduces,
// sequence parallelism 2 Allgathers and 2 ReduceScatters, under both
// policies.
func TestMegatronBlockCounts(t *testing.T) {
	for _, tc := range []struct {
		example string
		want    map[string]int
	}{
		{"gpt3_block_tp", map[string]int{"Allreduce": 2}},
		{"gpt3_block_tp_sp", map[string]int{"Allgather": 2, "ReduceScatter": 2}},
	} {
		src, err := os.ReadFile("../../testdata/examples/" + tc.example + ".yaml")
		if err != nil {
			t.Fatal(err)
		}
		for _, devices := range []int{4, 8} {
			for _, policy := range []Policy{PolicyOptimal, PolicyNvFuser} {
				t.Run(fmt.Sprintf("%s/%d/%s", tc.example, devices, policy), func(t *testing.T) {
					p := lowerAtGPT3Size(t, tc.example, src, devices, policy)
					if d := cmp.Diff(tc.want, p.Summary.ByType); d != "" {
						t.Errorf("collectives (-Megatron-LM +nvcomm):\n%s", d)
					}
				})
			}
		}
	}
}

// gpt3Size rewrites a GPT-3 block example (b 2, s 8, e 16, 4 heads of 4,
// float64, on 4 devices) to b 1, s 2048, e 12288, 96 heads of 128 in
// bfloat16 on the given number of devices: each shape list of the
// example's sizes becomes the realistic one, each slice's bounds scale
// with the head dim.
func gpt3Size(src string, devices int) string {
	const b, s, e, h = 1, 2048, 12288, 96
	dh := e / h
	lists := map[string][]int{
		"[2, 8, 16]": {b, s, e}, "[48, 16]": {3 * e, e}, "[48]": {3 * e}, "[16, 16]": {e, e}, "[16]": {e},
		"[64, 16]": {4 * e, e}, "[64]": {4 * e}, "[16, 64]": {e, 4 * e}, "[2, 8, 4, 12]": {b, s, h, 3 * dh},
	}
	src = regexp.MustCompile(`\[[0-9, ]+\]`).ReplaceAllStringFunc(src, func(l string) string {
		if v, ok := lists[l]; ok {
			return strings.ReplaceAll(fmt.Sprint(v), " ", ", ")
		}
		return l
	})
	src = regexp.MustCompile(`start: (\d+), end: (\d+)`).ReplaceAllStringFunc(src, func(w string) string {
		var lo, hi int
		fmt.Sscanf(w, "start: %d, end: %d", &lo, &hi)
		return fmt.Sprintf("start: %d, end: %d", lo/4*dh, hi/4*dh)
	})
	mesh := make([]string, devices)
	for i := range mesh {
		mesh[i] = fmt.Sprint(i)
	}
	src = strings.Replace(src, "tp: [0, 1, 2, 3]", "tp: ["+strings.Join(mesh, ", ")+"]", 1)
	src = strings.ReplaceAll(src, "factor: 4}", fmt.Sprintf("factor: %d}", devices))
	return strings.ReplaceAll(src, "float64", "bfloat16")
}

// TestMegatronBackwardCounts lowers the GPT-3 blocks with a backward
// section (tp_block_backward, sp_block_backward) at the realistic size of
// TestMegatronBlockCounts on 4 and 8 devices and holds each phase's
// collectives to Megatron-LM's per layer (Shoeybi et al., 2019;
// Korthikanti et al., 2022; transformers.md §3 of the references):
//
//   - tensor parallelism: 2 Allreduces forward (g), 2 backward (f, the
//     input gradients of the column-parallel linears), no gradient
//     reduction (every replicated weight's gradient is computed from
//     replicated gradients);
//   - sequence parallelism: 2 Allgathers and 2 ReduceScatters forward, and
//     their conjugates backward (the row-parallel linears' output
//     gradients gathered, the column-parallel input gradients
//     reduce-scattered); Megatron gathers the saved sequence-split inputs
//     of the column-parallel linears again for their weight gradients (+2
//     Allgathers), where the optimal policy reads the forward's gathered
//     copies (saved activations) unless the backward section lists them
//     under regather, which gives Megatron's 4; nvFuser's policy makes one copy per op,
//     so it gathers them again as Megatron does and gathers each output
//     gradient twice, for the input gradient and for its transpose (+2).
//     The gradient reduction is one Allreduce per sequence-parallel norm
//     weight and bias and row-parallel bias (6), which Megatron-LM sums in
//     one bucket (finalize_model_grads.py): the same bytes, 2(n−1)/n of
//     the six vectors.
//
// A collective is of the backward from the first op of a gradient on,
// and of the gradient reduction when its op is a reduction (the sum of a
// weight's or bias's gradient over the tokens).
func TestMegatronBackwardCounts(t *testing.T) {
	type phases map[string]map[string]int
	tp := phases{"forward": {"Allreduce": 2}, "backward": {"Allreduce": 2}}
	sp := phases{"forward": {"Allgather": 2, "ReduceScatter": 2}, "backward": {"Allgather": 2, "ReduceScatter": 2},
		"gradient reduction": {"Allreduce": 6}}
	spNvFuser := phases{"forward": {"Allgather": 2, "ReduceScatter": 2}, "backward": {"Allgather": 6, "ReduceScatter": 2},
		"gradient reduction": {"Allreduce": 6}}
	spRegather := phases{"forward": {"Allgather": 2, "ReduceScatter": 2}, "backward": {"Allgather": 4, "ReduceScatter": 2},
		"gradient reduction": {"Allreduce": 6}}
	for _, tc := range []struct {
		example, back string // back is added to the example's backward section
		want          map[Policy]phases
		reduced       int // vectors of the model dim whose gradients the reduction sums
	}{
		{"tp_block_backward", "", map[Policy]phases{PolicyOptimal: tp, PolicyNvFuser: tp}, 0},
		{"sp_block_backward", "", map[Policy]phases{PolicyOptimal: sp, PolicyNvFuser: spNvFuser}, 6},
		// Megatron-LM's count: the saved inputs gathered again.
		{"sp_block_backward", "  regather: [ln1, ln2]\n", map[Policy]phases{PolicyOptimal: spRegather, PolicyNvFuser: spNvFuser}, 6},
	} {
		src, err := os.ReadFile("../../testdata/examples/" + tc.example + ".yaml")
		if err != nil {
			t.Fatal(err)
		}
		src = append(src, tc.back...)
		for _, devices := range []int{4, 8} {
			for _, policy := range []Policy{PolicyOptimal, PolicyNvFuser} {
				t.Run(fmt.Sprintf("%s%s/%d/%s", tc.example, map[bool]string{true: "+regather"}[tc.back != ""], devices, policy), func(t *testing.T) {
					p := lowerAtGPT3Size(t, tc.example, src, devices, policy)
					got, reduced := phasesOf(p)
					if d := cmp.Diff(tc.want[policy], phases(got)); d != "" {
						t.Errorf("collectives per phase (-Megatron-LM +nvcomm):\n%s", d)
					}
					const e, bf16 = 12288, 2
					if want := int64(2*(devices-1)*tc.reduced*e*bf16) / int64(devices); reduced != want {
						t.Errorf("gradient reduction receives %d bytes per device, want %d: one bucket's", reduced, want)
					}
				})
			}
		}
	}
}

// phasesOf counts p's collectives by phase and type (forward, backward,
// gradient reduction: TestMegatronBackwardCounts), with the bytes the
// busiest device receives in the gradient reduction.
func phasesOf(p *plan.Plan) (map[string]map[string]int, int64) {
	first := slices.IndexFunc(p.Ops, func(o plan.Op) bool { return o.Of != nil && o.Of.Grad })
	got := map[string]map[string]int{}
	var reduced int64
	for _, s := range p.Steps {
		if slices.Contains(plan.LocalTypes, s.Type) {
			continue
		}
		phase := "forward"
		switch op := p.Ops[s.Op]; {
		case first >= 0 && s.Op >= first && ops.Is(op.Op, ops.Reduction):
			phase = "gradient reduction"
			reduced += s.Bytes.ReceivedPerDevice
		case first >= 0 && s.Op >= first:
			phase = "backward"
		}
		if got[phase] == nil {
			got[phase] = map[string]int{}
		}
		got[phase][s.Type]++
	}
	return got, reduced
}

// lowerAtGPT3Size lowers the example src (named example) at GPT-3's size
// on the given number of devices (gpt3Size) under policy.
func lowerAtGPT3Size(t *testing.T, example string, src []byte, devices int, policy Policy) *plan.Plan {
	t.Helper()
	f, err := syntax.Parse(example+".yaml", []byte(gpt3Size(string(src), devices)))
	if err != nil {
		t.Fatal(err)
	}
	p, err := Lower(f, Options{Policy: policy})
	if err != nil {
		t.Fatal(err)
	}
	return p
}
