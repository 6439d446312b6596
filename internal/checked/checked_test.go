package checked

import (
	"math"
	"math/big"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// result is a value with its ok flag, for cmp.Diff.
type result struct {
	V  int64
	OK bool
}

func TestMulAddProduct(t *testing.T) {
	const maxI, minI = math.MaxInt64, math.MinInt64
	tests := []struct {
		name string
		got  func() (int64, bool)
		want result
	}{
		{"mul small", func() (int64, bool) { return Mul[int64](6, 7) }, result{42, true}},
		{"mul by zero", func() (int64, bool) { return Mul[int64](0, maxI) }, result{0, true}},
		{"mul 2^32 squared", func() (int64, bool) { return Mul[int64](1<<32, 1<<32) }, result{0, false}},
		{"mul 2^31 by 2^32", func() (int64, bool) { return Mul[int64](1<<31, 1<<32) }, result{0, false}},
		{"mul max by 1", func() (int64, bool) { return Mul[int64](maxI, 1) }, result{maxI, true}},
		{"mul max by 2", func() (int64, bool) { return Mul[int64](maxI, 2) }, result{0, false}},
		{"mul min by -1", func() (int64, bool) { return Mul[int64](minI, -1) }, result{0, false}},
		{"mul -1 by min", func() (int64, bool) { return Mul[int64](-1, minI) }, result{0, false}},
		{"mul min by 1", func() (int64, bool) { return Mul[int64](minI, 1) }, result{minI, true}},
		{"mul -2^31 by 2^32", func() (int64, bool) { return Mul[int64](-1<<31, 1<<32) }, result{minI, true}},
		{"add small", func() (int64, bool) { return Add[int64](40, 2) }, result{42, true}},
		{"add max and 1", func() (int64, bool) { return Add[int64](maxI, 1) }, result{0, false}},
		{"add min and -1", func() (int64, bool) { return Add[int64](minI, -1) }, result{0, false}},
		{"add max and min", func() (int64, bool) { return Add[int64](maxI, minI) }, result{-1, true}},
		{"add 2^62 twice", func() (int64, bool) { return Add[int64](1<<62, 1<<62) }, result{0, false}},
		{"product empty", func() (int64, bool) { return Product[int64]() }, result{1, true}},
		{"product shape", func() (int64, bool) { return Product[int64](2, 3, 4) }, result{24, true}},
		// The defects of issue 10: 2^64-byte tensors whose counts wrapped.
		{"product 2^16 four times", func() (int64, bool) { return Product[int64](65536, 65536, 65536, 65536) }, result{0, false}},
		{"product 2^30 2^30 8", func() (int64, bool) { return Product[int64](1<<30, 1<<30, 8) }, result{0, false}},
		{"product 2^30 2^30 4", func() (int64, bool) { return Product[int64](1<<30, 1<<30, 4) }, result{1 << 62, true}},
		{"product with zero", func() (int64, bool) { return Product[int64](1<<40, 1<<40, 0) }, result{0, true}},
		{"muldiv exact", func() (int64, bool) { return MulDiv[int64](7, 3, 2) }, result{10, true}},
		// An Allreduce of 2^61 bytes over 3 devices: 4·2^61 overflows, /3 fits.
		{"muldiv past int64", func() (int64, bool) { return MulDiv[int64](1<<61, 4, 3) }, result{3074457345618258602, true}},
		{"muldiv max", func() (int64, bool) { return MulDiv[int64](maxI, maxI, maxI) }, result{maxI, true}},
		{"muldiv quotient too large", func() (int64, bool) { return MulDiv[int64](maxI, 2, 1) }, result{0, false}},
		{"muldiv quotient 2^63", func() (int64, bool) { return MulDiv[int64](1<<62, 4, 2) }, result{0, false}},
		{"muldiv by zero", func() (int64, bool) { return MulDiv[int64](1, 1, 0) }, result{0, false}},
		{"muldiv negative", func() (int64, bool) { return MulDiv[int64](-1, 1, 1) }, result{0, false}},
		{"product wraps to positive", func() (int64, bool) { return Product[int64](1<<33, 1<<33, 1<<33) }, result{0, false}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, ok := tt.got()
			if diff := cmp.Diff(tt.want, result{v, ok}); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestIntType(t *testing.T) {
	type elems int
	got := []any{}
	if n, ok := Product[elems](3, 4); ok {
		got = append(got, n)
	}
	if _, ok := Mul(math.MaxInt, 2); !ok {
		got = append(got, "overflow")
	}
	if diff := cmp.Diff([]any{elems(12), "overflow"}, got); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}
}

// edges are values around every boundary the checks compare against.
var edges = []int64{
	0, 1, -1, 2, -2, 3, 1<<31 - 1, 1 << 31, 1 << 32, 1<<32 + 1, 3037000499, 3037000500,
	1<<62 - 1, 1 << 62, math.MaxInt64 / 2, math.MaxInt64/2 + 1, math.MaxInt64 - 1, math.MaxInt64,
	-(1 << 32), -3037000500, -(1 << 62), math.MinInt64 / 2, math.MinInt64 + 1, math.MinInt64,
}

// TestAgainstBig compares Add and Mul with exact arithmetic on every pair of
// edge values, and MulDiv on every triple.
func TestAgainstBig(t *testing.T) {
	for _, a := range edges {
		for _, b := range edges {
			checkAgainstBig(t, a, b)
			for _, c := range edges {
				checkMulDivAgainstBig(t, a, b, c)
			}
		}
	}
}

// FuzzArith compares Add, Mul and MulDiv with exact arithmetic.
func FuzzArith(f *testing.F) {
	for i, a := range edges {
		f.Add(a, edges[len(edges)-1-i], edges[i/2])
	}
	f.Fuzz(func(t *testing.T, a, b, c int64) {
		checkAgainstBig(t, a, b)
		checkMulDivAgainstBig(t, a, b, c)
	})
}

func checkAgainstBig(t *testing.T, a, b int64) {
	x, y := big.NewInt(a), big.NewInt(b)
	for _, op := range []struct {
		name  string
		exact *big.Int
		f     func(int64, int64) (int64, bool)
	}{
		{"Add", new(big.Int).Add(x, y), Add[int64]},
		{"Mul", new(big.Int).Mul(x, y), Mul[int64]},
	} {
		want := result{0, false}
		if op.exact.IsInt64() {
			want = result{op.exact.Int64(), true}
		}
		v, ok := op.f(a, b)
		if diff := cmp.Diff(want, result{v, ok}); diff != "" {
			t.Errorf("%s(%d, %d) mismatch (-want +got):\n%s", op.name, a, b, diff)
		}
	}
}

// checkMulDivAgainstBig compares MulDiv with exact arithmetic.
func checkMulDivAgainstBig(t *testing.T, a, b, c int64) {
	want := result{0, false}
	if a >= 0 && b >= 0 && c > 0 {
		q := new(big.Int).Mul(big.NewInt(a), big.NewInt(b))
		if q.Div(q, big.NewInt(c)); q.IsInt64() {
			want = result{q.Int64(), true}
		}
	}
	v, ok := MulDiv(a, b, c)
	if diff := cmp.Diff(want, result{v, ok}); diff != "" {
		t.Errorf("MulDiv(%d, %d, %d) mismatch (-want +got):\n%s", a, b, c, diff)
	}
}
