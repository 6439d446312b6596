package lower

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nvcomm/nvcomm/internal/plan"
	"github.com/nvcomm/nvcomm/internal/syntax"
)

// contextParallel is a causal sdpa over 4 devices, q, k, v and the output
// [batch, heads, sequence, head_dim] split on the sequence, of shape
// SHAPE, with the sdpa's attributes ATTRS.
const contextParallel = `format: 2
meshes:
  cp: [0, 1, 2, 3]
tensors:
  q: {mesh: cp, shape: SHAPE, placements: [Shard(2)]}
  k: {mesh: cp, shape: SHAPE, placements: [Shard(2)]}
  v: {mesh: cp, shape: SHAPE, placements: [Shard(2)]}
  o: {placements: [Shard(2)]}
ops:
  - {op: sdpa, in: [q, k, v], out: o, causal: trueATTRS}
`

// ringSummary says how a plan computes its sdpa: its collectives by
// type, and how many ops it computes within another.
type ringSummary struct {
	ByType map[string]int
	Within int
}

// summarize is p's ringSummary.
func summarize(p *plan.Plan) ringSummary {
	s := ringSummary{ByType: p.Summary.ByType}
	for _, op := range p.Ops {
		if op.Within != nil {
			s.Within++
		}
	}
	return s
}

// TestRingChosen lowers a context-parallel causal sdpa at the example's
// size and at a realistic one ([1, 8, 4096, 128], float32), with and
// without sdpa's cp, under both policies, and checks which form each plan
// takes: the ring (6 SendRecvs, the expansion's 17 other ops computed
// within its last, as are the set inserted for one) where the objective
// prices it cheapest — at the realistic size, where each round's
// attention hides the next blocks' transfer — or where cp says ring; the
// all-gather form (2 Allgathers, the 17 ops within) where it is cheapest —
// at the small size, where the SendRecvs' latency outweighs the overlap
// and the expansion's collectives are more — or cp says allgather; the
// op-by-op form where cp says expansion, and always under nvFuser's
// policy. The fusion's bound is the same in every plan of one size.
func TestRingChosen(t *testing.T) {
	ring := ringSummary{ByType: map[string]int{"SendRecv": 6}, Within: 17}
	gather := ringSummary{ByType: map[string]int{"Allgather": 2}, Within: 17}
	ops := ringSummary{ByType: map[string]int{"Allgather": 1, "Allreduce": 4}}
	nvfuser := ringSummary{ByType: map[string]int{"AllToAll": 1, "Allgather": 2, "Allreduce": 3}}
	for _, tc := range []struct {
		shape, attrs string
		policy       Policy
		want         ringSummary
	}{
		{"[2, 4, 16, 8]", "", PolicyOptimal, gather},
		{"[2, 4, 16, 8]", ", cp: expansion", PolicyOptimal, ops},
		{"[2, 4, 16, 8]", ", cp: ring", PolicyOptimal, ring},
		{"[2, 4, 16, 8]", ", cp: ring", PolicyNvFuser, nvfuser},
		{"[2, 4, 16, 8]", ", cp: allgather", PolicyNvFuser, nvfuser},
		{"[1, 8, 4096, 128]", "", PolicyOptimal, ring},
		{"[1, 8, 4096, 128]", ", cp: allgather", PolicyOptimal, gather},
		{"[1, 8, 4096, 128]", ", cp: expansion", PolicyOptimal, ringSummary{ByType: map[string]int{"Allgather": 1, "Allreduce": 3, "ReduceScatter": 1}}},
		{"[1, 8, 4096, 128]", "", PolicyNvFuser, nvfuser},
	} {
		t.Run(fmt.Sprintf("%s%s/%s", tc.shape, tc.attrs, tc.policy), func(t *testing.T) {
			p := lowerRingSource(t, tc.shape, tc.attrs, tc.policy)
			if d := cmp.Diff(tc.want, summarize(p)); d != "" {
				t.Errorf("form (-want +got):\n%s", d)
			}
			base := lowerRingSource(t, tc.shape, ", cp: expansion", PolicyNvFuser)
			if got, want := p.Summary.BytesLowerBound, base.Summary.BytesLowerBound; got != want {
				t.Errorf("bound %d, nvFuser's plan of the op-by-op form %d: the fusion's bound depends on the form", got, want)
			}
		})
	}
}

