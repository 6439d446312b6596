package diag

import (
	"fmt"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestSuggest(t *testing.T) {
	cands := []string{"meshes", "tensors", "ops", "inputs", "outputs"}
	tests := map[string]string{
		"tensor":  `did you mean "tensors"?`,
		"mehses":  `did you mean "meshes"?`,
		"opz":     `did you mean "ops"?`,
		"zzzzzzz": "",
		"":        "",
	}
	for name, want := range tests {
		if got := Suggest(name, cands); got != want {
			t.Errorf("Suggest(%q) = %q, want %q", name, got, want)
		}
	}
}

// TestTypo: one edit (a swap of neighbours counting as one) in short
// names, two in longer ones, and no suggestion for a word two edits from
// a short candidate ("div" is not "min") or for the name itself.
func TestTypo(t *testing.T) {
	ops := []string{"set", "sum", "prod", "max", "min", "add", "sub", "mul", "maximum", "minimum", "relu", "neg", "abs", "broadcast", "matmul", "linear"}
	tests := []struct{ name, want string }{
		{"summ", "sum"},
		{"sett", "set"},
		{"mx", "max"},
		{"lienar", "linear"}, // a swap
		{"lnear", "linear"},
		{"brodcst", "broadcast"}, // two edits in a long name
		{"matmull", "matmul"},
		{"maxmum", "maximum"},
		{"rleu", "relu"},
		{"div", ""}, // two edits from min, sub
		{"silu", ""},
		{"mean", ""},
		{"brdcst", ""}, // three edits
		{"sum", ""},    // the name itself is no typo
		{"", ""},
	}
	for _, tt := range tests {
		if got := Typo(tt.name, ops); got != tt.want {
			t.Errorf("Typo(%q) = %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestListSortsDedupesAndCaps(t *testing.T) {
	l := &List{File: "f.yaml"}
	l.Add(Pos{Line: 3, Col: 1}, "third")
	l.AddHint(Pos{Line: 1, Col: 5}, `did you mean "x"?`, "first")
	l.Add(Pos{Line: 1, Col: 5}, "first") // same position, other hint: kept
	l.AddHint(Pos{Line: 1, Col: 5}, `did you mean "x"?`, "first")
	want := "f.yaml:1:5: error: first; did you mean \"x\"?\nf.yaml:1:5: error: first\nf.yaml:3:1: error: third"
	if d := cmp.Diff(want, l.Error()); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	for i := range 2 * MaxErrors {
		l.Add(At(10+i, 1), "e%d", i)
	}
	if l.Len() != MaxErrors || l.Dropped != 2*MaxErrors-(MaxErrors-3) {
		t.Errorf("kept %d, dropped %d", l.Len(), l.Dropped)
	}
	if got := l.Error(); !cmp.Equal(got[len(got)-len("f.yaml: too many errors (13 more)"):], fmt.Sprintf("f.yaml: too many errors (%d more)", l.Dropped)) {
		t.Errorf("last line of %q", got)
	}
}

// TestListInOrder checks a list that keeps diagnostics as reported: in
// that order, repeats too, the first MaxErrors, then a count with the
// list's noun.
func TestListInOrder(t *testing.T) {
	for _, tc := range []struct {
		name    string
		noun    string
		reports int
		want    []string
	}{
		{"none", "problems", 0, nil},
		{"repeats kept", "problems", 2, []string{"error: s: m", "error: s: m"}},
		{"capped", "problems", MaxErrors + 3, append(slices.Repeat([]string{"error: s: m"}, MaxErrors), "error: too many problems (3 more)")},
		{"default noun", "", MaxErrors + 1, append(slices.Repeat([]string{"error: s: m"}, MaxErrors), "error: too many errors (1 more)")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := &List{Noun: tc.noun, InOrder: true}
			for range tc.reports {
				l.AddAbout("s", "m")
			}
			var got []string
			for _, d := range l.All() {
				got = append(got, d.Error())
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
			if l.Count() != tc.reports {
				t.Errorf("Count() = %d, want %d", l.Count(), tc.reports)
			}
		})
	}
	l := &List{InOrder: true}
	l.Add(Pos{Line: 3, Col: 1}, "later")
	l.Add(Pos{Line: 1, Col: 1}, "earlier")
	if got := l.Items[0].Message; got != "later" {
		t.Errorf("first kept %q, want the first reported", got)
	}
}

func TestPosString(t *testing.T) {
	if got := (Pos{}).String(); got != "-" {
		t.Errorf("zero Pos = %q", got)
	}
	if got := (Pos{Line: 2, Col: 7}).String(); got != "2:7" {
		t.Errorf("Pos = %q", got)
	}
	if got := (Diagnostic{Message: "m"}).Error(); got != "error: m" {
		t.Errorf("no position: %q", got)
	}
}

// TestSeverity checks that errors and warnings print alike but for their
// severity, positioned or not.
func TestSeverity(t *testing.T) {
	for _, tc := range []struct {
		d    Diagnostic
		want string
	}{
		{Diagnostic{File: "f.yaml", Pos: Pos{Line: 3, Col: 5}, Message: "m", Hint: "h"}, "f.yaml:3:5: error: m; h"},
		{Diagnostic{File: "f.yaml", Pos: Pos{Line: 3, Col: 5}, Severity: Warning, Message: "m", Hint: "h"}, "f.yaml:3:5: warning: m; h"},
		{Warn("f.yaml", "search stopped after %d", 7), "f.yaml: warning: search stopped after 7"},
		{Diagnostic{File: "p.json", Subject: "step 3 (Allgather)", Message: "m", Hint: "h"}, "p.json: error: step 3 (Allgather): m; h"},
		{Diagnostic{File: "p.json", Subject: "step 3", Severity: Warning, Message: "m"}, "p.json: warning: step 3: m"},
	} {
		if got := tc.d.Error(); got != tc.want {
			t.Errorf("%+v: Error() = %q, want %q", tc.d, got, tc.want)
		}
	}
}

// TestKeep checks Keep's rules: sorted by position, ties in the order
// added, repeats kept once and not counted, the first max by position
// kept, and a negative max keeping all.
func TestKeep(t *testing.T) {
	at := func(line, col int, msg string) Diagnostic {
		return Diagnostic{Pos: At(line, col), Message: msg}
	}
	tests := []struct {
		name        string
		items       []Diagnostic
		add         Diagnostic
		max         int
		want        []Diagnostic
		wantDropped int
	}{
		{"into empty", nil, at(3, 1, "a"), 2, []Diagnostic{at(3, 1, "a")}, 0},
		{"before", []Diagnostic{at(3, 1, "a")}, at(1, 4, "b"), 2, []Diagnostic{at(1, 4, "b"), at(3, 1, "a")}, 0},
		{"tie goes after", []Diagnostic{at(3, 1, "a")}, at(3, 1, "b"), 2, []Diagnostic{at(3, 1, "a"), at(3, 1, "b")}, 0},
		{"repeat", []Diagnostic{at(3, 1, "a")}, at(3, 1, "a"), 1, []Diagnostic{at(3, 1, "a")}, 0},
		{"full, after the last", []Diagnostic{at(1, 1, "a"), at(2, 1, "b")}, at(5, 1, "c"), 2,
			[]Diagnostic{at(1, 1, "a"), at(2, 1, "b")}, 1},
		{"full, displaces the last", []Diagnostic{at(1, 1, "a"), at(2, 1, "b")}, at(1, 3, "c"), 2,
			[]Diagnostic{at(1, 1, "a"), at(1, 3, "c")}, 1},
		{"unknown position first", []Diagnostic{at(1, 1, "a")}, at(0, 0, "c"), 1, []Diagnostic{at(0, 0, "c")}, 1},
		{"uncapped", []Diagnostic{at(1, 1, "a")}, at(2, 1, "b"), -1, []Diagnostic{at(1, 1, "a"), at(2, 1, "b")}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, dropped := Keep(slices.Clone(tt.items), tt.add, tt.max)
			if d := cmp.Diff(tt.want, got); d != "" {
				t.Errorf("items (-want +got):\n%s", d)
			}
			if dropped != tt.wantDropped {
				t.Errorf("dropped %d, want %d", dropped, tt.wantDropped)
			}
		})
	}
}
