package sim

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/nvcomm/nvcomm/internal/plan"
)

func osplit(axis, factor int) plan.ScheduleStep {
	return plan.ScheduleStep{OuterSplit: &plan.SplitArgs{Axis: axis, Factor: factor}}
}

func isplit(axis, factor int) plan.ScheduleStep {
	return plan.ScheduleStep{Split: &plan.SplitArgs{Axis: axis, Factor: factor}}
}

func mergeAt(axis int) plan.ScheduleStep {
	return plan.ScheduleStep{Merge: &plan.AxisArgs{Axis: axis}}
}

func reorderTo(order ...int) plan.ScheduleStep {
	return plan.ScheduleStep{Reorder: order}
}

func par(axis int, typ string) plan.ScheduleStep {
	return plan.ScheduleStep{Parallelize: &plan.ParallelizeArgs{Axis: axis, Type: typ}}
}

func mesh1(devs ...int) plan.Mesh {
	return plan.Mesh{Shape: []int{len(devs)}, Devices: devs}
}

func idx(rows ...[]int) [][]int { return rows }

// ints turns 1-D indices into [][]int.
func ints(vs ...int) [][]int {
	out := make([][]int, len(vs))
	for i, v := range vs {
		out[i] = []int{v}
	}
	return out
}

func TestShard(t *testing.T) {
	mesh22 := plan.Mesh{Shape: []int{2, 2}, Devices: []int{0, 1, 2, 3}}
	seedTensor := plan.Tensor{Name: "tv0", Shape: []int{2, 12}, Schedule: []plan.ScheduleStep{osplit(1, 4), par(1, "DIDx")}}
	tests := map[string]struct {
		t      plan.Tensor
		m      plan.Mesh
		device int
		want   [][]int
	}{
		"block": {
			t:      plan.Tensor{Shape: []int{8}, Schedule: []plan.ScheduleStep{osplit(0, 4), par(0, "DIDx")}},
			m:      mesh1(0, 1, 2, 3),
			device: 1,
			want:   ints(2, 3),
		},
		"strided": {
			t:      plan.Tensor{Shape: []int{6}, Schedule: []plan.ScheduleStep{isplit(0, 2), par(1, "DIDx")}},
			m:      mesh1(0, 1),
			device: 0,
			want:   ints(0, 2, 4),
		},
		"strided uneven, hole skipped": {
			t:      plan.Tensor{Shape: []int{5}, Schedule: []plan.ScheduleStep{isplit(0, 2), par(1, "DIDx")}},
			m:      mesh1(0, 1),
			device: 1,
			want:   ints(1, 3),
		},
		"nested on a 2-D mesh": {
			t: plan.Tensor{Shape: []int{8}, Schedule: []plan.ScheduleStep{
				osplit(0, 2), par(0, "DIDy"), osplit(1, 2), par(1, "DIDx")}},
			m:      mesh22,
			device: 2, // coordinates (1, 0)
			want:   ints(4, 5),
		},
		"nested, other device": {
			t: plan.Tensor{Shape: []int{8}, Schedule: []plan.ScheduleStep{
				osplit(0, 2), par(0, "DIDy"), osplit(1, 2), par(1, "DIDx")}},
			m:      mesh22,
			device: 1, // coordinates (0, 1)
			want:   ints(2, 3),
		},
		"logical DID": {
			t:      plan.Tensor{Shape: []int{4, 3}, Schedule: []plan.ScheduleStep{par(0, "DIDx")}},
			m:      mesh1(0, 1, 2, 3),
			device: 2,
			want:   idx([]int{2, 0}, []int{2, 1}, []int{2, 2}),
		},
		"merge then parallelize": {
			t:      plan.Tensor{Shape: []int{2, 2}, Schedule: []plan.ScheduleStep{mergeAt(0), par(0, "DIDx")}},
			m:      mesh1(0, 1, 2, 3),
			device: 3,
			want:   idx([]int{1, 1}),
		},
		"merge, split, parallelize": {
			t:      plan.Tensor{Shape: []int{2, 4}, Schedule: []plan.ScheduleStep{mergeAt(0), osplit(0, 4), par(0, "DIDx")}},
			m:      mesh1(0, 1, 2, 3),
			device: 1,
			want:   idx([]int{0, 2}, []int{0, 3}),
		},
		"allocation with reorder is column-major": {
			t:      plan.Tensor{Shape: []int{2, 3}, Schedule: []plan.ScheduleStep{reorderTo(1, 0)}, Allocation: []int{0, 1}},
			m:      mesh1(0),
			device: 0,
			want:   idx([]int{0, 0}, []int{1, 0}, []int{0, 1}, []int{1, 1}, []int{0, 2}, []int{1, 2}),
		},
		"reorder without allocation stays row-major": {
			t:      plan.Tensor{Shape: []int{2, 2}, Schedule: []plan.ScheduleStep{reorderTo(1, 0)}},
			m:      mesh1(0),
			device: 0,
			want:   idx([]int{0, 0}, []int{0, 1}, []int{1, 0}, []int{1, 1}),
		},
		"allocation of a sharded tensor": {
			t: plan.Tensor{Shape: []int{2, 12}, Schedule: seedTensor.Schedule, Allocation: []int{2, 0}},
			m: mesh1(0, 1, 2, 3), device: 1,
			want: idx([]int{0, 3}, []int{1, 3}, []int{0, 4}, []int{1, 4}, []int{0, 5}, []int{1, 5}),
		},
		"seed tensor": {
			t: seedTensor, m: mesh1(0, 1, 2, 3), device: 3,
			want: idx([]int{0, 9}, []int{0, 10}, []int{0, 11}, []int{1, 9}, []int{1, 10}, []int{1, 11}),
		},
		"reduction axis is not in the index": {
			t: plan.Tensor{Shape: []int{4, 6}, ReductionAxes: []int{0},
				Schedule: []plan.ScheduleStep{osplit(1, 2), par(1, "DIDx")}},
			m: mesh1(0, 1), device: 1,
			want: ints(3, 4, 5),
		},
		"DID on a reduction axis does not shard": {
			t: plan.Tensor{Shape: []int{4, 3}, ReductionAxes: []int{0},
				Schedule: []plan.ScheduleStep{osplit(0, 2), par(0, "DIDx")}},
			m: mesh1(0, 1), device: 1,
			want: ints(0, 1, 2),
		},
		"fully reduced tensor is one element": {
			t: plan.Tensor{Shape: []int{4}, ReductionAxes: []int{0}},
			m: mesh1(0, 1), device: 1,
			want: idx([]int{}),
		},
		"device outside the mesh holds nothing": {
			t: plan.Tensor{Shape: []int{4}}, m: mesh1(0, 1), device: 7,
			want: nil,
		},
		"serial parallelize is a no-op": {
			t:      plan.Tensor{Shape: []int{3}, Schedule: []plan.ScheduleStep{par(0, "DIDx"), par(0, "Serial")}},
			m:      mesh1(0, 1, 2),
			device: 2,
			want:   ints(0, 1, 2),
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := Shard(tc.t, tc.m, tc.device)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("Shard (-want +got):\n%s", diff)
			}
		})
	}
}

