package sim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nvcomm/nvcomm/internal/plan"
)

func ip(i int) *int { return &i }

func sp(s string) *string { return &s }

// coll builds a collective step reading "a" and writing "b".
func coll(typ string, count [2]int, teams ...[]int) plan.Step {
	return plan.Step{ID: 7, Kind: plan.KindCollective, Type: typ, Teams: teams,
		Input: "a", Output: "b", Count: plan.Count{Input: count[0], Output: count[1]}}
}

func rooted(s plan.Step, root int) plan.Step {
	s.Root = ip(root)
	return s
}

// splitting gives an AllToAllV its send_counts.
func splitting(s plan.Step, counts ...[]int) plan.Step {
	s.SendCounts = counts
	return s
}

func reducing(s plan.Step, op string) plan.Step {
	s.ReduceOp = sp(op)
	return s
}

// loc builds a local step reading "a" and writing "b".
func loc(typ string, count [2]int, devices ...int) plan.Step {
	return plan.Step{ID: 7, Kind: plan.KindLocal, Type: typ, Devices: devices,
		Input: "a", Output: "b", Count: plan.Count{Input: count[0], Output: count[1]}}
}

func withDims(s plan.Step, dims, perm, reduceDims []int) plan.Step {
	s.Dims, s.Perm, s.ReduceDims = dims, perm, reduceDims
	return s
}

type bufs map[int][]float64

