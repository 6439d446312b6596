package sim

import (
	"math"

	"github.com/nvcomm/nvcomm/internal/ops"
	"github.com/nvcomm/nvcomm/internal/plan"
)

// modulus is the prime 2^31 − 1. Sums and products are computed modulo it
// on representatives in [−(modulus−1)/2, (modulus−1)/2]: exact in float64
// and independent of the order and grouping a plan combines values in,
// and equal to ordinary integer arithmetic while results stay in that
// range.
const modulus = 1<<31 - 1

// inputData returns n deterministic integer values for the tensor at index
// in the plan, value i from [inputValue] in data set data. It steps the
// generator's state, key + γ·(i+1), by one γ a value rather than
// multiplying (the same state modulo 2⁶⁴).
//
// Each value depends only on its position, so the values are filled in
// pieces on every CPU: generating them is the costliest pass of
// simulating a big tensor.
func inputData(seed uint64, index, n int, data DataSet, bound int) []float64 {
	key := streamKey(seed, index)
	v := make([]float64, n)
	inParallel(n, func(lo, hi int) { fillInputs(v, key, data, bound, lo, hi) })
	return v
}

// fillInputs sets v[lo:hi] to the values at those positions of the stream
// that starts at key, stepping the state from position lo's.
func fillInputs(v []float64, key uint64, data DataSet, bound, lo, hi int) {
	(&stream{key: key, data: data, bound: bound}).fill(v[lo:hi], lo, 1)
}

// InputValues returns the first n values simulate fills the fusion input
// at position index of the plan's tensors with, for programs that must
// reproduce the data (nvcomm export); data is the plan's [DataOf], bound
// the input's entry of [IndexBounds] (0 for an input no lookup indexes
// with). docs/simulate.md gives the formula.
func InputValues(seed uint64, index, n int, data DataSet, bound int) []float64 {
	return inputData(seed, index, n, data, bound)
}

// DataSet is which values simulate fills a plan's fusion inputs with
// (docs/simulate.md, "Data"): the plan's ops choose it ([DataOf]).
type DataSet uint8

// The data sets.
const (
	// Wide values, integers in [−512, 512]: the default.
	Wide DataSet = iota
	// Small values {−2, −1, 1, 2}, for a fusion with a prod: its products
	// stay in the plain range longer.
	Small
	// Positive values {1, 2, 3, 4}, for a fusion with an op whose torch
	// function the exported program can only bound on operands away from
	// 0 and negatives (log, sqrt, rsqrt, div, reciprocal) or not large
	// (exp): ops.Torch.PositiveData.
	Positive
)

// dataTables are the values of the data sets of four values, by h mod 4.
var dataTables = [...][4]float64{Small: {-2, -1, 1, 2}, Positive: {1, 2, 3, 4}}

// DataOf returns the data set of p's inputs: Positive when an op of p
// needs it, else Small when p has a prod, else Wide.
func DataOf(p *plan.Plan) DataSet {
	data := Wide
	for _, o := range p.Ops {
		if e := ops.Lookup(o.Op); e != nil && e.Torch != nil && e.Torch.PositiveData {
			return Positive
		}
		if o.Op == "prod" {
			data = Small
		}
	}
	return data
}

// splitMixGamma is SplitMix64's increment, 2^64 divided by the golden ratio.
const splitMixGamma = 0x9E3779B97F4A7C15

// mix64 is SplitMix64's output function (Steele, Lea and Flood, 2014).
func mix64(z uint64) uint64 {
	z = (z ^ z>>30) * 0xBF58476D1CE4E5B9
	z = (z ^ z>>27) * 0x94D049BB133111EB
	return z ^ z>>31
}

// streamKey is the SplitMix64 state that starts the stream of the tensor at
// index: the (index+1)-th output of a SplitMix64 generator seeded with seed.
func streamKey(seed uint64, index int) uint64 {
	return mix64(seed + splitMixGamma*uint64(index+1))
}

// inputValue is the value at row-major position i: the high 32 bits h of
// the (i+1)-th output of a SplitMix64 generator seeded with key, mapped to
// h mod 1025 − 512, or in a data set of four values to its table's entry
// h mod 4. It needs only 64-bit wrapping arithmetic, so a vectorized
// program (PyTorch int64 tensors) reproduces it exactly.
func inputValue(key uint64, i int, data DataSet, bound int) float64 {
	h := mix64(key+splitMixGamma*uint64(i+1)) >> 32
	if bound > 0 {
		return indexOf(h, bound)
	}
	return valueOf(h, data)
}

