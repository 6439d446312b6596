package sim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nvcomm/nvcomm/internal/ops"
	"github.com/nvcomm/nvcomm/internal/plan"
)

// This file runs ring attention (Liu et al., 2023) as plan steps on
// virtual devices: the steps a context-parallel sdpa's ring form is made
// of (docs/layers.md, "Attention"), which the simulator proves exactly
// because its exp is a homomorphism (sort.go).

// ringGeometry is a context-parallel attention: bt batches and heads, c
// devices, each holding sb queries and tb keys of the sequence, heads of d
// (and dv for v).
type ringGeometry struct {
	bt, c, sb, tb, d, dv int
	causal               bool
}

// ringSteps writes ring attention's steps: c rounds; in round r device i
// holds k's and v's block j = i − r (mod c), computes the scaled scores of
// its q block against it (masked with that block's diagonal when causal),
// their row max, the running max m, exp(s − m), their row sums and the P·V
// product, and merges them into the running l and o by online softmax
// (rescaling both by exp(m_old − m)); one SendRecv ring per tensor passes
// the blocks to the next device. sendFirst puts each round's SendRecvs
// before its compute rather than after, the other order the step graph
// allows. The output "o" is o / l.
func ringSteps(g ringGeometry, sendFirst bool) []plan.Step {
	devs := make([]int, g.c)
	ring := make([][]int, g.c)
	for i := range devs {
		devs[i], ring[i] = i, []int{i, (i + 1) % g.c}
	}
	rows, scores := g.bt*g.sb, g.bt*g.sb*g.tb
	sdims, rdims, cdims := []int{g.bt, g.sb, g.tb}, []int{g.bt, g.sb}, []int{g.bt, g.sb, 1}
	odims := []int{g.bt, g.sb, g.dv}
	local := func(typ, out string, n [2]int, dims []int, in ...string) plan.Step {
		s := plan.Step{Kind: plan.KindLocal, Type: typ, Devices: devs, Output: out, Count: plan.Count{Input: n[0], Output: n[1]}, Dims: dims}
		if len(in) == 1 {
			s.Input = in[0]
		} else {
			s.Inputs = in
		}
		return s
	}
	pointwise := func(f, out string, dims []int, inDims [][]int, in ...string) plan.Step {
		s := local(plan.Pointwise, out, [2]int{product(inDims[0]), product(dims)}, dims, in...)
		s.Func, s.InputDims = sp(f), inDims
		return s
	}
	reduce := func(op, out, in string) plan.Step {
		s := local(plan.LocalReduce, out, [2]int{scores, rows}, sdims, in)
		s.ReduceDims, s.ReduceOp = []int{2}, sp(op)
		return s
	}
	tril := func(out, in string, r int) plan.Step {
		s := local(plan.Tril, out, [2]int{scores, scores}, sdims, in)
		for i := range devs {
			j := ((i-r)%g.c + g.c) % g.c
			s.Offsets = append(s.Offsets, i*g.sb-j*g.tb)
		}
		return s
	}
	var steps []plan.Step
	for r := range g.c {
		name := func(x string) string { return fmt.Sprintf("%s/%d", x, r) }
		k, v := name("k"), name("v")
		if r == 0 {
			k, v = "k", "v"
		}
		var send []plan.Step
		if r < g.c-1 {
			for _, x := range []struct{ in, out string }{{k, fmt.Sprintf("k/%d", r+1)}, {v, fmt.Sprintf("v/%d", r+1)}} {
				n := g.bt * g.tb * g.d
				if x.in == v {
					n = g.bt * g.tb * g.dv
				}
				send = append(send, plan.Step{Kind: plan.KindCollective, Type: plan.SendRecv, Teams: ring,
					Input: x.in, Output: x.out, Count: plan.Count{Input: n, Output: n}})
			}
		}
		if sendFirst {
			steps = append(steps, send...)
		}
		qk := local(plan.Matmul, name("qk"), [2]int{rows * g.d, scores}, []int{g.bt, g.sb, g.d, g.tb}, "q", k)
		qk.TransposeB = true
		scaled := pointwise("mul", name("s"), sdims, [][]int{sdims}, name("qk"))
		scaled.Scalar = &ops.Scalar{Slot: 1, Value: 1 / math.Sqrt(float64(g.d))}
		steps = append(steps, qk, scaled)
		s := name("s")
		if g.causal {
			steps = append(steps, tril(name("sm"), s, r))
			s = name("sm")
		}
		steps = append(steps, reduce("max", name("mb"), s))
		m := name("mb")
		if r > 0 {
			steps = append(steps, pointwise("maximum", name("m"), rdims, [][]int{rdims, rdims}, fmt.Sprintf("m/%d", r-1), name("mb")))
		} else {
			steps = append(steps, pointwise("copy", name("m"), rdims, [][]int{rdims}, m))
		}
		steps = append(steps,
			pointwise("sub", name("x"), sdims, [][]int{sdims, cdims}, s, name("m")),
			pointwise("exp", name("e"), sdims, [][]int{sdims}, name("x")))
		e := name("e")
		if g.causal {
			steps = append(steps, tril(name("ek"), e, r))
			e = name("ek")
		}
		steps = append(steps, reduce("sum", name("lb"), e),
			local(plan.Matmul, name("ob"), [2]int{scores, rows * g.dv}, []int{g.bt, g.sb, g.tb, g.dv}, e, v))
		if r == 0 {
			steps = append(steps, pointwise("copy", name("l"), rdims, [][]int{rdims}, name("lb")),
				pointwise("copy", name("o"), odims, [][]int{odims}, name("ob")))
		} else {
			prev := func(x string) string { return fmt.Sprintf("%s/%d", x, r-1) }
			steps = append(steps,
				pointwise("sub", name("dm"), rdims, [][]int{rdims, rdims}, prev("m"), name("m")),
				pointwise("exp", name("a"), rdims, [][]int{rdims}, name("dm")),
				pointwise("mul", name("la"), rdims, [][]int{rdims, rdims}, prev("l"), name("a")),
				pointwise("add", name("l"), rdims, [][]int{rdims, rdims}, name("la"), name("lb")),
				pointwise("mul", name("oa"), odims, [][]int{odims, cdims}, prev("o"), name("a")),
				pointwise("add", name("o"), odims, [][]int{odims, odims}, name("oa"), name("ob")))
		}
		if !sendFirst {
			steps = append(steps, send...)
		}
	}
	last := func(x string) string { return fmt.Sprintf("%s/%d", x, g.c-1) }
	return append(steps, pointwise("div", "o", odims, [][]int{odims, cdims}, last("o"), last("l")))
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

// TestRingAttentionSteps runs ring attention's steps on 4 devices, q, k
// and v split on the sequence, causal and not, with each round's
// SendRecvs after its compute and before it, and checks every device's
// output block equal, exactly, to the simulator's definition of sdpa:
// the online softmax's rescaling is exact. The merge without its
// rescaling fails, and so does, for causal attention, a round's blocks in
// the wrong order (the ring turned the other way, the masks' diagonals
// still assuming the first).
func TestRingAttentionSteps(t *testing.T) {
	r := rand.New(rand.NewPCG(26, 11))
	for _, g := range []ringGeometry{
		{bt: 2, c: 4, sb: 3, tb: 3, d: 4, dv: 2},
		{bt: 2, c: 4, sb: 3, tb: 3, d: 4, dv: 2, causal: true},
		{bt: 1, c: 4, sb: 2, tb: 2, d: 8, dv: 3, causal: true},
	} {
		s, t2 := g.c*g.sb, g.c*g.tb
		q := randomOperand(r, "q", []int{g.bt, s, g.d})
		k := randomOperand(r, "k", []int{g.bt, t2, g.d})
		v := randomOperand(r, "v", []int{g.bt, t2, g.dv})
		want, err := sdpaDef([]operand{q, k, v}, g.causal)
		if err != nil {
			t.Fatal(err)
		}
		run := func(steps []plan.Step) map[int][]float64 {
			m := newMachine(0)
			for i := range g.c {
				m.put(i, "q", seqBlock(q.vals, g.bt, g.c, g.sb, g.d, i))
				m.put(i, "k", seqBlock(k.vals, g.bt, g.c, g.tb, g.d, i))
				m.put(i, "v", seqBlock(v.vals, g.bt, g.c, g.tb, g.dv, i))
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
		wantBlocks := map[int][]float64{}
		for i := range g.c {
			wantBlocks[i] = seqBlock(want, g.bt, g.c, g.sb, g.dv, i)
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
