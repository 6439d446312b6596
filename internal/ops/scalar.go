package ops

import "strconv"

// Scalar is a number that a binary elementwise op takes as one of its two
// operands, in place of a tensor: torch's `v + 1e-5`, a mean's division
// by its extent, a norm's epsilon. The op then reads one tensor, and the
// number is the same for every element (docs/fusion.md, "ops").
type Scalar struct {
	// Slot is the operand the number stands for: 0 for a, 1 for b.
	Slot int `json:"slot"`
	// Value is the number.
	Value float64 `json:"value"`
}

// Text writes the number as fusion files and op expressions do: 1e-05, 2.
func (s Scalar) Text() string { return strconv.FormatFloat(s.Value, 'g', -1, 64) }

// Args places operand names (the op's tensors, in order) and the number
// in the op's slots: ["x", "1e-05"] for add(x, 1e-05). s nil gives names.
func (s *Scalar) Args(names []string) []string {
	if s == nil {
		return names
	}
	at := min(max(s.Slot, 0), len(names))
	args := make([]string, 0, len(names)+1)
	args = append(args, names[:at]...)
	args = append(args, s.Text())
	return append(args, names[at:]...)
}

// Equal reports whether s and t are the same number in the same slot (both
// nil, or both set).
func (s *Scalar) Equal(t *Scalar) bool {
	if s == nil || t == nil {
		return s == t
	}
	return *s == *t
}

// Clone returns a copy of s; nil for nil.
func (s *Scalar) Clone() *Scalar {
	if s == nil {
		return nil
	}
	c := *s
	return &c
}
