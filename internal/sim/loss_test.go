package sim

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nvcomm/nvcomm/internal/ops"
	"github.com/nvcomm/nvcomm/internal/plan"
)

// labelsOperand is labels of shape, class indices below v.
func labelsOperand(r *rand.Rand, shape []int, v int) operand {
	vals := make([]float64, product(shape))
	for i := range vals {
		vals[i] = float64(r.IntN(v))
	}
	return operand{name: "labels", v: stored(vals), vals: vals, shape: shape}
}

// TestLossDefinition proves the expansions of log_softmax and
// cross_entropy equal, exactly, to the simulator's own definitions, on
// random data of several shapes, axes and reductions.
func TestLossDefinition(t *testing.T) {
	r := rand.New(rand.NewPCG(26, 3))
	for _, tc := range []struct {
		name      string
		shape     []int
		axis      int    // log_softmax's
		reduction string // cross_entropy's, "" for its default
	}{
		{"log_softmax", []int{4, 8}, 1, ""}, {"log_softmax", []int{4, 8}, 0, ""}, {"log_softmax", []int{2, 3, 5}, 1, ""}, {"log_softmax", []int{7}, 0, ""},
		{"cross_entropy", []int{4, 8}, -1, ""}, {"cross_entropy", []int{4, 8}, -1, ops.ReductionNone}, {"cross_entropy", []int{2, 3, 5}, -1, ops.ReductionMean},
		{"cross_entropy", []int{2, 3, 5}, -1, ops.ReductionNone}, {"cross_entropy", []int{6}, -1, ""},
	} {
		ins := []operand{randomOperand(r, "x", tc.shape)}
		a, def := ops.Attrs{Axis: tc.axis}, &plan.Of{Op: tc.name, Axis: new(tc.axis)}
		if tc.name == "cross_entropy" {
			r := len(tc.shape) - 1
			ins = append(ins, labelsOperand(rand.New(rand.NewPCG(uint64(r), 4)), tc.shape[:r], tc.shape[r]))
			def = &plan.Of{Op: tc.name, Reduction: tc.reduction}
			a = ops.Attrs{Axis: -1, Values: reductionValues(def)}
		}
		want, err := compositeDef(def, ins)
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(want, expanded(t, tc.name, ins, a)); d != "" {
			t.Errorf("%s of %v (axis %d, reduction %q): the expansion differs from the definition (-definition +expansion):\n%s",
				tc.name, tc.shape, tc.axis, tc.reduction, d)
		}
	}
}

// TestLossDefinitionDetects checks that the definitions tell wrong
// results apart: a cross-entropy whose log-sum-exp is not shifted by the
// max (equal in real numbers, not under the simulator's fixed map for
// exp), one of other labels, a mean over another count.
func TestLossDefinitionDetects(t *testing.T) {
	r := rand.New(rand.NewPCG(26, 5))
	x, labels := randomOperand(r, "x", []int{4, 8}), labelsOperand(r, []int{4}, 8)
	none := &plan.Of{Op: "cross_entropy", Reduction: ops.ReductionNone}
	want := mustDef(t, none, x, labels)
	unshifted := make([]float64, 4)
	var total float64
	for o, label := range labels.vals {
		var s float64
		for k := range 8 {
			s = combine("sum", s, fnExp(x.vals[o*8+k], 0))
		}
		unshifted[o] = fnSub(fnLog(s, 0), x.vals[o*8+int(label)])
		total = combine("sum", total, want[o])
	}
	mean := mustDef(t, &plan.Of{Op: "cross_entropy"}, x, labels)
	for _, tc := range []struct {
		name      string
		want, got []float64
	}{
		{"log-sum-exp not shifted by the max", want, unshifted},
		{"other labels", want, mustDef(t, none, x, labelsOperand(rand.New(rand.NewPCG(7, 7)), []int{4}, 8))},
		{"mean over 3 tokens", mean, []float64{fnDiv(total, scalarResidue(3))}},
	} {
		if slices.Equal(tc.want, tc.got) {
			t.Errorf("%s: equal to the definition, want a difference", tc.name)
		}
	}
	if d := cmp.Diff(mean, []float64{fnDiv(total, scalarResidue(4))}); d != "" {
		t.Errorf("the mean is not the per-token losses' sum over 4 (-definition +sum/4):\n%s", d)
	}
}
