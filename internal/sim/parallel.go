package sim

import (
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
)

// minPiece is the fewest elements inParallel gives one goroutine: below
// it, starting goroutines costs more than it saves.
const minPiece = 1 << 16

// inParallel calls f on consecutive pieces [lo, hi) of [0, n), at most one
// per CPU, and returns when every call has. f must write only its own
// piece: the result is then the same as f(0, n).
func inParallel(n int, f func(lo, hi int)) {
	inPieces(n, min(runtime.GOMAXPROCS(0), n/minPiece), f)
}

// inPieces calls f on at most workers consecutive pieces of [0, n) that
// cover it, each in a goroutine of its own when there are several.
func inPieces(n, workers int, f func(lo, hi int)) {
	if workers <= 1 || n <= 1 {
		f(0, n)
		return
	}
	piece := (n + workers - 1) / workers
	var wg sync.WaitGroup
	for lo := 0; lo < n; lo += piece {
		wg.Go(func() { f(lo, min(lo+piece, n)) })
	}
	wg.Wait()
}

// cloneFloats returns a copy of s, made on every CPU when s is long: the
// collectives' outputs are most of the bytes a big simulation writes.
func cloneFloats(s []float64) []float64 {
	if len(s) < 2*minPiece {
		return slices.Clone(s)
	}
	out := make([]float64, len(s))
	copyFloats(out, s)
	return out
}

// concatFloats returns the parts one after the other, as slices.Concat,
// copied on every CPU when they are long.
func concatFloats(parts ...[]float64) []float64 {
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	if n < 2*minPiece {
		return slices.Concat(parts...)
	}
	out := make([]float64, n)
	pos := 0
	for _, p := range parts {
		copyFloats(out[pos:pos+len(p)], p)
		pos += len(p)
	}
	return out
}

// copyFloats copies src into dst, which is as long, on every CPU.
func copyFloats(dst, src []float64) {
	inParallel(len(dst), func(lo, hi int) { copy(dst[lo:hi], src[lo:hi]) })
}

// firstDiffering returns the first position where got and want (as long)
// differ, or -1. Long buffers are compared in pieces on every CPU, and
// the position is the least of the pieces' first.
func firstDiffering(got, want []float64) int {
	if len(got) < 2*minPiece {
		return firstDiff(got, want)
	}
	var first atomic.Int64
	first.Store(int64(len(got)))
	inParallel(len(got), func(lo, hi int) {
		i := firstDiff(got[lo:hi], want[lo:hi])
		if i < 0 {
			return
		}
		for cur := first.Load(); int64(lo+i) < cur && !first.CompareAndSwap(cur, int64(lo+i)); {
			cur = first.Load()
		}
	})
	if i := int(first.Load()); i < len(got) {
		return i
	}
	return -1
}

// firstDiff is firstDiffering on one CPU.
func firstDiff(got, want []float64) int {
	want = want[:len(got)] // one bounds check for the loop
	for i, v := range got {
		if v != want[i] {
			return i
		}
	}
	return -1
}
