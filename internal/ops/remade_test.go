package ops

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestRemade checks which names are the backward's copies made again,
// and the forward tensor each stands for.
func TestRemade(t *testing.T) {
	type got struct {
		T          string
		Regathered bool
	}
	for name, want := range map[string]got{
		"y.grad/recomputed_w2_full": {"w2_full", false},
		"qkv.grad/regathered_ln1":   {"ln1", true},
		"h.grad/saved_x":            {},
		"y.grad/recomputed_":        {},
		"y.grad/recomputed_a/b":     {},
		".grad/recomputed_a":        {},
		"recomputed_a":              {},
		"y.grad/dw_dyt":             {},
		"y.grad/recomputed_1a":      {},
	} {
		tn, regathered := Remade(name)
		if d := cmp.Diff(want, got{tn, regathered}); d != "" {
			t.Errorf("Remade(%q) (-want +got):\n%s", name, d)
		}
	}
}
