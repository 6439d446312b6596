package plan

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestValidatePartial: Validate reports a Partial field that does not
// hold, with the tensor and why, and nothing of one that does.
func TestValidatePartial(t *testing.T) {
	tests := map[string]struct {
		edit func(p *Plan)
		want string // "" when the field holds
	}{
		"holds":              {func(*Plan) {}, ""},
		"not a reduce op":    {func(p *Plan) { p.Tensors[0].Partial = "set" }, `tensor "p": partial "set": the terms combine with sum, prod, max or min`},
		"read by another op": {func(p *Plan) { p.Tensors[0].Partial = "max" }, `tensor "p": partial "max": op 0 reads it but is not a max of it over axis 0`},
		"axis 0 split": {func(p *Plan) {
			p.Tensors[0].Schedule = []ScheduleStep{{OuterSplit: &SplitArgs{Axis: 0, Factor: 2}}, {Parallelize: &ParallelizeArgs{Axis: 0, Type: "DIDx"}}}
		}, `tensor "p": partial "sum": its schedule does not parallelize logical axis 0 (the terms) unsplit over a mesh axis of 4 devices`},
		"written by an op": {func(p *Plan) {
			z := &p.Tensors[2]
			z.Shape, z.Schedule, z.Partial = []int{4}, p.Tensors[0].Schedule, "sum"
		}, `tensor "z": partial "sum": op 1 writes it, and only a contraction or a reduction leaves pending terms, not set`},
		"left pending by a reduction of its op": {func(p *Plan) { pendingZ(p, "max", "max") }, ""},
		"left pending by a reduction of another op": {func(p *Plan) { pendingZ(p, "max", "sum") },
			`tensor "z": partial "sum": op 1 writes it, and max leaves terms that combine with max, not sum`},
	}
	for name, tc := range tests {
		p := partialPlan()
		tc.edit(p)
		var got []string
		v := &validator{p: p, probs: NewProblems()}
		v.checkPartials()
		for _, d := range v.probs.All() {
			got = append(got, d.Message)
		}
		if tc.want == "" {
			if diff := cmp.Diff([]string(nil), got); diff != "" {
				t.Errorf("%s: (-want +got):\n%s", name, diff)
			}
			continue
		}
		if len(got) != 1 || !strings.HasPrefix(got[0], tc.want) {
			t.Errorf("%s: got %q, want one problem starting %q", name, got, tc.want)
		}
	}
}

// pendingZ makes partialPlan's op 1 a reduction op of y over axis 1 that
// leaves its output z as pending terms of r, on logical axis 0.
func pendingZ(p *Plan, op, r string) {
	one := 1
	p.Ops[1].Op, p.Ops[1].Axis = op, &one
	z := &p.Tensors[2]
	z.Shape, z.Schedule, z.Partial = []int{4}, p.Tensors[0].Schedule, r
}

// TestValidatePendingOutput validates the plans of the examples whose op
// outputs hold pending terms, as lowered and edited: the output domain of
// the op that leaves them is the terms axis and its values, and only a
// reduction of their op reads them.
func TestValidatePendingOutput(t *testing.T) {
	tests := map[string]struct {
		example string
		edit    func(p *Plan)
		want    []string
	}{
		"output left pending":     {"partial_grad_output", func(*Plan) {}, nil},
		"terms reduced by an add": {"partial_residual", func(*Plan) {}, nil},
		"terms with the reduced axis": {"partial_grad_output", func(p *Plan) { p.Tensors[2].Shape = []int{4, 16, 8, 32} }, []string{
			`op 0: output "dw" has shape [4 16 8 32] and reduction_axes [], want [4 16 8] and [] (the terms axis, then [...batch, m, n] and the contracted k as a trailing reduction axis without the combined axis: the output holds pending terms)`}},
		"reduced with another op": {"partial_residual", func(p *Plan) { p.Ops[3].Op = "prod" }, []string{
			`op 3: is marked inserted, but nvcomm inserts only sets (a set from a Partial tensor being the reduction of its terms over axis 0), not prod`,
			`tensor "y": partial "sum": op 3 reads it but is not a sum of it over axis 0, which reduces the terms`}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			file := filepath.Join("..", "..", "testdata", "examples", tc.example+".optimal.json")
			src, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			p, err := Decode(file, src)
			if err != nil {
				t.Fatal(err)
			}
			tc.edit(p)
			got := map[string]bool{}
			for _, d := range Validate(p) {
				got[d.Message] = true
			}
			if len(tc.want) == 0 && len(got) > 0 {
				t.Errorf("Validate = %v, want no problem", got)
			}
			for _, w := range tc.want { // among others that follow from it
				if !got[w] {
					t.Errorf("Validate = %v, want among them %q", got, w)
				}
			}
		})
	}
}
