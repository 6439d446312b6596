package plan

import (
	"encoding/binary"
	"math/bits"
	"math/rand/v2"
	"strings"
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

// TestListLength counts the items of lists read up to their opening
// bracket: nested lists and objects, strings holding brackets, commas,
// escaped quotes and backslashes, runs of spaces of every length around
// the commas, and lists that do not end (countItems, uncapped), and caps
// the count at one item for every 64 bytes of the list (listLength).
func TestListLength(t *testing.T) {
	tests := []struct {
		src  string // after the opening bracket
		want int
	}{
		{"]", 0},
		{" \n\t\r ]", 0},
		{"1]", 1},
		{"1, 2, 3]", 3},
		{"[1, 2], [3], []]", 3},
		{`{"a": [1, {"b": 2}], "c": "]"}, {}]`, 2},
		{`"a,b", "c]d", "e\"f,", "g\\", "h"]`, 5},
		{"\n" + strings.Repeat(" ", 17) + "{\"x\": 1},\n" + strings.Repeat(" ", 8) + "{\"x\": 2}\n" + strings.Repeat(" ", 9) + "]", 2},
		{strings.Repeat(" ", 16) + "1," + strings.Repeat(" ", 7) + "2" + strings.Repeat(" ", 8) + "]", 2},
		{"1, 2", -1},
		{`"a]`, -1},
		{"[1, 2]", -1},
		{"]]", 0},
	}
	for _, tt := range tests {
		d := &fastDecoder{src: []byte(tt.src)}
		if got, _ := d.countItems(); got != tt.want {
			t.Errorf("countItems of [%s = %d, want %d", tt.src, got, tt.want)
		}
		if d.pos != 0 {
			t.Errorf("countItems of [%s moved pos to %d", tt.src, d.pos)
		}
	}
	capped := []struct {
		src  string
		want int
	}{
		{strings.Repeat("1, ", 1000) + "1]", 46},                                     // 3,002 bytes
		{strings.Repeat(`{"name": "`+strings.Repeat("x", 60)+`"}, `, 9) + "{}]", 10}, // 669 bytes: not capped
		{"1, 2", -1},
	}
	for _, tt := range capped {
		d := &fastDecoder{src: []byte(tt.src)}
		if got := d.listLength(); got != tt.want {
			t.Errorf("listLength of [%.40s… (%d bytes) = %d, want %d", tt.src, len(tt.src), got, tt.want)
		}
	}
}
