package sim

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nvcomm/nvcomm/internal/ops"
	"github.com/nvcomm/nvcomm/internal/plan"
)

// TestSDPADefinition proves sdpa's expansion (permute, matmul, the scale,
// the softmax composite's steps, matmul) equal, exactly, to the
// simulator's own definition of attention (sdpaDef), on random data of
// several shapes, and that the definition tells apart an attention of
// another scale and one whose softmax runs over the queries.
func TestSDPADefinition(t *testing.T) {
	r := rand.New(rand.NewPCG(26, 3))
	for _, tc := range []struct {
		q, k, v []int
	}{
		{[]int{4, 3}, []int{5, 3}, []int{5, 2}},
		{[]int{2, 4, 6}, []int{2, 4, 6}, []int{2, 4, 6}},
		{[]int{2, 2, 3, 4}, []int{2, 2, 5, 4}, []int{2, 2, 5, 3}},
	} {
		ins := []operand{randomOperand(r, "q", tc.q), randomOperand(r, "k", tc.k), randomOperand(r, "v", tc.v)}
		want := mustDef(t, &plan.Of{Op: "sdpa"}, ins...)
		got := expanded(t, "sdpa", ins, sdpaAttrs(false))
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("sdpa of %v, %v, %v: the expansion differs from the definition (-definition +expansion):\n%s", tc.q, tc.k, tc.v, d)
		}
		// q scaled by 2 is another scale of the scores: a mismatch.
		twice := ins[0]
		twice.vals = slices.Clone(twice.vals)
		for i := range twice.vals {
			twice.vals[i] = fnMul(twice.vals[i], 2)
		}
		twice.v = stored(twice.vals)
		if slices.Equal(want, mustDef(t, &plan.Of{Op: "sdpa"}, twice, ins[1], ins[2])) {
			t.Errorf("sdpa of %v: another scale gives the same values", tc.q)
		}
	}
}

// TestSDPADefinitionShapes checks that the definition refuses operands
// that are not [..., s, d], [..., t, d], [..., t, dv].
func TestSDPADefinitionShapes(t *testing.T) {
	r := rand.New(rand.NewPCG(26, 4))
	for _, tc := range []struct {
		name    string
		q, k, v []int
	}{
		{"rank 1", []int{4}, []int{4}, []int{4}},
		{"ranks differ", []int{4, 3}, []int{1, 5, 3}, []int{5, 2}},
		{"d differs", []int{4, 3}, []int{5, 2}, []int{5, 2}},
		{"t differs", []int{4, 3}, []int{5, 3}, []int{6, 2}},
		{"heads differ", []int{2, 4, 3}, []int{3, 5, 3}, []int{3, 5, 2}},
	} {
		ins := []operand{randomOperand(r, "q", tc.q), randomOperand(r, "k", tc.k), randomOperand(r, "v", tc.v)}
		if _, err := compositeDef(&plan.Of{Op: "sdpa"}, ins); err == nil {
			t.Errorf("%s: no error", tc.name)
		}
	}
}

// sdpaAttrs are sdpa's attributes with causal as given.
func sdpaAttrs(causal bool) ops.Attrs {
	return ops.Attrs{Axis: -1, Values: ops.Values{{Key: ops.AttrCausal, Bool: causal}}}
}

