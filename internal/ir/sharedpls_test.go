package ir

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nvcomm/nvcomm/internal/diag"
)

// TestRebasedPlacements checks that a list of placements kept relative to
// where it is written (sharedPlacements) gets back every entry's own
// position, on the list's line and on the lines after it.
func TestRebasedPlacements(t *testing.T) {
	tests := []struct {
		name string
		at   diag.Pos
		pos  []diag.Pos
	}{
		{"one line", diag.Pos{Line: 7, Col: 40}, []diag.Pos{{Line: 7, Col: 41}, {Line: 7, Col: 51}}},
		{"block list", diag.Pos{Line: 3, Col: 7}, []diag.Pos{{Line: 4, Col: 9}, {Line: 5, Col: 9}}},
		{"flow list over lines", diag.Pos{Line: 9, Col: 20}, []diag.Pos{{Line: 9, Col: 21}, {Line: 10, Col: 5}}},
	}
	for _, tt := range tests {
		p := NewSource("f.yaml")
		var pls []placement
		for _, pos := range tt.pos {
			pls = append(pls, placement{pos: pos})
		}
		var got []diag.Pos
		for _, pl := range rebased(*p.sharedPlacements(pls, tt.at), tt.at) {
			got = append(got, pl.pos)
		}
		if diff := cmp.Diff(tt.pos, got); diff != "" {
			t.Errorf("%s: positions (-want +got):\n%s", tt.name, diff)
		}
	}
}

// TestReadingHoldsLittle reads a generated chain of tensors and ops, as
// the front end's streaming reader does before Build, and requires that it
// was built as read (no raw op kept) and that what is live once the file
// is read (the fusion, built) stays under 3.5 times the file: 3.2 times
// for 20k ops, where the raw declarations and ops alone were 4.1 times
// before they were built as read, 5.9 times while every declaration kept
// its own list of placements, 4.9 while it held the shared list's header
// rather than a pointer to it and 4.7 while a position was two ints
// rather than two int32s (docs/performance.md, "The parse's peak" and
// "Ops built as read"). The declarations that write the same placements
// share one list.
func TestReadingHoldsLittle(t *testing.T) {
	const n, bound = 20000, 3.5
	src := []byte(chainFile(n))
	before := liveHeap()
	p := ReadFront("chain.yaml", src, true)
	if p == nil {
		t.Fatal("the chain is not read by the streaming reader")
	}
	if !p.BuiltAsRead() || len(p.ops) > 0 {
		t.Errorf("the chain is not built as read (built: %v, raw ops kept: %d)", p.BuiltAsRead(), len(p.ops))
	}
	ratio := float64(liveHeap()-before) / float64(len(src))
	if ratio > bound {
		t.Errorf("%d ops: %.2f times the file live once read, want at most %.1f", n, ratio, bound)
	}
	if len(p.sharedPls) != 3 {
		t.Errorf("%d placement lists shared, want 3", len(p.sharedPls))
	}
	runtime.KeepAlive(p)
	runtime.KeepAlive(src)
}

// chainFile is a format-1 chain of n sets on a 1-D mesh of 8, its
// placements cycling through three, as the chain1d family of
// internal/scale writes it.
func chainFile(n int) string {
	var b strings.Builder
	b.WriteString("format: 1\nname: chain\nmeshes:\n  m: [0, 1, 2, 3, 4, 5, 6, 7]\ntensors:\n")
	pls := []string{"Shard(0)", "Shard(1)", "Replicate()"}
	b.WriteString("  t0: {mesh: m, shape: [16, 16], placements: [Shard(0)]}\n")
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "  t%d: {mesh: m, placements: [%s]}\n", i, pls[i%3])
	}
	b.WriteString("ops:\n")
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "  - {op: set, in: t%d, out: t%d}\n", i, i+1)
	}
	return b.String()
}

// TestFusionHoldsLittle parses a generated chain of 20k ops and requires
// that the fusion, its tensors alike sharing one TensorDomain, stays under
// 3.5 times the file: 3.2 times, where it was 5.3 while each tensor held
// a copy of its domains' 208-byte struct (docs/performance.md, "What
// bounds the peak now"). Twice that, with the collector's headroom, is
// what lowering the fusion needs at the least.
func TestFusionHoldsLittle(t *testing.T) {
	const n, bound = 20000, 3.5
	src := []byte(chainFile(n))
	before := liveHeap()
	f, err := Parse("chain.yaml", src)
	if err != nil {
		t.Fatal(err)
	}
	f.ShareAlike()
	ratio := float64(liveHeap()-before) / float64(len(src))
	if ratio > bound {
		t.Errorf("%d ops: the fusion is %.2f times its file, want at most %.1f", n, ratio, bound)
	}
	runtime.KeepAlive(f)
	runtime.KeepAlive(src)
}
