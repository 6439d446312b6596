package sim

import (
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nvcomm/nvcomm/internal/plan"
)

// This file runs ring attention (Liu et al., 2023) as plan steps on
// virtual devices: the steps a context-parallel sdpa's ring form is made
// of (docs/layers.md, "Attention"), which the simulator proves exactly
// because its exp is a homomorphism (sort.go).

// ringGeometry is a context-parallel attention: bt batches and heads, c
// devices, each holding sb queries and tb keys of the sequence, heads of d
// (and dv for v); with grp > 1, grouped-query attention (enable_gqa): q's
// bt heads read k's and v's bt/grp, grp query heads to a key/value head.
type ringGeometry struct {
	bt, c, sb, tb, d, dv int
	causal               bool
	grp                  int
}

// kvbt is the heads of k and v: bt/grp.
func (g ringGeometry) kvbt() int { return g.bt / max(g.grp, 1) }

// ringSteps writes ring attention's steps with the builder the lowering
// uses (plan.RingAttention), on devices 0 to c−1, buffers "q", "k", "v"
// and "o", intermediates named as the builder names them ("qk/1").
func ringSteps(g ringGeometry, sendFirst bool) []plan.Step {
	devs := make([]int, g.c)
	for i := range devs {
		devs[i] = i
	}
	return plan.RingAttention{Devices: devs, BT: g.bt, SB: g.sb, TB: g.tb, D: g.d, DV: g.dv, G: g.grp, Causal: g.causal,
		Scale: 1 / math.Sqrt(float64(g.d)), Q: "q", K: "k", V: "v", Out: "o",
		Buffer: func(what string) string { return what }, SendFirst: sendFirst}.Steps()
}

// seqBlock is block i of n of a row-major [bt, n·w, e] array's middle
// dim: the rows of device i of a tensor split on its sequence.
func seqBlock(vals []float64, bt, n, w, e, i int) []float64 {
	var out []float64
	for b := range bt {
		lo := (b*n*w + i*w) * e
		out = append(out, vals[lo:lo+w*e]...)
	}
	return out
}

// TestRingAttentionSteps runs ring attention's steps on 3 and 4 devices,
// q, k and v split on the sequence, causal and not, with each round's
// SendRecvs after its compute and before it, equal heads and grouped
// query heads (enable_gqa: the key/value heads' blocks travel, each read
// by its group's query rows), and checks every device's
// output block equal, exactly, to the simulator's definition of sdpa:
// the online softmax's rescaling is exact, and so is skipping the blocks
// the causal mask zeroes whole (each device computes only the blocks
// with a key it sees, while every block still travels the ring). The merge without its
// rescaling fails, and so does, for causal attention, a round's blocks in
// the wrong order (the ring turned the other way, the masks' diagonals
// still assuming the first).
func TestRingAttentionSteps(t *testing.T) {
	r := rand.New(rand.NewPCG(26, 11))
	for _, g := range []ringGeometry{
		{bt: 2, c: 4, sb: 3, tb: 3, d: 4, dv: 2},
		{bt: 2, c: 4, sb: 3, tb: 3, d: 4, dv: 2, causal: true},
		{bt: 1, c: 4, sb: 2, tb: 2, d: 8, dv: 3, causal: true},
		// Blocks of q and k of different lengths: a device may skip its
		// round 0 (device 2: queries 4, 5 against keys 6 to 8) or compute
		// again after skipping (device 0: rounds 0 and 3), so a round's
		// merge reads the states of several previous rounds.
		{bt: 1, c: 4, sb: 2, tb: 3, d: 2, dv: 2, causal: true},
		{bt: 2, c: 4, sb: 3, tb: 2, d: 2, dv: 3, causal: true},
		{bt: 6, c: 3, sb: 1, tb: 2, d: 2, dv: 2, causal: true},
		// Grouped-query attention: q's heads read k's and v's in groups
		// (query head h key/value head h / grp), the blocks that travel
		// the key/value heads' alone.
		{bt: 4, c: 4, sb: 3, tb: 3, d: 4, dv: 2, grp: 2},
		{bt: 6, c: 3, sb: 2, tb: 2, d: 2, dv: 3, causal: true, grp: 3},
		{bt: 4, c: 4, sb: 2, tb: 3, d: 2, dv: 2, causal: true, grp: 4},
	} {
		wantBlocks, operands := ringReference(t, r, g)
		run := func(steps []plan.Step) map[int][]float64 { return runRing(t, g, operands, steps) }
		if d := cmp.Diff(blocksSeen(g), blocksComputed(ringSteps(g, false))); d != "" {
			t.Errorf("%+v: blocks computed per device (-want +got):\n%s", g, d)
		}
		for _, sendFirst := range []bool{false, true} {
			if d := cmp.Diff(wantBlocks, run(ringSteps(g, sendFirst))); d != "" {
				t.Errorf("%+v, sends first %v: ring attention differs from sdpa's definition (-want +got):\n%s", g, sendFirst, d)
			}
		}
		// The merge without its rescaling by exp(m_old − m): l and o summed
		// as they are.
		steps := ringSteps(g, false)
		for j := range steps {
			if o := steps[j].Output; len(o) > 3 && (o[:3] == "la/" || o[:3] == "oa/") {
				steps[j].Func, steps[j].Input, steps[j].Inputs = sp("copy"), steps[j].Inputs[0], nil
				steps[j].InputDims = steps[j].InputDims[:1]
			}
		}
		if d := cmp.Diff(wantBlocks, run(steps)); d == "" {
			t.Errorf("%+v: the merge without rescaling gives sdpa's definition, want a difference", g)
		}
		if g.causal {
			// The ring turned the other way: device i receives from i + 1,
			// so its blocks come in another order than the masks assume.
			steps := ringSteps(g, false)
			for j := range steps {
				if steps[j].Type == plan.SendRecv {
					var turned [][]int // the steps share their teams: new ones
					for _, team := range steps[j].Teams {
						turned = append(turned, []int{team[1], team[0]})
					}
					steps[j].Teams = turned
				}
			}
			if d := cmp.Diff(wantBlocks, run(steps)); d == "" {
				t.Errorf("%+v: the ring turned the other way gives sdpa's definition, want a difference", g)
			}
		}
	}
}

