package sim

import (
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nvcomm/nvcomm/internal/ops"
	"github.com/nvcomm/nvcomm/internal/plan"
)

// TestMoEDefinitions checks the routing ops' definitions on a group whose
// answer is written out: ties go to the lowest expert, the tokens fill
// each expert's queue in order, and a token past the capacity is dropped
// by that expert only.
func TestMoEDefinitions(t *testing.T) {
	// 1 group, 4 tokens, 3 experts.
	probs := []float64{
		5, 1, 3, // experts 0 and 2
		2, 2, 2, // a three-way tie: experts 0 and 1
		1, 4, 4, // a tie for first: 1 and 2
		9, 0, 8, // 0 and 2: expert 0's third token, past capacity 2
	}
	wantSel := []float64{
		1, 0, 1,
		1, 1, 0,
		0, 1, 1,
		1, 0, 1,
	}
	in := operand{name: "probs", vals: probs, v: stored(probs), shape: []int{1, 4, 3}}
	sel := mustDef(t, &plan.Of{Op: "moe_topk", TopK: 2}, in)
	if d := cmp.Diff(wantSel, sel); d != "" {
		t.Errorf("moe_topk (-want +got):\n%s", d)
	}
	// Slots (token: expert→slot): 0: 0→0, 2→0; 1: 0→1, 1→0; 2: 1→1,
	// 2→1; 3: 0→2 (dropped), 2→2 (dropped).
	wantMask := []float64{
		1, 0, 0, 0, 1, 0, // token 0: expert 0 slot 0, expert 1 none, expert 2 slot 0
		0, 1, 1, 0, 0, 0,
		0, 0, 0, 1, 0, 1,
		0, 0, 0, 0, 0, 0,
	}
	s := operand{name: "sel", vals: sel, v: stored(sel), shape: []int{1, 4, 3}}
	if d := cmp.Diff(wantMask, mustDef(t, &plan.Of{Op: "moe_dispatch", Capacity: 2}, s)); d != "" {
		t.Errorf("moe_dispatch (-want +got):\n%s", d)
	}
}

// TestMoEExpansion proves the registry's expansions of moe_topk and
// moe_dispatch (comparisons, tril, sums, a matmul) equal, exactly, to
// the simulator's definitions, on random data with many ties (values 0
// to 3) and on a softmax's output (values of the second sort), for
// several shapes (groups of one dim or two), top_k and capacities, some
// small enough to drop tokens.
func TestMoEExpansion(t *testing.T) {
	r := rand.New(rand.NewPCG(30, 1))
	for _, tc := range []struct {
		shape    []int
		k, c     int
		softmax  bool
		dropsAny bool
	}{
		{[]int{2, 6, 4}, 2, 6, false, false},
		{[]int{1, 8, 8}, 2, 1, false, true},
		{[]int{3, 5, 3}, 1, 5, true, false},
		{[]int{2, 8, 4}, 2, 2, true, true},
		{[]int{2, 3, 6, 4}, 2, 2, false, true},
		{[]int{3, 2, 5, 3}, 1, 5, true, false},
	} {
		vals := make([]float64, product(tc.shape))
		for i := range vals {
			vals[i] = float64(r.IntN(4))
		}
		in := operand{name: "probs", vals: vals, v: stored(vals), shape: tc.shape}
		if tc.softmax {
			p := mustDef(t, &plan.Of{Op: "softmax", Axis: new(len(tc.shape) - 1)}, in)
			in = operand{name: "probs", vals: p, v: stored(p), shape: tc.shape}
		}
		topk := ops.Attrs{Axis: -1, Values: ops.Values{{Key: ops.AttrTopK, Int: tc.k}}}
		sel := mustDef(t, &plan.Of{Op: "moe_topk", TopK: tc.k}, in)
		if d := cmp.Diff(sel, expanded(t, "moe_topk", []operand{in}, topk)); d != "" {
			t.Errorf("moe_topk of %v, k %d: the expansion differs from the definition (-definition +expansion):\n%s", tc.shape, tc.k, d)
		}
		s := operand{name: "sel", vals: sel, v: stored(sel), shape: tc.shape}
		capacity := ops.Attrs{Axis: -1, Values: ops.Values{{Key: ops.AttrCapacity, Int: tc.c}}}
		mask := mustDef(t, &plan.Of{Op: "moe_dispatch", Capacity: tc.c}, s)
		if d := cmp.Diff(mask, expanded(t, "moe_dispatch", []operand{s}, capacity)); d != "" {
			t.Errorf("moe_dispatch of %v, capacity %d: the expansion differs from the definition (-definition +expansion):\n%s", tc.shape, tc.c, d)
		}
		// Each token keeps at most k experts; fewer only where dropped.
		var kept float64
		for _, m := range mask {
			kept += qValue(m)
		}
		tokens := product(tc.shape[:len(tc.shape)-1])
		if dropped := kept < float64(tokens*tc.k); dropped != tc.dropsAny || kept > float64(tokens*tc.k) {
			t.Errorf("moe_dispatch of %v, capacity %d: %v of %d tokens' %d choices kept, want drops %v", tc.shape, tc.c, kept, tokens, tc.k, tc.dropsAny)
		}
	}
}
