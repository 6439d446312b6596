package plan

import "slices"

// HeadBoxes reports whether every device's real box of a Pad or an Unpad
// (its entry of Valid within Dims) is the head of the padded buffer: the
// dims before the box's first short one have extent 1 and the dims after
// it are whole, so the box's elements are the buffer's first ones, in
// order (an empty box is the empty head). Such an Unpad keeps a prefix of
// its input — the exporter runs it as a view and the cost model prices it
// as one — and such a Pad writes its input at the start of its output and
// fills the tail. It is false for other steps.
func (s *Step) HeadBoxes() bool {
	if s.Type != Pad && s.Type != Unpad {
		return false
	}
	for _, box := range s.Valid {
		if len(box) != len(s.Dims) || !isHead(box, s.Dims) {
			return false
		}
	}
	return true
}

// isHead reports whether box, at the low corner of row-major dims, is the
// array's first elements. An empty box (an extent 0) is: it has none.
func isHead(box, dims []int) bool {
	if slices.Contains(box, 0) {
		return true
	}
	short := -1
	for d := range box {
		if box[d] < dims[d] {
			short = d
			break
		}
	}
	if short < 0 {
		return true
	}
	for d := range box {
		if d < short && dims[d] != 1 || d > short && box[d] != dims[d] {
			return false
		}
	}
	return true
}

// PadInput is the elements the busiest device of a Pad reads: its largest
// real box that does not fill dims. A device whose box fills dims pads
// nothing — its padded buffer is its input as it is, as the exporter runs
// it and as DTensor's pad_tensor returns a chunk with nothing to pad — so
// ok is false when every device's box fills dims, or for another step.
func (s *Step) PadInput() (elems int, ok bool) {
	if s.Type != Pad {
		return 0, false
	}
	for _, box := range s.Valid {
		if n, within := boxSize(box, s.Dims); within && !slices.Equal(box, s.Dims) {
			elems, ok = max(elems, n), true
		}
	}
	return elems, ok
}
