package ir

import (
	"github.com/nvcomm/nvcomm/internal/diag"
)

// Str is a value that should be a string, as a file writes it and as the
// checks that run after the front end has read it need it: the string
// (Value), or else what the value is (Got: "integer 3", "a list"), and
// where it is written.
type Str struct {
	Value string
	// Got is what the value is when it is no string, "" for a string.
	Got string
	Pos diag.Pos
}

// StrList is a list of strings as a file writes it (a fusion's inputs, a
// tensor's placements): where it is written, what it is when it is no
// list (Got, "" for a list), and its entries.
type StrList struct {
	At    diag.Pos
	Got   string
	Items []Str
}

// Expected reports into errs a value at pos that is not what it should
// be: got (what the value is: "a list", "integer 3") where want was
// expected.
func Expected(errs *diag.Collector, pos diag.Pos, what, want, got string) {
	errs.Add(pos, "%s: expected %s, got %s", what, want, got)
}

// String is s's string, after reporting into errs that s is none.
func (s Str) String(errs *diag.Collector, what string) (string, bool) {
	if s.Got != "" {
		Expected(errs, s.Pos, what, "a string", s.Got)
		return "", false
	}
	return s.Value, true
}

// Ident is s's string when it is a name (IsIdent), after reporting into
// errs that it is none.
func (s Str) Ident(errs *diag.Collector, what string) (string, bool) {
	name, ok := s.String(errs, what)
	if ok && !IsIdent(name) {
		errs.Add(s.Pos, "%s: %q is not a valid name (expected letters, digits and _, not starting with a digit)", what, name)
		return "", false
	}
	return name, ok
}

// Entries are l's entries, after reporting into errs that l is no list.
func (l *StrList) Entries(errs *diag.Collector, what string) ([]Str, bool) {
	if l.Got != "" {
		Expected(errs, l.At, what, "a list", l.Got)
		return nil, false
	}
	return l.Items, true
}

// tensorIn is Ident for a list of tensors (inputs, outputs), which may
// name a gradient too (t.grad).
func (p *Source) tensorIn(s Str, what string) (string, bool) {
	if IsGradName(s.Value) && s.Got == "" {
		return s.Value, true
	}
	return s.Ident(p.errs, what)
}

// IsIdent reports whether s matches [A-Za-z_][A-Za-z0-9_]*, the names of
// a fusion's meshes and tensors: a loop over bytes, as every name of a
// fusion is checked (a regular expression took a tenth of parsing).
// Buffer names nvcomm makes ("tv1/partial") are no identifiers, so they
// never collide with a file's.
func IsIdent(s string) bool {
	for i := range len(s) {
		c := s[i]
		letter := c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
		if !letter && (i == 0 || c < '0' || c > '9') {
			return false
		}
	}
	return s != ""
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
