// Package diag holds diagnostics: messages tied to a position in an input
// file (or, where there is none, to a subject such as a plan's step),
// collected several at a time and rendered as file:line:col lines.
//
// Diagnostic is nvcomm's one error type, for fusions and plans alike.
// Every phase reports problems as a [List] rather than stopping at the
// first one, so a user sees up to [MaxErrors] problems per run.
package diag

import (
	"cmp"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"unicode/utf8"
)

// MaxErrors is how many diagnostics a [List] keeps; later ones are counted
// but dropped, as the Go compiler does.
const MaxErrors = 10

// Pos is a position in an input file. Line and Col are 1-based; Col counts
// characters, as the YAML parser reports them. The zero Pos means "unknown".
// They are 32-bit: a fusion's declarations keep several positions each, and
// inputs are far below 2³¹ lines (At saturates beyond).
type Pos struct {
	Line int32
	Col  int32
}

// At is the position of line and col, each saturated at the largest
// int32.
func At(line, col int) Pos {
	return Pos{Line: int32(min(line, math.MaxInt32)), Col: int32(min(col, math.MaxInt32))}
}

// IsKnown reports whether p points somewhere.
func (p Pos) IsKnown() bool { return p.Line > 0 }

// String renders p as "line:col", or "-" when unknown.
func (p Pos) String() string {
	if !p.IsKnown() {
		return "-"
	}
	return fmt.Sprintf("%d:%d", p.Line, p.Col)
}

// Severity says whether a diagnostic stops the run.
type Severity int

// The severities. The zero Severity is Error.
const (
	// Error: the input is wrong, and the run fails (exit code 1).
	Error Severity = iota
	// Warning: the run goes on, and its result may not be what was meant.
	Warning
)

// String names the severity as diagnostics print it.
func (s Severity) String() string {
	if s == Warning {
		return "warning"
	}
	return "error"
}

// Diagnostic is one error or warning about an input, with where it is,
// what was wrong and, optionally, a hint on how to fix it.
type Diagnostic struct {
	File     string
	Pos      Pos
	Severity Severity
	// Subject names what in the input the diagnostic is about where it has
	// no position ("step 3 (Allgather)" in a plan); empty when Pos, or the
	// message, says it.
	Subject string
	Message string // lower-case, no trailing period
	Hint    string // optional remedy, e.g. a did-you-mean suggestion
}

// Warn is a warning about file, at no position.
func Warn(file, format string, args ...any) Diagnostic {
	return Diagnostic{File: file, Severity: Warning, Message: fmt.Sprintf(format, args...)}
}

// Error renders d as "file:line:col: error: subject: message; hint"
// ("warning:" for a warning).
func (d Diagnostic) Error() string {
	var b strings.Builder
	if d.File != "" {
		b.WriteString(d.File)
		b.WriteString(":")
	}
	if d.Pos.IsKnown() {
		fmt.Fprintf(&b, "%d:%d:", d.Pos.Line, d.Pos.Col)
	}
	if b.Len() > 0 {
		b.WriteString(" ")
	}
	b.WriteString(d.Severity.String())
	b.WriteString(": ")
	b.WriteString(d.Text())
	return b.String()
}

// Text renders what d says, without its file, position and severity:
// "subject: message; hint".
func (d Diagnostic) Text() string {
	s := d.Message
	if d.Subject != "" {
		s = d.Subject + ": " + s
	}
	if d.Hint != "" {
		s += "; " + d.Hint
	}
	return s
}

// List collects diagnostics for one file. The zero value is ready to use
// once File is set. It keeps the first MaxErrors diagnostics by position,
// not the first reported: nvcomm checks a file in passes (its structure,
// then shapes and shardings, then the lowering of ops in dependency
// order) that report in their own order, and a user fixing a file top
// down wants its first errors, whichever pass found them.
//
// A list with InOrder set keeps instead the first MaxErrors diagnostics
// reported, in that order, each however often it is reported: a plan's
// problems have no position, and its checks run in the order a user reads
// the plan in (header, meshes, tensors, ops, steps, summary).
type List struct {
	File string
	// Noun names the diagnostics where they are counted (All, WriteTo):
	// "errors" when empty.
	Noun string
	// InOrder keeps the diagnostics in the order they were added, each
	// time it is added, the first MaxErrors of them: a plan's problems,
	// which have no position, are printed in the order the checks find
	// them, and a check counts them to learn whether it found one.
	InOrder bool
	// Items are the kept diagnostics, sorted by position, ties in the
	// order they were reported (InOrder: in that order).
	Items   []Diagnostic
	Dropped int // diagnostics beyond MaxErrors
}

// Add records an error at pos. Messages are formatted with fmt.Sprintf.
func (l *List) Add(pos Pos, format string, args ...any) {
	l.AddHint(pos, "", format, args...)
}

// AddHint records an error at pos with a hint.
func (l *List) AddHint(pos Pos, hint, format string, args ...any) {
	l.Append(Diagnostic{File: l.File, Pos: pos, Message: fmt.Sprintf(format, args...), Hint: hint})
}

// AddAbout records an error about subject, at no position, formatting its
// message only when the list keeps it: a plan may have millions of
// problems.
func (l *List) AddAbout(subject, format string, args ...any) {
	if l.InOrder && l.Full() {
		l.Dropped++
		return
	}
	l.Append(Diagnostic{File: l.File, Subject: subject, Message: fmt.Sprintf(format, args...)})
}

