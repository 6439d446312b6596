package reshard

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nvcomm/nvcomm/internal/ir"
)

// TestExchangeCounts checks the split sizes of exchanges worked out by
// hand.
func TestExchangeCounts(t *testing.T) {
	// Axis 0 of 8 rows as digits a (halves), b (quarters in a half), and
	// axis 1 as c (halves), d (quarters in a half).
	a, b := ir.Digit{Axis: 0, Stride: 4, Extent: 2}, ir.Digit{Axis: 0, Stride: 2, Extent: 2}
	c, d := ir.Digit{Axis: 1, Stride: 2, Extent: 2}, ir.Digit{Axis: 1, Stride: 1, Extent: 2}
	// One axis of 8 as x (halves), y, z: a strided shard over 4 devices
	// selects (y, z), a block shard (x, y).
	x, y, z := ir.Digit{Axis: 0, Stride: 4, Extent: 2}, ir.Digit{Axis: 0, Stride: 2, Extent: 2}, ir.Digit{Axis: 0, Stride: 1, Extent: 2}
	tests := []struct {
		name   string
		dp, dn []ir.Digit
		n, c   int
		at     int // the first receiver's rank, between two meshes
		want   [][]int
	}{
		{
			// [S(0), S(1)] → [S(1), S(0)] on a 2×4 mesh: device (i, j)
			// selects a = i, (c, d) = j before and c = i, (a, b) = j
			// after; it sends half b of its rows to (j/2, 2i+b).
			name: "2x4 swap", dp: []ir.Digit{a, c, d}, dn: []ir.Digit{c, a, b}, n: 8, c: 8,
			want: [][]int{
				{8, 8, 0, 0, 0, 0, 0, 0},
				{8, 8, 0, 0, 0, 0, 0, 0},
				{0, 0, 0, 0, 8, 8, 0, 0},
				{0, 0, 0, 0, 8, 8, 0, 0},
				{0, 0, 8, 8, 0, 0, 0, 0},
				{0, 0, 8, 8, 0, 0, 0, 0},
				{0, 0, 0, 0, 0, 0, 8, 8},
				{0, 0, 0, 0, 0, 0, 8, 8},
			},
		},
		{
			// Device 2y+z holds elements 2y+z and 4+2y+z; element
			// 4x+2y+z goes to device 2x+y.
			name: "strided to block", dp: []ir.Digit{y, z}, dn: []ir.Digit{x, y}, n: 4, c: 1,
			want: [][]int{
				{1, 0, 1, 0},
				{1, 0, 1, 0},
				{0, 1, 0, 1},
				{0, 1, 0, 1},
			},
		},
		{
			// [S(0)] of 8 on 4 devices (x, y) to [S(0)] on 2 others (x),
			// ranks 4 and 5: each receiver takes its half from the two
			// devices that hold it, who receive nothing.
			name: "4 devices to 2 others", dp: []ir.Digit{x, y}, dn: []ir.Digit{x}, n: 6, c: 2, at: 4,
			want: [][]int{
				{0, 0, 0, 0, 2, 0},
				{0, 0, 0, 0, 2, 0},
				{0, 0, 0, 0, 0, 2},
				{0, 0, 0, 0, 0, 2},
				{0, 0, 0, 0, 0, 0},
				{0, 0, 0, 0, 0, 0},
			},
		},
		{
			// A row of two devices (x) to a column of four others
			// (x, y): each sender splits its half between the two that
			// keep its quarters.
			name: "2 devices to 4 others", dp: []ir.Digit{x}, dn: []ir.Digit{x, y}, n: 6, c: 2, at: 2,
			want: [][]int{
				{0, 0, 2, 2, 0, 0},
				{0, 0, 0, 0, 2, 2},
				{0, 0, 0, 0, 0, 0},
				{0, 0, 0, 0, 0, 0},
				{0, 0, 0, 0, 0, 0},
				{0, 0, 0, 0, 0, 0},
			},
		},
		{
			// The same digits in another order: a device permutation,
			// each buffer whole to one device.
			name: "permutation", dp: []ir.Digit{a, c}, dn: []ir.Digit{c, a}, n: 4, c: 3,
			want: [][]int{
				{3, 0, 0, 0},
				{0, 0, 3, 0},
				{0, 3, 0, 0},
				{0, 0, 0, 3},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := exchangeCounts(tt.dp, tt.dn, tt.n, tt.at, tt.c)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("send_counts (-want +got):\n%s", diff)
			}
		})
	}
}

// TestExchangeReceived checks the search's count of what an exchange's
// members receive against the send_counts the emission writes, on every
// exchange between selections of two or three digits of a fine axis.
func TestExchangeReceived(t *testing.T) {
	var ds []ir.Digit
	for i, e := range []int{2, 3, 2, 2} {
		ds = append(ds, ir.Digit{Axis: i % 2, Stride: 1 << i, Extent: e})
	}
	var picks [][]ir.Digit
	var pick func(cur []ir.Digit, used int)
	pick = func(cur []ir.Digit, used int) {
		if len(cur) >= 2 {
			picks = append(picks, append([]ir.Digit(nil), cur...))
		}
		if len(cur) == 3 {
			return
		}
		for i, d := range ds {
			if used&(1<<i) == 0 {
				pick(append(cur, d), used|1<<i)
			}
		}
	}
	pick(nil, 0)
	tried := 0
	for _, dp := range picks {
		for _, dn := range picks {
			n := extentOf(dp)
			if !exchangeable(dp, dn, n) {
				continue
			}
			tried++
			chunk := 5
			counts := exchangeCounts(dp, dn, n, 0, chunk)
			wantMost, wantTotal := 0, 0
			for r := range n {
				got := 0
				for k := range n {
					if k != r {
						got += counts[k][r]
					}
				}
				wantMost, wantTotal = max(wantMost, got), wantTotal+got
			}
			for k, row := range counts {
				sent := 0
				for _, c := range row {
					sent += c
				}
				if want := chunk * extentOf(without(dn, dp)); sent != want {
					t.Fatalf("%v → %v: member %d sends %d elements, want its buffer, %d", dp, dn, k, sent, want)
				}
			}
			most, total := exchangeReceived(dp, dn, n, chunk)
			if got, want := fmt.Sprint(most, total), fmt.Sprint(wantMost, wantTotal); got != want {
				t.Errorf("%v → %v: exchangeReceived = %s, send_counts say %s", dp, dn, got, want)
			}
		}
	}
	if tried < 50 {
		t.Fatalf("only %d exchanges tried", tried)
	}
}
