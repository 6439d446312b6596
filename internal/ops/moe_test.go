package ops

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestMoEExpandErrors checks that the routing ops refuse an operand that
// is not [groups, tokens, experts], and that their attributes are
// checked as written.
func TestMoEExpandErrors(t *testing.T) {
	for _, tc := range []struct {
		op   string
		in   []int
		want string
	}{
		{"moe_topk", []int{4, 8}, "has rank 2, want at least 3: [groups, tokens, experts]"},
		{"moe_dispatch", []int{8}, "has rank 1, want at least 3: [groups, tokens, experts]"},
	} {
		_, err := Lookup(tc.op).Expand([][]int{tc.in}, Attrs{Axis: -1, Values: Values{{Key: AttrTopK, Int: 2}, {Key: AttrCapacity, Int: 2}}})
		if err == nil {
			t.Errorf("%s of %v: no error", tc.op, tc.in)
			continue
		}
		if d := cmp.Diff(tc.want, err.Msg); d != "" {
			t.Errorf("%s of %v (-want +got):\n%s", tc.op, tc.in, d)
		}
	}
	for _, key := range []Attr{AttrTopK, AttrCapacity} {
		msg, _ := AttrOf(string(key)).Check(Value{Key: key, Int: 0})
		if d := cmp.Diff(string(key)+" 0 is not positive", msg); d != "" {
			t.Errorf("%s: 0 (-want +got):\n%s", key, d)
		}
	}
}

// TestMoEConstant checks that the routing ops, and only they, are
// selections through which no gradient flows.
func TestMoEConstant(t *testing.T) {
	var got []string
	for _, o := range Default.All() {
		if o.Constant {
			got = append(got, o.Name)
		}
	}
	if d := cmp.Diff([]string{"moe_topk", "moe_dispatch"}, got); d != "" {
		t.Errorf("constant ops (-want +got):\n%s", d)
	}
}