// TestSDPACausalDefinition proves causal sdpa's expansion (the scores'
// row minimum, tril of the scores less it, the max of that plus it, exp,
// tril of the exponentials, normalized) equal, exactly, to the
// simulator's own definition (causalRow: the softmax over the keys j ≤ i,
// shifted by their max), on random data with fewer, as many and more
// queries than keys; and that the definition tells apart the expansions
// that are wrong: no mask, masks of another diagonal (one off, or aligned
// bottom-right as some libraries do when s ≠ t) and the exponentials left
// unmasked (no second tril). The max taken over every key (no first
// tril) is not wrong: exp's homomorphism cancels any shift exactly, as in
// real numbers, and the test shows that expansion equal too.
func TestSDPACausalDefinition(t *testing.T) {
	r := rand.New(rand.NewPCG(26, 5))
	// setDiagonal gives the expansion's k-th tril diagonal d; dropTril
	// replaces its k-th tril with a copy (the identity, as add of 0).
	setDiagonal := func(k, d int) func([]ops.ExpandStep) {
		return func(steps []ops.ExpandStep) { nthTril(steps, k).Values = ops.Values{{Key: ops.AttrDiagonal, Int: d}} }
	}
	dropTril := func(k int) func([]ops.ExpandStep) {
		return func(steps []ops.ExpandStep) {
			s := nthTril(steps, k)
			s.Op, s.Values, s.Scalar = "add", nil, &ops.Scalar{Slot: 1, Value: 0}
		}
	}
	for _, tc := range []struct {
		q, k, v []int
	}{
		{[]int{6, 3}, []int{6, 3}, []int{6, 2}},
		{[]int{2, 4, 6}, []int{2, 7, 6}, []int{2, 7, 6}},
		{[]int{2, 2, 5, 4}, []int{2, 2, 3, 4}, []int{2, 2, 3, 3}},
	} {
		ins := []operand{randomOperand(r, "q", tc.q), randomOperand(r, "k", tc.k), randomOperand(r, "v", tc.v)}
		want := mustDef(t, &plan.Of{Op: "sdpa", Causal: true}, ins...)
		if got := expanded(t, "sdpa", ins, sdpaAttrs(true)); !slices.Equal(want, got) {
			t.Errorf("causal sdpa of %v, %v, %v: the expansion differs from the definition (-definition +expansion):\n%s", tc.q, tc.k, tc.v, cmp.Diff(want, got))
		}
		if slices.Equal(want, mustDef(t, &plan.Of{Op: "sdpa"}, ins...)) {
			t.Errorf("causal sdpa of %v: equals the attention without a mask", tc.q)
		}
		s, keys := tc.q[len(tc.q)-2], tc.k[len(tc.k)-2]
		wrong := map[string]func([]ops.ExpandStep){
			"diagonal 1":           func(st []ops.ExpandStep) { setDiagonal(0, 1)(st); setDiagonal(1, 1)(st) },
			"diagonal -1 on exp":   setDiagonal(1, -1),
			"unmasked exponential": dropTril(1),
		}
		if s != keys {
			wrong["bottom-right"] = func(st []ops.ExpandStep) { setDiagonal(0, keys-s)(st); setDiagonal(1, keys-s)(st) }
		}
		steps, err := ops.Lookup("sdpa").Expand([][]int{tc.q, tc.k, tc.v}, sdpaAttrs(true))
		if err != nil {
			t.Fatal(err.Msg)
		}
		if dropTril(0)(steps); !slices.Equal(want, runSteps(t, "sdpa", steps, ins)) {
			t.Errorf("causal sdpa of %v, %v: the expansion with the max over every key differs from the definition", tc.q, tc.k)
		}
		for name, mutate := range wrong {
			steps, err := ops.Lookup("sdpa").Expand([][]int{tc.q, tc.k, tc.v}, sdpaAttrs(true))
			if err != nil {
				t.Fatal(err.Msg)
			}
			mutate(steps)
			if slices.Equal(want, runSteps(t, "sdpa", steps, ins)) {
				t.Errorf("causal sdpa of %v, %v: the expansion with %s equals the definition", tc.q, tc.k, name)
			}
		}
	}
}

// nthTril is the k-th tril of an expansion.
func nthTril(steps []ops.ExpandStep, k int) *ops.ExpandStep {
	for j := range steps {
		if steps[j].Op == "tril" {
			if k == 0 {
				return &steps[j]
			}
			k--
		}
	}
	panic("no such tril")
}

// TestTrilKernel checks the Tril step's kernel, a block masked with its
// own diagonal, against the reference's tril of the whole matrix: every
// block of a 2×3 grid of a [2, 6, 9] tensor, with the diagonal of its
// place (d + r0 − c0), is the same block of the whole tensor's tril, for
// diagonals below, on and above the main one.
func TestTrilKernel(t *testing.T) {
	r := rand.New(rand.NewPCG(26, 6))
	x := randomOperand(r, "x", []int{2, 6, 9})
	ignored := 0 // blocks that the tensor's diagonal, not their own, masks wrong
	for _, d := range []int{-4, -1, 0, 2, 9} {
		whole := trilReference(x, d)
		for r0 := 0; r0 < 6; r0 += 3 {
			for c0 := 0; c0 < 9; c0 += 3 {
				block, want := blockOf(x.vals, r0, c0), blockOf(whole, r0, c0)
				if got := trilKernel(block, 3, 3, d+r0-c0); !slices.Equal(want, got) {
					t.Errorf("diagonal %d, block at (%d, %d): (-want +got):\n%s", d, r0, c0, cmp.Diff(want, got))
				}
				if !slices.Equal(want, trilKernel(block, 3, 3, d)) {
					ignored++
				}
			}
		}
	}
	if ignored < 10 {
		t.Errorf("only %d blocks are masked wrong by the tensor's diagonal: the test cannot tell the offsets apart", ignored)
	}
}

// blockOf is the [2, 3, 3] block at rows r0, columns c0 of a row-major
// [2, 6, 9] array.
func blockOf(vals []float64, r0, c0 int) []float64 {
	var out []float64
	for b := range 2 {
		for i := range 3 {
			start := (b*6+r0+i)*9 + c0
			out = append(out, vals[start:start+3]...)
		}
	}
	return out
}

