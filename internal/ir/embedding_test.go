package ir

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestLookupErrors checks the lookups' positioned errors — embedding's ids
// of a float dtype, a table of an integer dtype or of another rank than 2,
// an output declared in another dtype than the table's; gather along
// another dim than the last, an index not of x's shape with extent 1 last
// — and the output a valid lookup infers: the indices' shape (embedding's
// with e appended), of the table's dtype.
func TestLookupErrors(t *testing.T) {
	const head = "meshes: {m: [0, 1]}\ntensors:\n"
	const embedding = "ops:\n  - {op: embedding, in: [ids, table], out: y}\n"
	const gather = "ops:\n  - {op: gather, in: [table, ids], out: y, axis: %s}\n"
	for _, tc := range []struct {
		name, tensors, ops string
		want               string
		shape              []int
	}{
		{"embedding", "  ids: {mesh: m, dtype: int32, shape: [2, 3]}\n  table: {mesh: m, shape: [10, 4]}\n", embedding, "", []int{2, 3, 4}},
		{"float ids", "  ids: {mesh: m, shape: [2, 3]}\n  table: {mesh: m, shape: [10, 4]}\n", embedding,
			"in.yaml:6:26: error: ops[0]: embedding operand ids, \"ids\", is float32, expected an integer dtype (int32, int64); " +
				"declare \"ids\" int32 or int64: it holds row indices of \"table\"", nil},
		{"integer table", "  ids: {mesh: m, dtype: int64, shape: [3]}\n  table: {mesh: m, dtype: int64, shape: [10, 4]}\n", embedding,
			"in.yaml:6:31: error: ops[0]: embedding operand table, \"table\", is int64, expected a float dtype; " +
				"declare \"table\" of a float dtype, or cast it", nil},
		{"table of rank 3", "  ids: {mesh: m, dtype: int64, shape: [3]}\n  table: {mesh: m, shape: [10, 4, 2]}\n", embedding,
			"in.yaml:6:31: error: ops[0]: embedding table \"table\" of shape [10, 4, 2] has rank 3, expected 2; " +
				"table is [vocab, e]: one row of e values per index", nil},
		{"output dtype", "  ids: {mesh: m, dtype: int64, shape: [3]}\n  table: {mesh: m, shape: [10, 4]}\n  y: {mesh: m, dtype: int64}\n", embedding,
			"in.yaml:5:23: error: tensor \"y\": dtype int64 differs from its table's float32 (operands share a dtype; use cast); " +
				"remove its dtype, or declare it float32; a cast op converts to another", nil},
		{"gather", "  ids: {mesh: m, dtype: int64, shape: [2, 3, 1]}\n  table: {mesh: m, shape: [2, 3, 10]}\n", fmt.Sprintf(gather, "-1"), "", []int{2, 3, 1}},
		{"gather along dim 0", "  ids: {mesh: m, dtype: int64, shape: [1, 3]}\n  table: {mesh: m, shape: [2, 3]}\n", fmt.Sprintf(gather, "0"),
			"in.yaml:6:50: error: ops[0]: gather axis 0 is not the last dim of \"table\" (rank 2); " +
				"gather selects along x's last dim: axis -1; permute x first to select along another", nil},
		{"gather index shape", "  ids: {mesh: m, dtype: int64, shape: [2, 2]}\n  table: {mesh: m, shape: [2, 3]}\n", fmt.Sprintf(gather, "1"),
			"in.yaml:6:30: error: ops[0]: gather index \"ids\" has shape [2, 2], expected [2, 1]; " +
				"index is x's shape with extent 1 on the last dim: [2, 1]", nil},
		{"gather float index", "  ids: {mesh: m, shape: [2, 1]}\n  table: {mesh: m, shape: [2, 3]}\n", fmt.Sprintf(gather, "1"),
			"in.yaml:6:30: error: ops[0]: gather operand index, \"ids\", is float32, expected an integer dtype (int32, int64); " +
				"declare \"ids\" int32 or int64: it holds row indices of \"table\"", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := Parse("in.yaml", []byte(head+tc.tensors+tc.ops))
			got := ""
			if err != nil {
				got = err.Error()
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Fatalf("Parse (-want +got):\n%s", d)
			}
			if err != nil {
				return
			}
			y := f.Tensor("y")
			if d := cmp.Diff([]any{tc.shape, DType("float32")}, []any{y.Shape(), y.DType}); d != "" {
				t.Errorf("y (-want +got):\n%s", d)
			}
		})
	}
}
