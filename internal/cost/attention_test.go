package cost

import (
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nvcomm/nvcomm/internal/plan"
)

// TestAttentionKernel prices the local steps of one sdpa's expansion as
// one kernel: the run's first step carries the larger of the bytes that
// cross the run's boundary (q, k and v read, the output written; the
// scores never) at the memory's rate and the products' arithmetic —
// halved when causal — and the others run inside it. A layout step that
// reshards the output (a Permute of the matmul op) is priced on its own,
// as the planner priced it.
func TestAttentionKernel(t *testing.T) {
	all := []int{0, 1}
	const bt, s, d = 32, 4096, 128 // [Bt, s, d] blocks of q, k, v; scores [Bt, s, s]
	sdpa := &plan.Of{Op: "sdpa", Inputs: []string{"q", "k", "v"}, Output: "o"}
	steps := []plan.Step{
		{Op: 1, Type: plan.Permute, Input: "k", Output: "kt", Count: plan.Count{Input: bt * s * d, Output: bt * s * d}},
		{Op: 2, Type: plan.Matmul, Inputs: []string{"q", "kt"}, Output: "scores", Dims: []int{bt, s, d, s}, Count: plan.Count{Input: bt * s * d, Output: bt * s * s}},
		{Op: 2, Type: plan.Pointwise, Input: "scores", Output: "probs", Count: plan.Count{Input: bt * s * s, Output: bt * s * s}},
		{Op: 2, Type: plan.Matmul, Inputs: []string{"probs", "v"}, Output: "o", Dims: []int{bt, s, s, d}, Count: plan.Count{Input: bt * s * s, Output: bt * s * d}},
		{Op: 2, Type: plan.Permute, Input: "o", Output: "o/in", Count: plan.Count{Input: bt * s * d, Output: bt * s * d}},
		{Op: 3, Type: plan.Pointwise, Input: "o/in", Output: "y", Count: plan.Count{Input: bt * s * d, Output: bt * s * d}},
	}
	top := Default()
	flops := 2.0 * bt * s * d * s * 2    // the two products
	bytes := int64(4 * (4 * bt * s * d)) // q, k, v in, o out, float32
	for _, causal := range []bool{false, true} {
		of := *sdpa
		of.Causal = causal
		p := &plan.Plan{Format: 1, Tensors: []plan.Tensor{{Name: "kt", DType: "float32"}, {Name: "o", DType: "float32"}, {Name: "y", DType: "float32"}},
			Ops: []plan.Op{{Output: "x"}, {Op: "permute", Output: "kt", Of: &of}, {Op: "matmul", Output: "o", Of: &of}, {Op: "neg", Output: "y"}}}
		for i, st := range steps {
			st.ID, st.Kind, st.Devices = i, plan.KindLocal, all
			p.Steps = append(p.Steps, st)
		}
		pr, err := Predict(top, p)
		if err != nil {
			t.Fatal(err)
		}
		f := flops
		if causal {
			f /= 2
		}
		want := max(top.Local(bytes), top.Compute.Seconds("float32", f))
		if want == top.Local(bytes) {
			t.Fatalf("the products' arithmetic should bound this kernel: %v s of memory, %v s of arithmetic", top.Local(bytes), top.Compute.Seconds("float32", f))
		}
		got := []float64{pr.Steps[0].Seconds, pr.Steps[1].Seconds, pr.Steps[2].Seconds, pr.Steps[3].Seconds}
		if d := cmp.Diff([]float64{want, 0, 0, 0}, got); d != "" {
			t.Errorf("causal %v: the kernel's steps (-want +got):\n%s", causal, d)
		}
		if pr.Steps[0].Bytes != bytes {
			t.Errorf("causal %v: the kernel moves %d bytes, want %d", causal, pr.Steps[0].Bytes, bytes)
		}
		for k := 1; k < 4; k++ {
			if f := pr.Steps[k].FusedInto; f == nil || *f != 0 {
				t.Errorf("causal %v: step %d runs in %v, want the kernel of step 0", causal, k, f)
			}
		}
		for _, k := range []int{4, 5} {
			if pr.Steps[k].FusedInto != nil || pr.Steps[k].Seconds == 0 {
				t.Errorf("causal %v: step %d is priced in the kernel: %+v", causal, k, pr.Steps[k])
			}
		}
	}
}

