package export

import (
	"fmt"
	"strconv"

	"github.com/nvcomm/nvcomm/internal/plan"
)

// lookup writes a Lookup as Megatron-LM's VocabParallelEmbedding computes
// it: the indices shifted by the device's first row, those outside its
// rows masked to row 0, looked up (torch.nn.functional.embedding for one
// table, torch.gather for a table per batch), and the masked rows zeroed.
func (g *gen) lookup(b planned, s *plan.Step) error {
	return g.indexed(b, s, "table", "the table's rows at the indices this device holds, zero rows for the others",
		func(bt, n, v, e int, off string) {
			g.w.line("%s = lookup(%s.view(%d, %d), %s.view(%d, %d, %d), %s).view(-1)", g.names[s.Output],
				g.names[s.Inputs[0]], bt, n, g.names[s.Inputs[1]], bt, v, e, off)
		})
}

// indexed writes a step of inputs [indices, second] and dims [Bt, N, V, E]
// (a Lookup or a ScatterAdd) on its devices, line writing its call with
// each device's first row off, and records its Python helper as used.
func (g *gen) indexed(b planned, s *plan.Step, second, comment string, line func(bt, n, v, e int, off string)) error {
	if len(s.Dims) != 4 || len(s.Inputs) != 2 || len(s.Offsets) != len(s.Devices) {
		return fmt.Errorf("step %d (%s): needs inputs [indices, %s], dims [Bt, N, V, E] and one offset per device", s.ID, s.Type, second)
	}
	off := perRank(s.Devices, func(d int) string { return strconv.Itoa(s.Offsets[indexOf(s.Devices, d)]) })
	g.comment(b, comment)
	g.helpers[indexedHelpers[s.Type]] = true
	done := g.guard(s.Devices)
	line(s.Dims[0], s.Dims[1], s.Dims[2], s.Dims[3], off)
	done()
	g.alloc(s.Output, s.Devices)
	g.record(b, "", 0, 0)
	return nil
}

// indexedHelpers names the Python helper each indexed step calls.
var indexedHelpers = map[string]string{plan.Lookup: "lookup", plan.ScatterAdd: "scatter_add"}

// indexOf is the position of d in ds.
func indexOf(ds []int, d int) int {
	for i, x := range ds {
		if x == d {
			return i
		}
	}
	return -1
}

// lookupHelper is the function the plan's function calls for a Lookup.
const lookupHelper = `def lookup(ids, table, off):
    """Rows of table [Bt, V, E] at ids [Bt, N] (integers), counted from row off:
    a zero row for an index outside [off, off + V) (Megatron-LM's VocabParallelEmbedding)."""
    local = ids.long() - off
    outside = (local < 0) | (local >= table.shape[1])
    local = local.masked_fill(outside, 0)
    if table.shape[0] == 1:
        rows = torch.nn.functional.embedding(local[0], table[0]).unsqueeze(0)
    else:
        rows = table.gather(1, local.unsqueeze(-1).expand(-1, -1, table.shape[2]))
    return rows.masked_fill(outside.unsqueeze(-1), 0)
`

// scatterAdd writes a ScatterAdd as the backward of Megatron-LM's
// VocabParallelEmbedding: the indices shifted by the device's first row,
// those outside its rows dropped, and the values' rows added into zeros
// at the others (torch.Tensor.index_put_ with accumulate).
func (g *gen) scatterAdd(b planned, s *plan.Step) error {
	return g.indexed(b, s, "values", "the values' rows added at the indices this device holds, into zeros",
		func(bt, n, v, e int, off string) {
			g.w.line("%s = scatter_add(%s.view(%d, %d), %s.view(%d, %d, %d), %s, %d).view(-1)", g.names[s.Output],
				g.names[s.Inputs[0]], bt, n, g.names[s.Inputs[1]], bt, n, e, off, v)
		})
}

// scatterHelper is the function the plan's function calls for a
// ScatterAdd.
const scatterHelper = `def scatter_add(ids, values, off, rows):
    """Zeros [Bt, rows, E] with the rows of values [Bt, N, E] added at ids [Bt, N] (integers),
    counted from row off: an index outside [off, off + rows) adds nothing."""
    local = ids.long() - off
    keep = (local >= 0) & (local < rows)
    out = values.new_zeros(values.shape[0], rows, values.shape[2])
    b = torch.arange(values.shape[0], device=values.device).unsqueeze(1).expand_as(local)
    out.index_put_((b[keep], local[keep]), values[keep], accumulate=True)
    return out
`

// tril writes a Tril as torch.tril of the device's block viewed [Bt, R,
// C], with the device's own diagonal: tril's diagonal shifted by where
// the block lies in the tensor (its first row less its first column).
func (g *gen) tril(b planned, s *plan.Step) error {
	if len(s.Dims) != 3 || s.Input == "" || len(s.Offsets) != len(s.Devices) {
		return fmt.Errorf("step %d (Tril): needs an input, dims [Bt, R, C] and one diagonal per device", s.ID)
	}
	diag := perRank(s.Devices, func(d int) string { return strconv.Itoa(s.Offsets[indexOf(s.Devices, d)]) })
	g.comment(b, "the entries of this device's block on or below the diagonal, shifted by where the block lies")
	done := g.guard(s.Devices)
	g.w.line("%s = torch.tril(%s.view(%d, %d, %d), %s).view(-1)", g.names[s.Output], g.names[s.Input], s.Dims[0], s.Dims[1], s.Dims[2], diag)
	done()
	g.alloc(s.Output, s.Devices)
	g.record(b, "", 0, 0)
	return nil
}