// TestRingNeedsSequenceBlocks checks that cp: ring or cp: allgather on
// an sdpa that neither form can compute — k and v whole — is an error at
// the op, with a hint, of equal heads and of grouped-query heads alike;
// nvFuser's policy ignores cp.
func TestRingNeedsSequenceBlocks(t *testing.T) {
	for _, cp := range []string{"ring", "allgather", "ring (grouped-query)"} {
		src := strings.NewReplacer("SHAPE", "[2, 4, 16, 8]", "ATTRS", ", cp: "+cp).Replace(contextParallel)
		src = strings.Replace(src, "k: {mesh: cp, shape: [2, 4, 16, 8], placements: [Shard(2)]}", "k: {mesh: cp, shape: [2, 4, 16, 8], placements: [Replicate()]}", 1)
		if cp == "ring (grouped-query)" {
			cp = "ring"
			src = strings.NewReplacer("QSHAPE", "[2, 4, 16, 8]", "KVSHAPE", "[2, 2, 16, 8]", "ATTRS", ", cp: ring").Replace(groupedQuery)
			src = strings.Replace(src, "k: {mesh: cp, shape: [2, 2, 16, 8], placements: [Shard(2)]}", "k: {mesh: cp, shape: [2, 2, 16, 8], placements: [Replicate()]}", 1)
		}
		f, err := syntax.Parse("f.yaml", []byte(src))
		if err != nil {
			t.Fatal(err)
		}
		_, err = Lower(f, Options{})
		if err == nil || !strings.Contains(err.Error(), "f.yaml:10:") || !strings.Contains(err.Error(), "cp: "+cp+" needs q, k, v and its output") {
			t.Errorf("cp: %s: lower: %v, want the form's error at the sdpa (f.yaml:10)", cp, err)
		}
		if _, err := Lower(f, Options{Policy: PolicyNvFuser}); err != nil {
			t.Errorf("cp: %s: nvfuser: %v", cp, err)
		}
	}
}

// TestFormsByBytes checks the three forms' prices under the bytes
// objective: what the busiest device receives. The ring and the all-gather
// form receive the same, every block of k and v but the device's own (6
// KiB at the example's size, 24 MiB at the realistic one; each device of
// a ring shift, in two of its teams, receives once); the op-by-op form
// more (q gathered, the statistics and the output summed: 8.25 KiB, and
// 24.56 MiB). The tie goes to the ring, and the plan certifies under the
// objective.
func TestFormsByBytes(t *testing.T) {
	for _, tc := range []struct {
		shape                   string
		ring, gather, expansion float64
	}{
		{"[2, 4, 16, 8]", 6 << 10, 6 << 10, 8448},
		{"[1, 8, 4096, 128]", 24 << 20, 24 << 20, 24<<20 + 576<<10},
	} {
		src := strings.NewReplacer("SHAPE", tc.shape, "ATTRS", "").Replace(contextParallel)
		f, err := syntax.Parse("f.yaml", []byte(src))
		if err != nil {
			t.Fatal(err)
		}
		p, err := Lower(f, Options{Objective: ObjectiveBytes})
		if err != nil {
			t.Fatal(err)
		}
		if probs, unproven := Certify(p); len(probs) > 0 || len(unproven) > 0 {
			t.Fatalf("%s: certify: %v, unproven ops %v", tc.shape, probs, unproven)
		}
		forms, err := Forms(p, nil)
		if err != nil {
			t.Fatal(err)
		}
		want := []Form{{Op: 17, Ring: tc.ring, Gather: tc.gather, Expansion: tc.expansion, Bytes: true, Chosen: cheapest(Form{Ring: tc.ring, Gather: tc.gather, Expansion: tc.expansion})}}
		if d := cmp.Diff(want, forms); d != "" {
			t.Errorf("%s: forms (-want +got):\n%s", tc.shape, d)
		}
	}
}

