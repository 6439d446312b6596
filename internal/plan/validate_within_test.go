package plan

import (
	"fmt"
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// ringStep is the problem of a step that is not ring attention's step n.
func ringStep(n int) string {
	return fmt.Sprintf(`is not step %d of ring attention, whose steps an op that computes o = sdpa(q, k, v, causal=true, cp=ring) whole must take (docs/layers.md, "Ring attention")`, n)
}

// TestValidateWithin checks the ops a plan computes within another's
// steps (ring attention's expansion, testdata/examples/
// attention_context_parallel_ring.optimal.json): the plan is valid as
// lowered, and each mutant of its marks is rejected with the problem
// that names it.
func TestValidateWithin(t *testing.T) {
	const file = "attention_context_parallel_ring.optimal.json"
	for _, tc := range []struct {
		name   string
		mutate func(p *Plan)
		want   []string
	}{
		{"as lowered", func(*Plan) {}, nil},
		{"a mark removed", func(p *Plan) { p.Ops[0].Within = nil },
			[]string{"op 0: no step implements it"}},
		{"within an op that is not the last", func(p *Plan) { p.Ops[0].Within = new(2) },
			[]string{"op 0: within op 2, which is not the last op of a composite's expansion"}},
		{"within an earlier op", func(p *Plan) { p.Ops[2].Within = new(0) },
			// The set inserted for op 2 is then within op 17 for nothing.
			[]string{"op 1: within op 17, but it is neither an op of o's expansion nor a set inserted for one",
				"op 2: within op 0, which is not a later op of the plan"}},
		{"a step of an op within", func(p *Plan) { p.Steps[0].Op = 2; p.Steps[0].Expr = p.Ops[2].Expr() },
			[]string{`input "q" is neither an input nor the output of op 2`,
				`input "k" is neither an input nor the output of op 2`,
				`input "o/ring/qk/0" is an intermediate buffer of op 2 (step 0 writes it); an op's intermediate buffers are its own`,
				ringStep(0), "op 2: is computed within op 17, but a step implements it"}},
		// The row max is the softmax's shift: any other shift gives the
		// same result exactly (the simulator cannot tell), not in floats.
		{"another shift", func(p *Plan) { p.Steps[3].ReduceOp = new("min") }, []string{ringStep(3)}},
		{"the diagonal's mask off by one", func(p *Plan) { p.Steps[2].Offsets = []int{1, 1, 1, 1} },
			[]string{ringStep(2)}},
		// Device 1 skips round 1's block, all of whose keys its queries
		// see (the causal ring skips only the blocks above the diagonal).
		{"a seen block skipped", func(p *Plan) { p.Steps[15].Devices = []int{2, 3} },
			[]string{`device 1 reads "o/ring/qk/1", which it does not hold`, ringStep(15)}},
		// Device 0 computes round 1's block, all of whose keys come after
		// its queries.
		{"a masked block computed", func(p *Plan) { p.Steps[15].Devices = []int{0, 1, 2, 3} },
			[]string{ringStep(15)}},
		{"sends first", func(p *Plan) {
			// Each round's SendRecvs before its compute: the other order of
			// ring attention's steps, as valid.
			var sends, rest []Step
			for _, s := range p.Steps {
				if s.Type == SendRecv {
					sends = append(sends, s)
				}
			}
			for _, s := range p.Steps {
				if s.Type == SendRecv {
					continue
				}
				if s.Type == Matmul && s.TransposeB && len(sends) > 0 {
					rest, sends = append(rest, sends[:2]...), sends[2:]
				}
				rest = append(rest, s)
			}
			for i := range rest {
				rest[i].ID = i
			}
			p.Steps = rest
		}, nil},
		{"no marks", func(p *Plan) {
			for i := range p.Ops {
				p.Ops[i].Within = nil
			}
		}, []string{`input "q" is neither an input nor the output of op 17`,
			`input "k" is neither an input nor the output of op 17`,
			`reduce_op is "max", but op 17 is a matmul`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src, err := os.ReadFile("../../testdata/examples/" + file)
			if err != nil {
				t.Fatal(err)
			}
			p, err := Decode(file, src)
			if err != nil {
				t.Fatal(err)
			}
			tc.mutate(p)
			var got []string
			for _, d := range Validate(p) {
				got = append(got, d.Message)
			}
			if len(got) > 10 {
				got = got[:3] // the first: the last op's steps read q and k
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("problems (-want +got):\n%s", d)
			}
		})
	}
}

// gatherStep is the problem of a step that is not the all-gather form's
// step n.
func gatherStep(n int) string {
	return fmt.Sprintf(`is not step %d of the all-gather form, whose steps an op that computes o = sdpa(q, k, v, causal=true) whole must take (docs/layers.md, "Ring attention")`, n)
}

// TestValidateGatherForm checks the all-gather form of a causal sdpa
// (testdata/examples/attention_context_parallel_causal.optimal.json, the
// objective's choice at its size): the plan is valid as lowered, and
// mutants of its steps that simulate cannot tell from it or that compute
// something else are rejected: another shift of the softmax, the gathered
// blocks left in device order (gathered along the wrong axis), a device's
// diagonal off by one, and a step dropped.
func TestValidateGatherForm(t *testing.T) {
	const file = "attention_context_parallel_causal.optimal.json"
	for _, tc := range []struct {
		name   string
		mutate func(p *Plan)
		want   []string
	}{
		{"as lowered", func(*Plan) {}, nil},
		{"another shift", func(p *Plan) { p.Steps[7].ReduceOp = new("min") }, []string{gatherStep(7)}},
		{"blocks in device order", func(p *Plan) { p.Steps[2].Perm = []int{0, 1, 2} }, []string{gatherStep(2)}},
		{"a diagonal off by one", func(p *Plan) { p.Steps[6].Offsets = []int{0, 4, 9, 12} }, []string{gatherStep(6)}},
		{"the output's division dropped", func(p *Plan) { p.Steps = p.Steps[:len(p.Steps)-1] },
			[]string{"op 17: computes o = sdpa(q, k, v, causal=true) whole, but its 13 steps are not the all-gather form's 14",
				`op 17: no step of the op writes its output "o"`, "summary: local_steps is 12, but the plan has 11 local steps"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src, err := os.ReadFile("../../testdata/examples/" + file)
			if err != nil {
				t.Fatal(err)
			}
			p, err := Decode(file, src)
			if err != nil {
				t.Fatal(err)
			}
			tc.mutate(p)
			var got []string
			for _, d := range Validate(p) {
				got = append(got, d.Message)
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("problems (-want +got):\n%s", d)
			}
		})
	}
}
