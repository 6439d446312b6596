package plan

import (
	"bytes"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestWriter writes plans section by section and compares with Encode of
// the same plan made whole: lists with no element (null for tensors and
// ops, [] for steps, as NewWriter says), one short op that fits on a
// line, several that do not, and a tensor given after the ops (dropped).
func TestWriter(t *testing.T) {
	tensor := Tensor{Name: "t0", DType: "float32", Mesh: "m", Shape: []int{4}, Sharding: []Sharding{}, LocalShape: []int{4}, Layout: []int{0}}
	op := func(i int) Op { return Op{Index: i, Op: "set", Input: "t0", Output: "t1"} }
	step := Step{ID: 0, Expr: "t1 = set(t0)", Kind: KindLocal, Type: Copy, Devices: []int{0}, Input: "t0", Output: "t1", Count: Count{4, 4}}
	head := Plan{Format: Format, Fusion: "f", Policy: "optimal", Meshes: map[string]Mesh{"m": {Shape: []int{1}, Devices: []int{0}}}}
	for _, tc := range []struct {
		name    string
		tensors []Tensor
		ops     []Op
		steps   []Step
		late    bool // a tensor after the ops, which the Writer drops
	}{
		{"nothing", nil, nil, []Step{}, false},
		{"one short op", []Tensor{tensor}, []Op{op(0)}, []Step{step}, false},
		{"ops across lines", []Tensor{tensor, tensor}, []Op{op(0), op(1), op(2)}, []Step{step, step}, false},
		{"a late tensor", []Tensor{tensor}, []Op{op(0)}, []Step{}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got bytes.Buffer
			w := NewWriter(&got)
			w.Head(&head)
			for i := range tc.tensors {
				w.Tensor(&tc.tensors[i])
			}
			for i := range tc.ops {
				w.Op(&tc.ops[i])
			}
			if tc.late {
				w.Tensor(&tensor)
			}
			for i := range tc.steps {
				w.Step(&tc.steps[i])
			}
			sum := Summary{ByType: map[string]int{}}
			if err := w.Finish(&sum); err != nil {
				t.Fatal(err)
			}
			p := head
			p.Tensors, p.Ops, p.Steps, p.Summary = tc.tensors, tc.ops, tc.steps, sum
			want, err := Marshal(&p)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(string(want), got.String()); d != "" {
				t.Errorf("Writer and Encode differ (-Encode +Writer):\n%s", d)
			}
		})
	}
}
