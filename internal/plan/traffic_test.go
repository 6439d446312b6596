package plan

import (
	"math"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestTrafficAllToAllV checks what Traffic books, device by device, for an
// AllToAllV: each chunk to another device, sent by its sender and received
// by its receiver; a member's chunk for itself and an empty chunk book
// nothing; every team uses the one matrix.
func TestTrafficAllToAllV(t *testing.T) {
	all := func(int) bool { return true }
	tests := map[string]struct {
		teams      [][]int
		counts     [][]int
		elem       int64
		sent, recv map[int]int64
	}{
		// allToAllVPlan's step: member d sends and receives 2048 elements
		// less its own chunk, of 4 bytes.
		"unequal chunks and self chunks": {
			teams: [][]int{{0, 1, 2, 3}}, counts: allToAllVCounts(), elem: 4,
			sent: map[int]int64{0: 4192, 1: 4192, 2: 4192, 3: 3392},
			recv: map[int]int64{0: 4192, 1: 4192, 2: 4192, 3: 3392},
		},
		// Ranks, not device ids, index the matrix: team [3 1 0 2] reads
		// row 0 for device 3.
		"team order": {
			teams:  [][]int{{3, 1, 0, 2}},
			counts: [][]int{{0, 1, 2, 3}, {0, 0, 0, 0}, {0, 0, 0, 0}, {0, 0, 0, 0}},
			elem:   1,
			sent:   map[int]int64{3: 6},
			recv:   map[int]int64{1: 1, 0: 2, 2: 3},
		},
		// Members 0 and 2 are one device (validate rejects such a team):
		// each of its rows is booked once, and what the two send each
		// other stays on it.
		"a device listed twice": {
			teams:  [][]int{{0, 1, 0}},
			counts: [][]int{{1, 10, 1000}, {2, 1, 20}, {3000, 30, 1}},
			elem:   1,
			sent:   map[int]int64{0: 40, 1: 22},
			recv:   map[int]int64{0: 22, 1: 40},
		},
		"two teams, one matrix": {
			teams: [][]int{{0, 1}, {2, 3}}, counts: [][]int{{1, 3}, {3, 1}}, elem: 2,
			sent: map[int]int64{0: 6, 1: 6, 2: 6, 3: 6},
			recv: map[int]int64{0: 6, 1: 6, 2: 6, 3: 6},
		},
		"every chunk kept": {
			teams: [][]int{{0, 1}}, counts: [][]int{{5, 0}, {0, 5}}, elem: 8,
			sent: map[int]int64{}, recv: map[int]int64{},
		},
		"one way": {
			teams: [][]int{{0, 1}}, counts: [][]int{{2, 0}, {2, 0}}, elem: 4,
			sent: map[int]int64{1: 8}, recv: map[int]int64{0: 8},
		},
		// Malformed counts, which Validate reports: a member without a
		// row sends nothing, a count past the team is nobody's.
		"rows missing": {
			teams: [][]int{{0, 1, 2}}, counts: [][]int{{0, 1, 1}}, elem: 1,
			sent: map[int]int64{0: 2}, recv: map[int]int64{1: 1, 2: 1},
		},
		"row too long": {
			teams: [][]int{{0, 1}}, counts: [][]int{{0, 1, 7}, {1, 0, 7}}, elem: 1,
			sent: map[int]int64{0: 1, 1: 1}, recv: map[int]int64{0: 1, 1: 1},
		},
		"negative count": {
			teams: [][]int{{0, 1}}, counts: [][]int{{3, -1}, {1, 1}}, elem: 1,
			sent: map[int]int64{1: 1}, recv: map[int]int64{0: 1},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s := &Step{Kind: KindCollective, Type: AllToAllV, Teams: tc.teams, SendCounts: tc.counts}
			sent, recv, ok := Traffic(s, tc.elem, all)
			if !ok {
				t.Fatal("Traffic overflowed")
			}
			if d := cmp.Diff(tc.sent, sent); d != "" {
				t.Errorf("sent (-want +got):\n%s", d)
			}
			if d := cmp.Diff(tc.recv, recv); d != "" {
				t.Errorf("recv (-want +got):\n%s", d)
			}
		})
	}
}

