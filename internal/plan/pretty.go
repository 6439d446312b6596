package plan

import (
	"encoding/json"
	"io"
	"strconv"
	"unicode/utf8"
)

// inlineWidth is the longest value, in characters, that the encoder keeps
// on one line, with two characters per level of indentation: short lists
// and objects ("teams": [[0, 1, 2, 3]]) read better inline than one number
// per line.
const inlineWidth = 88

// flushSize is how many bytes the encoder collects before it writes them:
// large enough that writes are few, small enough that a big plan is never
// held whole.
const flushSize = 64 << 10

// encoder writes a plan as indented JSON in one pass over the plan, without
// reflection or an intermediate encoding (re-indenting encoding/json's
// output took 75% of the time of lowering 100k ops).
//
// A container (list or object) goes on one line when that line, indented,
// is at most inlineWidth wide; else each child goes on its own line. The
// encoder does not measure a container first: it writes it inline into
// buf (flat) and, if the line grows past limit, drops what it wrote and
// writes it again across lines. Inline writing stops as soon as the limit
// is passed, so a failed attempt costs at most about inlineWidth bytes,
// and the plan is written in time linear in its size. Bytes before an
// attempt are final, and are flushed to w whenever buf holds flushSize.
type encoder struct {
	w   io.Writer
	buf []byte
	err error
	// depth is the indentation level of the value about to be written.
	depth int
	// flat is set during an inline attempt; limit is then the length of
	// buf past which the attempt fails.
	flat  bool
	limit int
	// open lists the containers being written, innermost last: a stack
	// in the encoder rather than a value passed to each body, which the
	// compiler would allocate on the heap (body is called indirectly).
	open []frame
}

// frame is a list or object being written: how deep it is and how many
// children it has so far.
type frame struct{ depth, n int }

// over reports whether an inline attempt has already failed: every write
// then does nothing, so a long list inside a long line is not written in
// full only to be dropped.
func (e *encoder) over() bool {
	return e.flat && len(e.buf) > e.limit
}

// flush writes buf out. Only called outside inline attempts, when every
// byte of buf is final.
func (e *encoder) flush() {
	if e.err == nil {
		_, e.err = e.w.Write(e.buf)
	}
	e.buf = e.buf[:0]
}

// object writes a JSON object whose fields body writes, each after
// e.key(name).
func (e *encoder) object(body func()) { e.container('{', '}', body) }

// wideObject writes a JSON object whose fields that are always written
// are wider than inlineWidth (a step's take 151 characters at the least, a
// tensor's 99): across lines
// at once, without the inline attempt that container would make and drop,
// which was a third of writing a step.
func (e *encoder) wideObject(body func()) {
	if !e.over() {
		e.write('{', '}', e.depth, body)
	}
}

// list writes a JSON array of n elements; elem writes element i.
func (e *encoder) list(n int, elem func(i int)) {
	e.container('[', ']', func() {
		for i := range n {
			if e.over() {
				return
			}
			e.item()
			elem(i)
		}
	})
}

// container writes a list or object on one line if it fits, else across
// lines.
func (e *encoder) container(open, close byte, body func()) {
	if e.over() {
		return
	}
	depth := e.depth
	if !e.flat {
		start := len(e.buf)
		e.flat, e.limit = true, start+inlineWidth-2*depth
		n := e.write(open, close, depth, body)
		e.flat = false
		if len(e.buf) <= e.limit || n == 0 { // an empty container is always inline
			return
		}
		e.buf = e.buf[:start]
	}
	e.write(open, close, depth, body)
}

// write writes a container inline or across lines, as e.flat says, and
// returns its number of children.
func (e *encoder) write(open, close byte, depth int, body func()) int {
	e.begin(open, depth)
	body()
	return e.end(close)
}

// begin opens a container at depth, inline or across lines as e.flat
// says; its children follow, each after e.item().
func (e *encoder) begin(open byte, depth int) {
	e.open = append(e.open, frame{depth: depth})
	e.buf = append(e.buf, open)
}

// end closes the innermost container and returns its number of children.
func (e *encoder) end(close byte) int {
	f := e.open[len(e.open)-1]
	e.open = e.open[:len(e.open)-1]
	if f.n > 0 && !e.flat {
		e.newline(f.depth)
	}
	e.buf = append(e.buf, close)
	e.depth = f.depth
	return f.n
}

// item starts the innermost container's next child: its separator, and
// when written across lines its own indented line.
func (e *encoder) item() {
	f := &e.open[len(e.open)-1]
	if e.flat {
		if f.n > 0 {
			e.buf = append(e.buf, ", "...)
		}
	} else {
		if f.n > 0 {
			e.buf = append(e.buf, ',')
		}
		if len(e.buf) >= flushSize {
			e.flush()
		}
		e.newline(f.depth + 1)
	}
	f.n++
	e.depth = f.depth + 1
}

