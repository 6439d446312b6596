package sim

import (
	"runtime"
	"sync"
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
