package ops_test

import (
	"math/big"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nvcomm/nvcomm/internal/ops"
)

// prime is the simulator's modulus, 2³¹ − 1.
const prime = 1<<31 - 1

// kernel returns op's kernel as a function of two integers, modulo prime
// in [0, prime), as the simulator applies it.
func kernel(t *testing.T, op string) func(a, b int64) int64 {
	t.Helper()
	o := ops.Lookup(op)
	if o == nil || o.Kernel == nil {
		t.Fatalf("op %q has no kernel", op)
	}
	canon := func(v int64) int64 { return ((v % prime) + prime) % prime }
	if k := o.Kernel.Ring; k != nil {
		return func(a, b int64) int64 { return canon(k(a, b, prime)) }
	}
	if k := o.Kernel.Field; k != nil {
		return func(a, b int64) int64 { return canon(k(a, b, prime)) }
	}
	t.Fatalf("op %q's kernel is not exact", op)
	return nil
}

// samples are operands: small, negative (representatives), near ±p/2
// and near p.
var samples = []int64{0, 1, 2, 3, -1, -2, 7, 512, -512, 65535, 1 << 30, -(1 << 30), prime - 1, prime - 2, 123456789, -987654321}

// TestFieldKernelIdentities checks the identities docs/simulate.md states
// of the exact kernels, on every pair of samples.
func TestFieldKernelIdentities(t *testing.T) {
	mul, div, sq := kernel(t, "mul"), kernel(t, "div"), kernel(t, "square")
	recip := kernel(t, "reciprocal")
	rec := func(a int64) int64 { return recip(a, 0) }
	sig, silu, sqrt, rsqrt := kernel(t, "sigmoid"), kernel(t, "silu"), kernel(t, "sqrt"), kernel(t, "rsqrt")
	canon := func(v int64) int64 { return ((v % prime) + prime) % prime }
	for _, tc := range []struct {
		name string
		ok   func(a, b int64) bool
	}{
		{"div(a, b)·b = a for b ≠ 0", func(a, b int64) bool { return canon(b) == 0 || mul(div(a, b), b) == canon(a) }},
		{"div(a, b) = a·reciprocal(b), b = 0 included", func(a, b int64) bool { return div(a, b) == mul(a, rec(b)) }},
		{"div(a, 0) = 0", func(a, _ int64) bool { return div(a, 0) == 0 && div(a, prime) == 0 }},
		{"reciprocal(a)·a = 1 for a ≠ 0, reciprocal(0) = 0", func(a, _ int64) bool {
			if canon(a) == 0 {
				return rec(a) == 0
			}
			return mul(rec(a), a) == 1
		}},
		{"reciprocal(reciprocal(a)) = a", func(a, _ int64) bool { return rec(rec(a)) == canon(a) }},
		{"square(a) = a·a", func(a, _ int64) bool { return sq(a, 0) == mul(a, a) }},
		{"silu(x) = x·sigmoid(x)", func(a, _ int64) bool { return silu(a, 0) == mul(a, sig(a, 0)) }},
		{"rsqrt(x) = reciprocal(sqrt(x))", func(a, _ int64) bool { return rsqrt(a, 0) == rec(sqrt(a, 0)) }},
		{"a residue and its representative agree", func(a, b int64) bool {
			return div(a, b) == div(a+prime, b-prime) && sig(a, 0) == sig(a-prime, 0)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, a := range samples {
				for _, b := range samples {
					if !tc.ok(a, b) {
						t.Errorf("fails for a = %d, b = %d", a, b)
					}
				}
			}
		})
	}
}

// TestFixedMapsDistinguish checks the transcendental maps: deterministic,
// one-to-one on a run of residues (each is a permutation), and no two of
// them agree on the same operand, so that a plan applying one op where
// another belongs, or one op to another operand, fails.
func TestFixedMapsDistinguish(t *testing.T) {
	names := []string{"log", "tanh", "sigmoid", "gelu", "gelu_tanh", "sqrt", "erf"}
	for i, name := range names {
		f, image := kernel(t, name), map[int64]int64{}
		for x := int64(-2048); x < 2048; x++ {
			y := f(x, 0)
			if y != f(x, 0) || y < 0 || y >= prime {
				t.Fatalf("%s(%d) = %d is not one residue", name, x, y)
			}
			if prev, ok := image[y]; ok {
				t.Fatalf("%s(%d) = %s(%d) = %d", name, x, name, prev, y)
			}
			image[y] = x
			for j := range i {
				if g := kernel(t, names[j]); g(x, 0) == y {
					t.Fatalf("%s(%d) = %s(%d) = %d", name, x, names[j], x, y)
				}
			}
		}
	}
	// Pinned values: the maps are part of the simulator's documented
	// semantics, (x + key)⁵ mod p.
	got := map[string]int64{}
	for _, name := range names {
		got[name] = kernel(t, name)(0, 0)
	}
	want := map[string]int64{"log": 32, "tanh": 243, "sigmoid": 1024, "gelu": 3125, "gelu_tanh": 7776, "sqrt": 16807, "erf": 32768}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("f(0) (-want +got):\n%s", d)
	}
}