func TestStepSemantics(t *testing.T) {
	tests := map[string]struct {
		step  plan.Step
		in    bufs // buffer "a" per device
		want  bufs // buffer "b" per device afterwards
		flows map[int]flow
	}{
		"Allgather, two teams": {
			step:  coll(plan.Allgather, [2]int{2, 4}, []int{0, 1}, []int{2, 3}),
			in:    bufs{0: {1, 2}, 1: {3, 4}, 2: {5, 6}, 3: {7, 8}},
			want:  bufs{0: {1, 2, 3, 4}, 1: {1, 2, 3, 4}, 2: {5, 6, 7, 8}, 3: {5, 6, 7, 8}},
			flows: map[int]flow{0: {8, 8}, 1: {8, 8}, 2: {8, 8}, 3: {8, 8}},
		},
		"ReduceScatter": {
			step:  reducing(coll(plan.ReduceScatter, [2]int{4, 2}, []int{0, 1}), "sum"),
			in:    bufs{0: {1, 2, 3, 4}, 1: {10, 20, 30, 40}},
			want:  bufs{0: {11, 22}, 1: {33, 44}},
			flows: map[int]flow{0: {8, 8}, 1: {8, 8}},
		},
		"Allreduce max, bytes rounded down": {
			step:  reducing(coll(plan.Allreduce, [2]int{2, 2}, []int{0, 1, 2}), "max"),
			in:    bufs{0: {1, 9}, 1: {5, -3}, 2: {2, 2}},
			want:  bufs{0: {5, 9}, 1: {5, 9}, 2: {5, 9}},
			flows: map[int]flow{0: {10, 10}, 1: {10, 10}, 2: {10, 10}}, // 2·2·2·4/3
		},
		"AllToAll": {
			step:  coll(plan.AllToAll, [2]int{4, 4}, []int{0, 1}),
			in:    bufs{0: {1, 2, 3, 4}, 1: {5, 6, 7, 8}},
			want:  bufs{0: {1, 2, 5, 6}, 1: {3, 4, 7, 8}},
			flows: map[int]flow{0: {8, 8}, 1: {8, 8}},
		},
		"AllToAllV, unequal chunks, empty ones and a chunk kept": {
			// Member 0 keeps 1 element, sends none to member 1 and 3 to
			// member 2; member 1 sends 2 to member 0, keeps 2 and sends
			// none to member 2; member 2 sends 1 and 2 and keeps 1. Only
			// the chunks between members count as traffic.
			step: splitting(coll(plan.AllToAllV, [2]int{4, 4}, []int{5, 3, 8}),
				[]int{1, 0, 3}, []int{2, 2, 0}, []int{1, 2, 1}),
			in:    bufs{5: {1, 2, 3, 4}, 3: {10, 20, 30, 40}, 8: {100, 200, 300, 400}},
			want:  bufs{5: {1, 10, 20, 100}, 3: {30, 40, 200, 300}, 8: {2, 3, 4, 400}},
			flows: map[int]flow{5: {12, 12}, 3: {8, 8}, 8: {12, 12}},
		},
		"AllToAllV, two teams share the counts": {
			// Team [1, 0] and team [2, 3]: the first member of each keeps
			// 2 elements and sends 1; the second sends 1 and keeps 2.
			step: splitting(coll(plan.AllToAllV, [2]int{3, 3}, []int{1, 0}, []int{2, 3}),
				[]int{2, 1}, []int{1, 2}),
			in:    bufs{0: {1, 2, 3}, 1: {4, 5, 6}, 2: {7, 8, 9}, 3: {10, 11, 12}},
			want:  bufs{1: {4, 5, 1}, 0: {6, 2, 3}, 2: {7, 8, 10}, 3: {9, 11, 12}},
			flows: map[int]flow{0: {4, 4}, 1: {4, 4}, 2: {4, 4}, 3: {4, 4}},
		},
		"AllToAllV, nothing to send": {
			step:  splitting(coll(plan.AllToAllV, [2]int{2, 2}, []int{0, 1}), []int{2, 0}, []int{0, 2}),
			in:    bufs{0: {1, 2}, 1: {3, 4}},
			want:  bufs{0: {1, 2}, 1: {3, 4}},
			flows: map[int]flow{0: {}, 1: {}},
		},
		"AllToAllV of empty buffers": {
			step:  splitting(coll(plan.AllToAllV, [2]int{0, 0}, []int{0, 1}), []int{0, 0}, []int{0, 0}),
			in:    bufs{0: {}, 1: {}},
			want:  bufs{0: {}, 1: {}},
			flows: map[int]flow{0: {}, 1: {}},
		},
		"AllToAllV from two senders of 6 to three receivers of 4": {
			// Team [0 1 5 6 7]: devices 0 and 1 send, 5, 6 and 7 receive;
			// the receivers hold no input, the senders get no output.
			step: splitting(coll(plan.AllToAllV, [2]int{6, 4}, []int{0, 1, 5, 6, 7}),
				[]int{0, 0, 4, 2, 0}, []int{0, 0, 0, 2, 4},
				[]int{0, 0, 0, 0, 0}, []int{0, 0, 0, 0, 0}, []int{0, 0, 0, 0, 0}),
			in:    bufs{0: {1, 2, 3, 4, 5, 6}, 1: {7, 8, 9, 10, 11, 12}},
			want:  bufs{5: {1, 2, 3, 4}, 6: {5, 6, 7, 8}, 7: {9, 10, 11, 12}},
			flows: map[int]flow{0: {24, 0}, 1: {24, 0}, 5: {0, 16}, 6: {0, 16}, 7: {0, 16}},
		},
		"AllToAllV, two teams of a sender and two receivers": {
			step: splitting(coll(plan.AllToAllV, [2]int{4, 2}, []int{0, 2, 3}, []int{1, 4, 5}),
				[]int{0, 2, 2}, []int{0, 0, 0}, []int{0, 0, 0}),
			in:    bufs{0: {1, 2, 3, 4}, 1: {5, 6, 7, 8}},
			want:  bufs{2: {1, 2}, 3: {3, 4}, 4: {5, 6}, 5: {7, 8}},
			flows: map[int]flow{0: {16, 0}, 1: {16, 0}, 2: {0, 8}, 3: {0, 8}, 4: {0, 8}, 5: {0, 8}},
		},
		"AllToAllV, a member that sends and receives": {
			// Members 0 and 1 send 3 elements each, members 0 and 2
			// receive 3: member 0 keeps 1, member 1 receives nothing and
			// member 2 sends nothing, so its short input is not read.
			step: splitting(coll(plan.AllToAllV, [2]int{3, 3}, []int{0, 1, 2}),
				[]int{1, 0, 2}, []int{2, 0, 1}, []int{0, 0, 0}),
			in:    bufs{0: {1, 2, 3}, 1: {4, 5, 6}, 2: {9}},
			want:  bufs{0: {1, 4, 5}, 2: {2, 3, 6}},
			flows: map[int]flow{0: {8, 8}, 1: {12, 0}, 2: {0, 12}},
		},
		"AllToAllV of empty inputs to every member": {
			// count.input 0: every member reads its (empty) input and,
			// count.output being 0 too, writes an empty output.
			step:  splitting(coll(plan.AllToAllV, [2]int{0, 0}, []int{0, 1, 2}), []int{0, 0, 0}, []int{0, 0, 0}, []int{0, 0, 0}),
			in:    bufs{0: {}, 1: {}, 2: {}},
			want:  bufs{0: {}, 1: {}, 2: {}},
			flows: map[int]flow{0: {}, 1: {}, 2: {}},
		},
		"Pad puts each device's box at the low corner": {
			step: plan.Step{ID: 7, Kind: plan.KindLocal, Type: plan.Pad, Devices: []int{0, 1},
				Input: "a", Output: "b", Count: plan.Count{Input: 6, Output: 6},
				Dims: []int{2, 3}, Valid: [][]int{{2, 2}, {1, 3}}, Fill: sp("-inf")},
			in:    bufs{0: {1, 2, 3, 4}, 1: {5, 6, 7}},
			want:  bufs{0: {1, 2, math.Inf(-1), 3, 4, math.Inf(-1)}, 1: {5, 6, 7, math.Inf(-1), math.Inf(-1), math.Inf(-1)}},
			flows: map[int]flow{0: {}, 1: {}},
		},
		"Unpad keeps each device's box": {
			step: plan.Step{ID: 7, Kind: plan.KindLocal, Type: plan.Unpad, Devices: []int{0, 1},
				Input: "a", Output: "b", Count: plan.Count{Input: 6, Output: 4},
				Dims: []int{2, 3}, Valid: [][]int{{2, 2}, {1, 1}}},
			in:    bufs{0: {1, 2, 9, 3, 4, 9}, 1: {5, 9, 9, 9, 9, 9}},
			want:  bufs{0: {1, 2, 3, 4}, 1: {5}},
			flows: map[int]flow{0: {}, 1: {}},
		},
		"Slice keeps each rank's chunk, two teams": {
			step: plan.Step{ID: 7, Kind: plan.KindLocal, Type: plan.Slice, Teams: [][]int{{0, 1}, {3, 2}},
				Input: "a", Output: "b", Count: plan.Count{Input: 4, Output: 2}},
			in:    bufs{0: {1, 2, 3, 4}, 1: {1, 2, 3, 4}, 2: {5, 6, 7, 8}, 3: {5, 6, 7, 8}},
			want:  bufs{0: {1, 2}, 1: {3, 4}, 2: {7, 8}, 3: {5, 6}},
			flows: map[int]flow{0: {}, 1: {}, 2: {}, 3: {}},
		},
		"Slice of a short input: the rest of a rank's chunk, then zeros": {
			step: plan.Step{ID: 7, Kind: plan.KindLocal, Type: plan.Slice, Teams: [][]int{{0, 1, 2, 3}},
				Input: "a", Output: "b", Count: plan.Count{Input: 5, Output: 2}},
			in:    bufs{0: {1, 2, 3, 4, 5}, 1: {1, 2, 3, 4, 5}, 2: {1, 2, 3, 4, 5}, 3: {1, 2, 3, 4, 5}},
			want:  bufs{0: {1, 2}, 1: {3, 4}, 2: {5, 0}, 3: {0, 0}},
			flows: map[int]flow{0: {}, 1: {}, 2: {}, 3: {}},
		},
		"Broadcast": {
			step:  rooted(coll(plan.Broadcast, [2]int{2, 2}, []int{0, 1, 2}), 1),
			in:    bufs{1: {7, 8}},
			want:  bufs{0: {7, 8}, 1: {7, 8}, 2: {7, 8}},
			flows: map[int]flow{0: {0, 8}, 1: {16, 0}, 2: {0, 8}},
		},
		"Scatter": {
			step:  rooted(coll(plan.Scatter, [2]int{4, 2}, []int{0, 1}), 0),
			in:    bufs{0: {1, 2, 3, 4}},
			want:  bufs{0: {1, 2}, 1: {3, 4}},
			flows: map[int]flow{0: {8, 0}, 1: {0, 8}},
		},
		"Gather, root appended without input": {
			step:  rooted(coll(plan.Gather, [2]int{2, 4}, []int{0, 1, 2}), 2),
			in:    bufs{0: {1, 2}, 1: {3, 4}},
			want:  bufs{2: {1, 2, 3, 4}},
			flows: map[int]flow{0: {8, 0}, 1: {8, 0}, 2: {0, 16}},
		},
		"Gather, root holds input": {
			step:  rooted(coll(plan.Gather, [2]int{1, 3}, []int{0, 1, 2}), 1),
			in:    bufs{0: {1}, 1: {2}, 2: {3}},
			want:  bufs{1: {1, 2, 3}},
			flows: map[int]flow{0: {4, 0}, 1: {0, 8}, 2: {4, 0}},
		},
		"Reduce": {
			step:  reducing(rooted(coll(plan.Reduce, [2]int{2, 2}, []int{0, 1, 2}), 0), "prod"),
			in:    bufs{0: {1, 2}, 1: {3, 4}, 2: {-1, 2}},
			want:  bufs{0: {-3, 16}},
			flows: map[int]flow{0: {0, 8}, 1: {8, 0}, 2: {8, 8}}, // a chain 1 → 2 → 0
		},
		"Reduce, root appended without input": {
			step:  reducing(rooted(coll(plan.Reduce, [2]int{1, 1}, []int{0, 1, 5}), 5), "min"),
			in:    bufs{0: {4}, 1: {3}},
			want:  bufs{5: {3}},
			flows: map[int]flow{0: {4, 0}, 1: {4, 4}, 5: {0, 4}}, // a chain 0 → 1 → 5
		},
		"SendRecv": {
			step:  rooted(coll(plan.SendRecv, [2]int{2, 2}, []int{0, 3}), 0),
			in:    bufs{0: {1, 2}},
			want:  bufs{3: {1, 2}},
			flows: map[int]flow{0: {8, 0}, 3: {0, 8}},
		},
		"SendRecv of two pairs at once": {
			step:  coll(plan.SendRecv, [2]int{2, 2}, []int{0, 2}, []int{1, 3}),
			in:    bufs{0: {1, 2}, 1: {3, 4}},
			want:  bufs{2: {1, 2}, 3: {3, 4}},
			flows: map[int]flow{0: {8, 0}, 1: {8, 0}, 2: {0, 8}, 3: {0, 8}},
		},
		"SendRecv of a shift: device 1 receives and sends": {
			step:  coll(plan.SendRecv, [2]int{1, 1}, []int{0, 1}, []int{1, 2}),
			in:    bufs{0: {5}, 1: {7}},
			want:  bufs{1: {5}, 2: {7}},
			flows: map[int]flow{0: {4, 0}, 1: {4, 4}, 2: {0, 4}},
		},
		"SendRecv to itself copies": {
			step:  rooted(coll(plan.SendRecv, [2]int{2, 2}, []int{2, 2}), 2),
			in:    bufs{2: {1, 2}},
			want:  bufs{2: {1, 2}},
			flows: map[int]flow{2: {0, 0}},
		},
		"Copy": {
			step:  loc(plan.Copy, [2]int{2, 2}, 0, 1),
			in:    bufs{0: {1, 2}, 1: {3, 4}},
			want:  bufs{0: {1, 2}, 1: {3, 4}},
			flows: map[int]flow{0: {}, 1: {}},
		},
		"Permute transposes": {
			step:  withDims(loc(plan.Permute, [2]int{6, 6}, 0), []int{2, 3}, []int{1, 0}, nil),
			in:    bufs{0: {0, 1, 2, 3, 4, 5}},
			want:  bufs{0: {0, 3, 1, 4, 2, 5}},
			flows: map[int]flow{0: {}},
		},
		"Permute 3-D": {
			// [2][2][3] -> dims [3][2][2] with out[k][i][j] = in[i][j][k].
			step:  withDims(loc(plan.Permute, [2]int{12, 12}, 0), []int{2, 2, 3}, []int{2, 0, 1}, nil),
			in:    bufs{0: {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}},
			want:  bufs{0: {0, 3, 6, 9, 1, 4, 7, 10, 2, 5, 8, 11}},
			flows: map[int]flow{0: {}},
		},
		"LocalReduce inner dim": {
			step:  reducing(withDims(loc(plan.LocalReduce, [2]int{6, 2}, 0), []int{2, 3}, nil, []int{1}), "sum"),
			in:    bufs{0: {1, 2, 3, 4, 5, 6}},
			want:  bufs{0: {6, 15}},
			flows: map[int]flow{0: {}},
		},
		"LocalReduce outer dim": {
			step:  reducing(withDims(loc(plan.LocalReduce, [2]int{6, 3}, 0), []int{2, 3}, nil, []int{0}), "sum"),
			in:    bufs{0: {1, 2, 3, 4, 5, 6}},
			want:  bufs{0: {5, 7, 9}},
			flows: map[int]flow{0: {}},
		},
	}
	for name, tc := range tests {
		// Each chunk a step moves copied, and listed in a rope.
		for _, rm := range []int{ropeMin, 1} {
			t.Run(fmt.Sprintf("%s, ropeMin %d", name, rm), func(t *testing.T) {
				withRopeMin(rm, func() {
					m := newMachine(0)
					for d, b := range tc.in {
						m.put(d, "a", b)
					}
					flows, err := m.exec(&tc.step, 4)
					if err != nil {
						t.Fatal(err)
					}
					got := bufs{}
					for d, b := range m.named("b") {
						got[d] = b.flat()
					}
					if diff := cmp.Diff(tc.want, got); diff != "" {
						t.Errorf("buffers (-want +got):\n%s", diff)
					}
					if diff := cmp.Diff(tc.flows, flows, cmp.AllowUnexported(flow{})); diff != "" {
						t.Errorf("traffic (-want +got):\n%s", diff)
					}
				})
			})
		}
	}
}

