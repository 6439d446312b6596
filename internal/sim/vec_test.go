package sim

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/nvcomm/nvcomm/internal/plan"
)

// The tests of the values shared between buffers (vec.go): every
// operation on values in pieces against the same operation on the values
// copied out of them, and simulations with every chunk in pieces against
// simulations that copy them.

// withRopeMin runs f with ropeMin set to n, and restores it. Below the
// default it generates every fusion input's values where they are read
// (smallInput 1), as big tensors do.
func withRopeMin(n int, f func()) {
	defer func(rm, si int) { ropeMin, smallInput = rm, si }(ropeMin, smallInput)
	if n < ropeMin {
		smallInput = 1
	}
	ropeMin = n
	f()
}

// TestDiv1025 checks the multiply and shift of div1025 against division
// where it could go wrong: below every multiple of 1025 (where h/1025 has
// its largest fraction, so the excess of h·M/2⁴² is likeliest to reach the
// next integer), at every multiple and at the ends of the range.
func TestDiv1025(t *testing.T) {
	check := func(h uint64) {
		if got := div1025(h); got != h/1025 {
			t.Fatalf("div1025(%d) = %d, want %d", h, got, h/1025)
		}
	}
	for q := uint64(1); q*1025 <= math.MaxUint32; q++ {
		check(q*1025 - 1)
		check(q * 1025)
	}
	for _, h := range []uint64{0, 1, 1024, math.MaxUint32 - 1, math.MaxUint32} {
		check(h)
	}
}

// TestStreamFill checks a stream's values generated a run at a time, of
// any stride (0 and negative strides come from joining one-element
// pieces), against inputValue.
func TestStreamFill(t *testing.T) {
	for _, data := range []DataSet{Wide, Small, Positive} {
		g := &stream{key: streamKey(3, 1), data: data}
		for _, r := range []run{{0, 1, 50}, {17, 3, 40}, {9, 0, 5}, {90, -2, 30}} {
			got := make([]float64, r.n)
			g.fill(got, r.off, r.stride)
			for i, v := range got {
				if want := inputValue(g.key, r.at(i), data, 0); v != want {
					t.Fatalf("data set %v, run %+v, value %d: %v, inputValue gives %v", data, r, i, v, want)
				}
			}
		}
	}
}

// randomVec builds a vec of stored values or of random pieces of arrays
// and streams, and returns it with its values copied out.
func randomVec(r *rand.Rand, arrays [][]float64, streams []*stream) (vec, []float64) {
	if r.IntN(4) == 0 {
		a := arrays[r.IntN(len(arrays))]
		lo := r.IntN(len(a))
		hi := lo + r.IntN(len(a)-lo+1)
		return stored(a[lo:hi]), slices.Clone(a[lo:hi])
	}
	var b ropeBuilder
	var want []float64
	for range r.IntN(6) {
		p := piece{run: run{stride: []int{1, 1, 2, -1, 0}[r.IntN(5)], n: 1 + r.IntN(9)}}
		if r.IntN(2) == 0 {
			p.vals = arrays[r.IntN(len(arrays))]
			span := (p.n - 1) * p.stride // the run must stay within the array
			lo, hi := max(0, -span), len(p.vals)-max(0, span)
			if hi <= lo {
				continue
			}
			p.off = lo + r.IntN(hi-lo)
		} else {
			p.gen = streams[r.IntN(len(streams))]
			p.off = 100 + r.IntN(100)
		}
		b.addPiece(p)
		for i := range p.n {
			want = append(want, p.value(i))
		}
	}
	if want == nil {
		want = []float64{}
	}
	return b.vec(), want
}

