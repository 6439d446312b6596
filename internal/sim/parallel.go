package sim

import (
	"runtime"
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

// firstMismatch compares n values a block at a time, on every CPU when n
// is long: fill sets got and exp, as long, to the values and what they
// should be at positions [lo, hi). It returns the first position where
// they differ, or -1.
func firstMismatch(n int, fill func(lo, hi int, got, exp []float64)) int {
	var first atomic.Int64
	first.Store(int64(n))
	if n < 2*minPiece {
		mismatchRange(&first, 0, n, fill) // no goroutine, nor its closure
	} else {
		inParallel(n, func(from, to int) { mismatchRange(&first, from, to, fill) })
	}
	if i := int(first.Load()); i < n {
		return i
	}
	return -1
}

// mismatchRange is firstMismatch on positions [from, to): it lowers first
// to the first position there that differs, and stops once first is below
// the block it would compare.
func mismatchRange(first *atomic.Int64, from, to int, fill func(lo, hi int, got, exp []float64)) {
	block := min(combineBlock, to-from)
	got, exp := make([]float64, block), make([]float64, block)
	for lo := from; lo < to && int64(lo) < first.Load(); lo += block {
		hi := min(lo+block, to)
		g, e := got[:hi-lo], exp[:hi-lo]
		fill(lo, hi, g, e)
		if i := firstDiff(g, e); i >= 0 {
			lowerTo(first, int64(lo+i))
			return
		}
	}
}

// lowerTo sets first to v when v is lower.
func lowerTo(first *atomic.Int64, v int64) {
	for cur := first.Load(); v < cur && !first.CompareAndSwap(cur, v); {
		cur = first.Load()
	}
}
