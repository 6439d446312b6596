package plan

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/nvcomm/nvcomm/internal/diag"
)

// FuzzDecodeValidate checks that Validate never panics on a decoded plan,
// answers the same twice, and names only steps the plan has; and that a
// plan Decode rejects gets one error, in the file, in nvcomm's words.
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
			checkDecodeError(t, src, err)
			return
		}
		got := Validate(p)
		if again := Validate(p); !slices.Equal(got, again) {
			t.Fatalf("Validate is not deterministic:\n%v\n%v", got, again)
		}
		for _, pr := range got {
			if pr.Message == "" || pr.File != "" || pr.Pos.IsKnown() || pr.Severity != diag.Error {
				t.Fatalf("bad problem %#v", pr)
			}
		}
	})
}

// checkDecodeError checks an error of Decode: one diagnostic, at a line
// and column of src, worded by describe (the library's own messages, which
// start "json:" or "jsontext:", are not shown).
func checkDecodeError(t *testing.T, src []byte, err error) {
	t.Helper()
	dl, ok := err.(*diag.List)
	if !ok || len(dl.Items) != 1 {
		t.Fatalf("Decode error %T %v, want a *diag.List of one", err, err)
	}
	d := dl.Items[0]
	lines := bytes.Split(src, []byte("\n"))
	if line, col := int(d.Pos.Line), int(d.Pos.Col); line < 1 || line > len(lines) || col < 1 || col > len(lines[line-1])+1 {
		t.Fatalf("Decode error at %d:%d, outside the input: %v", d.Pos.Line, d.Pos.Col, err)
	}
	if strings.Contains(d.Message, "json:") || strings.Contains(d.Message, "jsontext:") {
		t.Fatalf("Decode error in the library's words: %v", err)
	}
}
