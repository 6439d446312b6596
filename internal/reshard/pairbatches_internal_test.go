package reshard

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestPairBatches: the pairs from[i] → to[i] that move go in as few
// SendRecv steps as keep every device sending at most once and receiving
// at most once in a step: from one mesh to another, one step.
func TestPairBatches(t *testing.T) {
	tests := map[string]struct {
		from, to []int
		want     [][][]int
	}{
		"two pipeline stages":       {from: []int{0, 1}, to: []int{2, 3}, want: [][][]int{{{0, 2}, {1, 3}}}},
		"a device of both copies":   {from: []int{1, 2}, to: []int{1, 0}, want: [][][]int{{{2, 0}}}},
		"nothing moves":             {from: []int{0, 1}, to: []int{0, 1}, want: nil},
		"a shift: 1 sends and gets": {from: []int{1, 2}, to: []int{0, 1}, want: [][][]int{{{1, 0}, {2, 1}}}},
		"a ring of four":            {from: []int{0, 1, 2, 3}, to: []int{1, 2, 3, 0}, want: [][][]int{{{0, 1}, {1, 2}, {2, 3}, {3, 0}}}},
		"two senders to one device": {from: []int{0, 1}, to: []int{2, 2}, want: [][][]int{{{0, 2}}, {{1, 2}}}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, pairBatches(tc.from, tc.to)); diff != "" {
				t.Errorf("pairBatches(%v, %v) (-want +got):\n%s", tc.from, tc.to, diff)
			}
		})
	}
}
