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

// TestValidateSDPAHeads checks an sdpa's record against its operands'
// shapes as the registry's expansion takes them (ops.SDPAGroup), on
// hand-edited plans: enable_gqa dropped where k and v have fewer heads, k
// and v of heads that do not divide q's, and v's heads not k's are each
// one problem at the first op of the expansion, naming the operand at
// fault; enable_gqa on equal heads is no problem (torch's enable_gqa
// takes them: each key/value head serves a group of one).
func TestValidateSDPAHeads(t *testing.T) {
	heads := func(p *Plan, name string, h int) {
		for i := range p.Tensors {
			if tn := &p.Tensors[i]; tn.Name == name {
				tn.Shape = []int{tn.Shape[0], h, tn.Shape[2], tn.Shape[3]}
				tn.LocalShape = []int{tn.LocalShape[0], h, tn.LocalShape[2], tn.LocalShape[3]}
			}
		}
	}
	gqa := func(p *Plan, on bool) {
		for i := range p.Ops {
			if of := p.Ops[i].Of; of != nil && of.Op == "sdpa" && !of.Grad {
				of.GQA = on
			}
		}
	}
	const grouped, equal = "attention_context_parallel_gqa_allgather.optimal.json", "attention_context_parallel_causal.optimal.json"
	for _, tc := range []struct {
		name, file string
		mutate     func(p *Plan)
		want       []string
	}{
		{"enable_gqa dropped", grouped, func(p *Plan) { gqa(p, false) }, []string{
			`op 0: of records o = sdpa(q, k, v, causal=true, cp=allgather), whose operands are not sdpa's (k "k"): k's leading dims [2, 2] differ from q's [2, 4]; ` +
				`batch and heads dims are equal in q, k and v; for grouped-query attention (fewer key/value heads) write enable_gqa: true`}},
		{"heads not a multiple", grouped, func(p *Plan) { heads(p, "k", 3); heads(p, "v", 3) }, []string{
			`op 0: of records o = sdpa(q, k, v, causal=true, cp=allgather, enable_gqa=true), whose operands are not sdpa's (k "k"): q's 4 heads (dim -3) are not a multiple of k's 3; ` +
				`with enable_gqa, each of k's heads serves a group of H/Hkv query heads: H is a multiple of Hkv`}},
		{"v's heads not k's", grouped, func(p *Plan) { heads(p, "v", 1) }, []string{
			`op 0: of records o = sdpa(q, k, v, causal=true, cp=allgather, enable_gqa=true), whose operands are not sdpa's (v "v"): v's heads (dim -3) are 1, k's 2; ` +
				`with enable_gqa, k and v have the same key/value heads Hkv`}},
		{"enable_gqa on equal heads", equal, func(p *Plan) { gqa(p, true) }, nil},
		{"as lowered", grouped, func(*Plan) {}, nil},
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
			tc.mutate(p)
			var got []string
			for _, d := range Validate(p) {
				if strings.Contains(d.Message, "are not sdpa's") {
					got = append(got, d.Message)
				}
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("sdpa's problems (-want +got):\n%s", d)
			}
		})
	}
}
