package plan

import (
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestValidateConcat breaks the Concat steps of the rotary embedding's
// plan (steps 0 and 1 slice q [16, 16, 1] into halves, step 3 joins two
// [16, 8, 1] halves) and checks what Validate says, from the step's own
// fields first.
func TestValidateConcat(t *testing.T) {
	src, err := os.ReadFile("../../testdata/examples/rotary_embedding.optimal.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		step   int
		mutate func(s *Step)
		want   string
	}{
		{"window past its input", 1, func(s *Step) { s.Windows[0][1] = 9 }, "windows[0] [16 9 8]: the window runs past the input's m entries"},
		{"window of two entries", 0, func(s *Step) { s.Windows[0] = s.Windows[0][:2] }, "windows[0] [16 0]: has 2 entries, want [m, start, len]"},
		{"lens short of the output", 3, func(s *Step) { s.Windows[1][2] = 7 }, "the windows' lens sum to 15, but dims[1] is 16"},
		{"a window per input", 3, func(s *Step) { s.Windows = s.Windows[:1] }, "windows has 1 entries for 2 inputs"},
		{"dims not three", 0, func(s *Step) { s.Dims = []int{16, 8} }, "dims [16 8] are not [outer, N, inner], three positive extents"},
		{"windows on a Pointwise", 2, func(s *Step) { s.Windows = [][]int{{8, 0, 8}} }, "windows is set, but only a Concat takes them"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Decode("rotary_embedding.optimal.json", src)
			if err != nil {
				t.Fatal(err)
			}
			s := &p.Steps[tc.step]
			tc.mutate(s)
			probs := Validate(p)
			if len(probs) == 0 {
				t.Fatal("Validate found nothing")
			}
			if d := cmp.Diff(sp(tc.step, s.Type, tc.want), probs[0]); d != "" {
				t.Errorf("first problem (-want +got):\n%s", d)
			}
		})
	}
}