func TestStepErrors(t *testing.T) {
	tests := map[string]struct {
		step plan.Step
		in   bufs
		want string
	}{
		"Allgather sizes differ": {
			step: coll(plan.Allgather, [2]int{2, 4}, []int{0, 1}),
			in:   bufs{0: {1, 2}, 1: {3}},
			want: `step 7 (Allgather): buffer "a" on device 1 has 1 elements, count.input is 2 (team sizes 0:2 1:1)`,
		},
		"Allgather sizes differ from count": {
			step: coll(plan.Allgather, [2]int{3, 6}, []int{0, 1}),
			in:   bufs{0: {1, 2}, 1: {3, 4}},
			want: `step 7 (Allgather): buffer "a" on device 0 has 2 elements, count.input is 3`,
		},
		"Allgather member without input": {
			step: coll(plan.Allgather, [2]int{2, 4}, []int{0, 1}),
			in:   bufs{0: {1, 2}},
			want: `step 7 (Allgather): device 1 has no buffer "a"`,
		},
		"Allgather wrong count.output": {
			step: coll(plan.Allgather, [2]int{2, 2}, []int{0, 1}),
			in:   bufs{0: {1, 2}, 1: {3, 4}},
			want: "count.output is 2, but on team [0 1] the step produces 4 elements",
		},
		"Scatter root without input": {
			step: rooted(coll(plan.Scatter, [2]int{2, 1}, []int{0, 1}), 0),
			in:   bufs{1: {1, 2}},
			want: `step 7 (Scatter): device 0 has no buffer "a"`,
		},
		"Gather without holders": {
			step: rooted(coll(plan.Gather, [2]int{2, 2}, []int{0, 1}), 0),
			in:   bufs{},
			want: "no member of team [0 1] holds buffer",
		},
		"ReduceScatter indivisible": {
			step: reducing(coll(plan.ReduceScatter, [2]int{3, 1}, []int{0, 1}), "sum"),
			in:   bufs{0: {1, 2, 3}, 1: {1, 2, 3}},
			want: "count.input 3 is not a multiple of the team size 2",
		},
		"Allreduce without reduce_op": {
			step: coll(plan.Allreduce, [2]int{1, 1}, []int{0, 1}),
			in:   bufs{0: {1}, 1: {1}},
			want: "reduce_op must be one of",
		},
		"rooted with two teams": {
			step: rooted(coll(plan.Broadcast, [2]int{1, 1}, []int{0}, []int{1}), 0),
			in:   bufs{0: {1}},
			want: "exactly one team",
		},
		"root outside the team": {
			step: rooted(coll(plan.Broadcast, [2]int{1, 1}, []int{0, 1}), 4),
			in:   bufs{0: {1}},
			want: "root must be a device of team [0 1]",
		},
		"SendRecv root is not the sender": {
			step: rooted(coll(plan.SendRecv, [2]int{1, 1}, []int{0, 1}), 1),
			in:   bufs{0: {1}},
			want: "must be the sender",
		},
		"SendRecv of pairs with a root": {
			step: rooted(coll(plan.SendRecv, [2]int{1, 1}, []int{0, 2}, []int{1, 3}), 0),
			in:   bufs{0: {1}, 1: {1}},
			want: "has no root",
		},
		"SendRecv pairs share a sender": {
			step: coll(plan.SendRecv, [2]int{1, 1}, []int{0, 1}, []int{0, 2}),
			in:   bufs{0: {1}},
			want: "device 0 sends more than once",
		},
		"SendRecv pairs share a receiver": {
			step: coll(plan.SendRecv, [2]int{1, 1}, []int{0, 2}, []int{1, 2}),
			in:   bufs{0: {1}, 1: {1}},
			want: "device 2 receives more than once",
		},
		"device in two teams": {
			step: coll(plan.Allgather, [2]int{1, 2}, []int{0, 1}, []int{1, 2}),
			in:   bufs{0: {1}, 1: {1}, 2: {1}},
			want: "device 1 appears more than once",
		},
		"local device without input": {
			step: loc(plan.Copy, [2]int{1, 1}, 0, 1),
			in:   bufs{0: {1}},
			want: `step 7 (Copy): device 1 has no buffer "a"`,
		},
		"local size differs from count": {
			step: loc(plan.Copy, [2]int{2, 2}, 0),
			in:   bufs{0: {1}},
			want: `step 7 (Copy): buffer "a" on device 0 has 1 elements, count.input is 2`,
		},
		"Permute dims disagree with count": {
			step: withDims(loc(plan.Permute, [2]int{4, 4}, 0), []int{2, 3}, []int{1, 0}, nil),
			in:   bufs{0: {1, 2, 3, 4}},
			want: "dims [2 3] hold 6 elements, count.input is 4",
		},
		"LocalReduce wrong count.output": {
			step: reducing(withDims(loc(plan.LocalReduce, [2]int{6, 3}, 0), []int{2, 3}, nil, []int{1}), "sum"),
			in:   bufs{0: {1, 2, 3, 4, 5, 6}},
			want: "count.output is 3, reducing dims [1] of [2 3] gives 2",
		},
		"Slice with devices": {
			step: loc(plan.Slice, [2]int{1, 1}, 0),
			in:   bufs{0: {1}},
			want: "step 7 (Slice): a Slice takes teams, not devices",
		},
		"Slice with a wrong count": {
			step: plan.Step{ID: 7, Kind: plan.KindLocal, Type: plan.Slice, Teams: [][]int{{0, 1}}, Input: "a", Output: "b", Count: plan.Count{Input: 4, Output: 1}},
			in:   bufs{0: {1, 2, 3, 4}, 1: {1, 2, 3, 4}},
			want: "step 7 (Slice): count.input 4 must be 1 to the team size 2 times count.output 1",
		},
		"strided Slice of a short input": {
			step: plan.Step{ID: 7, Kind: plan.KindLocal, Type: plan.Slice, Teams: [][]int{{0, 1}}, Input: "a", Output: "b", Count: plan.Count{Input: 3, Output: 2}, Dims: []int{1, 2, 2}},
			in:   bufs{0: {1, 2, 3}, 1: {1, 2, 3}},
			want: "step 7 (Slice): count.input 3 must be the team size 2 times count.output 2",
		},
		"AllToAllV input shorter than count.input": {
			step: splitting(coll(plan.AllToAllV, [2]int{3, 3}, []int{0, 1}), []int{1, 2}, []int{2, 1}),
			in:   bufs{0: {1, 2, 3}, 1: {4, 5}},
			want: `step 7 (AllToAllV): buffer "a" on device 1 has 2 elements, count.input is 3 (team sizes 0:3 1:2)`,
		},
		"AllToAllV member without input": {
			step: splitting(coll(plan.AllToAllV, [2]int{1, 1}, []int{0, 1}), []int{0, 1}, []int{1, 0}),
			in:   bufs{0: {1}},
			want: `step 7 (AllToAllV): device 1 has no buffer "a"`,
		},
		"AllToAllV sender without input": {
			step: splitting(coll(plan.AllToAllV, [2]int{2, 2}, []int{0, 1, 2, 3}),
				[]int{0, 0, 1, 1}, []int{0, 0, 1, 1}, []int{0, 0, 0, 0}, []int{0, 0, 0, 0}),
			in:   bufs{0: {1, 2}, 2: {3, 4}, 3: {5, 6}},
			want: `step 7 (AllToAllV): device 1 has no buffer "a"`,
		},
		"AllToAllV sender's input short": {
			step: splitting(coll(plan.AllToAllV, [2]int{2, 2}, []int{0, 1, 2}),
				[]int{0, 1, 1}, []int{0, 1, 1}, []int{0, 0, 0}),
			in:   bufs{0: {1, 2}, 1: {3}},
			want: `step 7 (AllToAllV): buffer "a" on device 1 has 1 elements, count.input is 2 (team sizes 0:2 1:1)`,
		},
		"AllToAllV empty inputs, a member without one": {
			step: splitting(coll(plan.AllToAllV, [2]int{0, 0}, []int{0, 1}), []int{0, 0}, []int{0, 0}),
			in:   bufs{0: {}},
			want: `step 7 (AllToAllV): device 1 has no buffer "a"`,
		},
		"AllToAllV row neither 0 nor count.input": {
			step: splitting(coll(plan.AllToAllV, [2]int{6, 4}, []int{0, 1, 2, 3}),
				[]int{0, 0, 4, 2}, []int{0, 0, 0, 2}, []int{0, 0, 0, 0}, []int{0, 0, 0, 0}),
			in:   bufs{0: {1, 2, 3, 4, 5, 6}, 1: {1, 2, 3, 4, 5, 6}},
			want: "step 7 (AllToAllV): send_counts[1] sums to 2, but count.input is 6: member 1 cuts its whole input into these chunks (or sends nothing)",
		},
		"AllToAllV column neither 0 nor count.output": {
			step: splitting(coll(plan.AllToAllV, [2]int{6, 4}, []int{0, 1, 2, 3, 4, 5}),
				[]int{0, 0, 4, 2, 0, 0}, []int{0, 0, 0, 2, 3, 1},
				[]int{0, 0, 0, 0, 0, 0}, []int{0, 0, 0, 0, 0, 0}, []int{0, 0, 0, 0, 0, 0}, []int{0, 0, 0, 0, 0, 0}),
			in:   bufs{0: {1, 2, 3, 4, 5, 6}, 1: {1, 2, 3, 4, 5, 6}},
			want: "step 7 (AllToAllV): column 4 of send_counts sums to 3, but count.output is 4: member 4 of team [0 1 2 3 4 5] receives these chunks (or nothing)",
		},
		"AllToAllV row short of count.input": {
			step: splitting(coll(plan.AllToAllV, [2]int{3, 3}, []int{0, 1}), []int{1, 1}, []int{2, 2}),
			in:   bufs{0: {1, 2, 3}, 1: {4, 5, 6}},
			want: "step 7 (AllToAllV): send_counts[0] sums to 2, but count.input is 3: member 0 cuts its whole input into these chunks",
		},
		"AllToAllV row past count.input": {
			step: splitting(coll(plan.AllToAllV, [2]int{2, 2}, []int{0, 1}), []int{1, 1}, []int{1, 2}),
			in:   bufs{0: {1, 2}, 1: {3, 4}},
			want: "step 7 (AllToAllV): send_counts[1] sums to more than count.input 2",
		},
		"AllToAllV column past count.output": {
			step: splitting(coll(plan.AllToAllV, [2]int{2, 2}, []int{0, 1}), []int{2, 0}, []int{2, 0}),
			in:   bufs{0: {1, 2}, 1: {3, 4}},
			want: "step 7 (AllToAllV): column 0 of send_counts sums to more than count.output 2: member 0 of team [0 1] receives these chunks",
		},
		"AllToAllV column short of count.output": {
			step: splitting(coll(plan.AllToAllV, [2]int{2, 3}, []int{0, 1}), []int{1, 1}, []int{1, 1}),
			in:   bufs{0: {1, 2}, 1: {3, 4}},
			want: "step 7 (AllToAllV): column 0 of send_counts sums to 2, but count.output is 3",
		},
		"AllToAllV negative count": {
			step: splitting(coll(plan.AllToAllV, [2]int{2, 2}, []int{0, 1}), []int{-1, 3}, []int{3, -1}),
			in:   bufs{0: {1, 2}, 1: {3, 4}},
			want: "step 7 (AllToAllV): send_counts[0][0] is -1, a count is at least 0",
		},
		"AllToAllV counts that would overflow": {
			step: splitting(coll(plan.AllToAllV, [2]int{2, 2}, []int{0, 1}), []int{math.MaxInt, math.MaxInt}, []int{0, 2}),
			in:   bufs{0: {1, 2}, 1: {3, 4}},
			want: "send_counts[0] sums to more than count.input 2",
		},
		"AllToAllV without send_counts": {
			step: coll(plan.AllToAllV, [2]int{2, 2}, []int{0, 1}),
			in:   bufs{0: {1, 2}, 1: {3, 4}},
			want: "step 7 (AllToAllV): send_counts has 0 rows, but team [0 1] has 2 members",
		},
		"AllToAllV row of the wrong length": {
			step: splitting(coll(plan.AllToAllV, [2]int{2, 2}, []int{0, 1}), []int{2}, []int{0, 2}),
			in:   bufs{0: {1, 2}, 1: {3, 4}},
			want: "step 7 (AllToAllV): send_counts[0] has 1 counts, but team [0 1] has 2 members",
		},
		"AllToAllV teams of another size than the counts": {
			step: splitting(coll(plan.AllToAllV, [2]int{1, 1}, []int{0, 1}, []int{2}), []int{1, 0}, []int{0, 1}),
			in:   bufs{0: {1}, 1: {2}, 2: {3}},
			want: "step 7 (AllToAllV): send_counts has 2 rows, but team [2] has 1 members",
		},
		"kind disagrees with type": {
			step: loc(plan.Allgather, [2]int{1, 1}, 0),
			in:   bufs{0: {1}},
			want: `kind is "local"`,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			m := newMachine(0)
			for d, b := range tc.in {
				m.put(d, "a", b)
			}
			_, err := m.exec(&tc.step, 4)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("exec error = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// TestAllToAllVAcrossMeshes moves a buffer from devices 0 and 1 to
// devices 5, 6 and 7 in one AllToAllV: the receivers read it afterwards,
// a sender that received nothing holds no output, so a step reading it
// there fails as on any device without the buffer, and the memory model
// prices the output on the receivers only.
func TestAllToAllVAcrossMeshes(t *testing.T) {
	s := splitting(coll(plan.AllToAllV, [2]int{6, 4}, []int{0, 1, 5, 6, 7}),
		[]int{0, 0, 4, 2, 0}, []int{0, 0, 0, 2, 4},
		[]int{0, 0, 0, 0, 0}, []int{0, 0, 0, 0, 0}, []int{0, 0, 0, 0, 0})
	if got, want := writers(&s, stepDevices(&s)), []int{5, 6, 7}; !slices.Equal(got, want) {
		t.Errorf("writers = %v, want %v", got, want)
	}
	m := newMachine(0)
	m.put(0, "a", []float64{1, 2, 3, 4, 5, 6})
	m.put(1, "a", []float64{7, 8, 9, 10, 11, 12})
	if _, err := m.exec(&s, 4); err != nil {
		t.Fatal(err)
	}
	read := func(devices ...int) plan.Step {
		return plan.Step{ID: 8, Kind: plan.KindLocal, Type: plan.Copy, Devices: devices,
			Input: "b", Output: "c", Count: plan.Count{Input: 4, Output: 4}}
	}
	ok := read(5, 6, 7)
	if _, err := m.exec(&ok, 4); err != nil {
		t.Fatalf("reading the output on the receivers: %v", err)
	}
	bad := read(6, 0)
	_, err := m.exec(&bad, 4)
	if want := `step 8 (Copy): device 0 has no buffer "b"`; err == nil || err.Error() != want {
		t.Errorf("reading the output on a sender: error %v, want %q", err, want)
	}
}

// TestAllToAllVTraffic runs AllToAllVs of random split sizes on teams in
// random order: every element reaches the member and place the counts
// give it, and the bytes each device sends and receives are what
// plan.Traffic books (validate checks a plan's bytes with it).
func TestAllToAllVTraffic(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	for trial := range 200 {
		size, teams := 1+r.IntN(5), 1+r.IntN(3)
		devices := r.Perm(size * teams)
		var team [][]int
		for i := range teams {
			team = append(team, devices[i*size:(i+1)*size])
		}
		// A sum of permutation matrices has every row and column sum
		// alike; some of the weights are 0.
		counts := make([][]int, size)
		for k := range counts {
			counts[k] = make([]int, size)
		}
		n := 0
		for range 3 {
			w := r.IntN(4)
			for k, to := range r.Perm(size) {
				counts[k][to] += w
			}
			n += w
		}
		s := splitting(coll(plan.AllToAllV, [2]int{n, n}, team...), counts...)
		m := newMachine(0)
		for _, d := range devices {
			in := make([]float64, n)
			for i := range in {
				in[i] = float64(1000*d + i) // device and place
			}
			m.put(d, "a", in)
		}
		flows, err := m.exec(&s, 2)
		if err != nil {
			t.Fatalf("trial %d: %v", trial, err)
		}
		for _, members := range team {
			for to, d := range members {
				var want []float64
				for k, from := range members {
					lo := 0
					for _, c := range counts[k][:to] {
						lo += c
					}
					for i := range counts[k][to] {
						want = append(want, float64(1000*from+lo+i))
					}
				}
				if got := m.named("b")[d].flat(); !slices.Equal(got, want) {
					t.Fatalf("trial %d, counts %v, teams %v: device %d holds %v, want %v", trial, counts, team, d, got, want)
				}
			}
		}
		sent, recv, ok := plan.Traffic(&s, 2, func(int) bool { return true })
		if !ok {
			t.Fatalf("trial %d: plan.Traffic overflowed", trial)
		}
		for _, d := range devices {
			if f := flows[d]; f.sent != sent[d] || f.recv != recv[d] {
				t.Errorf("trial %d, counts %v, teams %v: device %d sends %d and receives %d bytes, plan.Traffic books %d and %d",
					trial, counts, team, d, f.sent, f.recv, sent[d], recv[d])
			}
		}
	}
}
