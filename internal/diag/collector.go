package diag

import (
	"fmt"
	"slices"
)

// Collector collects a file's diagnostics as a [List] does (the first
// [MaxErrors] by position, each once), and can also keep every one
// (Uncapped) and count them all (Count). A fusion's front end and its
// builder report into one Collector, so that their problems are kept
// and capped together.
type Collector struct {
	// File is the name each diagnostic is reported in.
	File string
	// Uncapped keeps every diagnostic: a collector whose items are taken
	// (Take) and added to another later, which caps them then.
	Uncapped bool
	// items are the kept diagnostics, sorted by position, ties in the
	// order they were reported.
	items []Diagnostic
	// dropped counts the diagnostics beyond the kept ones.
	dropped int
}

// Add records an error at pos; the message is formatted with fmt.Sprintf.
func (l *Collector) Add(pos Pos, format string, args ...any) {
	l.AddHint(pos, "", format, args...)
}

// AddHint records an error at pos with a hint.
func (l *Collector) AddHint(pos Pos, hint, format string, args ...any) {
	l.Append(Diagnostic{Pos: pos, Message: fmt.Sprintf(format, args...), Hint: hint})
}

// Append records d in the collector's file, as AddHint does.
func (l *Collector) Append(d Diagnostic) {
	d.File = l.File
	max := MaxErrors
	if l.Uncapped {
		max = -1
	}
	var dropped int
	l.items, dropped = Keep(l.items, d, max)
	l.dropped += dropped
}

// AppendAll records each of ds, as Append does.
func (l *Collector) AppendAll(ds []Diagnostic) {
	for _, d := range ds {
		l.Append(d)
	}
}

// Count is the number of distinct errors reported so far, kept or
// dropped: a check compares it before and after to learn whether it
// found a problem, which the kept ones alone cannot tell once the list is
// full.
func (l *Collector) Count() int { return len(l.items) + l.dropped }

// Take returns the diagnostics kept so far (nil when there are none) and
// empties the collector.
func (l *Collector) Take() []Diagnostic {
	if len(l.items) == 0 {
		return nil
	}
	ds := slices.Clone(l.items)
	l.items, l.dropped = l.items[:0], 0
	return ds
}

// List returns the diagnostics as a List.
func (l *Collector) List() *List {
	return &List{File: l.File, Items: slices.Clone(l.items), Dropped: l.dropped}
}

// Err returns the diagnostics as a *List, or nil when there are none.
func (l *Collector) Err() error {
	if l.Count() == 0 {
		return nil
	}
	return l.List()
}
