package ir

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestEmbeddingErrors checks embedding's positioned errors: ids of a float
// dtype, a table of an integer dtype or of another rank than 2, an output
// declared in another dtype than the table's; and that a valid embedding
// infers [..., e] of the table's dtype.
func TestEmbeddingErrors(t *testing.T) {
	const head = "meshes: {m: [0, 1]}\ntensors:\n"
	for _, tc := range []struct {
		name, tensors, want string
	}{
		{"valid", "  ids: {mesh: m, dtype: int32, shape: [2, 3]}\n  table: {mesh: m, shape: [10, 4]}\n", ""},
		{"float ids", "  ids: {mesh: m, shape: [2, 3]}\n  table: {mesh: m, shape: [10, 4]}\n",
			"in.yaml:6:26: error: ops[0]: embedding operand ids, \"ids\", is float32, expected an integer dtype (int32, int64); " +
				"declare \"ids\" int32 or int64: it holds row indices of \"table\""},
		{"integer table", "  ids: {mesh: m, dtype: int64, shape: [3]}\n  table: {mesh: m, dtype: int64, shape: [10, 4]}\n",
			"in.yaml:6:31: error: ops[0]: embedding operand table, \"table\", is int64, expected a float dtype; " +
				"declare \"table\" of a float dtype, or cast it"},
		{"table of rank 3", "  ids: {mesh: m, dtype: int64, shape: [3]}\n  table: {mesh: m, shape: [10, 4, 2]}\n",
			"in.yaml:6:31: error: ops[0]: embedding table \"table\" of shape [10, 4, 2] has rank 3, expected 2; " +
				"table is [vocab, e]: one row of e values per index"},
		{"output dtype", "  ids: {mesh: m, dtype: int64, shape: [3]}\n  table: {mesh: m, shape: [10, 4]}\n  y: {mesh: m, dtype: int64}\n",
			"in.yaml:5:23: error: tensor \"y\": dtype int64 differs from its table's float32 (operands share a dtype; use cast); " +
				"remove its dtype, or declare it float32; a cast op converts to another"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := head + tc.tensors + "ops:\n  - {op: embedding, in: [ids, table], out: y}\n"
			f, err := Parse("in.yaml", []byte(src))
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
			if d := cmp.Diff([]any{[]int{2, 3, 4}, DType("float32")}, []any{y.Shape(), y.DType}); d != "" {
				t.Errorf("y (-want +got):\n%s", d)
			}
		})
	}
}