// lowerRingSource lowers contextParallel of shape and attrs under policy.
func lowerRingSource(t *testing.T, shape, attrs string, policy Policy) *plan.Plan {
	t.Helper()
	src := strings.NewReplacer("SHAPE", shape, "ATTRS", attrs).Replace(contextParallel)
	f, err := syntax.Parse("f.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	p, err := Lower(f, Options{Policy: policy})
	if err != nil {
		t.Fatal(err)
	}
	if probs := plan.Validate(p); len(probs) > 0 {
		t.Fatalf("validate: %v", probs)
	}
	if probs, unproven := Certify(p); len(probs) > 0 || len(unproven) > 0 {
		t.Fatalf("certify: %v, unproven ops %v", probs, unproven)
	}
	return p
}

// TestForms checks the prices Forms reports for explain: the form each
// plan took, the cheapest of the three where the objective chose (a tie
// to the op-by-op form, then the ring), and none under nvFuser's policy.
func TestForms(t *testing.T) {
	for _, tc := range []struct {
		shape, attrs string
		policy       Policy
		chosen       string
	}{
		{"[2, 4, 16, 8]", "", PolicyOptimal, "allgather"},
		{"[2, 4, 16, 8]", ", cp: expansion", PolicyOptimal, "expansion"},
		{"[2, 4, 16, 8]", ", cp: ring", PolicyOptimal, "ring"},
		{"[2, 4, 16, 8]", ", cp: allgather", PolicyOptimal, "allgather"},
		{"[1, 8, 4096, 128]", "", PolicyOptimal, "ring"},
		{"[1, 8, 4096, 128]", "", PolicyNvFuser, ""},
	} {
		t.Run(fmt.Sprintf("%s%s/%s", tc.shape, tc.attrs, tc.policy), func(t *testing.T) {
			p := lowerRingSource(t, tc.shape, tc.attrs, tc.policy)
			forms, err := Forms(p, nil)
			if err != nil {
				t.Fatal(err)
			}
			if tc.chosen == "" {
				if len(forms) > 0 {
					t.Errorf("forms %+v, want none", forms)
				}
				return
			}
			if len(forms) != 1 || forms[0].Op != 17 || forms[0].Chosen != tc.chosen || forms[0].Bytes {
				t.Fatalf("forms %+v, want op 17's, chosen %v", forms, tc.chosen)
			}
			if f := forms[0]; tc.attrs == "" && cheapest(f) != f.Chosen {
				t.Errorf("ring %g s, all-gather %g s, expansion %g s: the objective chose %s", f.Ring, f.Gather, f.Expansion, f.Chosen)
			}
		})
	}
}

// cheapest is the form of least price in f, a tie to the op-by-op form,
// then the ring.
func cheapest(f Form) string {
	best, price := "expansion", f.Expansion
	for _, c := range []struct {
		name  string
		price float64
	}{{"ring", f.Ring}, {"allgather", f.Gather}} {
		if c.price < price {
			best, price = c.name, c.price
		}
	}
	return best
}

// groupedQuery is contextParallel with grouped-query heads: q of shape
// QSHAPE, k and v of KVSHAPE (fewer heads), enable_gqa.
const groupedQuery = `format: 2
meshes:
  cp: [0, 1, 2, 3]
tensors:
  q: {mesh: cp, shape: QSHAPE, placements: [Shard(2)]}
  k: {mesh: cp, shape: KVSHAPE, placements: [Shard(2)]}
  v: {mesh: cp, shape: KVSHAPE, placements: [Shard(2)]}
  o: {placements: [Shard(2)]}
ops:
  - {op: sdpa, in: [q, k, v], out: o, causal: true, enable_gqa: trueATTRS}
`

// TestGroupedQueryForms lowers a causal grouped-query sdpa split on the
// sequence over 4 devices (the example's [2, 4, 16, 8] with 2 key/value
// heads; Llama-3 8B's 32 heads of 128 with 8 key/value heads at 4096
// tokens, float32) in each form, and checks what each collective
// receives: the ring's SendRecvs and the all-gather form's Allgathers
// move the key/value heads unrepeated, b·(s/4)·Hkv·d elements a block
// (512 B at the small size, 4 MiB at the large one: a quarter of the
// repeated heads' there), the expansion's 21 other ops (the heads'
// repeats among them) computed within the last. Left to the objective,
// the all-gather form is cheapest at the small size and the ring at the
// large one, as for equal heads.
func TestGroupedQueryForms(t *testing.T) {
	type collective struct {
		Type     string
		Received int64
	}
	type form struct {
		Collectives []collective
		Within      int
	}
	repeat := func(typ string, received int64, n int) form {
		f := form{Within: 21}
		for range n {
			f.Collectives = append(f.Collectives, collective{typ, received})
		}
		return f
	}
	for _, tc := range []struct {
		q, kv, attrs string
		want         form
	}{
		{"[2, 4, 16, 8]", "[2, 2, 16, 8]", ", cp: ring", repeat("SendRecv", 512, 6)},
		{"[2, 4, 16, 8]", "[2, 2, 16, 8]", ", cp: allgather", repeat("Allgather", 3*512, 2)},
		{"[2, 4, 16, 8]", "[2, 2, 16, 8]", "", repeat("Allgather", 3*512, 2)},
		{"[1, 32, 4096, 128]", "[1, 8, 4096, 128]", ", cp: allgather", repeat("Allgather", 3*4<<20, 2)},
		{"[1, 32, 4096, 128]", "[1, 8, 4096, 128]", "", repeat("SendRecv", 4<<20, 6)},
	} {
		t.Run(tc.q+tc.attrs, func(t *testing.T) {
			src := strings.NewReplacer("QSHAPE", tc.q, "KVSHAPE", tc.kv, "ATTRS", tc.attrs).Replace(groupedQuery)
			f, err := syntax.Parse("f.yaml", []byte(src))
			if err != nil {
				t.Fatal(err)
			}
			p, err := Lower(f, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if probs := plan.Validate(p); len(probs) > 0 {
				t.Fatalf("validate: %v", probs)
			}
			if probs, unproven := Certify(p); len(probs) > 0 || len(unproven) > 0 {
				t.Fatalf("certify: %v, unproven ops %v", probs, unproven)
			}
			var got form
			for _, s := range p.Steps {
				if s.Kind == plan.KindCollective {
					got.Collectives = append(got.Collectives, collective{s.Type, s.Bytes.ReceivedPerDevice})
				}
			}
			for _, op := range p.Ops {
				if op.Within != nil {
					got.Within++
				}
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("form (-want +got):\n%s", d)
			}
		})
	}
}

// TestWholeFormsTakeNoBackward checks that cp: ring or cp: allgather on
// an sdpa whose gradient a backward takes, of equal heads and of
// grouped-query heads, is an error at the op naming the gradient's op
// that reads the forward's probabilities, which neither form holds; left
// to the objective, the sdpa is planned op by op and certifies.
func TestWholeFormsTakeNoBackward(t *testing.T) {
	const backward = "  do: {mesh: cp, shape: [2, 4, 16, 8], placements: [Shard(2)]}\n"
	const seeds = "backward:\n  seeds: {o: do}\n  wrt: [q, k, v]\n"
	for _, tc := range []struct{ name, src string }{
		{"equal heads", strings.NewReplacer("SHAPE", "[2, 4, 16, 8]").Replace(contextParallel)},
		{"grouped-query", strings.NewReplacer("QSHAPE", "[2, 4, 16, 8]", "KVSHAPE", "[2, 2, 16, 8]").Replace(groupedQuery)},
	} {
		src := strings.Replace(tc.src, "  o: {placements: [Shard(2)]}\n", "  o: {placements: [Shard(2)]}\n"+backward, 1) + seeds
		for _, cp := range []string{"ring", "allgather"} {
			f, err := syntax.Parse("f.yaml", []byte(strings.Replace(src, "ATTRS", ", cp: "+cp, 1)))
			if err != nil {
				t.Fatal(err)
			}
			_, err = Lower(f, Options{})
			want := "f.yaml:11:5: error: op \"o = matmul(o/probs, "
			if err == nil || !strings.HasPrefix(err.Error(), want) || !strings.Contains(err.Error(), "sdpa's cp: "+cp+" computes the sdpa whole and holds none of its intermediates, but op o.grad/") ||
				!strings.Contains(err.Error(), " of its gradient reads o/probs; write cp: expansion") {
				t.Errorf("%s, cp: %s: lower: %v, want the form's error at the sdpa (%s...) naming its gradient's read of o/probs", tc.name, cp, err, want)
			}
		}
		f, err := syntax.Parse("f.yaml", []byte(strings.Replace(src, "ATTRS", "", 1)))
		if err != nil {
			t.Fatal(err)
		}
		p, err := Lower(f, Options{})
		if err != nil {
			t.Fatalf("%s, cp left out: %v", tc.name, err)
		}
		if probs, unproven := Certify(p); len(probs) > 0 || len(unproven) > 0 {
			t.Errorf("%s, cp left out: certify: %v, unproven ops %v", tc.name, probs, unproven)
		}
	}
}
