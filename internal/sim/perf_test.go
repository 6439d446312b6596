package sim

import (
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nvcomm/nvcomm/internal/plan"
)

// The tests of what makes big simulations fast: each fast path against
// the plain computation it replaces.

// TestInPiecesCoverEachOnce checks that the pieces cover every position
// exactly once, whatever the number of workers.
func TestInPiecesCoverEachOnce(t *testing.T) {
	for _, n := range []int{0, 1, 2, 7, 100, 1<<17 + 3} {
		for _, workers := range []int{0, 1, 2, 3, 8, 200} {
			hits := make([]int32, n)
			inPieces(n, workers, func(lo, hi int) {
				for i := lo; i < hi; i++ {
					atomic.AddInt32(&hits[i], 1)
				}
			})
			for i, h := range hits {
				if h != 1 {
					t.Fatalf("n %d, %d workers: position %d covered %d times", n, workers, i, h)
				}
			}
		}
	}
}

// TestInputDataInPieces checks that input values filled in pieces, from
// any position, are inputValue's, and that inputData, which runs on every
// CPU for large tensors, gives them too.
func TestInputDataInPieces(t *testing.T) {
	const n = 3*minPiece + 17 // several pieces on a machine of 2 CPUs or more
	for _, data := range []DataSet{Wide, Small, Positive} {
		key := streamKey(7, 3)
		v := make([]float64, n)
		for _, r := range [][2]int{{0, 5}, {5, 1000}, {1000, n}} {
			fillInputs(v, key, data, 0, r[0], r[1])
		}
		for i, x := range v {
			if want := inputValue(key, i, data, 0); x != want {
				t.Fatalf("data set %v, value %d: %v, inputValue gives %v", data, i, x, want)
			}
		}
		if d := cmp.Diff(v, inputData(7, 3, n, data, 0)); d != "" {
			t.Errorf("inputData differs from the values filled in pieces:\n%s", d)
		}
	}
}

// TestCombineParts checks the blocked combination against combining the
// parts one after the other, over lengths that end inside a block.
func TestCombineParts(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, op := range plan.ReduceOps() {
		for _, n := range []int{0, 1, combineBlock - 1, combineBlock, 2*combineBlock + 5} {
			parts := make([][]float64, 4)
			for k := range parts {
				parts[k] = make([]float64, n)
				for i := range parts[k] {
					parts[k][i] = float64(r.IntN(modulus) - modulus/2)
				}
			}
			want := slices.Clone(parts[0])
			for _, p := range parts[1:] {
				for i := range want {
					want[i] = combine(op, want[i], p[i])
				}
			}
			if d := cmp.Diff(want, elementwise(op, parts)); d != "" {
				t.Errorf("%s, %d elements (-want +got):\n%s", op, n, d)
			}
		}
	}
}

// TestReduceAxis checks reduceAxis against a sum by definition, along
// each axis of a small tensor.
func TestReduceAxis(t *testing.T) {
	shape := []int{3, 4, 5}
	in := inputData(1, 0, 60, Wide, 0)
	for axis := range shape {
		out := reduceAxis("sum", in, shape, axis)
		outer, n, inner := product(shape[:axis]), shape[axis], product(shape[axis+1:])
		for o := range outer {
			for i := range inner {
				want := 0.0
				for k := range n {
					want += in[(o*n+k)*inner+i]
				}
				if got := out[o*inner+i]; got != want {
					t.Fatalf("axis %d, output %d: %v, want %v", axis, o*inner+i, got, want)
				}
			}
		}
	}
}

// TestSumModFastPath checks sumMod against the remainder it skips when
// the sum is already a representative, at and around the range's ends.
func TestSumModFastPath(t *testing.T) {
	const half = modulus / 2
	values := []float64{0, 1, -1, 512, -512, half, -half, half - 1, -half + 1, half / 2, -half / 2}
	r := rand.New(rand.NewPCG(1, 2))
	for range 1000 {
		values = append(values, float64(r.IntN(modulus)-half))
	}
	for _, a := range values {
		for _, b := range values[:12] {
			if got, want := sumMod(a, b), residue(int64(a)+int64(b)); got != want {
				t.Fatalf("sumMod(%v, %v) = %v, want %v", a, b, got, want)
			}
		}
	}
}

// TestParallelCopies checks reading a long vec, which copies on every
// CPU, and firstDiffering against their one-CPU forms, at lengths below
// and above where they split the work.
func TestParallelCopies(t *testing.T) {
	for _, n := range []int{0, 3, 2*minPiece - 1, 2 * minPiece, 5*minPiece + 3} {
		a := inputData(1, 0, n, Wide, 0)
		for _, v := range []vec{stored(a), generated(&stream{key: streamKey(1, 0)}, n)} {
			got := make([]float64, n)
			v.read(0, got)
			if d := cmp.Diff(a, got); d != "" {
				t.Errorf("read, %d elements:\n%s", n, d)
			}
		}
		if got := firstDiffering(a, slices.Clone(a)); got != -1 {
			t.Errorf("firstDiffering of equal buffers of %d elements: %d, want -1", n, got)
		}
		for _, diffs := range [][]int{{0}, {n - 1}, {n / 3, n / 2, n - 1}, {n - 2, 1}} {
			if n < 3 {
				continue
			}
			c := slices.Clone(a)
			for _, i := range diffs {
				c[i]++
			}
			if got, want := firstDiffering(a, c), slices.Min(diffs); got != want {
				t.Errorf("firstDiffering, %d elements differing at %v: %d, want %d", n, diffs, got, want)
			}
		}
	}
}
