package plan

import (
	"os"
	"testing"

	"github.com/nvcomm/nvcomm/internal/diag"
)

// duplicateOperandPlan is the golden plan of conformance case I-01: tv1 =
// mul(tv0, tv0) reads one resharding set (op 0) at both operands, and tv2
// = add(tv1, tv1/resharded) reads a second set (op 2) at operand 1.
func duplicateOperandPlan() *Plan {
	src, err := os.ReadFile("../../testdata/conformance/I-01_insert_resharding_duplicate_operand.json")
	if err != nil {
		panic(err)
	}
	p, err := Decode("I-01.json", src)
	if err != nil {
		panic(err)
	}
	return p
}

func TestValidateInserted(t *testing.T) {
	for _, tc := range []validateCase{
		{name: "inserted golden"},
		{name: "inserted before, a slot left out", mutate: func(p *Plan) { p.Ops[0].Inserted.Operands = []int{0} },
			want: []diag.Diagnostic{pp(`op 0: inserted before op 1 for its operands [0], but that op reads "tv0/resharded" at operands [0 1]`)}},
		{name: "inserted before, a slot it does not read", mutate: func(p *Plan) { p.Ops[2].Inserted.Operands = []int{0, 1} },
			want: []diag.Diagnostic{pp(`op 2: inserted before op 3 for its operands [0 1], but that op reads "tv1/resharded" at operands [1]`)}},
		{name: "inserted before an earlier op", mutate: func(p *Plan) { p.Ops[2].Inserted = &Inserted{For: 1, Operands: []int{0}} },
			want: []diag.Diagnostic{pp(`op 2: inserted before op 1 for its operands [0], but that op reads "tv1/resharded" at operands []`)}},
		{name: "inserted after, reading another tensor", mutate: func(p *Plan) { p.Ops[0].Inserted = &Inserted{For: 1, Output: true} },
			want: []diag.Diagnostic{pp(`op 0: inserted after op 1, so it reads that op's output "tv1" and comes after it, but it reads "tv0"`)}},
		{name: "inserted for no op", mutate: func(p *Plan) { p.Ops[0].Inserted.For = 9 },
			want: []diag.Diagnostic{pp(`op 0: inserted for op 9, which is not another op of the plan`)}},
		{name: "inserted for itself", mutate: func(p *Plan) { p.Ops[0].Inserted.For = 0 },
			want: []diag.Diagnostic{pp(`op 0: inserted for op 0, which is not another op of the plan`)}},
		{name: "inserted for operands and output", mutate: func(p *Plan) { p.Ops[0].Inserted.Output = true },
			want: []diag.Diagnostic{pp(`op 0: inserted for op 1 must name either its operands or its output`)}},
		{name: "inserted for nothing", mutate: func(p *Plan) { p.Ops[0].Inserted.Operands = nil },
			want: []diag.Diagnostic{pp(`op 0: inserted for op 1 must name either its operands or its output`)}},
		{name: "inserted op that is not a set", mutate: func(p *Plan) { p.Ops[1].Inserted = &Inserted{For: 0, Output: true} },
			want: []diag.Diagnostic{pp(`op 1: is marked inserted, but nvcomm inserts only sets (a set from a Partial tensor being the reduction of its terms over axis 0), not mul`)}},
	} {
		tc.base = duplicateOperandPlan
		runValidateCase(t, tc)
	}
}