// TestSDPAGQADefinition proves grouped-query sdpa's expansion (k and v
// repeated for the query heads of their group, then attention) equal,
// exactly, to the simulator's own definition (sdpaDef with gqa, which
// reads key/value head h / (H/Hkv) in place), causal and not; checks the
// definition against the attention of equal heads on k and v repeated
// as torch's repeat_interleave repeats them, and tells it apart from the
// pairing of torch's repeat (tiled: query head h with head h mod Hkv).
func TestSDPAGQADefinition(t *testing.T) {
	r := rand.New(rand.NewPCG(30, 1))
	for _, tc := range []struct {
		q, k, v []int
	}{
		{[]int{4, 3, 2}, []int{2, 5, 2}, []int{2, 5, 3}},
		{[]int{2, 6, 4, 3}, []int{2, 2, 4, 3}, []int{2, 2, 4, 2}},
		{[]int{2, 1, 4, 3, 2}, []int{2, 1, 1, 3, 2}, []int{2, 1, 1, 3, 2}},
	} {
		ins := []operand{randomOperand(r, "q", tc.q), randomOperand(r, "k", tc.k), randomOperand(r, "v", tc.v)}
		for _, causal := range []bool{false, true} {
			want := mustDef(t, &plan.Of{Op: "sdpa", Causal: causal, GQA: true}, ins...)
			a := sdpaAttrs(causal)
			a.Values = append(a.Values, ops.Value{Key: ops.AttrGQA, Bool: true})
			if got := expanded(t, "sdpa", ins, a); !slices.Equal(want, got) {
				t.Errorf("sdpa enable_gqa of %v, %v, %v, causal %v: the expansion differs from the definition (-definition +expansion):\n%s",
					tc.q, tc.k, tc.v, causal, cmp.Diff(want, got))
			}
			h := tc.q[len(tc.q)-3]
			interleaved := []operand{ins[0], repeatHeads(ins[1], h, true), repeatHeads(ins[2], h, true)}
			if d := cmp.Diff(want, mustDef(t, &plan.Of{Op: "sdpa", Causal: causal}, interleaved...)); d != "" {
				t.Errorf("sdpa enable_gqa of %v, causal %v: differs from attention on k and v repeat_interleaved (-gqa +repeated):\n%s", tc.q, causal, d)
			}
			tiled := []operand{ins[0], repeatHeads(ins[1], h, false), repeatHeads(ins[2], h, false)}
			if h != tc.k[len(tc.k)-3] && tc.k[len(tc.k)-3] > 1 && slices.Equal(want, mustDef(t, &plan.Of{Op: "sdpa", Causal: causal}, tiled...)) {
				t.Errorf("sdpa enable_gqa of %v, causal %v: equals attention on k and v tiled (head h mod Hkv)", tc.q, causal)
			}
		}
	}
}

// repeatHeads is x [..., Hkv, t, c] with its heads repeated to h:
// interleaved (torch's repeat_interleave: head i is x's i / (h/Hkv)) or
// tiled (torch's repeat: head i is x's i mod Hkv).
func repeatHeads(x operand, h int, interleaved bool) operand {
	r := len(x.shape)
	hkv, inner := x.shape[r-3], x.shape[r-2]*x.shape[r-1]
	shape := slices.Clone(x.shape)
	shape[r-3] = h
	var vals []float64
	for b := range product(x.shape[:r-3]) {
		for i := range h {
			src := i % hkv
			if interleaved {
				src = i / (h / hkv)
			}
			start := (b*hkv + src) * inner
			vals = append(vals, x.vals[start:start+inner]...)
		}
	}
	out := x
	out.shape, out.vals, out.v = shape, vals, stored(vals)
	return out
}

// TestSDPAGQAShapes checks that the definition refuses grouped-query
// operands whose heads do not group (H not a multiple of Hkv, or k's and
// v's heads unequal), and heads that differ without enable_gqa.
func TestSDPAGQAShapes(t *testing.T) {
	r := rand.New(rand.NewPCG(30, 2))
	for _, tc := range []struct {
		name    string
		gqa     bool
		q, k, v []int
	}{
		{"not a multiple", true, []int{5, 3, 2}, []int{2, 3, 2}, []int{2, 3, 2}},
		{"k and v heads differ", true, []int{4, 3, 2}, []int{2, 3, 2}, []int{1, 3, 2}},
		{"no heads", true, []int{3, 2}, []int{3, 2}, []int{3, 2}},
		{"batch differs", true, []int{2, 4, 3, 2}, []int{1, 2, 3, 2}, []int{1, 2, 3, 2}},
		{"fewer heads without enable_gqa", false, []int{4, 3, 2}, []int{2, 3, 2}, []int{2, 3, 2}},
	} {
		ins := []operand{randomOperand(r, "q", tc.q), randomOperand(r, "k", tc.k), randomOperand(r, "v", tc.v)}
		if _, err := compositeDef(&plan.Of{Op: "sdpa", GQA: tc.gqa}, ins); err == nil {
			t.Errorf("%s: no error", tc.name)
		}
	}
}
