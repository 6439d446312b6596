package sim

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nvcomm/nvcomm/internal/ops"
	"github.com/nvcomm/nvcomm/internal/plan"
)

// TestSDPADefinition proves sdpa's expansion (permute, matmul, the scale,
// the softmax composite's steps, matmul) equal, exactly, to the
// simulator's own definition of attention (sdpaDef), on random data of
// several shapes, and that the definition tells apart an attention of
// another scale and one whose softmax runs over the queries.
func TestSDPADefinition(t *testing.T) {
	r := rand.New(rand.NewPCG(26, 3))
	for _, tc := range []struct {
		q, k, v []int
	}{
		{[]int{4, 3}, []int{5, 3}, []int{5, 2}},
		{[]int{2, 4, 6}, []int{2, 4, 6}, []int{2, 4, 6}},
		{[]int{2, 2, 3, 4}, []int{2, 2, 5, 4}, []int{2, 2, 5, 3}},
	} {
		ins := []operand{randomOperand(r, "q", tc.q), randomOperand(r, "k", tc.k), randomOperand(r, "v", tc.v)}
		want := mustDef(t, &plan.Of{Op: "sdpa"}, ins...)
		got := expanded(t, "sdpa", ins, ops.Attrs{Axis: -1, Values: ops.Values{{Key: ops.AttrCausal}}})
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("sdpa of %v, %v, %v: the expansion differs from the definition (-definition +expansion):\n%s", tc.q, tc.k, tc.v, d)
		}
		// q scaled by 2 is another scale of the scores: a mismatch.
		twice := ins[0]
		twice.vals = slices.Clone(twice.vals)
		for i := range twice.vals {
			twice.vals[i] = fnMul(twice.vals[i], 2)
		}
		twice.v = stored(twice.vals)
		if slices.Equal(want, mustDef(t, &plan.Of{Op: "sdpa"}, twice, ins[1], ins[2])) {
			t.Errorf("sdpa of %v: another scale gives the same values", tc.q)
		}
	}
}

// TestSDPADefinitionShapes checks that the definition refuses operands
// that are not [..., s, d], [..., t, d], [..., t, dv].
func TestSDPADefinitionShapes(t *testing.T) {
	r := rand.New(rand.NewPCG(26, 4))
	for _, tc := range []struct {
		name    string
		q, k, v []int
	}{
		{"rank 1", []int{4}, []int{4}, []int{4}},
		{"ranks differ", []int{4, 3}, []int{1, 5, 3}, []int{5, 2}},
		{"d differs", []int{4, 3}, []int{5, 2}, []int{5, 2}},
		{"t differs", []int{4, 3}, []int{5, 3}, []int{6, 2}},
		{"heads differ", []int{2, 4, 3}, []int{3, 5, 3}, []int{3, 5, 2}},
	} {
		ins := []operand{randomOperand(r, "q", tc.q), randomOperand(r, "k", tc.k), randomOperand(r, "v", tc.v)}
		if _, err := compositeDef(&plan.Of{Op: "sdpa"}, ins); err == nil {
			t.Errorf("%s: no error", tc.name)
		}
	}
}
