package plan

import (
	"os"
	"slices"
	"strings"
	"testing"
)

// TestValidateWeightOverlap checks the Allgather of a linear's weight
// decomposed (FSDP's, testdata/examples/fsdp_mlp_overlap.optimal.json):
// the plan is valid as lowered, and a set within a linear that reads
// neither its output as the first operand nor as the weight, a weight
// marked split by columns, and a chunk's Allgather of another chunk's
// rows are each rejected with the problem that names them.
func TestValidateWeightOverlap(t *testing.T) {
	const file = "fsdp_mlp_overlap.optimal.json"
	for _, tc := range []struct {
		name   string
		mutate func(p *Plan)
		want   string // a part of one of the problems; "" for none
	}{
		{"as lowered", func(*Plan) {}, ""},
		{"within a linear that does not read it", func(p *Plan) { p.Ops[0].Within = new(4) },
			"op 0: within op 4, a linear, but it is not the set inserted to gather its first operand or a linear's weight"},
		{"a weight split by columns", func(p *Plan) {
			for i := range p.Tensors {
				if p.Tensors[i].Name == "w1" {
					p.Tensors[i].Sharding[0].LogicalAxis = 1
				}
			}
		}, "its weight is not split in blocks of rows over the output's devices"},
		{"a chunk's Allgather of another chunk's rows", func(p *Plan) {
			i := slices.IndexFunc(p.Steps, func(s Step) bool { return s.Type == Allgather && s.Output == "h/overlap/wg/1" })
			p.Steps[i].Input = "h/overlap/w/0"
		}, "is not step 4 of the collective-based decomposed collective"},
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
			switch {
			case tc.want == "" && len(got) > 0:
				t.Errorf("problems %q, want none", got)
			case tc.want != "" && !slices.ContainsFunc(got, func(m string) bool { return strings.Contains(m, tc.want) }):
				t.Errorf("problems %q, want one with %q", got, tc.want)
			}
		})
	}
}
