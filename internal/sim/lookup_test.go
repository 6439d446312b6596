package sim

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nvcomm/nvcomm/internal/plan"
)

// TestLookupKernel checks a device's Lookup: the rows of its table block
// at the indices within its rows, zero rows for the others, for one table
// and for a table per batch.
func TestLookupKernel(t *testing.T) {
	table := []float64{10, 11, 20, 21, 30, 31} // rows 4, 5, 6 of a [V=3, E=2] block at offset 4
	for _, tc := range []struct {
		name        string
		ids, table  []float64
		bt, n, v, e int
		off         int
		want        []float64
	}{
		{"own rows", []float64{4, 6, 5}, table, 1, 3, 3, 2, 4, []float64{10, 11, 30, 31, 20, 21}},
		{"other rows are zeros", []float64{3, 7, 0, 6}, table, 1, 4, 3, 2, 4, []float64{0, 0, 0, 0, 0, 0, 30, 31}},
		{"a table per batch", []float64{1, 0}, []float64{1, 2, 3, 4}, 2, 1, 2, 1, 0, []float64{2, 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := lookupKernel(tc.ids, tc.table, tc.bt, tc.n, tc.v, tc.e, tc.off)
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("lookupKernel (-want +got):\n%s", d)
			}
		})
	}
}

// TestLookupStepChecks checks what a Lookup's geometry must satisfy.
func TestLookupStepChecks(t *testing.T) {
	ok := plan.Step{Type: plan.Lookup, Inputs: []string{"ids", "table"}, Output: "y", Devices: []int{0, 1},
		Dims: []int{1, 3, 2, 4}, Offsets: []int{0, 2}, Count: plan.Count{Input: 3, Output: 12}}
	for _, tc := range []struct {
		name   string
		mutate func(s *plan.Step)
		want   string
	}{
		{"valid", func(*plan.Step) {}, ""},
		{"one input", func(s *plan.Step) { s.Inputs = []string{"ids"} }, "a Lookup reads 2 buffers (inputs [indices, table]), got 1"},
		{"offsets", func(s *plan.Step) { s.Offsets = []int{0} }, "offsets has 1 entries for 2 devices"},
		{"dims", func(s *plan.Step) { s.Dims = []int{1, 3, 2} }, "dims [1 3 2] must be [Bt, N, V, E], four non-negative extents"},
		{"count input", func(s *plan.Step) { s.Count.Input = 4 }, "count.input is 4, dims [1 3 2 4] give Bt·N = 3"},
		{"count output", func(s *plan.Step) { s.Count.Output = 6 }, "count.output is 6, dims [1 3 2 4] give Bt·N·E = 12"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := ok
			s.Offsets, s.Dims = append([]int(nil), ok.Offsets...), append([]int(nil), ok.Dims...)
			tc.mutate(&s)
			got := ""
			if _, err := lookupStep(&s); err != nil {
				got = err.Error()
			}
			if d := cmp.Diff(tc.want, strings.TrimPrefix(got, "step 0 (Lookup): ")); d != "" {
				t.Errorf("lookupStep (-want +got):\n%s", d)
			}
		})
	}
}

// TestIndexBounds checks which fusion inputs get indices, and below what:
// ids read directly or through a set and a reshape, bounded by the least
// table, and not ids an op computes.
func TestIndexBounds(t *testing.T) {
	tensor := func(name, dtype string, shape ...int) plan.Tensor {
		return plan.Tensor{Name: name, DType: dtype, Shape: shape}
	}
	emb := func(ids, table, out string) plan.Op {
		return plan.Op{Op: "embedding", Inputs: []string{ids, table}, Output: out}
	}
	p := &plan.Plan{
		Tensors: []plan.Tensor{
			tensor("a", "int64", 6), tensor("a2", "int64", 6), tensor("a3", "int64", 2, 3),
			tensor("big", "float32", 100, 4), tensor("small", "float32", 10, 4),
			tensor("y1", "float32", 2, 3, 4, 100), tensor("y2", "float32", 6, 4, 10),
			tensor("b", "int32", 5), tensor("c", "int32", 5), tensor("y3", "float32", 5, 4, 10),
		},
		Ops: []plan.Op{
			{Op: "set", Input: "a", Output: "a2"},
			{Op: "reshape", Input: "a2", Output: "a3"},
			emb("a3", "big", "y1"),
			emb("a", "small", "y2"),
			{Op: "add", Inputs: []string{"b", "b"}, Output: "c"},
			emb("c", "small", "y3"),
		},
	}
	for i := range p.Tensors {
		if n := len(p.Tensors[i].Shape); p.Tensors[i].Name[0] == 'y' {
			p.Tensors[i].ReductionAxes = []int{n - 1}
		}
	}
	if d := cmp.Diff(map[string]int{"a": 10}, IndexBounds(p)); d != "" {
		t.Errorf("IndexBounds (-want +got):\n%s", d)
	}
}
