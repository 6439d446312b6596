package lower_test

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nvcomm/nvcomm/internal/lower"
	"github.com/nvcomm/nvcomm/internal/plan"
	"github.com/nvcomm/nvcomm/internal/syntax"
)

// TestCausalAttentionShardings lowers causal sdpa of q, k, v [2, 4, 8, 4]
// on 4 devices split three ways, under both policies, and checks its
// collectives and the diagonals of its Tril steps: heads split, every
// block is a whole [s, t] matrix, so every device masks with diagonal 0
// and nothing moves; q (and the output) split on the sequence, k and v
// whole, device k's rows start at 2k, so its diagonal is 2k, and nothing
// moves; q, k, v and the output split on the sequence (context
// parallelism) and planned op by op (cp: expansion), the scores split on
// the keys t as kᵀ is, device k's columns start at 2k, so its diagonal is
// −2k, and the softmax's row statistics — the minimum, the max, the sum —
// are one Allreduce each; split so and left to the objective, which takes
// the all-gather form at this size, k and v gathered (2 Allgathers) and
// device k's rows starting at 2k again, its diagonal 2k.
func TestCausalAttentionShardings(t *testing.T) {
	for _, tc := range []struct {
		name      string
		q, kv, o  string
		cp        string
		diagonals []int
		optimal   map[string]int
		nvfuser   map[string]int
		// nvDiagonals are nvFuser's plan's diagonals where they differ
		// (it plans the expansion, whatever the objective's form).
		nvDiagonals []int
	}{
		{"heads", "Shard(1)", "Shard(1)", "Shard(1)", "", []int{0, 0, 0, 0}, map[string]int{}, map[string]int{}, nil},
		{"query sequence", "Shard(2)", "Replicate()", "Shard(2)", "", []int{0, 2, 4, 6}, map[string]int{}, map[string]int{}, nil},
		{"context parallel", "Shard(2)", "Shard(2)", "Shard(2)", ", cp: expansion", []int{0, -2, -4, -6},
			map[string]int{"Allgather": 1, "Allreduce": 4}, map[string]int{"AllToAll": 1, "Allgather": 2, "Allreduce": 3}, nil},
		{"context parallel, all-gather form", "Shard(2)", "Shard(2)", "Shard(2)", "", []int{0, 2, 4, 6},
			map[string]int{"Allgather": 2}, map[string]int{"AllToAll": 1, "Allgather": 2, "Allreduce": 3}, []int{0, -2, -4, -6}},
	} {
		src := fmt.Sprintf(`format: 2
meshes:
  m: [0, 1, 2, 3]
tensors:
  q: {mesh: m, shape: [2, 4, 8, 4], placements: [%s]}
  k: {mesh: m, shape: [2, 4, 8, 4], placements: [%s]}
  v: {mesh: m, shape: [2, 4, 8, 4], placements: [%s]}
  o: {placements: [%s]}
ops:
  - {op: sdpa, in: [q, k, v], out: o, causal: true%s}
`, tc.q, tc.kv, tc.kv, tc.o, tc.cp)
		for _, policy := range []lower.Policy{lower.PolicyOptimal, lower.PolicyNvFuser} {
			t.Run(tc.name+"/"+string(policy), func(t *testing.T) {
				f, err := syntax.Parse("in.yaml", []byte(src))
				if err != nil {
					t.Fatal(err)
				}
				p, err := lower.Lower(f, lower.Options{Policy: policy})
				if err != nil {
					t.Fatal(err)
				}
				want := tc.optimal
				if policy == lower.PolicyNvFuser {
					want = tc.nvfuser
				}
				if d := cmp.Diff(want, p.Summary.ByType); d != "" {
					t.Errorf("collectives (-want +got):\n%s", d)
				}
				trils := trilDiagonals(p)
				diagonals := tc.diagonals
				if policy == lower.PolicyNvFuser && tc.nvDiagonals != nil {
					diagonals = tc.nvDiagonals
				}
				if d := cmp.Diff([][]int{diagonals, diagonals}, trils); d != "" {
					t.Errorf("the Tril steps' diagonals (-want +got):\n%s", d)
				}
			})
		}
	}
}

