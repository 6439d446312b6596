package ops

import (
	"fmt"
	"math/bits"
	"sync"
)

// This file holds the exact kernels of the elementwise ops that are not
// ring operations — reciprocal, div and the transcendental functions — and
// the rounding rules of their torch functions. The simulator computes
// them in the integers modulo its prime p (docs/simulate.md, "Exactness"):
//
//   - reciprocal(x) = x^(p−2), the inverse x⁻¹ of a nonzero x and 0 for 0
//     (the one total rule that keeps x^(p−2) a plain power), and div(a, b) =
//     a·reciprocal(b): so div(a, b)·b = a for every b ≠ 0, and a plan that
//     computes a quotient as a product with a reciprocal matches exactly;
//   - exp is an exact homomorphism from the residues modulo p under
//     addition to the nonzero residues modulo a second prime q =
//     [ExpModulus] under multiplication, x ↦ hˣ mod q with h = [ExpBase]
//     of order p: exp(a + b) = exp(a)·exp(b) exactly, the one law of the
//     exponential that online softmax (ring attention's merge of partial
//     results) rests on;
//   - log, tanh, sigmoid, gelu, gelu_tanh, sqrt and erf are fixed maps of the
//     canonical residue, x ↦ (x + k)⁵ mod m with a key k of each op's
//     own, m the modulus of the operand's sort (p, or q for a value
//     computed from an exp): a permutation of the residues when 5 does not
//     divide m − 1 (it divides neither p − 1 nor q − 1), so two operands
//     that differ give results that differ, and since the keys differ, no
//     two of these ops agree on the same operand ((x + j)⁵ = (x + k)⁵ only
//     for j = k, 5 being prime to m − 1): a plan that applies one in place
//     of another fails on every element;
//   - silu(x) = x·sigmoid(x) and rsqrt(x) = reciprocal(sqrt(x)), torch's
//     definitions of them from the others, hold exactly.
//
// A plan computes these ops on complete values (each device's block of the
// operands the reference reads), so any fixed function of the residue is
// exact. What the fixed maps do not have is the real functions' algebra:
// log(exp(x)) = x and sqrt(x)² = x do not hold, so no plan may rely on
// them; exp's homomorphism does hold, so a plan may.

