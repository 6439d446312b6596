package ops

// This file holds the exact kernels of the elementwise ops that are not
// ring operations — reciprocal, div and the transcendental functions — and
// the rounding rules of their torch functions. The simulator computes
// them in the integers modulo its prime p (docs/simulate.md, "Exactness"):
//
//   - reciprocal(x) = x^(p−2), the inverse x⁻¹ of a nonzero x and 0 for 0
//     (the one total rule that keeps x^(p−2) a plain power), and div(a, b) =
//     a·reciprocal(b): so div(a, b)·b = a for every b ≠ 0, and a plan that
//     computes a quotient as a product with a reciprocal matches exactly;
//   - exp, log, tanh, sigmoid, gelu, gelu_tanh, sqrt and erf are fixed maps of
//     the canonical residue, x ↦ (x + k)⁵ mod p with a key k of each op's
//     own: a permutation of the residues when 5 does not divide p − 1 (it
//     does not for p = 2³¹ − 1), so two operands that differ give results
//     that differ, and since the keys differ, no two of these ops agree on
//     the same operand ((x + j)⁵ = (x + k)⁵ only for j = k, 5 being prime
//     to p − 1): a plan that applies one in place of another fails on
//     every element;
//   - silu(x) = x·sigmoid(x) and rsqrt(x) = reciprocal(sqrt(x)), torch's
//     definitions of them from the others, hold exactly.
//
// A plan computes these ops on complete values (each device's block of the
// operands the reference reads), so any fixed function of the residue is
// exact. What the maps do not have is the real functions' algebra: exp(a +
// b) = exp(a)·exp(b), log(exp(x)) = x and sqrt(x)² = x do not hold, so no
// plan may rely on them.

// The keys of the transcendental maps: distinct, so that no two of the
// maps agree on the same residue.
const (
	keyExp int64 = 1 + iota
	keyLog
	keyTanh
	keySigmoid
	keyGelu
	keyGeluTanh
	keySqrt
	keyErf
)

// canonical returns the residue of a modulo p in [0, p).
func canonical(a, p int64) int64 {
	if a %= p; a < 0 {
		a += p
	}
	return a
}

// mulMod returns a·b modulo p, in [0, p): a and b are reduced first, so
// that for a p below 2³¹ the product fits in int64.
func mulMod(a, b, p int64) int64 { return canonical(a, p) * canonical(b, p) % p }

// mersenne31 is the simulator's prime 2³¹ − 1, whose residues powMod
// reduces without a division.
const mersenne31 = 1<<31 - 1

// powMod returns aᵉ modulo p, in [0, p), for e ≥ 0, by squaring. For p =
// 2³¹ − 1 it reduces a product x below 2⁶² as (x mod 2³¹) + ⌊x / 2³¹⌋,
// which is x modulo p (2³¹ ≡ 1), twice, without a division: a reciprocal
// takes some 60 products, and the remainder made it 30 times slower than
// a mul.
func powMod(a, e, p int64) int64 {
	reduce := func(x int64) int64 { return x % p }
	if p == mersenne31 {
		reduce = func(x int64) int64 {
			x = x&mersenne31 + x>>31
			x = x&mersenne31 + x>>31
			if x >= mersenne31 {
				x -= mersenne31
			}
			return x
		}
	}
	r, a := int64(1)%p, canonical(a, p)
	for ; e > 0; e >>= 1 {
		if e&1 == 1 {
			r = reduce(r * a)
		}
		a = reduce(a * a)
	}
	return r
}

// Reciprocal returns a⁻¹ modulo the prime p, a^(p−2): the inverse of a
// nonzero residue (Fermat) and 0 for 0.
func Reciprocal(a, p int64) int64 { return powMod(a, p-2, p) }

// fixedMap returns (a + key)⁵ modulo p: the stand-in of a transcendental
// function, a permutation of the residues when 5 does not divide p − 1.
func fixedMap(key int64) func(a, _, p int64) int64 {
	return func(a, _, p int64) int64 { return powMod(canonical(a, p)+key, 5, p) }
}

// The field kernels of the ops of this file.
var (
	sigmoidField = fixedMap(keySigmoid)
	sqrtField    = fixedMap(keySqrt)
)

// siluField is x·sigmoid(x), torch's definition of silu.
func siluField(a, _, p int64) int64 { return mulMod(a, sigmoidField(a, 0, p), p) }

// rsqrtField is reciprocal(sqrt(x)), torch's definition of rsqrt.
func rsqrtField(a, _, p int64) int64 { return Reciprocal(sqrtField(a, 0, p), p) }

// divField is a·b⁻¹, with reciprocal's rule for b = 0.
func divField(a, b, p int64) int64 { return mulMod(a, Reciprocal(b, p), p) }

// reciprocalField is reciprocal as a kernel.
func reciprocalField(a, _, p int64) int64 { return Reciprocal(a, p) }

// The rounding rules of the ops of this file (docs/export.md, "Data and the check").
const (
	// Transcendental ops (exp, log, tanh, sigmoid, silu, gelu, gelu_tanh,
	// erf, sqrt, rsqrt) round to within a few ulps of the function at the
	// computed operand; the exported program bounds how an operand's own
	// error carries through by the function's slope near it, and checks
	// that the operand stays in the function's domain.
	Transcendental Rounding = "transcendental"
	// Quotient ops (div, reciprocal) are one IEEE division, correctly
	// rounded; the error of the operands carries through a quotient as
	// (εa·|b| + |a|·εb) / (|b|·(|b| − εb)), and a divisor within its error
	// of 0 leaves the domain.
	Quotient Rounding = "quotient"
)

// count returns how many of the kernel's functions are set.
func (k *Kernel) count() int {
	n := 0
	for _, set := range []bool{k.Ring != nil, k.Field != nil, k.Value != nil} {
		if set {
			n++
		}
	}
	return n
}
