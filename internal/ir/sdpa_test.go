package ir

import (
	"fmt"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nvcomm/nvcomm/internal/ops"
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

// TestSDPACausalExpansion checks causal sdpa's softmax: the scores' row
// minimum, tril of the scores less it, the max of that plus it (the
// visible keys' max), exp, and tril of the exponentials normalized.
func TestSDPACausalExpansion(t *testing.T) {
	f, err := Parse("in.yaml", []byte(sdpaHead+"  - {op: sdpa, in: [q, k, v], out: o, causal: true}\n"))
	if err != nil {
		t.Fatal(err)
	}
	sdpa := of("sdpa", "o")
	want := []opSum{
		{"o/kt = permute(k, dims=[0, 1, 3, 2])", sdpa, "m propagated"},
		{"o/scores = matmul(q, o/kt)", sdpa, "m propagated"},
		{"o/scaled = mul(o/scores, 0.4082482904638631)", sdpa, "m propagated"},
		{"o/low = min(o/scaled, axis=3)", sdpa, "m propagated"},
		{"o/low_b = broadcast(o/low, axes=[3])", sdpa, "m propagated"},
		{"o/shifted = sub(o/scaled, o/low_b)", sdpa, "m propagated"},
		{"o/masked = tril(o/shifted, diagonal=0)", sdpa, "m propagated"},
		{"o/lifted = add(o/masked, o/low_b)", sdpa, "m propagated"},
		{"o/max = max(o/lifted, axis=3)", sdpa, "m propagated"},
		{"o/max_b = broadcast(o/max, axes=[3])", sdpa, "m propagated"},
		{"o/sub = sub(o/scaled, o/max_b)", sdpa, "m propagated"},
		{"o/exp = exp(o/sub)", sdpa, "m propagated"},
		{"o/kept = tril(o/exp, diagonal=0)", sdpa, "m propagated"},
		{"o/sum = sum(o/kept, axis=3)", sdpa, "m propagated"},
		{"o/sum_b = broadcast(o/sum, axes=[3])", sdpa, "m propagated"},
		{"o/probs = div(o/kept, o/sum_b)", sdpa, "m propagated"},
		{"o = matmul(o/probs, v)", sdpa, "m propagated"},
	}
	if d := cmp.Diff(want, opSums(f)); d != "" {
		t.Errorf("ops (-want +got):\n%s", d)
	}
}

// TestTrilErrors checks tril's errors, at the value at fault.
func TestTrilErrors(t *testing.T) {
	for _, tc := range []struct{ name, ops, want string }{
		{"rank 1", "  - {op: sum, in: r3, out: s, axis: 2}\n  - {op: sum, in: s, out: s1, axis: 1}\n  - {op: tril, in: s1, out: y, diagonal: 0}\n",
			`in.yaml:15:20: error: ops[2]: tril of "s1": has rank 1, but tril masks the last two dims; tril takes a tensor of rank 2 or more: [..., rows, columns]`},
		{"no diagonal", "  - {op: tril, in: q, out: y}\n",
			`in.yaml:13:5: error: ops[0]: tril needs "diagonal"; diagonal: tril's diagonal: the entries with column − row above it are zeroed (0 the main diagonal, torch.tril's)`},
		{"diagonal not an integer", "  - {op: tril, in: q, out: y, diagonal: 0.5}\n",
			`in.yaml:13:41: error: ops[0] diagonal: expected an integer, got number 0.5`},
	} {
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
		`in.yaml:13:24: error: ops[0]: sdpa of "q": k's leading dims [2, 2] differ from q's [2, 4]; batch and heads dims are equal in q, k and v; for grouped-query attention (fewer key/value heads) write enable_gqa: true`},
	{"no causal", "  - {op: sdpa, in: [q, k, v], out: o}\n",
		`in.yaml:13:5: error: ops[0]: sdpa needs "causal"; causal: sdpa's causal mask: query i attends to keys 0 to i (torch's is_causal, top-left aligned)`},
	{"two operands", "  - {op: sdpa, in: [q, k], out: o, causal: false}\n",
		"in.yaml:13:20: error: ops[0]: sdpa takes 3 inputs ([q, k, v]), got 2; write in: [q, k, v]"},
}

// gqaHead is the top of the grouped-query sdpa tests: q [2, 4, 8, 6] of 4
// heads, k and v [2, 2, 10, 6] of 2, all sharded on heads over 2
// devices (each device a whole group), and tensors of heads that do not
// group.
const gqaHead = `format: 2
meshes:
  m: [0, 1]
tensors:
  q: {mesh: m, shape: [2, 4, 8, 6], placements: [Shard(1)]}
  k: {mesh: m, shape: [2, 2, 10, 6], placements: [Shard(1)]}
  v: {mesh: m, shape: [2, 2, 10, 6], placements: [Shard(1)]}
  k3: {mesh: m, shape: [2, 3, 10, 6]}
  v1: {mesh: m, shape: [2, 1, 10, 6]}
ops:
`

// TestSDPAGQAExpansion checks grouped-query sdpa's expansion: k and v
// repeated for their groups (a broadcast to [2, 2, 2, 10, 6] and a reshape
// merging each head with its copies; v's after the softmax, where it is
// read), then the attention of equal heads,
// every op local where the heads are split in whole groups.
func TestSDPAGQAExpansion(t *testing.T) {
	f, err := Parse("in.yaml", []byte(gqaHead+"  - {op: sdpa, in: [q, k, v], out: o, causal: false, enable_gqa: true}\n"))
	if err != nil {
		t.Fatal(err)
	}
	sdpa := of("sdpa", "o")
	want := []opSum{
		{"o/k_rep_b = broadcast(k, axes=[2])", sdpa, "m propagated"},
		{"o/k_rep = reshape(o/k_rep_b, shape=[2, 4, 10, 6])", sdpa, "m propagated"},
		{"o/kt = permute(o/k_rep, dims=[0, 1, 3, 2])", sdpa, "m propagated"},
		{"o/scores = matmul(q, o/kt)", sdpa, "m propagated"},
		{"o/scaled = mul(o/scores, 0.4082482904638631)", sdpa, "m propagated"},
		{"o/max = max(o/scaled, axis=3)", sdpa, "m propagated"},
		{"o/max_b = broadcast(o/max, axes=[3])", sdpa, "m propagated"},
		{"o/sub = sub(o/scaled, o/max_b)", sdpa, "m propagated"},
		{"o/exp = exp(o/sub)", sdpa, "m propagated"},
		{"o/sum = sum(o/exp, axis=3)", sdpa, "m propagated"},
		{"o/sum_b = broadcast(o/sum, axes=[3])", sdpa, "m propagated"},
		{"o/probs = div(o/exp, o/sum_b)", sdpa, "m propagated"},
		{"o/v_rep_b = broadcast(v, axes=[2])", sdpa, "m propagated"},
		{"o/v_rep = reshape(o/v_rep_b, shape=[2, 4, 10, 6])", sdpa, "m propagated"},
		{"o = matmul(o/probs, o/v_rep)", sdpa, "m propagated"},
	}
	if d := cmp.Diff(want, opSums(f)); d != "" {
		t.Errorf("ops (-want +got):\n%s", d)
	}
	for _, name := range []string{"o/k_rep", "o"} {
		sh := f.Tensor(name).Shardings()
		if len(sh) != 1 || sh[0].Kind != Block || !slices.Equal(sh[0].Axes(), []int{1}) || f.Tensor(name).LocalShape()[1] != 2 {
			t.Errorf("%s: shardings %v, local shape %v, want 2 heads a device in a block (a whole group)", name, sh, f.Tensor(name).LocalShape())
		}
	}
}

// TestSDPAGQAForms checks that grouped-query sdpa takes every form
// under context parallelism: cp: ring and cp: allgather read the
// key/value heads unrepeated (plan.RingAttention), so the fusion keeps
// the expansion (the op-by-op form's, whose ops the whole forms compute
// within their last) and records both attributes for the lowering.
func TestSDPAGQAForms(t *testing.T) {
	for _, cp := range []string{"ring", "allgather", "expansion"} {
		t.Run(cp, func(t *testing.T) {
			f, err := Parse("in.yaml", []byte(gqaHead+"  - {op: sdpa, in: [q, k, v], out: o, causal: true, enable_gqa: true, cp: "+cp+"}\n"))
			if err != nil {
				t.Fatal(err)
			}
			last := f.Ops[len(f.Ops)-1]
			gqa, _ := last.Of.Attrs.Get(ops.AttrGQA)
			form, _ := last.Of.Attrs.Get(ops.AttrCP)
			if got := fmt.Sprintf("%s %v %s", last.Of.Kind, gqa.Bool, form.Str); got != "sdpa true "+cp {
				t.Errorf("the last op's record: %s, want sdpa true %s", got, cp)
			}
		})
	}
}

// TestSDPAGQAErrors checks the errors of grouped-query sdpa's operands,
// each where the value at fault is written.
func TestSDPAGQAErrors(t *testing.T) {
	for _, tc := range []struct{ name, ops, want string }{
		{"not a multiple", "  - {op: sdpa, in: [q, k3, k3], out: o, causal: false, enable_gqa: true}\n",
			`in.yaml:11:24: error: ops[0]: sdpa of "q": q's 4 heads (dim -3) are not a multiple of k's 3; with enable_gqa, each of k's heads serves a group of H/Hkv query heads: H is a multiple of Hkv`},
		{"v's heads", "  - {op: sdpa, in: [q, k, v1], out: o, causal: false, enable_gqa: true}\n",
			`in.yaml:11:27: error: ops[0]: sdpa of "q": v's heads (dim -3) are 1, k's 2; with enable_gqa, k and v have the same key/value heads Hkv`},
		{"without enable_gqa", "  - {op: sdpa, in: [q, k, v], out: o, causal: false}\n",
			`in.yaml:11:24: error: ops[0]: sdpa of "q": k's leading dims [2, 2] differ from q's [2, 4]; batch and heads dims are equal in q, k and v; for grouped-query attention (fewer key/value heads) write enable_gqa: true`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("in.yaml", []byte(gqaHead+tc.ops))
			if err == nil {
				t.Fatal("Parse succeeded, want an error")
			}
			if d := cmp.Diff(tc.want, err.Error()); d != "" {
				t.Errorf("error (-want +got):\n%s", d)
			}
		})
	}
}