// Append records d, keeping it or counting it as dropped.
func (l *List) Append(d Diagnostic) {
	if l.InOrder {
		if l.Full() {
			l.Dropped++
		} else {
			l.Items = append(l.Items, d)
		}
		return
	}
	var dropped int
	l.Items, dropped = Keep(l.Items, d, MaxErrors)
	l.Dropped += dropped
}

// Full reports whether the list keeps no more diagnostics.
func (l *List) Full() bool { return len(l.Items) >= MaxErrors }

// Count is the number of diagnostics recorded, kept or dropped.
func (l *List) Count() int { return len(l.Items) + l.Dropped }

// All returns the kept diagnostics, nil when there are none, followed by
// an error that says how many more there were when some were dropped:
// "too many problems (N more)", with the list's Noun.
func (l *List) All() []Diagnostic {
	if l.Dropped == 0 {
		return l.Items
	}
	return append(l.Items, Diagnostic{File: l.File, Message: fmt.Sprintf("too many %s (%d more)", l.noun(), l.Dropped)})
}

// noun is what the list's diagnostics are called when counted.
func (l *List) noun() string { return cmp.Or(l.Noun, "errors") }

// Keep adds d to items, which are sorted by position (ties in the order
// they were added), keeping at most max of them: the first by position.
// It returns the new items and how many diagnostics were dropped, 1 when
// the list was full (d, or the last kept one that d goes before), else 0.
// A diagnostic equal to one kept is not added again, and not counted.
// A max below 0 keeps every diagnostic.
func Keep(items []Diagnostic, d Diagnostic, max int) ([]Diagnostic, int) {
	if slices.Contains(items, d) {
		return items, 0
	}
	// The first kept diagnostic after d: d goes before it, after those at
	// its own position.
	i, _ := slices.BinarySearchFunc(items, d, func(a, b Diagnostic) int {
		if c := ComparePos(a.Pos, b.Pos); c != 0 {
			return c
		}
		return -1 // a was added first
	})
	if max < 0 || len(items) < max {
		return slices.Insert(items, i, d), 0
	}
	if i < len(items) {
		// d replaces the last kept one.
		copy(items[i+1:], items[i:len(items)-1])
		items[i] = d
	}
	return items, 1
}

// ComparePos orders positions as a List prints them: by line, then by
// column, an unknown position first.
func ComparePos(a, b Pos) int {
	return cmp.Or(cmp.Compare(a.Line, b.Line), cmp.Compare(a.Col, b.Col))
}

// Len reports how many diagnostics were kept.
func (l *List) Len() int { return len(l.Items) }

// Err returns the list as an error, or nil when it is empty.
func (l *List) Err() error {
	if len(l.Items) == 0 {
		return nil
	}
	return l
}

// Error renders every diagnostic, sorted by position, one per line.
func (l *List) Error() string {
	var b strings.Builder
	l.WriteTo(&b)
	return strings.TrimSuffix(b.String(), "\n")
}

// WriteTo writes the diagnostics (sorted by position), one per line, and a
// final line counting those that were dropped.
func (l *List) WriteTo(w io.Writer) (int64, error) {
	var n int64
	for _, d := range l.Items {
		k, err := fmt.Fprintln(w, d.Error())
		n += int64(k)
		if err != nil {
			return n, err
		}
	}
	if l.Dropped > 0 {
		k, err := fmt.Fprintf(w, "%s: too many %s (%d more)\n", l.File, l.noun(), l.Dropped)
		n += int64(k)
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// Suggest returns a hint naming the candidate closest to name, or "" when
// none is close enough to be a likely typo.
func Suggest(name string, candidates []string) string {
	sorted := slices.Sorted(slices.Values(candidates))
	best, bestDist := "", 3
	if len(name) <= 2 {
		bestDist = 2
	}
	for _, c := range sorted {
		if d := distance(name, c); d < bestDist {
			best, bestDist = c, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf("did you mean %q?", best)
}

// Typo returns the candidate of which name is a likely misspelling, or ""
// when there is none: one edit (an insertion, deletion, substitution or
// swap of neighbours) for names of up to 5 characters, two for longer
// ones. It is stricter than [Suggest], for names where a near word is
// often another word: "div" is not a misspelled "min", two edits in
// three letters. A name that is a candidate is no typo. Ties go to the
// first candidate in sorted order.
func Typo(name string, candidates []string) string {
	if name == "" || slices.Contains(candidates, name) {
		return ""
	}
	limit := 1
	if utf8.RuneCountInString(name) > 5 {
		limit = 2
	}
	best, bestDist := "", limit+1
	for _, c := range slices.Sorted(slices.Values(candidates)) {
		if d := swapDistance(name, c); d < bestDist {
			best, bestDist = c, d
		}
	}
	return best
}

// swapDistance is the optimal string alignment distance between a and b:
// the Levenshtein distance with a swap of two neighbouring characters
// ("lienar") counted as one edit.
func swapDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	d := make([][]int, len(ra)+1)
	for i := range d {
		d[i] = make([]int, len(rb)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(ra); i++ {
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(ra)][len(rb)]
}

// distance is the Levenshtein edit distance between a and b.
func distance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}
