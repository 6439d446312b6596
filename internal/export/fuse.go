package export

import (
	"slices"

	"github.com/nvcomm/nvcomm/internal/plan"
)

// Block is one block of statements of an exported plan's function: one
// step of the plan, or consecutive local steps fused into one pass over
// memory (docs/export.md, "Fusion"). The program's --bench times each.
type Block struct {
	// Steps are the indices of the plan steps the block runs, in order.
	Steps []int
	// Pass is how a block of local data movement moves memory, which is
	// what prices it: "copy" (contiguous reads and writes), "strided" (a
	// copy between strided views) or "view" (nothing moves: the output is a
	// view of the input). Empty for a collective or a compute step (Matmul,
	// Pointwise, LocalReduce), priced as its plan step.
	Pass string
	// Elements are the elements read plus written by the busiest device,
	// for a Pass of copy or strided.
	Elements int64
	// Kernels are the copies and fills the busiest device launches, for a
	// Pass of copy or strided: a Pad's box and each of its holes, each
	// piece of a fused copy.
	Kernels int
}

// fusion kinds: which consecutive local steps a block runs as one pass.
const (
	single        = ""
	permuteUnpad  = "permute+unpad"  // a strided copy from the Permute's input into the Unpad's output
	permuteSlice  = "permute+slice"  // only the chunk the Slice keeps is permuted
	padPermute    = "pad+permute"    // the Pad writes its box into the permuted layout
	permuteMatmul = "permute+matmul" // the Matmul reads the Permute's input transposed, in place
)

// planned is a block as the exporter plans it: its steps and how it fuses
// them.
type planned struct {
	steps []int
	kind  string
}

// fuse groups the plan's steps into blocks: a pair of consecutive local
// steps fuses when the first's output is an intermediate buffer (no op's
// output) that only the second reads, on the same devices, and the pair is
// one of the fusable kinds with a geometry (a common refinement of the two
// steps' views of the buffer).
func fuse(p *plan.Plan) []planned {
	readers := map[string]int{}
	for _, s := range p.Steps {
		for _, b := range s.Operands() {
			readers[b]++
		}
	}
	outputs := map[string]bool{}
	for _, op := range p.Ops {
		outputs[op.Output] = true
	}
	var out []planned
	for i := 0; i < len(p.Steps); i++ {
		if i+1 < len(p.Steps) {
			a, b := &p.Steps[i], &p.Steps[i+1]
			if !outputs[a.Output] && readers[a.Output] == 1 && slices.Contains(b.Operands(), a.Output) {
				if k := fusable(a, b); k != single {
					out = append(out, planned{steps: []int{i, i + 1}, kind: k})
					i++
					continue
				}
			}
		}
		out = append(out, planned{steps: []int{i}})
	}
	return out
}

// fusable is the kind of fusion of step a into step b, which reads a's
// output, or single when they do not fuse.
func fusable(a, b *plan.Step) string {
	if a.Kind != plan.KindLocal || b.Kind != plan.KindLocal {
		return single
	}
	switch {
	case a.Type == plan.Permute && b.Type == plan.Unpad && sameSet(a.Devices, b.Devices):
		if _, ok := newGeometry(a.Dims, a.Perm, b.Dims); ok {
			return permuteUnpad
		}
	case a.Type == plan.Permute && b.Type == plan.Slice && len(b.Dims) == 0 && !b.ShortSlice() && sameSet(a.Devices, slices.Concat(b.Teams...)):
		if _, ok := newGeometry(a.Dims, a.Perm, sliceShape(b)); ok {
			return permuteSlice
		}
	case a.Type == plan.Pad && b.Type == plan.Permute && sameSet(a.Devices, b.Devices):
		if _, ok := newGeometry(permuted(b.Dims, b.Perm), inverse(b.Perm), a.Dims); ok {
			return padPermute
		}
	case a.Type == plan.Permute && b.Type == plan.Matmul && sameSet(a.Devices, b.Devices) &&
		len(b.Inputs) == 2 && b.Inputs[1] == a.Output && b.Inputs[0] != a.Output && transposesB(a, b):
		return permuteMatmul
	}
	return single
}

// transposesB reports whether Permute a turns a Matmul b's B operand from
// [.., N, K] into [.., K, N] and nothing else, so that b can read a's
// input transposed in place.
func transposesB(a, b *plan.Step) bool {
	if b.TransposeB || len(b.Dims) != 4 {
		return false
	}
	bt, k, n := b.Dims[0], b.Dims[2], b.Dims[3]
	if b.BroadcastB || bt == 1 {
		return slices.Equal(a.Dims, []int{n, k}) && slices.Equal(a.Perm, []int{1, 0})
	}
	return slices.Equal(a.Dims, []int{bt, n, k}) && slices.Equal(a.Perm, []int{0, 2, 1})
}

// sliceShape views a Slice's input as [T, m]: the chunk a rank keeps is a
// row.
func sliceShape(s *plan.Step) []int {
	if len(s.Teams) == 0 || len(s.Teams[0]) == 0 {
		return nil
	}
	return []int{len(s.Teams[0]), s.Count.Output}
}

func sameSet(a, b []int) bool {
	return slices.Equal(slices.Compact(slices.Sorted(slices.Values(a))), slices.Compact(slices.Sorted(slices.Values(b))))
}

// permuted is dims in the order perm: a Permute's output dims.
func permuted(dims, perm []int) []int {
	out := make([]int, len(perm))
	for k, d := range perm {
		if d < 0 || d >= len(dims) {
			return nil
		}
		out[k] = dims[d]
	}
	return out
}

// inverse is the inverse permutation.
func inverse(perm []int) []int {
	out := make([]int, len(perm))
	for k, d := range perm {
		if d >= 0 && d < len(perm) {
			out[d] = k
		}
	}
	return out
}