// ringReference draws q, k and v for g and returns each device's block
// of sdpa's definition of them, and the operands.
func ringReference(t *testing.T, r *rand.Rand, g ringGeometry) (map[int][]float64, [3]operand) {
	t.Helper()
	s, t2 := g.c*g.sb, g.c*g.tb
	q := randomOperand(r, "q", []int{g.bt, s, g.d})
	k := randomOperand(r, "k", []int{g.kvbt(), t2, g.d})
	v := randomOperand(r, "v", []int{g.kvbt(), t2, g.dv})
	want, err := sdpaDef([]operand{q, k, v}, g.causal, g.grp > 1)
	if err != nil {
		t.Fatal(err)
	}
	blocks := map[int][]float64{}
	for i := range g.c {
		blocks[i] = seqBlock(want, g.bt, g.c, g.sb, g.dv, i)
	}
	return blocks, [3]operand{q, k, v}
}

// runRing runs steps on g's devices, each holding its blocks of the
// operands q, k and v, and returns each device's block of "o".
func runRing(t *testing.T, g ringGeometry, operands [3]operand, steps []plan.Step) map[int][]float64 {
	t.Helper()
	q, k, v := operands[0], operands[1], operands[2]
	m := newMachine(0)
	for i := range g.c {
		m.put(i, "q", seqBlock(q.vals, g.bt, g.c, g.sb, g.d, i))
		m.put(i, "k", seqBlock(k.vals, g.kvbt(), g.c, g.tb, g.d, i))
		m.put(i, "v", seqBlock(v.vals, g.kvbt(), g.c, g.tb, g.dv, i))
	}
	for j := range steps {
		steps[j].ID = j
		if _, err := m.exec(&steps[j], 4); err != nil {
			t.Fatalf("%+v: step %d: %v", g, j, err)
		}
	}
	got := map[int][]float64{}
	for d, b := range m.named("o") {
		got[d] = b.flat()
	}
	return got
}

