package ir_test

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nvcomm/nvcomm/internal/ir"
	"github.com/nvcomm/nvcomm/internal/scale"
)

// TestShareAlike parses generated fusions and counts the distinct logical
// domains left once tensors alike share theirs: one per distinct sharding
// (a chain on a 1-D mesh alternates three, on a 2×4 mesh four), whether
// ShareAlike shares them or the parser already has, as it builds each
// given tensor. Names, producers and positions stay each tensor's own.
func TestShareAlike(t *testing.T) {
	for _, tc := range []struct {
		family    string
		parseOnly bool
		want      int
	}{
		{"chain1d", false, 3},
		{"chain2d", false, 4},
		{"chain1d", true, 3},
		{"chain2d", true, 4},
	} {
		t.Run(fmt.Sprintf("%s/parse-only=%v", tc.family, tc.parseOnly), func(t *testing.T) {
			var gen func(int) []byte
			for _, f := range scale.Families {
				if f.Name == tc.family {
					gen = f.Gen
				}
			}
			f, err := ir.Parse("f.yaml", gen(40))
			if err != nil {
				t.Fatal(err)
			}
			type own struct {
				name     string
				line     int
				producer *ir.Op
			}
			before := make([]own, len(f.Tensors))
			for i, tv := range f.Tensors {
				before[i] = own{tv.Name, int(tv.Pos.Line), tv.Producer}
			}
			if !tc.parseOnly {
				f.ShareAlike()
			}
			domains, shared := map[*ir.IterDomain]bool{}, map[*ir.TensorDomain]bool{}
			after := make([]own, len(f.Tensors))
			for i, tv := range f.Tensors {
				domains[tv.Logical[0]] = true
				shared[tv.TensorDomain] = true
				after[i] = own{tv.Name, int(tv.Pos.Line), tv.Producer}
			}
			if d := cmp.Diff(tc.want, len(domains)); d != "" {
				t.Errorf("distinct logical domains (-want +got):\n%s", d)
			}
			if d := cmp.Diff(tc.want, len(shared)); d != "" {
				t.Errorf("distinct TensorDomains (-want +got):\n%s", d)
			}
			if d := cmp.Diff(before, after, cmp.AllowUnexported(own{}), cmp.Comparer(func(a, b *ir.Op) bool { return a == b })); d != "" {
				t.Errorf("tensors' own fields changed (-before +after):\n%s", d)
			}
		})
	}
}
