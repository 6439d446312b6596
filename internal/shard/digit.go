package shard

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
