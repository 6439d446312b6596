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
