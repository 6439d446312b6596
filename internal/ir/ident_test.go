package ir

import (
	"regexp"
	"testing"
)

// TestIsIdent compares isIdent with the regular expression it replaces,
// on names, near misses and bytes outside ASCII.
func TestIsIdent(t *testing.T) {
	re := regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	for _, s := range []string{
		"", "a", "_", "Z", "tv0", "_x9", "t_1_b", "0", "9a", "a-b", "a b", "a.b", "tv1/partial",
		"é", "aé", "a\x00", "[", "`", "@", "{", ":", "/", "a9Z_",
	} {
		if got, want := IsIdent(s), re.MatchString(s); got != want {
			t.Errorf("IsIdent(%q) = %v, want %v", s, got, want)
		}
	}
	for c := range 256 { // every single byte, first and later
		for _, s := range []string{string([]byte{byte(c)}), "a" + string([]byte{byte(c)})} {
			if got, want := IsIdent(s), re.MatchString(s); got != want {
				t.Errorf("IsIdent(%q) = %v, want %v", s, got, want)
			}
		}
	}
}
