package plan

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"
	"unicode"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// describe words an error of decodeLibrary's JSON library and returns the
// byte offset it is at: the bad byte, the repeated or unknown name, or the
// value of the wrong type. The library's own text is used only for the
// grammar (which byte was found, what was expected there): its semantic
// messages vary on purpose from run to run.
func describe(src []byte, err error) (int, string) {
	var syn *jsontext.SyntacticError
	var sem *jsonv2.SemanticError
	switch {
	case err == io.EOF: // no value at all, only blanks
		return 0, "empty input"
	case errors.As(err, &syn):
		return int(syn.ByteOffset), syntaxMessage(src, syn)
	case errors.As(err, &sem):
		return int(sem.ByteOffset), semanticMessage(src, sem)
	}
	return 0, err.Error() // not reached: reading bytes fails no other way
}

// syntaxMessage words an error of the JSON grammar, a repeated name
// included.
func syntaxMessage(src []byte, e *jsontext.SyntacticError) string {
	switch {
	case errors.Is(e.Err, jsontext.ErrDuplicateName):
		first := offsetPos(src, firstName(src, e.JSONPointer))
		return fmt.Sprintf("duplicate key %q%s (first at %d:%d); a plan states each field once",
			e.JSONPointer.LastToken(), within(e.JSONPointer.Parent()), first.Line, first.Col)
	case errors.Is(e.Err, io.ErrUnexpectedEOF):
		return "unexpected end of input" + within(e.JSONPointer)
	case e.Err == nil:
		return "syntax error" + within(e.JSONPointer)
	}
	return e.Err.Error() + within(e.JSONPointer)
}

// semanticMessage words a value that does not fit the plan: an unknown
// field, or a value of the wrong type or out of range.
func semanticMessage(src []byte, e *jsonv2.SemanticError) string {
	if errors.Is(e.Err, jsonv2.ErrUnknownName) {
		name := e.JSONPointer.LastToken()
		msg := fmt.Sprintf("unknown field %q%s", name, within(e.JSONPointer.Parent()))
		if known, ok := fieldFold(e.GoType, name); ok {
			msg += fmt.Sprintf(" (field names are case-sensitive: did you mean %q?)", known)
		}
		return msg
	}
	msg := "expected " + expected(e.GoType) + ", got JSON " + kindName(e.JSONKind)
	if v := scalar(src, e); v != "" {
		msg += " " + v
	}
	if errors.Is(e.Err, strconv.ErrRange) {
		msg += " (out of range)"
	}
	if e.JSONPointer != "" {
		msg = fmt.Sprintf("field %q: %s", fieldPath(e.JSONPointer), msg)
	}
	return msg
}

// firstName returns the offset of the first name that the object member
// ptr points to has in src: the one a duplicate repeats. It reads src
// again, allowing duplicates, up to that member; the decoder's pointer
// names the member as soon as its name is read.
func firstName(src []byte, ptr jsontext.Pointer) int {
	dec := jsontext.NewDecoder(bytes.NewBuffer(src), jsontext.AllowDuplicateNames(true))
	for {
		before := int(dec.InputOffset())
		tok, err := dec.ReadToken()
		if err != nil {
			return before // not reached: the duplicate follows the first
		}
		if tok.Kind() == '"' && dec.StackPointer() == ptr {
			// Only blanks, a comma or a colon come between two tokens.
			return before + bytes.IndexByte(src[before:], '"')
		}
	}
}

// within names where a problem is, for the end of a message: "" at the
// top level.
func within(ptr jsontext.Pointer) string {
	if ptr == "" {
		return ""
	}
	return " in " + fieldPath(ptr)
}

// fieldPath writes a JSON pointer as a path of fields and indices:
// /steps/3/teams/0 is steps[3].teams[0], and a name that is no identifier
// is quoted, meshes["m 1"]. A token that is a number is taken for an
// index, as plans name meshes and step types with letters.
func fieldPath(ptr jsontext.Pointer) string {
	var b strings.Builder
	for tok := range ptr.Tokens() {
		switch n, err := strconv.Atoi(tok); {
		case err == nil && n >= 0 && strconv.Itoa(n) == tok:
			b.WriteString("[" + tok + "]")
		case !isIdent(tok):
			b.WriteString("[" + strconv.Quote(tok) + "]")
		default:
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(tok)
		}
	}
	return b.String()
}

// isIdent reports whether a name is letters, digits and underscores, not
// starting with a digit.
func isIdent(name string) bool {
	for i, r := range name {
		if r != '_' && !unicode.IsLetter(r) && (i == 0 || !unicode.IsDigit(r)) {
			return false
		}
	}
	return name != ""
}

// fieldFold returns the field of struct type t whose JSON name equals
// name but for case, for the hint that names are case-sensitive.
func fieldFold(t reflect.Type, name string) (string, bool) {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t.Kind() != reflect.Struct {
		return "", false
	}
	for f := range t.Fields() {
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if strings.EqualFold(tag, name) {
			return tag, true
		}
	}
	return "", false
}

// expected is the JSON that a Go type of the plan is read from.
func expected(t reflect.Type) string {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil {
		return "another value"
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return t.String() // not reached: plans hold no other kinds
}

// kindName is the name of a kind of JSON value.
func kindName(k jsontext.Kind) string {
	switch k {
	case 'n':
		return "null"
	case 't', 'f':
		return "boolean"
	case '"':
		return "string"
	case '0':
		return "number"
	case '{':
		return "object"
	case '[':
		return "array"
	}
	return "value"
}

// maxShown is the longest string or number a message quotes.
const maxShown = 40

// scalar returns the string or number that e is about, as the JSON has
// it, when short; "" for other values. The library keeps the value for
// some errors only, so it is read again at the error's offset.
func scalar(src []byte, e *jsonv2.SemanticError) string {
	v := e.JSONValue
	if len(v) == 0 && (e.JSONKind == '"' || e.JSONKind == '0') && int(e.ByteOffset) < len(src) {
		v, _ = jsontext.NewDecoder(bytes.NewBuffer(src[e.ByteOffset:])).ReadValue()
	}
	if len(v) == 0 || len(v) > maxShown || (v.Kind() != '"' && v.Kind() != '0') {
		return ""
	}
	return string(v)
}
