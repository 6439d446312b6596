package sim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nvcomm/nvcomm/internal/plan"
)

// TestSecondSort checks the values of the second sort (sort.go): exp's
// results are of it, its arithmetic is modulo q, an integer operand is the
// same integer in it, the value ops act on its representatives, and an
// infinity stays of neither sort.
func TestSecondSort(t *testing.T) {
	e1, e2 := fnExp(1, 0), fnExp(2, 0)
	for _, tc := range []struct {
		name     string
		got      float64
		wantQ    bool
		wantSame float64
	}{
		{"exp(1)·exp(1) = exp(2)", prodMod(e1, e1), true, e2},
		{"exp(a)·exp(−a) = 1 of the second sort", prodMod(fnExp(-7, 0), fnExp(7, 0)), true, encodeQ(1)},
		{"exp(0) = 1 of the second sort", fnExp(0, 0), true, encodeQ(1)},
		{"an integer operand embeds as itself: 3 + exp(1) − 3", fnSub(sumMod(3, e1), 3), true, e1},
		{"exp(1)·2 = exp(1) + exp(1)", fnMul(e1, 2), true, sumMod(e1, e1)},
		{"div(exp(2), exp(1)) = exp(1)", fnDiv(e2, e1), true, e1},
		{"neg of the second sort is its negation", sumMod(pointwiseFuncOf("neg")(e1, 0), e1), true, encodeQ(0)},
		{"max of both sorts is of the second", maxValue(5, encodeQ(-3)), true, encodeQ(5)},
		{"first sort arithmetic is unchanged", sumMod(modulus/2, 1), false, float64(-modulus / 2)},
		{"exp of a second sort value reads its representative modulo p", fnExp(encodeQ(modulus+4), 0), true, fnExp(4, 0)},
	} {
		if isQ(tc.got) != tc.wantQ || tc.got != tc.wantSame {
			t.Errorf("%s: got %v (second sort %v), want %v (second sort %v)", tc.name, tc.got, isQ(tc.got), tc.wantSame, tc.wantQ)
		}
	}
	if got, want := fmt.Sprint(Value(encodeQ(-12)), Value(-12)), "-12 (mod q) -12"; got != want {
		t.Errorf("the report writes %q, want %q", got, want)
	}
	inf := math.Inf(1)
	if isQ(inf) || isQ(-inf) || !math.IsNaN(fnExp(inf, 0)) || !math.IsNaN(sumMod(-inf, e1)) || maxValue(inf, e1) != inf || maxValue(-inf, e1) != e1 {
		t.Error("an infinity is of neither sort: exact kernels make NaN of it, max and min keep it")
	}
}

// TestOnlineSoftmaxExact merges attention over blocks of keys as ring
// attention does (online softmax: a running max m, l·exp(m − m') +
// Σ exp(s − m'), o·exp(m − m') + Σ exp(s − m')·v, then o / l), the blocks
// in every rotation, and checks the result equal, exactly, to the
// simulator's definition of sdpa: exp's homomorphism is all it takes.
func TestOnlineSoftmaxExact(t *testing.T) {
	r := rand.New(rand.NewPCG(26, 7))
	const s, keys, d, dv, blocks = 3, 8, 4, 2, 4
	q := randomOperand(r, "q", []int{s, d})
	k := randomOperand(r, "k", []int{keys, d})
	v := randomOperand(r, "v", []int{keys, dv})
	want := mustDef(t, &plan.Of{Op: "sdpa"}, q, k, v)
	scale := scalarResidue(1 / math.Sqrt(float64(d)))
	for first := range blocks {
		got := make([]float64, 0, s*dv)
		for i := range s {
			m, l := math.Inf(-1), 0.0
			o := make([]float64, dv)
			for b := range blocks {
				blk := (first + b) % blocks
				lo, hi := blk*keys/blocks, (blk+1)*keys/blocks
				sc := make([]float64, 0, hi-lo)
				mNew := m
				for j := lo; j < hi; j++ {
					dot := 0.0
					for c := range d {
						dot = sumMod(dot, prodMod(q.vals[i*d+c], k.vals[j*d+c]))
					}
					sc = append(sc, prodMod(dot, scale))
					mNew = maxValue(mNew, sc[len(sc)-1])
				}
				rescale := 0.0 // the first block has nothing to rescale
				if !math.IsInf(m, -1) {
					rescale = fnExp(fnSub(m, mNew), 0)
				}
				l = prodMod(l, rescale)
				for c := range o {
					o[c] = prodMod(o[c], rescale)
				}
				for jj, x := range sc {
					p := fnExp(fnSub(x, mNew), 0)
					l = sumMod(l, p)
					for c := range o {
						o[c] = sumMod(o[c], prodMod(p, v.vals[(lo+jj)*dv+c]))
					}
				}
				m = mNew
			}
			for c := range o {
				got = append(got, fnDiv(o[c], l))
			}
		}
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("blocks from %d: online softmax differs from sdpa's definition (-want +got):\n%s", first, d)
		}
	}
}
