package lower

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

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
					f, err := syntax.Parse(tc.example+".yaml", []byte(gpt3Size(string(src), devices)))
					if err != nil {
						t.Fatal(err)
					}
					p, err := Lower(f, Options{Policy: policy})
					if err != nil {
						t.Fatal(err)
					}
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