// trilDiagonals is the offsets of each Tril step of p, in order.
func trilDiagonals(p *plan.Plan) [][]int {
	var out [][]int
	for _, s := range p.Steps {
		if s.Type == plan.Tril {
			out = append(out, s.Offsets)
		}
	}
	return out
}

// TestTrilStrided lowers tril of x [8, 8] into y whose rows are split
// strided (device k holds rows k and k+4): a device's rows are no block,
// so no diagonal of its own masks them. Under both policies it is the
// error of every computing op whose output is not split in blocks,
// positioned at the op, never a plan that masks the wrong entries.
func TestTrilStrided(t *testing.T) {
	const src = `format: 1
meshes:
  m: [0, 1, 2, 3]
tensors:
  x:
    mesh: m
    shape: [8, 8]
    schedule:
      - split: {axis: 0, factor: 4}
      - parallelize: {axis: 1, type: DIDx}
  y:
    mesh: m
    shape: [8, 8]
    schedule:
      - split: {axis: 0, factor: 4}
      - parallelize: {axis: 1, type: DIDx}
ops:
  - {op: tril, in: x, out: y, diagonal: 0}
`
	const want = `in.yaml:18:5: error: op "y = tril(x, diagonal=0)" cannot be lowered: "y" is split strided along DIDx, and layer ops take even block splits only; shard the outputs of layer ops with placements (Shard(d)) or outer_split by the mesh size, on extents the mesh divides`
	f, err := syntax.Parse("in.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	for _, policy := range []lower.Policy{lower.PolicyOptimal, lower.PolicyNvFuser} {
		if d := cmp.Diff(want, stepTypes(lower.Lower(f, lower.Options{Policy: policy}))); d != "" {
			t.Errorf("%s (-want +got):\n%s", policy, d)
		}
	}
}

// TestTrilOfBroadcastRows masks a tensor whose rows a broadcast made
// equal: masked, they differ, so an op that needs the rows whole must
// gather them, not repeat a device's one row (the soak's case 35155: a
// causal sdpa of a broadcast query, split on its sequence, read whole).
// Each plan is proven on virtual devices, under both policies.
func TestTrilOfBroadcastRows(t *testing.T) {
	const query = `  v: {mesh: m, shape: [2], placements: [Replicate()]}
  w: {shape: [4, 2], placements: [Shard(0)]}
  z: {placements: [Replicate()]}
`
	for name, tc := range map[string]struct{ tensors, ops string }{
		"tril": {query + `  y: {placements: [Shard(0)]}`, `  - {op: broadcast, in: v, out: w, axes: [0]}
  - {op: tril, in: w, out: y, diagonal: 0}
  - {op: neg, in: y, out: z}`},
		"causal sdpa": {query + `  k: {mesh: m, shape: [12, 2], placements: [Replicate()]}
  y: {mesh: m, shape: [12, 4], placements: [Shard(0)]}`, `  - {op: broadcast, in: v, out: w, axes: [0]}
  - {op: sdpa, in: [w, k, y], out: z, causal: true}`},
	} {
		src := fusion4(tc.tensors, tc.ops)
		for _, policy := range []lower.Policy{lower.PolicyOptimal, lower.PolicyNvFuser} {
			t.Run(name+"/"+string(policy), func(t *testing.T) {
				f, err := syntax.Parse("in.yaml", []byte(src))
				if err != nil {
					t.Fatal(err)
				}
				p, err := lower.Lower(f, lower.Options{Policy: policy})
				if err != nil {
					t.Fatal(err)
				}
				proveOnDevices(t, p)
			})
		}
	}
}
