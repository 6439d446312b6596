package shard

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParsePlacement(t *testing.T) {
	tests := map[string]struct {
		in   string
		want Placement
		err  *PlacementError
	}{
		"shard":            {in: "Shard(1)", want: Placement{Kind: Shard, Dim: 1}},
		"spaces":           {in: " Shard ( 0 ) ", want: Placement{Kind: Shard}},
		"replicate":        {in: "Replicate()", want: Placement{Kind: Replicate}},
		"partial default":  {in: "Partial()", want: Placement{Kind: Partial, Op: "sum"}},
		"partial max":      {in: "Partial(max)", want: Placement{Kind: Partial, Op: "max"}},
		"unknown kind":     {in: "Shrd(0)", err: &PlacementError{Msg: `"Shrd(0)" is not a placement (expected Shard(dim), Replicate() or Partial(sum|prod|max|min))`, Near: "Shrd"}},
		"replicate arg":    {in: "Replicate(0)", err: &PlacementError{Msg: `Replicate takes no argument, got "0"`}},
		"shard without":    {in: "Shard()", err: &PlacementError{Msg: `Shard needs a tensor dim, got ""`}},
		"partial wrong op": {in: "Partial(avg)", err: &PlacementError{Msg: `Partial needs a reduce op (sum, prod, max, min), got "avg"`, Op: "avg"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParsePlacement(tc.in)
			if d := cmp.Diff(tc.err, err); d != "" {
				t.Fatalf("error (-want +got):\n%s", d)
			}
			if err != nil {
				return
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
			if back, err := ParsePlacement(got.String()); err != nil || back != got {
				t.Errorf("%v does not read back: %v, %v", got, back, err)
			}
		})
	}
}

func TestParallelTypes(t *testing.T) {
	type axis struct {
		Type string
		Rank int
		Axis int
	}
	var got []axis
	for _, typ := range []ParallelType{Serial, DIDx, DIDy, DIDz} {
		for rank := 1; rank <= 3; rank++ {
			got = append(got, axis{typ.String(), rank, typ.MeshAxis(rank)})
		}
	}
	want := []axis{
		{"Serial", 1, -1}, {"Serial", 2, -1}, {"Serial", 3, -1},
		{"DIDx", 1, 0}, {"DIDx", 2, 1}, {"DIDx", 3, 2},
		{"DIDy", 1, -1}, {"DIDy", 2, 0}, {"DIDy", 3, 1},
		{"DIDz", 1, -1}, {"DIDz", 2, -1}, {"DIDz", 3, 0},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	for _, name := range ParallelTypeNames() {
		if typ, ok := ParseParallelType(name); !ok || typ.String() != name {
			t.Errorf("ParseParallelType(%q) = %v, %v", name, typ, ok)
		}
	}
	if _, ok := ParseParallelType("DIDw"); ok {
		t.Error(`ParseParallelType("DIDw") succeeded`)
	}
}