// TestVecMatchesItsValues checks every operation on random vecs against
// the same operation on their values: length, single values, reads from
// any position, slices, the pieces a range is made of, and joins of spans
// in a rope and copied.
func TestVecMatchesItsValues(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	arrays := [][]float64{{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, {-1, -2, -3}, {42}}
	streams := []*stream{{key: 1}, {key: 2, data: Small}}
	for trial := range 3000 {
		v, want := randomVec(r, arrays, streams)
		if v.len() != len(want) || !v.present() {
			t.Fatalf("trial %d: len %d, present %v, want %d values", trial, v.len(), v.present(), len(want))
		}
		if d := cmp.Diff(want, v.flat()); d != "" {
			t.Fatalf("trial %d: flat (-want +got):\n%s", trial, d)
		}
		for i, x := range want {
			if got := v.value(i); got != x {
				t.Fatalf("trial %d: value(%d) = %v, want %v", trial, i, got, x)
			}
		}
		lo := r.IntN(len(want) + 1)
		hi := lo + r.IntN(len(want)-lo+1)
		got := make([]float64, hi-lo)
		v.read(lo, got)
		if d := cmp.Diff(want[lo:hi], got); d != "" {
			t.Fatalf("trial %d: read(%d, %d) (-want +got):\n%s", trial, lo, hi, d)
		}
		if d := cmp.Diff(want[lo:hi], v.slice(lo, hi).flat()); d != "" {
			t.Fatalf("trial %d: slice(%d, %d) (-want +got):\n%s", trial, lo, hi, d)
		}
		next := lo
		v.each(lo, hi, func(p piece) bool {
			if p.pos != next || p.n < 1 {
				t.Fatalf("trial %d: each(%d, %d) gave a piece at %d of %d, want one at %d", trial, lo, hi, p.pos, p.n, next)
			}
			for i := range p.n {
				if p.value(i) != want[p.pos+i] {
					t.Fatalf("trial %d: each(%d, %d): the piece at %d differs at %d", trial, lo, hi, p.pos, i)
				}
			}
			next += p.n
			return true
		})
		if next != max(lo, hi) && hi > lo {
			t.Fatalf("trial %d: each(%d, %d) ended at %d", trial, lo, hi, next)
		}
		u, uwant := randomVec(r, arrays, streams)
		spans := []span{{v, lo, hi}, {u, 0, u.len()}, {v, 0, lo}}
		joined := slices.Concat(want[lo:hi], uwant, want[:lo])
		for _, asRope := range []bool{false, true} {
			var s slab
			if d := cmp.Diff(joined, join(spans, asRope, &s).flat(), cmpopts.EquateEmpty()); d != "" {
				t.Fatalf("trial %d: join, rope %v (-want +got):\n%s", trial, asRope, d)
			}
		}
	}
}

// TestListsSameOnlyWhenEqual checks that a piece taken for the very
// elements of the reference it should hold has their values (the check
// then reads neither), and that a piece cut from the reference's stream
// at the positions a run lists, in pieces of any length, is taken for
// them: what makes checking a moved buffer free.
func TestListsSameOnlyWhenEqual(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	g := &stream{key: 9}
	arrays := [][]float64{{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}}
	want := generated(g, 400)
	same := 0
	for trial := range 5000 {
		seg := run{off: r.IntN(200), stride: 1 + r.IntN(3), n: 1 + r.IntN(30)}
		var p piece
		switch r.IntN(3) {
		case 0: // the reference's own elements
			p = piece{gen: g, run: seg}
		case 1: // the stream, elsewhere or at another stride
			p = piece{gen: g, run: run{off: seg.off + r.IntN(3) - 1, stride: seg.stride + r.IntN(3) - 1, n: seg.n}}
		default: // another array
			v, _ := randomVec(r, arrays, []*stream{{key: 9}})
			if v.len() < seg.n {
				continue
			}
			v.each(0, seg.n, func(x piece) bool { p = x; return false })
			seg.n = p.n
		}
		if !listsSame(p, want, seg) {
			if p.gen == g && p.run == seg {
				t.Fatalf("trial %d: the stream's own run %+v is not taken for itself", trial, seg)
			}
			continue
		}
		same++
		for i := range p.n {
			if p.value(i) != want.value(seg.at(i)) {
				t.Fatalf("trial %d: piece %+v taken for run %+v of the reference, but value %d differs", trial, p.run, seg, i)
			}
		}
	}
	if same < 1000 {
		t.Errorf("only %d pieces were taken for the reference's elements", same)
	}
}

// TestRopesSameAsCopies simulates every conformance and example plan, and
// mutants of each (one number changed, as TestMutatedPlans does, and each
// collective's team reversed), twice: with every chunk a step moves
// listed in a rope (ropeMin 1), and with every chunk copied. Pieces must
// change nothing a simulation reports: the same pass, mismatch, traffic
// or error.
func TestRopesSameAsCopies(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("..", "..", "testdata", "conformance", "*.json"))
	examples, _ := filepath.Glob(filepath.Join("..", "..", "testdata", "examples", "*.json"))
	files = append(files, examples...)
	if len(files) == 0 {
		t.Fatal("no plans found")
	}
	r := rand.New(rand.NewPCG(7, 8))
	failing := 0
	for _, file := range files {
		src, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		variants := [][]byte{src}
		// The plans of the GPU runs hold tensors of megabytes: their
		// number mutants add seconds and little else.
		for range 4 * boolInt(!strings.HasPrefix(filepath.Base(file), "gpu")) {
			variants = append(variants, mutateNumber(t, src, r))
		}
		variants = append(variants, reversedTeams(t, src)...)
		for k, v := range variants {
			p, err := plan.Decode(file, v)
			if err != nil {
				continue
			}
			var roped, copied string
			withRopeMin(1, func() { roped = outcome(p) })
			withRopeMin(math.MaxInt, func() { copied = outcome(p) })
			if tooLarge(roped) && tooLarge(copied) {
				continue // a realistic size (tp_mlp_overlap_auto): refused either way, the estimates differing by the pieces shared
			}
			if roped != copied {
				t.Errorf("%s, variant %d: in pieces\n%s\ncopied\n%s", filepath.Base(file), k, roped, copied)
			}
			if k > 0 && roped != outcomePass {
				failing++
			}
		}
	}
	if failing == 0 {
		t.Error("no variant failed: the comparison shows nothing")
	}
}