// TestTrafficAllToAllVOverflow: a chunk whose bytes do not fit in 64 bits
// is an overflow, not a wrapped count.
func TestTrafficAllToAllVOverflow(t *testing.T) {
	s := &Step{Kind: KindCollective, Type: AllToAllV, Teams: [][]int{{0, 1}}, SendCounts: [][]int{{0, math.MaxInt / 2}, {0, 0}}}
	if _, _, ok := Traffic(s, 8, func(int) bool { return true }); ok {
		t.Error("Traffic of a chunk of MaxInt/2 elements of 8 bytes: ok, want an overflow")
	}
	if _, _, ok := Traffic(s, 2, func(int) bool { return true }); !ok {
		t.Error("Traffic of a chunk of MaxInt/2 elements of 2 bytes: overflow, want ok")
	}
}

// TestTrafficAllToAllVLikeAllToAll: an AllToAllV whose chunks are all
// count.input / T books what the AllToAll of those counts books.
func TestTrafficAllToAllVLikeAllToAll(t *testing.T) {
	for _, teams := range [][][]int{{{0, 1}}, {{0, 1, 2}}, {{4, 0, 7, 2}}, {{0, 1, 2}, {3, 4, 5}}} {
		n := len(teams[0])
		counts := make([][]int, n)
		for k := range counts {
			counts[k] = make([]int, n)
			for r := range counts[k] {
				counts[k][r] = 6
			}
		}
		c := Count{Input: 6 * n, Output: 6 * n}
		v := &Step{Kind: KindCollective, Type: AllToAllV, Teams: teams, Count: c, SendCounts: counts}
		a := &Step{Kind: KindCollective, Type: AllToAll, Teams: teams, Count: c}
		all := func(int) bool { return true }
		vs, vr, vok := Traffic(v, 4, all)
		as, ar, aok := Traffic(a, 4, all)
		if !vok || !aok {
			t.Fatalf("teams %v: overflow", teams)
		}
		if d := cmp.Diff(as, vs); d != "" {
			t.Errorf("teams %v: sent (-AllToAll +AllToAllV):\n%s", teams, d)
		}
		if d := cmp.Diff(ar, vr); d != "" {
			t.Errorf("teams %v: recv (-AllToAll +AllToAllV):\n%s", teams, d)
		}
	}
}

