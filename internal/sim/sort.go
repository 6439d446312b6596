package sim

import (
	"math"

	"github.com/nvcomm/nvcomm/internal/ops"
)

// This file holds the simulation's second sort of values (docs/simulate.md,
// "Exactness"). Values are residues modulo [modulus] p, except those
// computed from an exp: exp is the homomorphism x ↦ hˣ from the residues
// modulo p under addition to those modulo q = ops.ExpModulus under
// multiplication, so that exp(a + b) = exp(a)·exp(b) holds exactly, the law
// online softmax's merge rests on. A value of the second sort is stored in
// the same float64 arrays, as qBand + c, c its representative modulo q in
// [−(q−1)/2, (q−1)/2]: every value carries its sort, so that the data
// movement steps move it unchanged and only the arithmetic looks. An op
// with an operand of the second sort computes modulo q, the other operand
// embedded by its representative (an integer is the same integer in both);
// an op of first-sort operands is what it always was.

// expModulus is q, the modulus of the second sort.
const expModulus = ops.ExpModulus

// qBand is where the second sort's values lie: qBand + c for the
// representative c, |c| < q/2 < 2³⁶, far from the first sort's (|v| < 2³⁰)
// and exact in a float64 (below 2⁵³).
const qBand = 1 << 44

// isQ reports whether v is a value of the second sort. An infinity or a
// NaN is of neither.
func isQ(v float64) bool { return v > qBand/2 && v < 2*qBand }

// encodeQ is the value of the second sort whose residue modulo q is x's.
func encodeQ(x int64) float64 {
	x %= expModulus
	switch {
	case x > expModulus/2:
		x -= expModulus
	case x < -expModulus/2:
		x += expModulus
	}
	return qBand + float64(x)
}

// qRep is v's integer representative as an operand modulo q: a second
// sort value's own, and a first sort value (or an integer) as it is.
func qRep(v float64) int64 {
	if isQ(v) {
		return int64(v - qBand)
	}
	return int64(v)
}

// qValue is v as an operand of a value kernel in the second sort: a second
// sort value's representative, anything else (an infinity included) as it
// is.
func qValue(v float64) float64 {
	if isQ(v) {
		return v - qBand
	}
	return v
}

// finite reports whether v is neither an infinity nor a NaN.
func finite(v float64) bool { return !math.IsInf(v, 0) && v == v }

// valued returns a value kernel (max, relu, gt, …) on the simulation's
// values: on first sort values as they are, and on an operand of the
// second sort by its representative, the result again of the second sort
// (an infinity or a NaN as it is). So the kernel acts on one total order
// of the values, the same on the reference and the devices.
func valued(f func(a, b float64) float64) pointwiseFunc {
	return func(a, b float64) float64 {
		if !isQ(a) && !isQ(b) {
			return f(a, b)
		}
		if r := f(qValue(a), qValue(b)); finite(r) {
			return encodeQ(int64(r))
		}
		return f(qValue(a), qValue(b))
	}
}

// maxValue and minValue are the reductions' max and min on the
// simulation's values: valued(max) and valued(min) without the call on
// first sort values.
func maxValue(a, b float64) float64 {
	if isQ(a) || isQ(b) {
		return valuedMax(a, b)
	}
	return max(a, b)
}

func minValue(a, b float64) float64 {
	if isQ(a) || isQ(b) {
		return valuedMin(a, b)
	}
	return min(a, b)
}

var (
	valuedMax = valued(func(a, b float64) float64 { return max(a, b) })
	valuedMin = valued(func(a, b float64) float64 { return min(a, b) })
)

// expFunc is exp's kernel on the simulation's values: a first sort value
// x gives hˣ of the second sort; a second sort value gives h to its
// representative modulo p (a fixed map: exp is a homomorphism on the
// first sort only); an infinity or a NaN gives NaN, as an exact kernel's.
func expFunc(k func(a, p int64) int64) pointwiseFunc {
	return func(a, _ float64) float64 {
		if !finite(a) {
			return math.NaN()
		}
		return encodeQ(k(qRep(a), modulus))
	}
}

// anyQ reports whether some value of vs is of the second sort: the
// contractions take their fast first sort loops when none is.
func anyQ(vs []float64) bool {
	for _, v := range vs {
		if isQ(v) {
			return true
		}
	}
	return false
}

// canonQ is v's residue modulo q in [0, q), as an operand of the second
// sort's arithmetic (qRep, reduced).
func canonQ(v float64) int64 {
	r := qRep(v) % expModulus
	if r < 0 {
		r += expModulus
	}
	return r
}

// dotSorted is the dot product of a contraction whose operands hold values
// of the second sort: Σ_l a[ai + l·as]·b[bi + l·bs] in l's order by prodMod
// and sumMod, so that it is of the second sort exactly when a term is, as
// the reference's. When every term has an operand of the second sort
// (allQ: its row of a or its column of b is of the second sort
// throughout), that is the sum of the residues' products modulo q, which
// it computes at once, without a value a term.
func dotSorted(a []float64, ai, as int, b []float64, bi, bs, k int, allQ bool) float64 {
	if !allQ {
		acc := 0.0
		for l := range k {
			acc = sumMod(acc, prodMod(a[ai+l*as], b[bi+l*bs]))
		}
		return acc
	}
	var acc int64
	for l := range k {
		x, y := a[ai+l*as], b[bi+l*bs]
		if !finite(x) || !finite(y) {
			return math.NaN()
		}
		if acc += ops.MulMod(canonQ(x), canonQ(y), expModulus); acc >= expModulus {
			acc -= expModulus
		}
	}
	return encodeQ(acc)
}

// allQ reports whether the k values v[at + l·stride] are all of the
// second sort.
func allQ(v []float64, at, stride, k int) bool {
	for l := range k {
		if !isQ(v[at+l*stride]) {
			return false
		}
	}
	return true
}
