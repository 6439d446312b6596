package plan

import (
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestStridedSlice checks a Slice with dims [outer, T, inner] on the golden
// plan that has one: valid as lowered, and each of its numbers checked.
func TestStridedSlice(t *testing.T) {
	const file = "../../testdata/examples/gpu2_reduce_scatter_noncontiguous.optimal.json"
	src, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	base, err := Decode(file, src)
	if err != nil {
		t.Fatal(err)
	}
	k := len(base.Steps) - 1
	if s := base.Steps[k]; s.Type != Slice || len(s.Dims) != 3 {
		t.Fatalf("the last step of %s is %s with dims %v, want a strided Slice", file, s.Type, s.Dims)
	}
	tests := map[string]struct {
		dims []int
		want []string
	}{
		"as lowered":      {dims: base.Steps[k].Dims},
		"two dims":        {dims: []int{5, 28}, want: []string{"step 2 (Slice): dims [5 28] are not [outer, T, inner], three extents"}},
		"not the team":    {dims: []int{5, 1, 28}, want: []string{"step 2 (Slice): dims[1] is 1, want the team size 2 (each rank keeps its index of it)", "step 2 (Slice): count.output is 70, want outer·inner = 140 (dims [5 1 28])"}},
		"another view":    {dims: []int{7, 2, 10}}, // consistent: Certify finds it is not nvcomm's, simulation judges it
		"more than input": {dims: []int{10, 2, 14}, want: []string{"step 2 (Slice): dims [10 2 14] hold 280 elements, but count.input is 140", "step 2 (Slice): count.output is 70, want outer·inner = 140 (dims [10 2 14])"}},
		"a zero extent":   {dims: []int{0, 2, 14}, want: []string{"step 2 (Slice): dims[0] is 0, want >= 1", "step 2 (Slice): count.output is 70, want outer·inner = 0 (dims [0 2 14])"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			p, err := Decode(file, src)
			if err != nil {
				t.Fatal(err)
			}
			p.Steps[k].Dims = tc.dims
			var got []string
			for _, pr := range Validate(p) {
				got = append(got, pr.Text())
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
}
