package shard

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestDTypes(t *testing.T) {
	want := []string{"bfloat16", "float16", "float32", "float64", "int32", "int64"}
	if d := cmp.Diff(want, DTypeNames()); d != "" {
		t.Errorf("DTypeNames (-want +got):\n%s", d)
	}
	got := map[string]int{}
	for _, n := range append(want, "float8") {
		got[n] = DTypeSize(n)
	}
	wantSizes := map[string]int{"bfloat16": 2, "float16": 2, "float32": 4, "float64": 8, "int32": 4, "int64": 8, "float8": 0}
	if d := cmp.Diff(wantSizes, got); d != "" {
		t.Errorf("DTypeSize (-want +got):\n%s", d)
	}
}

// TestCoordsIndex checks that Coords numbers a 2x3x4 array row-major and
// that Index inverts it.
func TestCoordsIndex(t *testing.T) {
	shape := []int{2, 3, 4}
	tests := map[int][]int{0: {0, 0, 0}, 1: {0, 0, 1}, 4: {0, 1, 0}, 12: {1, 0, 0}, 23: {1, 2, 3}}
	for i, want := range tests {
		if d := cmp.Diff(want, Coords(i, shape)); d != "" {
			t.Errorf("Coords(%d) (-want +got):\n%s", i, d)
		}
	}
	for i := range 24 {
		if got := Index(Coords(i, shape), shape); got != i {
			t.Errorf("Index(Coords(%d)) = %d", i, got)
		}
	}
}

func TestCuts(t *testing.T) {
	type result struct {
		Cuts   []int
		OK     bool
		Digits []Digit
	}
	tests := map[string]struct {
		strides []int
		want    result
	}{
		"one digit":         {[]int{1, 8}, result{[]int{1, 8}, true, []Digit{{Axis: 2, Stride: 1, Extent: 8}}}},
		"repeats, unsorted": {[]int{8, 2, 1, 8, 2}, result{[]int{1, 2, 8}, true, []Digit{{Axis: 2, Stride: 2, Extent: 4}, {Axis: 2, Stride: 1, Extent: 2}}}},
		"not dividing":      {[]int{1, 4, 6, 12}, result{}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var got result
			got.Cuts, got.OK = Cuts(tc.strides)
			if got.OK {
				got.Digits = DigitsBetween(2, got.Cuts, 1, got.Cuts[len(got.Cuts)-1])
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
	if got := DigitsBetween(0, []int{1, 2, 8, 16}, 2, 8); !cmp.Equal(got, []Digit{{Axis: 0, Stride: 2, Extent: 4}}) {
		t.Errorf("DigitsBetween(cuts 1|2|8|16, 2..8) = %v, want the digit of stride 2", got)
	}
}
