package diag

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestCollector checks that a Collector keeps the first MaxErrors
// diagnostics by position, ties in report order, drops repeats and counts
// the rest.
func TestCollector(t *testing.T) {
	// A report is a diagnostic at line:col with message msg.
	type report struct {
		line, col int
		msg       string
	}
	// numbered are reports at the given lines (column 1), their messages
	// their indexes.
	numbered := func(lines ...int) []report {
		var rs []report
		for i, line := range lines {
			rs = append(rs, report{line, 1, fmt.Sprint(i)})
		}
		return rs
	}
	tests := []struct {
		name    string
		reports []report
		// want are the kept ones, "line:col msg", in order.
		want    []string
		dropped int
	}{
		{"none", nil, nil, 0},
		{"sorted by position", []report{{3, 1, "a"}, {1, 5, "b"}, {2, 2, "c"}, {1, 1, "d"}},
			[]string{"1:1 d", "1:5 b", "2:2 c", "3:1 a"}, 0},
		{"a repeat is kept once", []report{{2, 1, "a"}, {2, 1, "a"}, {1, 1, "b"}},
			[]string{"1:1 b", "2:1 a"}, 0},
		{"ties in report order", []report{{4, 2, "b"}, {4, 2, "a"}, {4, 2, "c"}},
			[]string{"4:2 b", "4:2 a", "4:2 c"}, 0},
		{"an earlier one displaces the last", append(numbered(20, 19, 18, 17, 16, 15, 14, 13, 12, 11, 30, 1, 11),
			report{15, 2, "13"}),
			[]string{"1:1 11", "11:1 9", "11:1 12", "12:1 8", "13:1 7", "14:1 6", "15:1 5", "15:2 13", "16:1 4", "17:1 3"}, 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := &Collector{File: "f.yaml"}
			for _, r := range tt.reports {
				l.Add(At(r.line, r.col), "%s", r.msg)
			}
			var got []string
			for _, d := range l.List().Items {
				got = append(got, d.Pos.String()+" "+d.Message)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("kept (-want +got):\n%s", diff)
			}
			if got, want := l.List().Dropped, tt.dropped; got != want {
				t.Errorf("dropped %d, want %d", got, want)
			}
			if got, want := l.Count(), len(tt.want)+tt.dropped; got != want {
				t.Errorf("Count() = %d, want %d", got, want)
			}
			if (l.Err() == nil) != (len(tt.want) == 0) {
				t.Errorf("Err() = %v with %d kept", l.Err(), len(tt.want))
			}
		})
	}
}