// TestExchangeReadersWriters checks which members of an AllToAllV read its
// input and write its output: those whose row, or column, of send_counts
// is not all zeros, in every team; every member when there is nothing to
// move or the matrix is malformed.
func TestExchangeReadersWriters(t *testing.T) {
	tests := []struct {
		name          string
		teams         [][]int
		counts        [][]int
		in, out       int
		reads, writes []int
	}{
		{
			name:  "two senders to three receivers",
			teams: [][]int{{0, 1, 5, 6, 7}},
			counts: [][]int{
				{0, 0, 4, 2, 0},
				{0, 0, 0, 2, 4},
				{0, 0, 0, 0, 0},
				{0, 0, 0, 0, 0},
				{0, 0, 0, 0, 0},
			},
			in: 6, out: 4, reads: []int{0, 1}, writes: []int{5, 6, 7},
		},
		{
			name:   "a member that sends and receives, two teams",
			teams:  [][]int{{0, 1}, {2, 3}},
			counts: [][]int{{1, 1}, {0, 0}},
			in:     2, out: 1, reads: []int{0, 2}, writes: []int{0, 1, 2, 3},
		},
		{
			name:   "nothing to move",
			teams:  [][]int{{0, 1}},
			counts: [][]int{{0, 0}, {0, 0}},
			reads:  []int{0, 1}, writes: []int{0, 1},
		},
		{
			name:   "ragged",
			teams:  [][]int{{0, 1}},
			counts: [][]int{{2}, {0, 0}},
			in:     2, out: 2, reads: []int{0, 1}, writes: []int{0, 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &Step{Type: AllToAllV, Teams: tt.teams, SendCounts: tt.counts, Count: Count{Input: tt.in, Output: tt.out}}
			if diff := cmp.Diff(tt.reads, readers(s)); diff != "" {
				t.Errorf("readers (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.writes, writers(s)); diff != "" {
				t.Errorf("writers (-want +got):\n%s", diff)
			}
		})
	}
}

// TestDeviceBookAsMap: the validator's deviceBook books what Traffic's
// maps do, device by device (zeros included), for every collective of the
// golden plans and for those steps with their teams' devices moved out of
// the meshes, over indexes of the devices dense, sparse and none.
func TestDeviceBookAsMap(t *testing.T) {
	files, plans := decodedGoldens(t)
	dense, sparse, huge := map[int]bool{}, map[int]bool{}, map[int]bool{}
	for d := range 16 {
		dense[d], sparse[2*d+1] = true, true
	}
	for d := range maxSetBits + 1 {
		huge[d] = true
	}
	holds := func(d int) bool { return d%3 != 1 }
	steps := 0
	for _, file := range files {
		p := plans[file]
		for _, s := range p.Steps {
			if s.Kind != KindCollective {
				continue
			}
			moved := s
			moved.Teams = nil
			for _, team := range s.Teams {
				moved.Teams = append(moved.Teams, append(slices.Clone(team), 100+len(team)))
			}
			for _, step := range []Step{s, moved} {
				steps++
				wantSent, wantRecv, wantOK := Traffic(&step, 4, holds)
				for name, devices := range map[string]map[int]bool{"dense": dense, "sparse": sparse, "huge": huge} {
					x := newDeviceIndex(devices)
					sent, recv := newDeviceBook(&x), newDeviceBook(&x)
					for range 2 { // the second time over books already used
						sent.reset()
						recv.reset()
						ok := trafficInto(&step, 4, holds, sent, recv)
						if ok != wantOK {
							t.Fatalf("%s: step %d, %s: ok %v, want %v", file, step.ID, name, ok, wantOK)
						}
						if !ok {
							continue
						}
						for _, c := range []struct {
							b    *deviceBook
							want map[int]int64
						}{{sent, wantSent}, {recv, wantRecv}} {
							got := map[int]int64{}
							for _, d := range c.b.touched {
								got[d] = c.b.get(d)
							}
							if diff := cmp.Diff(c.want, got); diff != "" {
								t.Fatalf("%s: step %d, %s: book differs from Traffic's map (-map +book):\n%s", file, step.ID, name, diff)
							}
							if most := largestOf(c.want); c.b.largest() != most {
								t.Fatalf("%s: step %d, %s: largest %d, want %d", file, step.ID, name, c.b.largest(), most)
							}
						}
					}
				}
			}
		}
	}
	if steps == 0 {
		t.Fatal("no collective steps")
	}
}

// largestOf is the largest value of m, 0 when m is empty.
func largestOf(m map[int]int64) int64 {
	var most int64
	for _, n := range m {
		most = max(most, n)
	}
	return most
}

// TestTrafficReduce checks that a Reduce is booked as the chain NCCL runs:
// every member but the root passes one buffer to the next in team order
// (the first after the last), members without the input included, so the
// root and every member but the one after it receive one buffer.
func TestTrafficReduce(t *testing.T) {
	tests := map[string]struct {
		team       []int
		root       int
		sent, recv map[int]int64
	}{
		"root first":  {[]int{0, 1, 2, 3}, 0, map[int]int64{1: 8, 2: 8, 3: 8}, map[int]int64{2: 8, 3: 8, 0: 8}},
		"root inside": {[]int{4, 1, 7, 2}, 7, map[int]int64{4: 8, 1: 8, 2: 8}, map[int]int64{1: 8, 7: 8, 4: 8}},
		"root appended without input": {[]int{0, 1, 5}, 5,
			map[int]int64{0: 8, 1: 8}, map[int]int64{1: 8, 5: 8}},
		"a team of one": {[]int{3}, 3, map[int]int64{}, map[int]int64{}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s := &Step{Kind: KindCollective, Type: Reduce, Teams: [][]int{tc.team}, Root: &tc.root, Count: Count{Input: 2, Output: 2}}
			sent, recv, ok := Traffic(s, 4, func(d int) bool { return d != 5 })
			if !ok {
				t.Fatal("Traffic overflowed")
			}
			if d := cmp.Diff(tc.sent, sent); d != "" {
				t.Errorf("sent (-want +got):\n%s", d)
			}
			if d := cmp.Diff(tc.recv, recv); d != "" {
				t.Errorf("recv (-want +got):\n%s", d)
			}
		})
	}
}
