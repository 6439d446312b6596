package cli

import (
	"fmt"
	"slices"
	"strings"
)

// enumFlag is a string flag restricted to a fixed set of values; a bad value
// fails at parse time and so exits 2. The first value is the default.
type enumFlag struct {
	allowed []string
	value   string
}

func newEnum(allowed ...string) *enumFlag { return &enumFlag{allowed: allowed, value: allowed[0]} }

func (e *enumFlag) String() string { return e.value }
func (e *enumFlag) Type() string   { return "string" }

func (e *enumFlag) Set(v string) error {
	if !slices.Contains(e.allowed, v) {
		return fmt.Errorf("must be one of %s", strings.Join(e.allowed, ", "))
	}
	e.value = v
	return nil
}
