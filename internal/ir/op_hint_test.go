package ir

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nvcomm/nvcomm/internal/ops"
)

// TestUnknownOpHint: a likely typo of an op is suggested; a word that is
// two edits from a short op, or another framework's op that reads like
// one of nvcomm's, is not.
func TestUnknownOpHint(t *testing.T) {
	const none = `docs/fusion.md ("ops") describes what each op does`
	tests := []struct{ name, want string }{
		{"summ", `did you mean "sum"?`},
		{"lienar", `did you mean "linear"?`},
		{"maxmum", `did you mean "maximum"?`},
		{"brodcast", `did you mean "broadcast"?`},
		{"rleu", `did you mean "relu"?`},
		{"dvi", `did you mean "div"?`},
		{"gleu", `did you mean "gelu"?`},
		{"slu", `did you mean "silu"?`},
		{"sigmod", `did you mean "sigmoid"?`},
		{"GELU", `did you mean "gelu"?`},  // the op in other letters' case
		{"divide", `did you mean "div"?`}, // torch's other name
		{"swish", `did you mean "silu"?`},
		{"selu", none}, // another framework's op, not relu or silu
		{"erfc", none}, // not erf
		{"amax", none}, // not max
		{"ne", none},   // torch.ne, not neg
		{"and", none},  // not add
		{"var", none},
		{"RMSNorm", `did you mean "rms_norm"?`},
		{"frobnicate", none},
	}
	for _, tt := range tests {
		if d := cmp.Diff(tt.want, unknownOpHint(tt.name)); d != "" {
			t.Errorf("unknownOpHint(%q) (-want +got):\n%s", tt.name, d)
		}
	}
}

// TestOpFamilies: the families name every op once, and no op of
// nvcomm's is listed as another framework's.
func TestOpFamilies(t *testing.T) {
	words := strings.FieldsFunc(opFamilies(), func(r rune) bool { return r == ',' || r == ';' || r == ' ' })
	count := map[string]int{}
	for _, w := range words {
		count[w]++
	}
	for _, op := range ops.Names() {
		if count[op] != 1 {
			t.Errorf("op %q appears %d times in %q", op, count[op], opFamilies())
		}
		if contains(otherOps, op) {
			t.Errorf("op %q is listed among other frameworks' ops", op)
		}
	}
}