// boolInt is 1 for true and 0 for false.
func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// tooLarge reports whether an outcome is the simulator's refusal of a
// plan too large to simulate.
func tooLarge(outcome string) bool { return strings.HasPrefix(outcome, "error: too large to simulate") }

// outcomePass is the outcome of a simulation that passes (traffic aside).
const outcomePass = "pass"

// outcome runs p and words everything the simulation reports.
func outcome(p *plan.Plan) string {
	res, err := Run(p, Options{Seed: 5, MaxBytes: 1 << 30})
	switch {
	case err != nil:
		return "error: " + err.Error()
	case res.Pass:
		return outcomePass
	}
	b, _ := json.Marshal(res)
	return string(b)
}

// reversedTeams returns src with one collective's first team reversed, a
// variant for each collective of a team of more than two.
func reversedTeams(t *testing.T, src []byte) [][]byte {
	var doc map[string]any
	if err := json.Unmarshal(src, &doc); err != nil {
		t.Fatal(err)
	}
	steps, _ := doc["steps"].([]any)
	var out [][]byte
	for i := range steps {
		step, _ := steps[i].(map[string]any)
		teams, _ := step["teams"].([]any)
		if len(teams) == 0 {
			continue
		}
		team, _ := teams[0].([]any)
		if len(team) < 3 {
			continue
		}
		slices.Reverse(team)
		b, err := json.Marshal(doc)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
		slices.Reverse(team) // back, for the next variant
	}
	return out
}

