// Package checked does the integer arithmetic of sizes, counts, bytes and
// offsets with overflow reported instead of wrapped: every function returns
// the result and ok, and ok is false (the result 0) when the exact result
// does not fit in the type. nvcomm's rule is never to produce silently wrong
// numbers, and a wrapped byte count is one.
//
// Where the bound comes from: ir.Parse rejects any tensor whose elements,
// padded where uneven splits leave holes, times its dtype size do not fit
// in int64. A product of the extents of one tensor's buffer (its size,
// count, bytes, an offset into it) is then safe in plain arithmetic. What
// can still overflow, and must go through this package, is arithmetic that
// crosses buffers: bytes multiplied by a team size, and sums over steps,
// ops and devices.
//
// The simulator (internal/sim) does not use this package on purpose: it is
// the independent oracle that checks plans, and has its own saturating
// helpers.
package checked

import (
	"math"
	"math/bits"
)

// Int is the integer types nvcomm counts in.
type Int interface{ ~int | ~int64 }

// Add returns a+b, and false when the sum does not fit in T.
func Add[T Int](a, b T) (T, bool) {
	x, y := int64(a), int64(b)
	if (y > 0 && x > math.MaxInt64-y) || (y < 0 && x < math.MinInt64-y) {
		return 0, false
	}
	return narrow[T](x + y)
}

// Mul returns a*b, and false when the product does not fit in T.
func Mul[T Int](a, b T) (T, bool) {
	x, y := int64(a), int64(b)
	if x == 0 || y == 0 {
		return 0, true
	}
	p := x * y
	if p/y != x || (x == math.MinInt64 && y == -1) {
		return 0, false
	}
	return narrow[T](p)
}

// Product returns the product of xs (1 for none), and false when it does
// not fit in T.
func Product[T Int](xs ...T) (T, bool) {
	for _, x := range xs {
		if x == 0 {
			return 0, true // however large the other factors
		}
	}
	n := T(1)
	for _, x := range xs {
		var ok bool
		if n, ok = Mul(n, x); !ok {
			return 0, false
		}
	}
	return n, true
}

// MulDiv returns a*b/c rounded down, exact even where a*b alone would
// overflow, for a, b >= 0 and c > 0; false when the quotient does not fit
// in T or an argument is out of that range. A collective's share of a
// buffer, (n-1)*bytes/n, is one.
func MulDiv[T Int](a, b, c T) (T, bool) {
	if a < 0 || b < 0 || c <= 0 {
		return 0, false
	}
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	if hi >= uint64(c) {
		return 0, false // the quotient needs more than 64 bits
	}
	q, _ := bits.Div64(hi, lo, uint64(c))
	if q > math.MaxInt64 {
		return 0, false
	}
	return narrow[T](int64(q))
}

// narrow converts v to T, and false when T (a 32-bit int) cannot hold it.
func narrow[T Int](v int64) (T, bool) {
	if r := T(v); int64(r) == v {
		return r, true
	}
	return 0, false
}