// TestRingRoundKernels prices the rounds of a causal ring attention (an
// op that computes its sdpa whole, the expansion's other ops within it)
// by their own masks: a round with a Tril (the diagonal's block) at half
// its products' arithmetic, a round without (a block wholly below the
// diagonal) at all of it. An op of the expansion planned op by op prices
// every run of a causal sdpa, a Tril in it or not, by the share its
// sdpa's Trils keep (here half), as the kernel of the whole sdpa does.
func TestRingRoundKernels(t *testing.T) {
	const bt, s, d = 32, 4096, 128 // one block of q, k and v per device
	sdpa := &plan.Of{Op: "sdpa", Inputs: []string{"q", "k", "v"}, Output: "o", Causal: true}
	round := func(r string, tril bool) []plan.Step {
		steps := []plan.Step{{Type: plan.Matmul, Inputs: []string{"q", "k" + r}, Output: "s" + r, TransposeB: true,
			Dims: []int{bt, s, d, s}, Count: plan.Count{Input: bt * s * d, Output: bt * s * s}}}
		in := "s" + r
		if tril {
			steps = append(steps, plan.Step{Type: plan.Tril, Input: in, Output: "sm" + r, Dims: []int{bt, s, s}, Offsets: []int{0, 0},
				Count: plan.Count{Input: bt * s * s, Output: bt * s * s}})
			in = "sm" + r
		}
		return append(steps, plan.Step{Type: plan.Matmul, Inputs: []string{in, "v" + r}, Output: "o" + r,
			Dims: []int{bt, s, s, d}, Count: plan.Count{Input: bt * s * s, Output: bt * s * d}})
	}
	send := plan.Step{Kind: plan.KindCollective, Type: plan.SendRecv, Teams: [][]int{{0, 1}, {1, 0}}, Input: "k0", Output: "k1",
		Count: plan.Count{Input: bt * s * d, Output: bt * s * d}}
	top := Default()
	flops := 2.0 * bt * s * d * s * 2 // a round's two products
	full, half := top.Compute.Seconds("float32", flops), top.Compute.Seconds("float32", flops/2)
	for _, whole := range []bool{true, false} {
		p := &plan.Plan{Format: 1, Tensors: []plan.Tensor{{Name: "q", DType: "float32"}, {Name: "o", DType: "float32"}},
			Ops: []plan.Op{{Op: "permute", Output: "kt", Of: sdpa}, {Op: "matmul", Output: "o", Of: sdpa}}}
		if whole {
			p.Ops[0].Within = new(1)
		}
		steps := append(append(round("0", true), send), round("1", false)...)
		for i, st := range steps {
			st.ID, st.Op = i, 1
			if st.Kind == "" {
				st.Kind, st.Devices = plan.KindLocal, []int{0, 1}
			}
			p.Steps = append(p.Steps, st)
		}
		pr, err := Predict(top, p)
		if err != nil {
			t.Fatal(err)
		}
		want := []float64{half, full}
		if !whole {
			want = []float64{half, half}
		}
		if got := []float64{pr.Steps[0].Seconds, pr.Steps[4].Seconds}; !cmp.Equal(want, got) {
			t.Errorf("computed whole %v: the rounds' kernels %v s, want %v s", whole, got, want)
		}
		if top.Local(pr.Steps[4].Bytes) >= want[1] {
			t.Fatalf("the products' arithmetic should bound the kernels: %v s of memory", top.Local(pr.Steps[4].Bytes))
		}
	}
}

// TestTrilShare checks the share of a block of the scores that a causal
// kernel computes on the busiest of a Tril's devices, against the area on
// or below each device's diagonal counted cell by cell on a fine grid:
// the diagonal's square block half, the all-gather form's last device
// (2c − 1)/2c of its queries against every key, the expansion split on
// the keys (every query against a quarter of them) 7/8 on device 0.
func TestTrilShare(t *testing.T) {
	for _, tc := range []struct {
		name    string
		dims    []int
		offsets []int
		want    float64
	}{
		{"diagonal's square block", []int{2, 4, 4}, []int{0, 0}, 0.5},
		{"all-gather form on 4 devices", []int{2, 4, 16}, []int{0, 4, 8, 12}, 7.0 / 8},
		{"all-gather form on 2 devices", []int{1, 8, 16}, []int{0, 8}, 3.0 / 4},
		{"split on the keys, 4 devices", []int{2, 16, 4}, []int{0, -4, -8, -12}, 7.0 / 8},
		{"wholly below", []int{1, 4, 4}, []int{4}, 1},
		{"wholly above", []int{1, 4, 4}, []int{-4}, 0},
		{"more columns than rows", []int{1, 2, 3}, []int{2}, 11.0 / 12},
		{"not a block", []int{4}, []int{0}, 1},
	} {
		got := trilShare(&plan.Step{Type: plan.Tril, Dims: tc.dims, Offsets: tc.offsets})
		if math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("%s: share %v, want %v", tc.name, got, tc.want)
		}
		if len(tc.dims) < 3 {
			continue
		}
		if grid := gridShare(tc.dims[1], tc.dims[2], tc.offsets); math.Abs(got-grid) > 1.0/64 {
			t.Errorf("%s: share %v, the area counted on a grid %v", tc.name, got, grid)
		}
	}
}

// gridShare is the largest share, over offsets, of an r × c block on or
// below the diagonal x − y ≥ −offset (x the row), counted on a grid of
// 1/64 cells at their centres: trilShare from the definition.
func gridShare(r, c int, offsets []int) float64 {
	const n = 64
	best := 0.0
	for _, o := range offsets {
		in := 0
		for i := range r * n {
			for j := range c * n {
				x, y := (float64(i)+0.5)/n, (float64(j)+0.5)/n
				if y <= x+float64(o) {
					in++
				}
			}
		}
		best = max(best, float64(in)/float64(r*c*n*n))
	}
	return best
}
