package plan

import (
	"encoding/binary"
	"math/bits"
	"math/rand/v2"
	"testing"
)

// TestNotPlain compares notPlain's lowest flagged byte with the first
// byte of eight that plainByte says is not plain: every byte at every
// position after plain bytes, followed by every byte (the borrows of the
// tests for a zero or small byte reach only the bytes above), and random
// words.
func TestNotPlain(t *testing.T) {
	first := func(b []byte) int {
		for i, c := range b {
			if !plainByte[c] {
				return i
			}
		}
		return 8
	}
	check := func(b []byte) {
		t.Helper()
		got := bits.TrailingZeros64(notPlain(binary.LittleEndian.Uint64(b))) / 8
		if want := first(b); got != want {
			t.Fatalf("% x: notPlain flags byte %d first, want %d", b, got, want)
		}
	}
	for pos := range 8 {
		for c := range 256 {
			for next := range 256 {
				b := []byte("abcdefgh")
				b[pos] = byte(c)
				if pos < 7 {
					b[pos+1] = byte(next)
				} else if next > 0 {
					break
				}
				check(b)
			}
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 100_000 {
		b := binary.LittleEndian.AppendUint64(nil, r.Uint64())
		check(b)
	}
}