// valueOf maps the high 32 bits h of a SplitMix64 output to a value.
func valueOf(h uint64, data DataSet) float64 {
	if data != Wide {
		return dataTables[data][h&3]
	}
	return float64(int64(h-div1025(h)*1025) - 512)
}

// div1025 is h / 1025 for h below 2³², as one multiply and a shift: with
// M = ⌈2⁴²/1025⌉ = 4290777085, M·1025 − 2⁴² = 1021 < 2¹⁰, so h·M/2⁴²
// exceeds h/1025 by less than 1/1025 and has the same floor (Granlund and
// Montgomery, 1994), and h·M fits in 64 bits. The compiler's h % 1025
// takes a 128-bit multiply, and generating values is the costliest pass
// of simulating a big tensor (TestDiv1025).
func div1025(h uint64) uint64 { return h * 4290777085 >> 42 }

// reduceAxis combines in, row-major of shape shape, along axis.
func reduceAxis(op string, in []float64, shape []int, axis int) []float64 {
	return reduceAxisVec(op, stored(in), shape, axis)
}

// reduceAxisVec is reduceAxis of values that may be a stream's: the
// output's rows are combined a block at a time from the input's rows, so
// that a stream is generated once, block by block, and never stored.
func reduceAxisVec(op string, in vec, shape []int, axis int) []float64 {
	outer, n, inner := product(shape[:axis]), shape[axis], product(shape[axis+1:])
	out := make([]float64, outer*inner)
	rows := make([]span, n)
	for o := range outer {
		for k := range rows {
			lo := (o*n + k) * inner
			rows[k] = span{in, lo, lo + inner}
		}
		combineSpansInto(op, out[o*inner:(o+1)*inner], rows)
	}
	return out
}

// combineBlock is how many elements combineSpansInto combines at a time: a
// block of the output stays in the first-level cache while every part is
// combined into it, so that each part is read once and the output
// written once, where combining whole buffers one after the other went
// through the output once a part.
const combineBlock = 2048

// combine applies a reduce op to two values: sum and prod modulo
// [modulus] (or q, sort.go), max and min as usual (a second sort value by
// its representative).
func combine(op string, a, b float64) float64 {
	switch op {
	case "sum":
		return sumMod(a, b)
	case "prod":
		return prodMod(a, b)
	case "max":
		return maxValue(a, b)
	default:
		return minValue(a, b)
	}
}

// combineInto sets dst[i] to combine(op, dst[i], src[i]) for every i of
// dst, choosing op's case once rather than once an element.
func combineInto(op string, dst, src []float64) {
	src = src[:len(dst)]
	switch op {
	case "sum":
		for i, x := range src {
			dst[i] = sumMod(dst[i], x)
		}
	case "prod":
		for i, x := range src {
			dst[i] = prodMod(dst[i], x)
		}
	case "max":
		for i, x := range src {
			dst[i] = maxValue(dst[i], x)
		}
	default:
		for i, x := range src {
			dst[i] = minValue(dst[i], x)
		}
	}
}

// sumMod and prodMod are a + b and a · b modulo [modulus], or modulo q
// when an operand is of the second sort (sort.go). An infinity
// (a Pad's fill, which a sum or product never pads with) has no residue:
// either of an infinity or a NaN is NaN, which equals nothing, as an exact
// kernel's (integral).
func prodMod(a, b float64) float64 {
	if p := a * b; math.IsInf(p, 0) || p != p {
		return math.NaN()
	}
	if isQ(a) || isQ(b) {
		return encodeQ(ops.MulMod(qRep(a), qRep(b), expModulus))
	}
	return residue(int64(a) * int64(b))
}

// sumMod adds in float64 when the sum is already a representative: exact
// for integers below 2⁵² in magnitude, and every value the simulation
// holds is below 2³¹. Only a sum past a representative's range goes
// through int64 and the remainder (three times as slow), as every sum did;
// an infinite or NaN sum fails the range test, and is NaN.
func sumMod(a, b float64) float64 {
	s := a + b
	if s >= -modulus/2 && s <= modulus/2 {
		return s
	}
	if math.IsInf(s, 0) || s != s {
		return math.NaN()
	}
	if isQ(a) || isQ(b) {
		return encodeQ(qRep(a) + qRep(b))
	}
	return residue(int64(a) + int64(b))
}

// residue returns the representative of v modulo [modulus] closest to 0.
func residue(v int64) float64 {
	v %= modulus
	switch {
	case v > modulus/2:
		v -= modulus
	case v < -modulus/2:
		v += modulus
	}
	return float64(v)
}

// product multiplies extents; the empty product is 1.
func product(xs []int) int {
	n := 1
	for _, x := range xs {
		n *= x
	}
	return n
}
