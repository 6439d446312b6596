package shard

import "slices"

// Digit is one factor of a logical axis written in mixed radix: logical
// index i along Axis contributes the digit (i / Stride) % Extent. A tensor
// whose splits divide evenly factors each axis into digits; device-parallel
// loop axes select digits, the remaining digits are stored
// (docs/lowering.md, "The digit model").
type Digit struct {
	Axis   int // value axis (position among non-reduction logical axes)
	Stride int
	Extent int
}

// Span is Stride*Extent, the stride of the next more significant digit.
func (d Digit) Span() int { return d.Stride * d.Extent }

// Cuts sorts the strides at which an axis is cut and drops repeats; false
// unless each divides the next, as the strides of its digits must. It
// sorts strides in place and returns a prefix of it: callers pass a list
// they built for it.
func Cuts(strides []int) ([]int, bool) {
	slices.Sort(strides)
	c := slices.Compact(strides)
	for i := 1; i < len(c); i++ {
		if c[i]%c[i-1] != 0 {
			return nil, false
		}
	}
	return c, true
}

// DigitsBetween returns the digits of axis a cut at cuts (as Cuts returns
// them) that lie between strides lo and hi, most significant first.
func DigitsBetween(a int, cuts []int, lo, hi int) []Digit {
	return AppendDigitsBetween(nil, a, cuts, lo, hi)
}

// AppendDigitsBetween appends to dst the digits DigitsBetween returns.
func AppendDigitsBetween(dst []Digit, a int, cuts []int, lo, hi int) []Digit {
	for i := len(cuts) - 1; i > 0; i-- {
		if cuts[i-1] >= lo && cuts[i] <= hi {
			dst = append(dst, Digit{Axis: a, Stride: cuts[i-1], Extent: cuts[i] / cuts[i-1]})
		}
	}
	return dst
}
