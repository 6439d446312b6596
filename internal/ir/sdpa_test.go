package ir

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// sdpaHead is the top of the sdpa tests: q [2, 4, 8, 6] and k, v
// [2, 4, 10, 6] sharded on heads over 4 devices, and tensors of wrong
// shapes for the errors.
const sdpaHead = `format: 2
meshes:
  m: [0, 1, 2, 3]
tensors:
  q: {mesh: m, shape: [2, 4, 8, 6], placements: [Shard(1)]}
  k: {mesh: m, shape: [2, 4, 10, 6], placements: [Shard(1)]}
  v: {mesh: m, shape: [2, 4, 10, 6], placements: [Shard(1)]}
  r3: {mesh: m, shape: [4, 10, 6]}
  d5: {mesh: m, shape: [2, 4, 10, 5]}
  t9: {mesh: m, shape: [2, 4, 9, 6]}
  h2: {mesh: m, shape: [2, 2, 10, 6]}
ops:
`

// TestSDPAExpansion checks the primitive ops the builder writes for sdpa:
// the permute of k, the scores' matmul and scale, the softmax
// composite's steps over the keys, and the second matmul, all local
// when heads are sharded.
func TestSDPAExpansion(t *testing.T) {
	f, err := Parse("in.yaml", []byte(sdpaHead+sdpaOp))
	if err != nil {
		t.Fatal(err)
	}
	sdpa := of("sdpa", "o")
	want := []opSum{
		{"o/kt = permute(k, dims=[0, 1, 3, 2])", sdpa, "m propagated"},
		{"o/scores = matmul(q, o/kt)", sdpa, "m propagated"},
		{"o/scaled = mul(o/scores, 0.4082482904638631)", sdpa, "m propagated"},
		{"o/max = max(o/scaled, axis=3)", sdpa, "m propagated"},
		{"o/max_b = broadcast(o/max, axes=[3])", sdpa, "m propagated"},
		{"o/sub = sub(o/scaled, o/max_b)", sdpa, "m propagated"},
		{"o/exp = exp(o/sub)", sdpa, "m propagated"},
		{"o/sum = sum(o/exp, axis=3)", sdpa, "m propagated"},
		{"o/sum_b = broadcast(o/sum, axes=[3])", sdpa, "m propagated"},
		{"o/probs = div(o/exp, o/sum_b)", sdpa, "m propagated"},
		{"o = matmul(o/probs, v)", sdpa, "m propagated"},
	}
	if d := cmp.Diff(want, opSums(f)); d != "" {
		t.Errorf("ops (-want +got):\n%s", d)
	}
}

// TestSDPAErrors checks sdpa's errors: each at the operand or value at
// fault, with a hint.
func TestSDPAErrors(t *testing.T) {
	for _, tc := range sdpaErrorTests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("in.yaml", []byte(sdpaHead+tc.ops))
			if err == nil {
				t.Fatal("Parse succeeded, want an error")
			}
			if d := cmp.Diff(tc.want, err.Error()); d != "" {
				t.Errorf("error (-want +got):\n%s", d)
			}
		})
	}
}

// sdpaOp is the sdpa of TestSDPAExpansion; FuzzParse seeds from it.
const sdpaOp = "  - {op: sdpa, in: [q, k, v], out: o, causal: false}\n"

// sdpaErrorTests are sdpa ops that are wrong, and their errors;
// FuzzParse seeds from them.
var sdpaErrorTests = []struct{ name, ops, want string }{
	{"rank", "  - {op: sdpa, in: [q, r3, v], out: o, causal: false}\n",
		`in.yaml:13:24: error: ops[0]: sdpa of "q": k has rank 3, q 4; q, k and v have the same rank: [..., s, d], [..., t, d], [..., t, dv]`},
	{"head dim", "  - {op: sdpa, in: [q, d5, v], out: o, causal: false}\n",
		`in.yaml:13:24: error: ops[0]: sdpa of "q": k's head dim is 5, q's 6; q [..., s, d] and k [..., t, d] share their last dim d`},
	{"keys", "  - {op: sdpa, in: [q, k, t9], out: o, causal: false}\n",
		`in.yaml:13:27: error: ops[0]: sdpa of "q": v has 9 keys, k 10; k [..., t, d] and v [..., t, dv] share their key dim t`},
	{"heads", "  - {op: sdpa, in: [q, h2, v], out: o, causal: false}\n",
		`in.yaml:13:24: error: ops[0]: sdpa of "q": k's leading dims [2, 2] differ from q's [2, 4]; batch and heads dims are equal in q, k and v; for grouped-query attention repeat k's heads (broadcast, then reshape)`},
	{"causal", "  - {op: sdpa, in: [q, k, v], out: o, causal: true}\n",
		`in.yaml:13:47: error: ops[0] causal: causal attention is not supported yet; write causal: false; a causal mask needs a masking op of exact semantics, which nvcomm does not have`},
	{"no causal", "  - {op: sdpa, in: [q, k, v], out: o}\n",
		`in.yaml:13:5: error: ops[0]: sdpa needs "causal"; causal: sdpa's causal mask; only false is supported`},
	{"two operands", "  - {op: sdpa, in: [q, k], out: o, causal: false}\n",
		"in.yaml:13:20: error: ops[0]: sdpa takes 3 inputs ([q, k, v]), got 2; write in: [q, k, v]"},
}
