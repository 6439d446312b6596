package ir

import (
	"fmt"
	"slices"

	"github.com/nvcomm/nvcomm/internal/diag"
)

// errList collects a file's diagnostics as a diag.List does (the first
// diag.MaxErrors by position, each once), and can also keep every one
// (uncapped) and count them all (Count).
type errList struct {
	file string
	// items are the kept diagnostics, sorted by position, ties in the
	// order they were reported.
	items []diag.Diagnostic
	// dropped counts the diagnostics beyond the kept ones.
	dropped int
	// uncapped keeps every diagnostic: a list whose items are taken
	// (take) and added to another later, which caps them then.
	uncapped bool
}

// Add records an error at pos; the message is formatted with fmt.Sprintf.
func (l *errList) Add(pos diag.Pos, format string, args ...any) {
	l.AddHint(pos, "", format, args...)
}

// AddHint records an error at pos with a hint.
func (l *errList) AddHint(pos diag.Pos, hint, format string, args ...any) {
	l.add(diag.Diagnostic{Pos: pos, Message: fmt.Sprintf(format, args...), Hint: hint})
}

// add records d, as AddHint does.
func (l *errList) add(d diag.Diagnostic) {
	d.File = l.file
	max := diag.MaxErrors
	if l.uncapped {
		max = -1
	}
	var dropped int
	l.items, dropped = diag.Keep(l.items, d, max)
	l.dropped += dropped
}

// Count is the number of distinct errors reported so far, kept or
// dropped: a check compares it before and after to learn whether it
// found a problem, which the kept ones alone cannot tell once the list is
// full.
func (l *errList) Count() int { return len(l.items) + l.dropped }

// addAll records each of ds, as add does.
func (l *errList) addAll(ds []diag.Diagnostic) {
	for _, d := range ds {
		l.add(d)
	}
}

// take returns the diagnostics kept so far (nil when there are none) and
// empties the list.
func (l *errList) take() []diag.Diagnostic {
	if len(l.items) == 0 {
		return nil
	}
	ds := slices.Clone(l.items)
	l.items, l.dropped = l.items[:0], 0
	return ds
}

// List returns the diagnostics as a diag.List.
func (l *errList) List() *diag.List {
	return &diag.List{File: l.file, Items: slices.Clone(l.items), Dropped: l.dropped}
}

// Err returns the diagnostics as a *diag.List, or nil when there are none.
func (l *errList) Err() error {
	if l.Count() == 0 {
		return nil
	}
	return l.List()
}