// key starts the innermost object's next field, named by a constant
// that JSON writes as it is (a field name of the plan's types).
func (e *encoder) key(name string) {
	if e.over() {
		return
	}
	e.item()
	e.buf = append(e.buf, '"')
	e.buf = append(e.buf, name...)
	e.buf = append(e.buf, '"', ':', ' ')
}

// mapKey starts the innermost object's next field, named by a map key.
func (e *encoder) mapKey(name string) {
	if e.over() {
		return
	}
	e.item()
	e.str(name)
	e.buf = append(e.buf, ": "...)
}

const spaces = "                                                                "

// newline starts a line indented for depth.
func (e *encoder) newline(depth int) {
	e.buf = append(e.buf, '\n')
	for n := 2 * depth; n > 0; n -= len(spaces) {
		e.buf = append(e.buf, spaces[:min(n, len(spaces))]...)
	}
}

// int writes an integer.
func (e *encoder) int(x int) {
	if !e.over() {
		e.buf = strconv.AppendInt(e.buf, int64(x), 10)
	}
}

// int64 writes an integer.
func (e *encoder) int64(x int64) {
	if !e.over() {
		e.buf = strconv.AppendInt(e.buf, x, 10)
	}
}

// bool writes true or false.
func (e *encoder) bool(b bool) {
	if !e.over() {
		e.buf = strconv.AppendBool(e.buf, b)
	}
}

// null writes null, as encoding/json writes a nil pointer, slice or map.
func (e *encoder) null() {
	if !e.over() {
		e.buf = append(e.buf, "null"...)
	}
}

// str writes a JSON string. Names are almost always plain ASCII, written as
// they are; anything else goes through encoding/json (without HTML
// escaping), after replacing each invalid UTF-8 byte with U+FFFD: the
// earlier encoder decoded encoding/json's "\ufffd" escape and wrote
// the character itself.
func (e *encoder) str(s string) {
	if e.over() {
		return
	}
	if plainASCII(s) {
		e.buf = append(e.buf, '"')
		e.buf = append(e.buf, s...)
		e.buf = append(e.buf, '"')
		return
	}
	b, err := marshalNoEscape(validUTF8(s))
	e.fail(err)
	e.buf = append(e.buf, b...)
}

// plainASCII reports whether JSON writes s as it is between quotes.
func plainASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= utf8.RuneSelf || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// validUTF8 replaces every byte of s that is not part of a valid UTF-8
// sequence with U+FFFD, one for each byte as encoding/json does.
func validUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	out := make([]byte, 0, len(s)+8)
	for _, r := range s { // an invalid byte ranges as one utf8.RuneError
		out = utf8.AppendRune(out, r)
	}
	return string(out)
}

// float writes a number as encoding/json does (NaN and infinities are an
// error).
func (e *encoder) float(f float64) {
	if e.over() {
		return
	}
	b, err := marshalNoEscape(f)
	e.fail(err)
	e.buf = append(e.buf, b...)
}

func (e *encoder) fail(err error) {
	if e.err == nil {
		e.err = err
	}
}

// marshalNoEscape is encoding/json without HTML escaping.
func marshalNoEscape(v any) ([]byte, error) {
	var b jsonBuffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	err := enc.Encode(v)
	return b.TrimNewline(), err
}

// jsonBuffer collects an encoding/json encoding.
type jsonBuffer []byte

func (b *jsonBuffer) Write(p []byte) (int, error) {
	*b = append(*b, p...)
	return len(p), nil
}

// TrimNewline returns the encoding without the newline json.Encoder ends
// it with.
func (b jsonBuffer) TrimNewline() []byte {
	if n := len(b); n > 0 && b[n-1] == '\n' {
		return b[:n-1]
	}
	return b
}

// ints writes a list of integers; nil is null.
func (e *encoder) ints(xs []int) {
	if xs == nil {
		e.null()
		return
	}
	e.list(len(xs), func(i int) { e.int(xs[i]) })
}

// intLists writes a list of integer lists; nil is null.
func (e *encoder) intLists(xss [][]int) {
	if xss == nil {
		e.null()
		return
	}
	e.list(len(xss), func(i int) { e.ints(xss[i]) })
}

// strs writes a list of strings; nil is null.
func (e *encoder) strs(xs []string) {
	if xs == nil {
		e.null()
		return
	}
	e.list(len(xs), func(i int) { e.str(xs[i]) })
}

// optInt writes an optional integer: null when absent.
func (e *encoder) optInt(x *int) {
	if x == nil {
		e.null()
		return
	}
	e.int(*x)
}

// optStr writes an optional string: null when absent.
func (e *encoder) optStr(s *string) {
	if s == nil {
		e.null()
		return
	}
	e.str(*s)
}
