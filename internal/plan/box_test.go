package plan

import "testing"

// TestHeadBoxes: a box is the head of its buffer when the dims before its
// first short one have extent 1 and those after it are whole.
func TestHeadBoxes(t *testing.T) {
	for _, c := range []struct {
		typ   string
		dims  []int
		valid [][]int
		want  bool
	}{
		{Unpad, []int{3, 3}, [][]int{{3, 3}, {1, 3}}, true}, // rows cut: a prefix
		{Unpad, []int{3, 3}, [][]int{{3, 3}, {0, 3}}, true}, // nothing left: the empty prefix
		{Unpad, []int{3, 4}, [][]int{{3, 3}}, false},        // a column cut: strided
		{Unpad, []int{1, 4, 2}, [][]int{{1, 3, 2}}, true},   // a leading dim of 1
		{Unpad, []int{2, 4, 2}, [][]int{{1, 4, 2}, {2, 4, 2}}, true},
		{Unpad, []int{2, 4, 2}, [][]int{{2, 3, 2}}, false},   // a short dim after a whole one of 2
		{Pad, []int{12, 3}, [][]int{{10, 3}, {10, 3}}, true}, // the same rule for a Pad
		{Pad, []int{12, 3}, [][]int{{10, 2}}, false},         // two short dims
		{Slice, []int{12, 3}, [][]int{{10, 3}}, false},       // only Pads and Unpads have boxes
		{Unpad, []int{3, 3}, [][]int{{3}}, false},            // a malformed box
	} {
		s := &Step{Type: c.typ, Dims: c.dims, Valid: c.valid}
		if got := s.HeadBoxes(); got != c.want {
			t.Errorf("%s dims %v valid %v: HeadBoxes = %v, want %v", c.typ, c.dims, c.valid, got, c.want)
		}
	}
}
