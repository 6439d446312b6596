package cost

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nvcomm/nvcomm/internal/plan"
)

// kernelPlan is a plan of one float32 op whose steps are steps, each
// step's count 1000 elements in and out.
func kernelPlan(steps ...plan.Step) *plan.Plan {
	p := &plan.Plan{Format: 1, Tensors: []plan.Tensor{{Name: "y", DType: "float32"}}, Ops: []plan.Op{{Output: "y"}}}
	for i, s := range steps {
		s.ID, s.Count = i, plan.Count{Input: 1000, Output: 1000}
		if s.Kind == "" {
			s.Kind = plan.KindLocal
		}
		p.Steps = append(p.Steps, s)
	}
	return p
}

// TestFusedRuns prices runs of elementwise and reduction steps: the
// first step of a run on one set of devices pays the latency, the others
// their bytes at the bandwidth and name the first as the kernel they run
// in; a collective, a layout step or other
// devices start a new run. The ends say how the plan joins others.
func TestFusedRuns(t *testing.T) {
	all, half := []int{0, 1, 2, 3}, []int{0, 1}
	pointwise := func(devices []int) plan.Step {
		return plan.Step{Type: plan.Pointwise, Devices: devices}
	}
	reduce := plan.Step{Type: plan.LocalReduce, Devices: all}
	allreduce := plan.Step{Type: plan.Allreduce, Kind: plan.KindCollective, Teams: [][]int{all}}
	permute := plan.Step{Type: plan.Permute, Devices: all}
	top := Default()
	alone := top.Local(8000)                        // 8000 bytes read and written: α + 2 ns
	streamed := 8000 / (top.Memory.Bandwidth * 1e9) // 2 ns
	tests := map[string]struct {
		plan  *plan.Plan
		want  []float64
		fused []int // each step's FusedInto, -1 for none
		ends  Ends
	}{
		"a norm's steps, one run": {
			plan:  kernelPlan(pointwise(all), reduce, pointwise(all)),
			want:  []float64{alone, streamed, streamed},
			fused: []int{-1, 0, 0},
			ends:  Ends{Head: "[0 1 2 3]", Tail: "[0 1 2 3]", Saving: alone - streamed},
		},
		"a collective ends the run": {
			plan:  kernelPlan(pointwise(all), allreduce, pointwise(all), pointwise(all)),
			want:  []float64{alone, -1, alone, streamed},
			fused: []int{-1, -1, -1, 2},
			ends:  Ends{Head: "[0 1 2 3]", Tail: "[0 1 2 3]", Saving: alone - streamed},
		},
		"a layout step is a kernel of its own": {
			plan:  kernelPlan(permute, pointwise(all), pointwise(all), permute),
			want:  []float64{-1, alone, streamed, -1},
			fused: []int{-1, -1, 1, -1},
		},
		"other devices start a run": {
			plan:  kernelPlan(pointwise(all), pointwise(half), pointwise(half)),
			want:  []float64{alone, alone, streamed},
			fused: []int{-1, -1, 1},
			ends:  Ends{Head: "[0 1 2 3]", Tail: "[0 1]", Saving: alone - streamed},
		},
		"no steps": {plan: kernelPlan(), ends: Ends{Empty: true}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			pr, err := Predict(top, tc.plan)
			if err != nil {
				t.Fatal(err)
			}
			var got []float64
			var fused []int
			for i, st := range pr.Steps {
				got = append(got, st.Seconds)
				fused = append(fused, -1)
				if st.FusedInto != nil {
					fused[i] = *st.FusedInto
				}
				if tc.want[i] < 0 { // not local: as priced alone
					alone, err := top.Step(tc.plan, &tc.plan.Steps[i])
					if err != nil {
						t.Fatal(err)
					}
					tc.want[i] = alone.Seconds
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("step times (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.fused, fused); diff != "" {
				t.Errorf("fused into (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.ends, top.PlanEnds(tc.plan, pr)); diff != "" {
				t.Errorf("ends (-want +got):\n%s", diff)
			}
		})
	}
}
