package plan

import (
	"slices"
	"testing"
)

// FuzzDecodeValidate checks that Validate never panics on a decoded plan,
// answers the same twice, and names only steps the plan has.
func FuzzDecodeValidate(f *testing.F) {
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for n := range validPlans() {
			if !yield(n) {
				return
			}
		}
	}) {
		b, err := Marshal(validPlans()[name]())
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"format": 1}`))
	f.Add([]byte(`{"format": 1, "meshes": {"m": {"shape": null, "devices": null}}, "tensors": [{}], "ops": [{"axis": -1}], "steps": [{"kind": "collective", "type": "Gather", "root": 0, "teams": [[]]}]}`))
	// Split sizes that are no matrix of the team's size: ragged, short,
	// negative, on teams of two sizes and on a type that takes none.
	f.Add([]byte(`{"format": 1, "meshes": {"m": {"shape": [3], "devices": [0, 1, 2]}}, "steps": [` +
		`{"kind": "collective", "type": "AllToAllV", "teams": [[0, 1], [2]], "count": {"input": 2, "output": 2}, "send_counts": [[1, -1], [2], []]},` +
		`{"kind": "collective", "type": "AllToAllV", "teams": [[0, 1, 1]], "send_counts": [[9223372036854775807, 1, 0]]},` +
		`{"kind": "collective", "type": "AllToAll", "teams": [[0, 1]], "send_counts": [[1, 1], [1, 1]]}]}`))
	f.Fuzz(func(t *testing.T, src []byte) {
		p, err := Decode("fuzz.json", src)
		if err != nil {
			return
		}
		got := Validate(p)
		if again := Validate(p); !slices.Equal(got, again) {
			t.Fatalf("Validate is not deterministic:\n%v\n%v", got, again)
		}
		for _, pr := range got {
			if pr.Msg == "" || pr.Step < -1 || pr.Step >= len(p.Steps) {
				t.Fatalf("bad problem %#v", pr)
			}
		}
	})
}
