package ops

import "strings"

// The backward of a fusion (docs/training.md, "Recomputation") makes some
// forward tensors again rather than keeping them: a recomputed copy of t,
// "y.grad/recomputed_t", and a copy of an operand x gathered again,
// "y.grad/regathered_x", y the output of the op whose gradient rule reads
// the copy first. The names are the plan's, so that the packages that
// read plans say which copy is which.

// Prefixes of the names of the copies the backward makes again, after
// "y.grad/".
const (
	RecomputedPrefix = "recomputed_"
	RegatheredPrefix = "regathered_"
)

// Remade returns the forward tensor that name, a copy the backward makes
// again, stands for: t for y.grad/recomputed_t (regathered false), x for
// y.grad/regathered_x (regathered true); "" for any other name.
func Remade(name string) (t string, regathered bool) {
	i := strings.Index(name, ".grad/")
	if i <= 0 {
		return "", false
	}
	rest := name[i+len(".grad/"):]
	if t, ok := strings.CutPrefix(rest, RecomputedPrefix); ok && ident(t) {
		return t, false
	}
	if x, ok := strings.CutPrefix(rest, RegatheredPrefix); ok && ident(x) {
		return x, true
	}
	return "", false
}

// ident reports whether s is a file's tensor name: letters, digits and
// _, not starting with a digit.
func ident(s string) bool {
	for i, c := range s {
		letter := c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
		if !letter && (i == 0 || c < '0' || c > '9') {
			return false
		}
	}
	return s != ""
}