// TestRingAttentionGeometries runs the causal ring, sends after and
// before each round's compute, on every geometry of 2 to 5 devices with
// blocks of 1 to 3 queries and 1 to 3 keys, and checks each device's
// output block equal, exactly, to sdpa's definition and the blocks it
// computes to those with a key its queries see: whichever rounds a device
// skips, its merges read the right state.
func TestRingAttentionGeometries(t *testing.T) {
	r := rand.New(rand.NewPCG(26, 12))
	for c := 2; c <= 5; c++ {
		for sb := 1; sb <= 3; sb++ {
			for tb := 1; tb <= 3; tb++ {
				g := ringGeometry{bt: 2, c: c, sb: sb, tb: tb, d: 2, dv: 2, causal: true}
				want, operands := ringReference(t, r, g)
				if d := cmp.Diff(blocksSeen(g), blocksComputed(ringSteps(g, false))); d != "" {
					t.Errorf("%+v: blocks computed per device (-want +got):\n%s", g, d)
				}
				for _, sendFirst := range []bool{false, true} {
					if d := cmp.Diff(want, runRing(t, g, operands, ringSteps(g, sendFirst))); d != "" {
						t.Errorf("%+v, sends first %v: ring attention differs from sdpa's definition (-want +got):\n%s", g, sendFirst, d)
					}
				}
			}
		}
	}
}

// blocksSeen is, for each device of g, how many of k's blocks hold a key
// that one of its queries sees, and how many SendRecvs pass the blocks:
// what the ring computes and moves, from the mask's definition (query
// x sees key y when y ≤ x) rather than the builder's.
func blocksSeen(g ringGeometry) ringWork {
	w := ringWork{Blocks: map[int]int{}, SendRecvs: 2 * (g.c - 1)}
	for i := range g.c {
		for j := range g.c {
			seen := !g.causal
			for x := i * g.sb; x < (i+1)*g.sb; x++ {
				for y := j * g.tb; y < (j+1)*g.tb; y++ {
					seen = seen || y <= x
				}
			}
			if seen {
				w.Blocks[i]++
			}
		}
	}
	return w
}

// ringWork is what ring attention's steps compute and move: per device
// the blocks whose scores it computes (its q·kᵀ Matmuls), and the
// SendRecvs.
type ringWork struct {
	Blocks    map[int]int
	SendRecvs int
}

// blocksComputed is the ringWork of steps.
func blocksComputed(steps []plan.Step) ringWork {
	w := ringWork{Blocks: map[int]int{}}
	for _, s := range steps {
		switch {
		case s.Type == plan.SendRecv:
			w.SendRecvs++
		case s.Type == plan.Matmul && s.TransposeB:
			for _, d := range s.Devices {
				w.Blocks[d]++
			}
		}
	}
	return w
}

