package plan

import (
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
		}, `tensor "z": partial "sum": op 1 writes it`},
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