func TestShardUneven(t *testing.T) {
	tv := plan.Tensor{Shape: []int{10}, Schedule: []plan.ScheduleStep{osplit(0, 4), par(0, "DIDx")}}
	want := [][][]int{ints(0, 1, 2), ints(3, 4, 5), ints(6, 7, 8), ints(9)}
	for d, w := range want {
		got, err := Shard(tv, mesh1(0, 1, 2, 3), d)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(w, got); diff != "" {
			t.Errorf("device %d (-want +got):\n%s", d, diff)
		}
	}
}

func TestShardErrors(t *testing.T) {
	tests := map[string]struct {
		t    plan.Tensor
		m    plan.Mesh
		want string
	}{
		"DIDy on a 1-D mesh": {
			t: plan.Tensor{Shape: []int{4}, Schedule: []plan.ScheduleStep{par(0, "DIDy")}}, m: mesh1(0),
			want: "DIDy needs a mesh of rank at least 2",
		},
		"two DIDx axes": {
			t: plan.Tensor{Shape: []int{4, 4}, Schedule: []plan.ScheduleStep{par(0, "DIDx"), par(1, "DIDx")}}, m: mesh1(0, 1, 2, 3),
			want: "both parallelized on DIDx",
		},
		"split of a parallel axis": {
			t: plan.Tensor{Shape: []int{4}, Schedule: []plan.ScheduleStep{par(0, "DIDx"), osplit(0, 2)}}, m: mesh1(0, 1, 2, 3),
			want: "parallelize after splitting",
		},
		"merge with a reduction axis": {
			t: plan.Tensor{Shape: []int{4, 4}, ReductionAxes: []int{1}, Schedule: []plan.ScheduleStep{mergeAt(0)}}, m: mesh1(0),
			want: "one is a reduction axis",
		},
		"merge of the last axis": {
			t: plan.Tensor{Shape: []int{4, 4}, Schedule: []plan.ScheduleStep{mergeAt(1)}}, m: mesh1(0),
			want: "needs a partner",
		},
		"bad reorder": {
			t: plan.Tensor{Shape: []int{4, 4}, Schedule: []plan.ScheduleStep{reorderTo(0, 0)}}, m: mesh1(0),
			want: "not a permutation",
		},
		"allocation misses an axis": {
			t: plan.Tensor{Shape: []int{4, 4}, Allocation: []int{1}}, m: mesh1(0),
			want: "misses local loop axis 0",
		},
		"unknown parallel type": {
			t: plan.Tensor{Shape: []int{4}, Schedule: []plan.ScheduleStep{par(0, "TIDx")}}, m: mesh1(0),
			want: `unknown parallel type "TIDx"`,
		},
		"two transforms in one step": {
			t: plan.Tensor{Shape: []int{4}, Schedule: []plan.ScheduleStep{{Split: &plan.SplitArgs{Axis: 0, Factor: 2}, Merge: &plan.AxisArgs{}}}}, m: mesh1(0),
			want: "exactly one transform",
		},
		"bad mesh": {
			t: plan.Tensor{Shape: []int{4}}, m: plan.Mesh{Shape: []int{3}, Devices: []int{0, 1}},
			want: "holds 3 devices",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := Shard(tc.t, tc.m, 0)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Shard error = %v, want one containing %q", err, tc.want)
			}
		})
	}
}