// sharedThenCopy gathers x [4, 8], a row on each of four devices, onto
// every device as y, whose members share the output, or sums the rows
// there (reduce). With wrong set, a later Copy puts y on device 2 again
// from z, the same step but for what makes it wrong: the Allgather's team
// reversed (the rows in the wrong order), the Allreduce's op max. Device 2
// then holds other values while the other members still share the right
// ones.
func sharedThenCopy(wrong, reduce bool) *plan.Plan {
	team := []int{0, 1, 2, 3}
	step := func(id int, out string, team []int, op string) plan.Step {
		s := plan.Step{ID: id, Kind: plan.KindCollective, Type: plan.Allgather, Teams: [][]int{team},
			Input: "x", Output: out, Count: plan.Count{Input: 8, Output: 32},
			Bytes: &plan.Bytes{SentPerDevice: 96, ReceivedPerDevice: 96}}
		if reduce {
			s.Type, s.ReduceOp, s.Count = plan.Allreduce, sp(op), plan.Count{Input: 8, Output: 8}
			s.Bytes = &plan.Bytes{SentPerDevice: 48, ReceivedPerDevice: 48}
		}
		return s
	}
	p := &plan.Plan{
		Format: 1, Meshes: map[string]plan.Mesh{"m": mesh1(team...)},
		Tensors: []plan.Tensor{
			{Name: "x", DType: "float32", Mesh: "m", Shape: []int{4, 8}, Schedule: []plan.ScheduleStep{par(0, "DIDx")}},
			{Name: "y", DType: "float32", Mesh: "m", Shape: []int{4, 8}},
		},
		Ops:     []plan.Op{{Index: 0, Op: "set", Input: "x", Output: "y"}},
		Steps:   []plan.Step{step(0, "y", team, "sum")},
		Summary: plan.Summary{BytesReceivedMax: 96},
	}
	if reduce {
		p.Tensors[1].ReductionAxes = []int{0}
		p.Ops[0] = plan.Op{Index: 0, Op: "sum", Input: "x", Output: "y", Axis: ip(0)}
		p.Summary.BytesReceivedMax = 48
	}
	if wrong {
		z := step(1, "z", []int{3, 2, 1, 0}, "sum")
		if reduce {
			z = step(1, "z", team, "max")
		}
		n := z.Count.Output
		p.Steps = append(p.Steps, z, plan.Step{ID: 2, Kind: plan.KindLocal, Type: plan.Copy, Devices: []int{2},
			Input: "z", Output: "y", Count: plan.Count{Input: n, Output: n}})
		p.Summary.BytesReceivedMax *= 2
	}
	return p
}

// TestSharedOutputMemberWrong checks that the members of an Allgather or
// an Allreduce, which share one output, are each checked: a later step
// that gives one member other values fails on that member, with the
// element and values a copied simulation reports (for the Allgather, row
// 3's first value where row 0's should be), while the plan without it
// passes.
func TestSharedOutputMemberWrong(t *testing.T) {
	for _, reduce := range []bool{false, true} {
		t.Run(fmt.Sprintf("reduce %v", reduce), func(t *testing.T) {
			var got []Mismatch
			for _, rm := range []int{1, math.MaxInt} {
				withRopeMin(rm, func() {
					res, err := Run(sharedThenCopy(false, reduce), Options{Seed: 2})
					if err != nil || !res.Pass {
						t.Fatalf("ropeMin %d, the right plan: %v, %+v", rm, err, res)
					}
					res, err = Run(sharedThenCopy(true, reduce), Options{Seed: 2})
					if err != nil {
						t.Fatal(err)
					}
					if res.Pass || res.Mismatch == nil || res.Mismatch.Device != 2 {
						t.Fatalf("ropeMin %d, the plan that gives device 2 other values: %+v", rm, res.Mismatch)
					}
					got = append(got, *res.Mismatch)
				})
			}
			if d := cmp.Diff(got[1], got[0]); d != "" {
				t.Errorf("mismatch in pieces (-copied +pieces):\n%s", d)
			}
			if reduce {
				return
			}
			x := inputData(2, 0, 32, Wide, 0)
			want := Mismatch{Op: 0, Step: 2, Tensor: "y", Device: 2, FlatIndex: 0, LogicalIndex: []int{0, 0},
				Expected: Value(x[0]), Actual: Value(x[24]), Reason: "value differs"}
			if d := cmp.Diff(want, got[0]); d != "" {
				t.Errorf("mismatch (-want +got):\n%s", d)
			}
		})
	}
}

