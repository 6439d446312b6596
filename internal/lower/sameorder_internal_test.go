package lower

import "testing"

// TestSameElementOrder: a block stored in another order of its axes
// holds its elements in the same order exactly when its axes of extent
// more than 1 keep their order.
func TestSameElementOrder(t *testing.T) {
	for _, tc := range []struct {
		name                 string
		local, layout, order []int
		want                 bool
	}{
		{"same order", []int{8, 4}, []int{0, 1}, []int{0, 1}, true},
		{"a row statistic broadcast back", []int{8, 1}, []int{0, 1}, []int{1, 0}, true},
		{"two extent-1 axes", []int{1, 8, 1}, []int{0, 1, 2}, []int{2, 0, 1}, true},
		{"a transpose", []int{8, 4}, []int{0, 1}, []int{1, 0}, false},
		{"long axes swapped around a unit one", []int{8, 1, 4}, []int{0, 1, 2}, []int{2, 1, 0}, false},
		{"one element", []int{1, 1}, []int{0, 1}, []int{1, 0}, true},
	} {
		if got := sameElementOrder(tc.local, tc.layout, tc.order); got != tc.want {
			t.Errorf("%s: sameElementOrder(%v, %v, %v) = %v, want %v", tc.name, tc.local, tc.layout, tc.order, got, tc.want)
		}
	}
}
