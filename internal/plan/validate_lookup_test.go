package plan

import (
	"os"
	"testing"

	"github.com/nvcomm/nvcomm/internal/diag"
)

// embeddingPlan is the golden optimal plan of the vocab-parallel
// embedding: a Lookup of ids [16, 2] in each device's 2048 rows of a
// [8192, 64] table, then an Allreduce of the partial rows.
func embeddingPlan() *Plan {
	src, err := os.ReadFile("../../testdata/examples/vocab_parallel_embedding.optimal.json")
	if err != nil {
		panic(err)
	}
	p, err := Decode("vocab_parallel_embedding.optimal.json", src)
	if err != nil {
		panic(err)
	}
	return p
}

// TestValidateLookup checks what validate says of a Lookup and of an
// embedding's tensors, each case one edit of the golden plan.
func TestValidateLookup(t *testing.T) {
	for _, tc := range []validateCase{
		{name: "lookup valid", base: embeddingPlan},
		{name: "lookup offsets count", base: embeddingPlan, mutate: func(p *Plan) { p.Steps[0].Offsets = p.Steps[0].Offsets[:3] },
			want: []diag.Diagnostic{sp(0, Lookup, "offsets has 3 entries for 4 devices")}},
		{name: "lookup negative offset", base: embeddingPlan, mutate: func(p *Plan) { p.Steps[0].Offsets[1] = -1 },
			want: []diag.Diagnostic{sp(0, Lookup, "offsets [0 -1 4096 6144] has a negative row")}},
		{name: "lookup one input", base: embeddingPlan, mutate: func(p *Plan) { p.Steps[0].Input, p.Steps[0].Inputs = "ids", nil },
			want: []diag.Diagnostic{sp(0, Lookup, "a Lookup reads 2 buffers (inputs [indices, table]), got 1")}},
		{name: "lookup dims rank", base: embeddingPlan, mutate: func(p *Plan) { p.Steps[0].Dims = []int{32, 2048, 64} },
			want: []diag.Diagnostic{sp(0, Lookup, "dims [32 2048 64] are not [Bt, N, V, E], four positive extents")}},
		{name: "lookup table count", base: embeddingPlan, mutate: func(p *Plan) { p.Steps[0].Dims[2] = 1024 },
			want: []diag.Diagnostic{sp(0, Lookup, `input "table" holds 131072 elements per device, but the step reads 65536 (Bt·V·E of dims [1, 32, 1024, 64])`)}},
		{name: "lookup count output", base: embeddingPlan, mutate: func(p *Plan) { p.Steps[0].Dims[3] = 32 },
			want: []diag.Diagnostic{
				sp(0, Lookup, `input "table" holds 131072 elements per device, but the step reads 65536 (Bt·V·E of dims [1, 32, 2048, 32])`),
				sp(0, Lookup, "count.output is 2048, want Bt·N·E = 1024 (dims [1 32 2048 32])"),
			}},
		{name: "offsets on an Allreduce", base: embeddingPlan, mutate: func(p *Plan) { p.Steps[1].Offsets = []int{0} },
			want: []diag.Diagnostic{sp(1, Allreduce, "offsets is set, but only a Lookup, a ScatterAdd or a Tril takes them")}},
		{name: "lookup sum axis", base: embeddingPlan, mutate: func(p *Plan) { p.Steps[1].Axis = new(0) },
			want: []diag.Diagnostic{sp(1, Allreduce, "axis is 0, but a lookup's indices have no axis it sums over (null)")}},
		{name: "embedding float ids", base: embeddingPlan, mutate: func(p *Plan) { p.Tensors[0].DType = "float32" },
			want: []diag.Diagnostic{pp(`op 0: embedding's indices "ids" have dtype float32, want int32 or int64`)}},
		{name: "embedding output dtype", base: embeddingPlan, mutate: func(p *Plan) { p.Tensors[2].DType = "float16" },
			want: []diag.Diagnostic{pp(`op 0: output "y" has dtype float16, but its table "table" has float32`)}},
	} {
		runValidateCase(t, tc)
	}
}
