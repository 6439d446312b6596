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
		return func(a, b int64) int64 { return canon(k(a, b)) }
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
	names := []string{"exp", "log", "tanh", "sigmoid", "gelu", "gelu_tanh", "sqrt", "erf"}
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
	want := map[string]int64{"exp": 1, "log": 32, "tanh": 243, "sigmoid": 1024, "gelu": 3125, "gelu_tanh": 7776, "sqrt": 16807, "erf": 32768}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("f(0) (-want +got):\n%s", d)
	}
}

// TestReciprocalAgainstModInverse checks Reciprocal, whose powers reduce
// without a division for the simulator's prime, against math/big's
// inverse, and for another prime, which takes the remainder.
func TestReciprocalAgainstModInverse(t *testing.T) {
	for _, p := range []int64{prime, 101, 65537} {
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