// TestReciprocalAgainstModInverse checks Reciprocal, whose powers reduce
// without a division for the simulator's prime, against math/big's
// inverse, and for another prime, which takes the remainder.
func TestReciprocalAgainstModInverse(t *testing.T) {
	for _, p := range []int64{prime, 101, 65537, ops.ExpModulus} {
		for _, a := range append(samples, 5, 100, 65536) {
			want := int64(0)
			if r := new(big.Int).ModInverse(big.NewInt(a), big.NewInt(p)); r != nil {
				want = r.Int64()
			}
			if got := ops.Reciprocal(a, p); got != want {
				t.Errorf("Reciprocal(%d, %d) = %d, want %d", a, p, got, want)
			}
		}
	}
}

// TestExpModulus proves the second sort's constants: q = ExpModulus is
// prime, p = 2³¹ − 1 divides q − 1, 5 does not (so the fixed maps are
// permutations modulo q too), and h = ExpBase has order exactly p modulo q
// (h ≠ 1, hᵖ = 1, p prime).
func TestExpModulus(t *testing.T) {
	q, p, h := big.NewInt(ops.ExpModulus), big.NewInt(prime), big.NewInt(ops.ExpBase)
	qm1 := new(big.Int).Sub(q, big.NewInt(1))
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"q is prime", q.ProbablyPrime(32)},
		{"p is prime", p.ProbablyPrime(32)},
		{"p divides q − 1", new(big.Int).Mod(qm1, p).Sign() == 0},
		{"5 does not divide q − 1", new(big.Int).Mod(qm1, big.NewInt(5)).Sign() != 0},
		{"h ≠ 1", h.Cmp(big.NewInt(1)) != 0 && h.Sign() > 0 && h.Cmp(q) < 0},
		{"hᵖ = 1 modulo q", new(big.Int).Exp(h, p, q).Cmp(big.NewInt(1)) == 0},
	} {
		if !tc.ok {
			t.Errorf("%s: false", tc.name)
		}
	}
}

// TestExpHomomorphism checks exp's kernel against math/big's power and its
// law, exp(a + b) = exp(a)·exp(b) modulo q, on every pair of samples
// (their sum taken as integers, past ±p included), and that it is one to
// one on a run of residues.
func TestExpHomomorphism(t *testing.T) {
	q := ops.ExpModulus
	exp := func(a int64) int64 { return ops.ExpKernel(a, prime) }
	for _, a := range samples {
		r := ((a % prime) + prime) % prime
		want := new(big.Int).Exp(big.NewInt(ops.ExpBase), big.NewInt(r), big.NewInt(q)).Int64()
		if got := exp(a); got != want {
			t.Errorf("exp(%d) = %d, want h^%d mod q = %d", a, got, r, want)
		}
		for _, b := range samples {
			if got, want := ops.MulMod(exp(a), exp(b), q), exp(a+b); got != want {
				t.Errorf("exp(%d)·exp(%d) = %d, exp(%d) = %d", a, b, got, a+b, want)
			}
			if got, want := ops.MulMod(exp(a), exp(-a), q), int64(1); got != want {
				t.Errorf("exp(%d)·exp(−%d) = %d, want 1", a, a, got)
			}
		}
	}
	seen := map[int64]int64{}
	for x := int64(-2048); x < 2048; x++ {
		y := exp(x)
		if prev, ok := seen[y]; ok {
			t.Fatalf("exp(%d) = exp(%d) = %d", x, prev, y)
		}
		seen[y] = x
	}
}

// TestMulModLarge checks MulMod against math/big for the second sort's
// modulus, whose residues' products pass 2⁶³, for the simulator's, and
// for moduli near the float quotient's limit (2⁵⁰) and past it.
func TestMulModLarge(t *testing.T) {
	for _, m := range []int64{prime, ops.ExpModulus, 1<<50 - 27, 1<<61 - 1} {
		for _, a := range append(samples, ops.ExpModulus-1, -(ops.ExpModulus - 1), ops.ExpModulus/2, m-1, m/3) {
			for _, b := range append(samples, ops.ExpModulus-2, ops.ExpBase, m-1, m-2) {
				want := new(big.Int).Mod(new(big.Int).Mul(big.NewInt(a), big.NewInt(b)), big.NewInt(m)).Int64()
				if got := ops.MulMod(a, b, m); got != want {
					t.Errorf("MulMod(%d, %d, %d) = %d, want %d", a, b, m, got, want)
				}
			}
		}
	}
}