// TestSharedBufferOtherShard checks that a device whose buffer is the
// one a device already checked holds, but whose shard is other elements,
// is compared all the same: a Broadcast of device 0's row of x [2, 2048]
// to both devices, as y sharded like x, passes on device 0 and fails on
// device 1, with long rows in pieces and copied.
func TestSharedBufferOtherShard(t *testing.T) {
	const n = 2048
	sharded := []plan.ScheduleStep{par(0, "DIDx")}
	p := &plan.Plan{
		Format: 1, Meshes: map[string]plan.Mesh{"m": mesh1(0, 1)},
		Tensors: []plan.Tensor{
			{Name: "x", DType: "float32", Mesh: "m", Shape: []int{2, n}, Schedule: sharded},
			{Name: "y", DType: "float32", Mesh: "m", Shape: []int{2, n}, Schedule: sharded},
		},
		Ops: []plan.Op{{Index: 0, Op: "set", Input: "x", Output: "y"}},
		Steps: []plan.Step{{ID: 0, Kind: plan.KindCollective, Type: plan.Broadcast, Teams: [][]int{{0, 1}}, Root: ip(0),
			Input: "x", Output: "y", Count: plan.Count{Input: n, Output: n},
			Bytes: &plan.Bytes{SentPerDevice: 4 * n, ReceivedPerDevice: 4 * n}}},
		Summary: plan.Summary{BytesReceivedMax: 4 * n},
	}
	x := inputData(4, 0, 2*n, Wide, 0)
	want := &Mismatch{Op: 0, Step: 0, Tensor: "y", Device: 1, FlatIndex: 0, LogicalIndex: []int{1, 0},
		Expected: Value(x[n]), Actual: Value(x[0]), Reason: "value differs"}
	for _, rm := range []int{1, ropeMin, math.MaxInt} {
		withRopeMin(rm, func() {
			res, err := Run(p, Options{Seed: 4})
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(want, res.Mismatch); d != "" {
				t.Errorf("ropeMin %d: mismatch (-want +got):\n%s", rm, d)
			}
		})
	}
}

// TestReductionSharesReference checks that an Allreduce of the very rows
// the reference sums, in their order, shares the reference's values
// rather than computing them again, so that neither computes them (the
// check finds the buffers to be the reference's), and that one in another
// order computes its own, equal values, against which the reference's are
// computed: both pass, in pieces.
func TestReductionSharesReference(t *testing.T) {
	withRopeMin(1, func() {
		for _, reversed := range []bool{false, true} {
			p := sharedThenCopy(false, true)
			if reversed {
				p.Steps[0].Teams = [][]int{{3, 2, 1, 0}}
			}
			w, err := newWorld(p)
			if err != nil {
				t.Fatal(err)
			}
			m, ref, res, err := w.simulate(w.footprint(), 3)
			if err != nil || !res.Pass {
				t.Fatalf("reversed %v: %v, %+v", reversed, err, res)
			}
			for d, b := range m.named("y") {
				if shared := b.same(ref["y"]); shared == reversed {
					t.Errorf("reversed %v: device %d shares the reference's values: %v", reversed, d, shared)
				}
			}
			if computed := ref["y"].rope.pieces[0].lazy.vals != nil; computed != reversed {
				t.Errorf("reversed %v: the reference's values computed: %v", reversed, computed)
			}
		}
	})
}
