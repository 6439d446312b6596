package sim

import (
	"fmt"
	"math"

	"github.com/nvcomm/nvcomm/internal/ops"
)

// This file gives the number operands of binary ops (ops.Scalar) their
// exact values in the simulation (docs/simulate.md, "Exactness"). A
// float64 c is m·2ᵉ for integers m and e, and maps to the residue
// m·2ᵉ modulo [modulus], 2⁻¹ being the inverse of 2: so 1/n written as a
// division by n is exactly a multiplication by n's inverse, and an
// epsilon is one fixed residue. As 2³¹ ≡ 1 modulo 2³¹ − 1, 2ᵉ is 2 to
// the power e modulo 31, which needs no inverse at all.

// scalarResidue is c's residue: m·2ᵉ modulo [modulus] for c = m·2ᵉ, as a
// representative of the simulation's values.
func scalarResidue(c float64) float64 {
	if c == 0 || math.IsInf(c, 0) || math.IsNaN(c) {
		return 0 // validate rejects the last two; 0 is 0
	}
	frac, exp := math.Frexp(c) // c = frac·2^exp, 0.5 <= |frac| < 1
	m := int64(math.Ldexp(frac, 53))
	e := exp - 53
	const period = 31 // 2^31 ≡ 1 (mod 2^31 − 1)
	shift := ((e % period) + period) % period
	r := (m % modulus) * (int64(1) << shift) % modulus
	return residue(r)
}

// withScalar returns f with number sc standing for its operand in slot
// sc.Slot, the one buffer it reads in the other; f itself when sc is nil.
func withScalar(f pointwiseFunc, sc *ops.Scalar) pointwiseFunc {
	if sc == nil || f == nil {
		return f
	}
	c := scalarResidue(sc.Value)
	if sc.Slot == 0 {
		return func(a, _ float64) float64 { return f(c, a) }
	}
	return func(a, _ float64) float64 { return f(a, c) }
}

// checkScalar checks number sc as an operand of function fn: only a
// binary function takes one, in slot 0 or 1, and it is finite.
func checkScalar(fn string, sc *ops.Scalar) error {
	switch {
	case sc == nil:
		return nil
	case !ops.Is(fn, ops.Binary):
		return fmt.Errorf("%s takes no number as an operand", fn)
	case sc.Slot != 0 && sc.Slot != 1:
		return fmt.Errorf("scalar slot %d is not 0 or 1", sc.Slot)
	case math.IsInf(sc.Value, 0) || math.IsNaN(sc.Value):
		return fmt.Errorf("scalar %v is not a finite number", sc.Value)
	}
	return nil
}

// scalarCount is the number of operands sc stands for: 1, or 0 for nil.
func scalarCount(sc *ops.Scalar) int {
	if sc == nil {
		return 0
	}
	return 1
}
