package plan

import (
	"testing"
	"unsafe"
)

// TestPopulateKeepsContents: populating a block, whole or from an offset
// inside a page, changes none of the values written before it, nor any
// of those around it, and values written after it read back.
func TestPopulateKeepsContents(t *testing.T) {
	const n = populateMin/8 + 1000 // ints: more than populateMin bytes
	xs := make([]int, n, n+5000)
	for i := range xs {
		xs[i] = i * 7
	}
	populateBlock(xs)
	populate(unsafe.Pointer(&xs[3]), 8*100) // not at a page's start
	for i := range xs {
		if xs[i] != i*7 {
			t.Fatalf("xs[%d] = %d after populate, want %d", i, xs[i], i*7)
		}
	}
	xs = xs[:cap(xs)]
	for i := n; i < len(xs); i++ {
		if xs[i] != 0 {
			t.Fatalf("xs[%d] = %d past the values written, want 0", i, xs[i])
		}
		xs[i] = -i
	}
	for i := n; i < len(xs); i++ {
		if xs[i] != -i {
			t.Fatalf("xs[%d] = %d, want %d", i, xs[i], -i)
		}
	}
}
