package sim

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nvcomm/nvcomm/internal/plan"
)

// TestConcatStep runs Concat steps on small inputs and checks their
// output, and that a step whose fields do not fit is an error.
func TestConcatStep(t *testing.T) {
	a := []float64{0, 1, 2, 3, 4, 5, 6, 7} // [2, 4, 1]
	b := []float64{10, 11, 12, 13}         // [2, 2, 1]
	for _, tc := range []struct {
		name string
		s    plan.Step
		ins  [][]float64
		want []float64
		err  string
	}{
		{"a slice", plan.Step{Input: "a", Dims: []int{2, 2, 1}, Windows: [][]int{{4, 1, 2}}, Count: plan.Count{Input: 8, Output: 4}},
			[][]float64{a}, []float64{1, 2, 5, 6}, ""},
		{"a cat", plan.Step{Inputs: []string{"b", "a"}, Dims: []int{2, 6, 1}, Windows: [][]int{{2, 0, 2}, {4, 0, 4}}, Count: plan.Count{Input: 4, Output: 12}},
			[][]float64{b, a}, []float64{10, 11, 0, 1, 2, 3, 12, 13, 4, 5, 6, 7}, ""},
		{"a window past its input", plan.Step{Input: "a", Dims: []int{2, 2, 1}, Windows: [][]int{{4, 3, 2}}, Count: plan.Count{Input: 8, Output: 4}},
			nil, nil, "step 7 (Concat): windows[0] [4 3 2] must be [m, start, len] with 0 <= start < start+len <= m"},
		{"lens short", plan.Step{Inputs: []string{"b", "a"}, Dims: []int{2, 7, 1}, Windows: [][]int{{2, 0, 2}, {4, 0, 4}}, Count: plan.Count{Input: 4, Output: 14}},
			nil, nil, "step 7 (Concat): the windows' lens sum to 6, but dims[1] is 7"},
		{"count.input", plan.Step{Input: "a", Dims: []int{2, 2, 1}, Windows: [][]int{{4, 0, 2}}, Count: plan.Count{Input: 6, Output: 4}},
			nil, nil, "step 7 (Concat): count.input is 6, dims [2 2 1] and windows[0] give outer·m·inner = 8"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.s.ID, tc.s.Type, tc.s.Kind = 7, plan.Concat, plan.KindLocal
			c, err := concatStep(&tc.s)
			if tc.err != "" || err != nil {
				if d := cmp.Diff(tc.err, errString(err)); d != "" {
					t.Fatalf("error (-want +got):\n%s", d)
				}
				return
			}
			if d := cmp.Diff(tc.want, c.f(0, tc.ins)); d != "" {
				t.Errorf("output (-want +got):\n%s", d)
			}
		})
	}
}
