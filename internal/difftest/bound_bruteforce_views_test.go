package difftest

import (
	"fmt"
	"slices"

	"github.com/nvcomm/nvcomm/internal/shard"
)

// This file lists the local steps of the brute-force bound test that see a
// buffer as an array: every Permute and LocalReduce of a buffer's elements
// over up to three dims.

// bfView is a way to see a buffer of n elements as row-major dims: a
// Permute's perm, or a LocalReduce's reduce_dims; from lists, for each
// output element, the input elements it takes (one for a Permute, those it
// combines for a LocalReduce).
type bfView struct {
	dims, perm, reduce []int
	from               [][]int
}

// bfFactorizations lists every way to write n as an ordered product of two
// or three factors of at least 2.
func bfFactorizations(n int) [][]int {
	var out [][]int
	var rec func(rest int, cur []int)
	rec = func(rest int, cur []int) {
		if rest == 1 && len(cur) >= 2 {
			out = append(out, slices.Clone(cur))
		}
		if len(cur) == 3 {
			return
		}
		for f := 2; f <= rest; f++ {
			if rest%f == 0 {
				rec(rest/f, append(cur, f))
			}
		}
	}
	rec(n, nil)
	return out
}

// bfPermuteViews lists the distinct reorderings of n elements a Permute can
// make (the identity left out), each with the first dims and perm found.
func bfPermuteViews(n int) []bfView {
	var out []bfView
	seen := map[string]bool{"": true}
	seen[fmt.Sprint(bfIdentity(n))] = true
	for _, dims := range bfFactorizations(n) {
		for _, perm := range bfPermutations(len(dims)) {
			from := bfPermuted(dims, perm)
			key := fmt.Sprint(from)
			if seen[key] {
				continue
			}
			seen[key] = true
			v := bfView{dims: dims, perm: perm}
			for _, f := range from {
				v.from = append(v.from, []int{f})
			}
			out = append(out, v)
		}
	}
	return out
}

// bfPermuted is, for each output element of a Permute of row-major dims by
// perm, the input element it reads.
func bfPermuted(dims, perm []int) []int {
	out := make([]int, len(dims))
	for k, p := range perm {
		out[k] = dims[p]
	}
	from := make([]int, bfProduct(dims))
	c := make([]int, len(dims))
	for o := range from {
		oc := shard.Coords(o, out)
		for k, p := range perm {
			c[p] = oc[k]
		}
		from[o] = shard.Index(c, dims)
	}
	return from
}

// bfReduceViews lists the distinct ways a LocalReduce can combine n
// elements: every dims (one dim too) and non-empty set of them to reduce.
func bfReduceViews(n int) []bfView {
	var out []bfView
	seen := map[string]bool{}
	for _, dims := range append(bfFactorizations(n), []int{n}) {
		for mask := 1; mask < 1<<len(dims); mask++ {
			var red []int
			for k := range dims {
				if mask&(1<<k) != 0 {
					red = append(red, k)
				}
			}
			from := bfReducedFrom(dims, red)
			if key := fmt.Sprint(from); !seen[key] {
				seen[key] = true
				out = append(out, bfView{dims: dims, reduce: red, from: from})
			}
		}
	}
	return out
}

// bfReducedFrom is, for each output element of a LocalReduce of row-major
// dims over red, the input elements it combines.
func bfReducedFrom(dims, red []int) [][]int {
	var keep []int
	for k, e := range dims {
		if !slices.Contains(red, k) {
			keep = append(keep, e)
		}
	}
	from := make([][]int, bfProduct(keep))
	for i := range bfProduct(dims) {
		c := shard.Coords(i, dims)
		var kc []int
		for k := range dims {
			if !slices.Contains(red, k) {
				kc = append(kc, c[k])
			}
		}
		o := shard.Index(kc, keep)
		from[o] = append(from[o], i)
	}
	return from
}

// apply computes a view's output from in.
func (v bfView) apply(in []bfVal, idem bool) []bfVal {
	out := make([]bfVal, len(v.from))
	for o, f := range v.from {
		for _, i := range f {
			out[o] = bfCombine(out[o], in[i], idem)
		}
	}
	return out
}

func bfIdentity(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// bfPermutations lists the permutations of 0..k-1 other than the identity.
func bfPermutations(k int) [][]int {
	var out [][]int
	var rec func(cur []int, used int)
	rec = func(cur []int, used int) {
		if len(cur) == k {
			if !slices.Equal(cur, bfIdentity(k)) {
				out = append(out, slices.Clone(cur))
			}
			return
		}
		for i := range k {
			if used&(1<<i) == 0 {
				rec(append(cur, i), used|1<<i)
			}
		}
	}
	rec(nil, 0)
	return out
}
