package sim

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nvcomm/nvcomm/internal/plan"
)

// zigzagBlock is device i's block of a row-major [bt, 2c·h, e] array in
// the load-balanced order: chunks i and 2c − 1 − i of h rows of the middle
// dim, in that order, for each of the bt rows.
func zigzagBlock(vals []float64, bt, c, h, e, i int) []float64 {
	var out []float64
	for b := range bt {
		for _, chunk := range []int{i, 2*c - 1 - i} {
			lo := (b*2*c*h + chunk*h) * e
			out = append(out, vals[lo:lo+h*e]...)
		}
	}
	return out
}

// zigzagSteps writes the zigzag ring's steps with plan.RingAttention's
// builder for g (g.sb = g.tb = 2h), named as ringSteps names them.
func zigzagSteps(g ringGeometry) []plan.Step {
	devs := make([]int, g.c)
	for i := range devs {
		devs[i] = i
	}
	return plan.RingAttention{Devices: devs, BT: g.bt, SB: g.sb, TB: g.tb, D: g.d, DV: g.dv, G: g.grp, Causal: true,
		Scale: 1 / math.Sqrt(float64(g.d)), Q: "q", K: "k", V: "v", Out: "o",
		Buffer: func(what string) string { return what }}.ZigzagSteps()
}

// runZigzag runs steps on g's devices, each holding its zigzag blocks of
// q, k and v, and returns each device's block of "o".
func runZigzag(t *testing.T, g ringGeometry, operands [3]operand, steps []plan.Step) map[int][]float64 {
	t.Helper()
	h := g.sb / 2
	m := newMachine(0)
	for i := range g.c {
		m.put(i, "q", zigzagBlock(operands[0].vals, g.bt, g.c, h, g.d, i))
		m.put(i, "k", zigzagBlock(operands[1].vals, g.kvbt(), g.c, h, g.d, i))
		m.put(i, "v", zigzagBlock(operands[2].vals, g.kvbt(), g.c, h, g.dv, i))
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

// TestZigzagRingSteps runs causal ring attention in the load-balanced
// chunk order (device i holding chunks i and 2c − 1 − i of the sequence)
// on 2 to 5 devices, chunks of 1 to 3 rows, one batch-and-head and
// several (and grouped-query heads, two to a key/value head), and checks each device's output block — its two chunks of the
// output — equal, exactly, to the same chunks of sdpa's definition; and
// that in every round each device computes as many visible query-key
// pairs as every other (the plain order's last device computes c blocks
// where its first computes one). A mutant that masks the late queries
// with the early ones' diagonal fails.
func TestZigzagRingSteps(t *testing.T) {
	r := rand.New(rand.NewPCG(26, 14))
	for c := 2; c <= 5; c++ {
		for h := 1; h <= 3; h++ {
			for _, heads := range [][2]int{{1, 0}, {2, 0}, {4, 2}} { // bt, and grp: grouped-query attention
				g := ringGeometry{bt: heads[0], c: c, sb: 2 * h, tb: 2 * h, d: 2, dv: 3, causal: true, grp: heads[1]}
				s := 2 * c * h
				q := randomOperand(r, "q", []int{g.bt, s, g.d})
				k := randomOperand(r, "k", []int{g.kvbt(), s, g.d})
				v := randomOperand(r, "v", []int{g.kvbt(), s, g.dv})
				def, err := sdpaDef([]operand{q, k, v}, true, g.grp > 1)
				if err != nil {
					t.Fatal(err)
				}
				want := map[int][]float64{}
				for i := range c {
					want[i] = zigzagBlock(def, g.bt, c, h, g.dv, i)
				}
				operands := [3]operand{q, k, v}
				steps := zigzagSteps(g)
				if d := cmp.Diff(want, runZigzag(t, g, operands, steps)); d != "" {
					t.Errorf("%+v: the zigzag ring differs from sdpa's definition (-want +got):\n%s", g, d)
				}
				for round, pairs := range visiblePairs(zigzagSteps(g)) {
					for i := range c {
						if pairs[i] != pairs[0] {
							t.Errorf("%+v: round %d: devices compute %v visible pairs, want one number", g, round, pairs)
							break
						}
					}
				}
				plain := visiblePairs(ringSteps(g, false))
				if last := plain[len(plain)-1]; len(last) != 1 || last[c-1] == 0 {
					t.Errorf("%+v: the plain ring's last round computes on %v, want its last device alone", g, last)
				}
				// The late queries' diagonal in round 0 taken as the early
				// ones' (0, not h): they would miss the early keys of their
				// own block.
				mutant := zigzagSteps(g)
				for j := range mutant {
					if mutant[j].Type == plan.Tril && (mutant[j].Input == "B/all/s/0" || mutant[j].Input == "B/all/e/0") {
						mutant[j].Offsets = make([]int, len(mutant[j].Offsets))
					}
				}
				if d := cmp.Diff(want, runZigzag(t, g, operands, mutant)); d == "" {
					t.Errorf("%+v: the late queries masked with diagonal 0 give sdpa's definition", g)
				}
			}
		}
	}
}

// visiblePairs is, per round (counted by the q·kᵀ Matmuls' buffers'
// round suffixes, in order) and device, the query-key pairs the steps
// compute that the causal mask keeps: a Matmul's M·N, or where a Tril
// masks its scores the entries on or below its diagonal.
func visiblePairs(steps []plan.Step) []map[int]int {
	masks := map[string]plan.Step{} // by the scores they mask
	for _, s := range steps {
		if s.Type == plan.Tril {
			masks[s.Input] = s
		}
	}
	var rounds []map[int]int
	round := map[string]int{} // a round's suffix, its index
	for _, s := range steps {
		if s.Type != plan.Matmul || !s.TransposeB {
			continue
		}
		suffix := s.Output[len(s.Output)-2:]
		if _, ok := round[suffix]; !ok {
			round[suffix] = len(rounds)
			rounds = append(rounds, map[int]int{})
		}
		m, n := s.Dims[1], s.Dims[3]
		scores := s.Output[:len(s.Output)-len("qk/0")] + "s" + suffix
		for k, d := range s.Devices {
			pairs := m * n
			if tril, ok := masks[scores]; ok {
				pairs = 0
				for x := range m {
					pairs += max(0, min(n, x+tril.Offsets[k]+1))
				}
			}
			rounds[round[suffix]][d] += pairs * s.Dims[0]
		}
	}
	return rounds
}