// TestRingPlanMutants runs the plan nvcomm lowers for ring attention
// (testdata/examples/attention_context_parallel_ring.yaml, cp: ring),
// which passes in the orders its graph allows, and mutants of it that
// compute something else, each of which simulation catches on its own
// (validate, which holds the op's steps to ring attention's, rejects
// them too): the ring turned the other way (each round's k and v blocks
// then another device's than its masks assume), the merge without its
// rescaling, the diagonal's mask off by one, and a block skipped that is
// not wholly masked (device 1's round 1, block 0, all of whose keys its
// queries see: the causal ring skips only the blocks above the
// diagonal).
func TestRingPlanMutants(t *testing.T) {
	const file = "../../testdata/examples/attention_context_parallel_ring.optimal.json"
	load := func() *plan.Plan {
		src, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		p, err := plan.Decode(file, src)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	p := load()
	plan.ToGraph(p)
	for seed := range uint64(4) {
		if res, err := Run(p, Options{Order: seed}); err != nil || !res.Pass {
			t.Fatalf("the ring's plan, order %d: %v %+v", seed, err, res)
		}
	}
	for _, tc := range []struct {
		name   string
		mutate func(p *plan.Plan)
	}{
		{"ring turned", func(p *plan.Plan) {
			for i := range p.Steps {
				if s := &p.Steps[i]; s.Type == plan.SendRecv {
					var turned [][]int
					for _, team := range s.Teams {
						turned = append(turned, []int{team[1], team[0]})
					}
					s.Teams = turned
				}
			}
		}},
		{"no rescaling", func(p *plan.Plan) {
			for i := range p.Steps {
				if s := &p.Steps[i]; strings.Contains(s.Output, "/la/") || strings.Contains(s.Output, "/oa/") {
					s.Func, s.Input, s.Inputs, s.InputDims = sp("copy"), s.Inputs[0], nil, s.InputDims[:1]
				}
			}
		}},
		{"diagonal's mask off by one", func(p *plan.Plan) {
			for i := range p.Steps {
				if s := &p.Steps[i]; s.Type == plan.Tril {
					var shifted []int // the steps share their offsets: new ones
					for _, o := range s.Offsets {
						shifted = append(shifted, o+1)
					}
					s.Offsets = shifted
				}
			}
		}},
		{"a seen block skipped", func(p *plan.Plan) {
			// Device 1 skips round 1, whose block (k's and v's block 0)
			// its queries see whole, and divides round 0's state.
			for i := range p.Steps {
				s := &p.Steps[i]
				if s.Kind != plan.KindLocal {
					continue
				}
				if strings.HasSuffix(s.Output, "/1") {
					s.Devices = slices.DeleteFunc(slices.Clone(s.Devices), func(d int) bool { return d == 1 })
				}
				if s.Output == "o" && slices.Equal(s.Devices, []int{1}) {
					s.Inputs = []string{"o/ring/o/0", "o/ring/l/0"}
				}
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := load()
			tc.mutate(m)
			for i := range m.Steps {
				m.Steps[i].ID = i
			}
			if probs := plan.Validate(m); len(probs) == 0 {
				t.Errorf("validate accepts the mutant")
			}
			res, err := Run(m, Options{})
			if err != nil || res.Pass {
				t.Errorf("simulation: %v, %+v; want a mismatch", err, res)
			}
		})
	}
}

// gatherSteps writes the all-gather form's steps with the builder the
// lowering uses (plan.RingAttention.GatherSteps), on devices 0 to c−1,
// named as ringSteps names them.
func gatherSteps(g ringGeometry) []plan.Step {
	devs := make([]int, g.c)
	for i := range devs {
		devs[i] = i
	}
	return plan.RingAttention{Devices: devs, BT: g.bt, SB: g.sb, TB: g.tb, D: g.d, DV: g.dv, G: g.grp, Causal: g.causal,
		Scale: 1 / math.Sqrt(float64(g.d)), Q: "q", K: "k", V: "v", Out: "o",
		Buffer: func(what string) string { return what }}.GatherSteps()
}

// TestGatherAttentionSteps runs the all-gather form's steps (k and v
// gathered along the sequence, each device's queries against every key)
// on 2 to 4 devices, causal and not, one batch-and-head and several (the
// gathered blocks then permuted into sequence order), of equal heads and
// grouped-query heads (the key/value heads gathered), blocks of q and k of
// equal and unequal lengths, and checks every device's output block equal,
// exactly, to sdpa's definition. Mutants fail: the gathered blocks left in
// device order (gathered along the wrong axis: the batches and heads
// outermost), the diagonal's mask off by one, every device masked with
// device 0's diagonal.
func TestGatherAttentionSteps(t *testing.T) {
	r := rand.New(rand.NewPCG(26, 13))
	for _, g := range []ringGeometry{
		{bt: 2, c: 4, sb: 3, tb: 3, d: 4, dv: 2},
		{bt: 2, c: 4, sb: 3, tb: 3, d: 4, dv: 2, causal: true},
		{bt: 1, c: 4, sb: 2, tb: 2, d: 8, dv: 3, causal: true},
		{bt: 1, c: 4, sb: 2, tb: 3, d: 2, dv: 2, causal: true},
		{bt: 3, c: 3, sb: 3, tb: 2, d: 2, dv: 3, causal: true},
		{bt: 2, c: 2, sb: 1, tb: 1, d: 1, dv: 1, causal: true},
		// Grouped-query attention: k's and v's key/value heads gathered
		// unrepeated; one key/value head (kvbt 1: no Permute) and two.
		{bt: 4, c: 4, sb: 2, tb: 2, d: 3, dv: 2, causal: true, grp: 4},
		{bt: 4, c: 2, sb: 3, tb: 2, d: 2, dv: 3, causal: true, grp: 2},
		{bt: 6, c: 3, sb: 2, tb: 2, d: 2, dv: 2, grp: 3},
	} {
		want, operands := ringReference(t, r, g)
		if d := cmp.Diff(want, runRing(t, g, operands, gatherSteps(g))); d != "" {
			t.Errorf("%+v: the all-gather form differs from sdpa's definition (-want +got):\n%s", g, d)
		}
		mutants := map[string]func([]plan.Step) []plan.Step{
			"mask off by one": func(steps []plan.Step) []plan.Step {
				for j := range steps {
					if steps[j].Type == plan.Tril {
						var shifted []int
						for _, o := range steps[j].Offsets {
							shifted = append(shifted, o+1)
						}
						steps[j].Offsets = shifted
					}
				}
				return steps
			},
			"device 0's diagonal everywhere": func(steps []plan.Step) []plan.Step {
				for j := range steps {
					if steps[j].Type == plan.Tril {
						steps[j].Offsets = make([]int, len(steps[j].Offsets))
					}
				}
				return steps
			},
			"blocks in device order": func(steps []plan.Step) []plan.Step {
				for j := range steps { // the Allgathers write the blocks where the Permutes would
					if steps[j].Type == plan.Allgather {
						steps[j].Output = strings.TrimSuffix(steps[j].Output, "g")
					}
				}
				return slices.DeleteFunc(steps, func(s plan.Step) bool { return s.Type == plan.Permute })
			},
		}
		for name, mutate := range mutants {
			if !g.causal && name != "blocks in device order" || g.kvbt() == 1 && name == "blocks in device order" {
				continue // no mask; or no order to get wrong
			}
			steps := gatherSteps(g)
			if d := cmp.Diff(want, runRing(t, g, operands, mutate(steps))); d == "" {
				t.Errorf("%+v: %s gives sdpa's definition, want a difference", g, name)
			}
		}
	}
}

// TestGatherPlanMutants runs the plan nvcomm lowers for the causal
// context-parallel sdpa of testdata/examples/attention_context_parallel_causal.yaml,
// whose objective takes the all-gather form at that size, in the orders
// its graph allows, and mutants of it that compute something else, each
// of which simulation catches on its own (validate, which holds the op's
// steps to the all-gather form's, rejects them too): k and v gathered
// along the wrong axis (the gathered blocks left in device order, the
// batches and heads outermost, by an identity Permute), the diagonal's
// mask off by one, and every device masked with device 0's diagonal.
func TestGatherPlanMutants(t *testing.T) {
	const file = "../../testdata/examples/attention_context_parallel_causal.optimal.json"
	load := func() *plan.Plan {
		src, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		p, err := plan.Decode(file, src)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	p := load()
	if p.Summary.ByType["Allgather"] != 2 || len(p.Summary.ByType) != 1 {
		t.Fatalf("the plan's collectives %v, want the all-gather form's 2 Allgathers", p.Summary.ByType)
	}
	plan.ToGraph(p)
	for seed := range uint64(8) {
		if res, err := Run(p, Options{Order: seed}); err != nil || !res.Pass {
			t.Fatalf("the all-gather form's plan, order %d: %v %+v", seed, err, res)
		}
	}
	trils := func(p *plan.Plan, offset func(k, o int) int) {
		for i := range p.Steps {
			if s := &p.Steps[i]; s.Type == plan.Tril {
				shifted := make([]int, len(s.Offsets)) // the steps share their offsets: new ones
				for k, o := range s.Offsets {
					shifted[k] = offset(k, o)
				}
				s.Offsets = shifted
			}
		}
	}
	for _, tc := range []struct {
		name   string
		mutate func(p *plan.Plan)
	}{
		{"gathered along the wrong axis", func(p *plan.Plan) {
			for i := range p.Steps {
				if s := &p.Steps[i]; s.Type == plan.Permute {
					s.Perm = []int{0, 1, 2}
				}
			}
		}},
		{"diagonal's mask off by one", func(p *plan.Plan) { trils(p, func(_, o int) int { return o + 1 }) }},
		{"device 0's diagonal everywhere", func(p *plan.Plan) { trils(p, func(int, int) int { return 0 }) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := load()
			tc.mutate(m)
			if probs := plan.Validate(m); len(probs) == 0 {
				t.Errorf("validate accepts the mutant")
			}
			res, err := Run(m, Options{})
			if err != nil || res.Pass {
				t.Errorf("simulation: %v, %+v; want a mismatch", err, res)
			}
		})
	}
}