// The keys of the transcendental maps: distinct, so that no two of the
// maps agree on the same residue. (Key 1 was exp's before exp became a
// homomorphism; the others keep theirs.)
const (
	keyLog int64 = 2 + iota
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

// smallModulus is the largest modulus whose canonical residues multiply
// within int64: ⌊√(2⁶³ − 1)⌋. A product modulo a larger one (q) takes
// 128 bits.
const smallModulus = 3037000499

// mulMod returns a·b modulo p, in [0, p): a and b are reduced first, so
// that for a p up to smallModulus the product fits in int64, and for a
// larger p (below 2⁶³) it is reduced from its 128 bits.
func mulMod(a, b, p int64) int64 { return mulCanonical(canonical(a, p), canonical(b, p), p) }

// mulCanonical is mulMod of residues already in [0, p).
func mulCanonical(a, b, p int64) int64 {
	switch {
	case p <= smallModulus:
		return a * b % p
	case p < 1<<50:
		return mulFloatQuotient(a, b, p)
	}
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	return int64(bits.Rem64(hi, lo, uint64(p)))
}

// mulFloatQuotient is a·b modulo p for residues a, b of a p below 2⁵⁰,
// without a division of 128 bits: the quotient ⌊a·b / p⌋ estimated in
// float64 is off by at most one (its relative error 2⁻⁵² times a quotient
// below 2⁵⁰), so a·b − quotient·p, computed modulo 2⁶⁴ (Go's integers
// wrap) but truly in (−p, 2p), is exact, and one correction makes it the
// residue. The second sort's products (q < 2³⁷) take it: a reciprocal
// modulo q is some 60 of them, once per element of a softmax's division.
func mulFloatQuotient(a, b, p int64) int64 {
	quot := int64(float64(a) * float64(b) / float64(p))
	r := a*b - quot*p
	switch {
	case r < 0:
		r += p
	case r >= p:
		r -= p
	}
	return r
}

// MulMod returns a·b modulo m, in [0, m), for any integers a and b and a
// modulus m below 2⁶³: the product of the ring's kernels, exact for the
// second sort's modulus too, whose residues' products pass 2⁶³.
func MulMod(a, b, m int64) int64 { return mulMod(a, b, m) }

// ringMul is mul's ring kernel: a·b itself for operands below a modulus
// up to smallModulus in magnitude (below 2⁶³; the simulator reduces it,
// once, as it reduced every product before the second sort), and the
// product reduced from its 128 bits for a larger modulus.
func ringMul(a, b, m int64) int64 {
	if m <= smallModulus {
		return a * b
	}
	return mulMod(a, b, m)
}

// ExpModulus is q = 46·p + 1 = 98,784,247,763, p = 2³¹ − 1 the
// simulator's prime: the prime of the values computed from an exp (the
// second sort, docs/simulate.md "Exactness"). p divides q − 1, so the
// nonzero residues modulo q, a cyclic group of order q − 1, hold an
// element of order p; 46 is the least even multiplier that makes 46·p + 1
// prime and is not a multiple of 5, so that the fixed maps (x + k)⁵ stay
// permutations modulo q. field_test.go proves q prime and p | q − 1.
const ExpModulus int64 = 46*(1<<31-1) + 1

// ExpBase is h = 2^((q−1)/p) mod q, of multiplicative order exactly p
// modulo q (h ≠ 1 and hᵖ = 1, p prime: field_test.go proves both), so
// that x ↦ hˣ is well defined on residues modulo p and one-to-one.
const ExpBase int64 = 34359770408

// expOrder is the order of [ExpBase]: the simulator's prime 2³¹ − 1.
const expOrder = 1<<31 - 1

// ExpKernel is exp's exact kernel: h^(a mod p) modulo q = [ExpModulus],
// in [1, q), for the simulator's prime p = 2³¹ − 1. It is a
// homomorphism: ExpKernel(a + b) = ExpKernel(a)·ExpKernel(b) modulo q for
// all integers a and b, as the residue of a + b modulo p is the sum of
// theirs and h has order p. Any other p has no such h and is refused.
func ExpKernel(a, p int64) int64 {
	if p != expOrder {
		panic(fmt.Sprintf("ops: exp's kernel is a homomorphism from the residues modulo %d, not %d", int64(expOrder), p))
	}
	t := expTables()
	r := canonical(a, p)
	return mulCanonical(t.low[r&(1<<expSplit-1)], t.high[r>>expSplit], ExpModulus)
}

// expSplit cuts an exponent r < 2³¹ into r = hi·2¹⁶ + lo: hʳ is then one
// product of two table entries, h^lo and h^(hi·2¹⁶), where powMod took some
// 60 products of 128 bits, each a division (a softmax of a million
// entries took seconds).
const expSplit = 16

// expTable holds h^lo for lo < 2¹⁶ and h^(hi·2¹⁶) for hi < 2¹⁵, modulo q.
type expTable struct{ low, high []int64 }

// expTables builds the tables once, on first use (768 KiB).
var expTables = sync.OnceValue(func() expTable {
	t := expTable{low: make([]int64, 1<<expSplit), high: make([]int64, 1<<(31-expSplit))}
	t.low[0], t.high[0] = 1, 1
	for i := 1; i < len(t.low); i++ {
		t.low[i] = mulCanonical(t.low[i-1], ExpBase, ExpModulus)
	}
	step := mulCanonical(t.low[len(t.low)-1], ExpBase, ExpModulus) // h^(2¹⁶)
	for i := 1; i < len(t.high); i++ {
		t.high[i] = mulCanonical(t.high[i-1], step, ExpModulus)
	}
	return t
})

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
	if p > smallModulus {
		for ; e > 0; e >>= 1 {
			if e&1 == 1 {
				r = mulCanonical(r, a, p)
			}
			a = mulCanonical(a, a, p)
		}
		return r
	}
	for ; e > 0; e >>= 1 {
		if e&1 == 1 {
			r = reduce(r * a)
		}
		a = reduce(a * a)
	}
	return r
}

// Reciprocal returns a⁻¹ modulo the prime p, a^(p−2): the inverse of a
// nonzero residue (Fermat) and 0 for 0. p is the simulator's prime, or
// [ExpModulus] for a value of the second sort.
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
	for _, set := range []bool{k.Ring != nil, k.Field != nil, k.Exp != nil, k.Value != nil} {
		if set {
			n++
		}
	}
	return n
}
