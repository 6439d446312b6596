package plan

import (
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestValidateOfAlike checks that the ops of one expansion record their
// composite alike: an epsilon or a causal flag changed on one op is
// rejected, naming both records.
func TestValidateOfAlike(t *testing.T) {
	for _, tc := range []struct {
		name, file string
		mutate     func(p *Plan) int
		want       string
	}{
		{"eps", "rmsnorm_sequence_parallel.json", func(p *Plan) int {
			i := lastOf(p, "rms_norm")
			p.Ops[i].Of.Eps = new(0.5)
			return i
		}, "eps=0.5"},
		{"causal", "attention_context_parallel_causal.json", func(p *Plan) int {
			i := lastOf(p, "sdpa")
			p.Ops[i].Of.Causal = false
			return i
		}, "o = sdpa(q, k, v)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src, err := os.ReadFile("../../testdata/examples/" + tc.file)
			if err != nil {
				t.Fatal(err)
			}
			p, err := Decode(tc.file, src)
			if err != nil {
				t.Fatal(err)
			}
			if probs := Validate(p); len(probs) > 0 {
				t.Fatalf("the golden plan is invalid: %v", probs)
			}
			i := tc.mutate(p)
			var got []string
			for _, d := range Validate(p) {
				if strings.Contains(d.Message, "record its op alike") {
					got = append(got, d.Message)
				}
			}
			if len(got) != 1 || !strings.HasPrefix(got[0], "op ") || !strings.Contains(got[0], tc.want) {
				t.Errorf("op %d's record changed: want one problem naming %q, got %s", i, tc.want, cmp.Diff([]string{}, got))
			}
		})
	}
}

// lastOf is the index of the last op of p that records composite op.
func lastOf(p *Plan, op string) int {
	last := -1
	for i, o := range p.Ops {
		if o.Of != nil && o.Of.Op == op {
			last = i
		}
	}
	return last
}
