package plan

import "slices"

// fills are the values a Pad may write into holes: the identities of the
// reduce ops.
var fills = []string{"0", "1", "-inf", "inf"}

// checkPad checks a Pad or Unpad: dims, one real box per device within dims,
// a fill exactly for a Pad, and counts that are the padded size on one side
// and the largest real box on the other.
func (v *validator) checkPad(i int, s *Step) {
	if len(s.Dims) == 0 {
		v.stepf(i, "dims is missing, but type %s needs it", s.Type)
		return
	}
	full, ok := product(s.Dims)
	if !ok || slices.ContainsFunc(s.Dims, func(d int) bool { return d < 1 }) {
		v.stepf(i, "dims %v are not positive extents", s.Dims)
		return
	}
	if len(s.Valid) != len(s.Devices) {
		v.stepf(i, "valid has %d boxes for %d devices", len(s.Valid), len(s.Devices))
		return
	}
	hull := make([]int, len(s.Dims))
	for k, box := range s.Valid {
		if _, ok := boxSize(box, s.Dims); !ok {
			v.stepf(i, "valid box %v of device %d is not within dims %v", box, s.Devices[k], s.Dims)
			return
		}
		for d, e := range box {
			hull[d] = max(hull[d], e)
		}
	}
	most, _ := product(hull)
	padded, real := s.Count.Output, s.Count.Input
	if s.Type == Unpad {
		padded, real = real, padded
	}
	if padded != full {
		v.stepf(i, "the padded count is %d, want %d (the product of dims %v)", padded, full, s.Dims)
	}
	if real != most {
		v.stepf(i, "the unpadded count is %d, want %d (the box that holds every valid box)", real, most)
	}
	switch {
	case s.Type == Pad && (s.Fill == nil || !slices.Contains(fills, *s.Fill)):
		v.stepf(i, "a Pad needs a fill of 0, 1, -inf or inf")
	case s.Type == Unpad && s.Fill != nil:
		v.stepf(i, "an Unpad takes no fill")
	}
}

// boxSize returns the elements of a box that fits within dims.
func boxSize(box, dims []int) (int, bool) {
	if len(box) != len(dims) {
		return 0, false
	}
	n := 1
	for k, e := range box {
		if e < 0 || e > dims[k] {
			return 0, false
		}
		n *= e
	}
	return n, true
}
