package ir

import (
	"bytes"
	"runtime"
	"testing"
)

// TestParseKeepsNoFileText parses every valid fusion of the tests with
// 8 MiB of blank lines after it, and requires that the fusion does not
// keep the file alive: were a single string the fusion keeps (a tensor's
// name, a dtype, an op's kind) a slice of the file's text, it would keep
// the whole file as long as the fusion, through lowering (the fast reader
// makes each scalar a string of its own: fastDecoder.str).
func TestParseKeepsNoFileText(t *testing.T) {
	const padding = 8 << 20
	srcs := map[string]string{}
	for _, tt := range append(validTests, layerTests...) {
		srcs[tt.name] = tt.src
	}
	for _, tt := range propagateTests {
		srcs[tt.name] = tt.src
	}
	for name, src := range srcs {
		before := liveHeap()
		f := parsePadded(name, src, padding)
		kept := liveHeap() - before
		if f != nil && kept > padding/2 {
			t.Errorf("%s: the parsed fusion keeps %d bytes, its file's text with it", name, kept)
		}
		runtime.KeepAlive(f)
	}
}

// parsePadded parses src followed by padding blank lines, nil when it
// does not parse; the file is garbage once it returns.
func parsePadded(name, src string, padding int) *Fusion {
	f, err := Parse(name, append([]byte(src), bytes.Repeat([]byte("\n"), padding)...))
	if err != nil {
		return nil
	}
	return f
}

// liveHeap is the heap's bytes in use after a collection.
func liveHeap() int64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}
