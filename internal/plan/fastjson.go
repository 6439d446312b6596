package plan

import (
	"encoding/binary"
	"math"
	"math/bits"
	"strconv"
	"unicode/utf8"
	"unsafe"
)

// fastDecode decodes src as Decode's library path (decodeLibrary) would,
// when src keeps to the plain JSON that Encode writes: every key exactly a
// field's name, each once, integers where the schema has integers, strings
// with no escapes but \" \\ \/ \b \f \n \r \t. Anything else — a key of
// another case or unknown, a duplicate, a fraction or exponent for an
// integer, a \u escape, invalid UTF-8, a type mismatch, data after the
// plan, a format this package does not read — makes it give up (ok false), and the
// library decodes the plan instead, errors included, so every diagnostic
// is decodeLibrary's. The library takes several times as long
// (BenchmarkDecode): it reflects on every field and allocates every
// string, list and pointer. Here the schema is code, repeated names are
// interned, and lists, pointers and strings are carved from a few large
// allocations. TestFastDecode and FuzzFastDecode hold it to the library's
// plans.
func fastDecode(src []byte) (p *Plan, ok bool) {
	d := &fastDecoder{src: src, symbols: make(map[string]string)}
	defer func() {
		// The decoder gives up by panicking with fastGiveUp, from any depth.
		if r := recover(); r != nil {
			if r != fastGiveUp {
				panic(r)
			}
			p, ok = nil, false
		}
	}()
	p = new(Plan)
	d.space()
	d.plan(p)
	d.space()
	if d.pos != len(d.src) || !KnownFormat(p.Format) {
		return nil, false
	}
	return p, true
}

// fastGiveUp is what fastDecoder panics with when src leaves its subset.
var fastGiveUp = new(int)

// fastDecoder reads src byte by byte; pos is the next byte. Values start
// where the caller skipped blanks and end right after their last byte.
type fastDecoder struct {
	src []byte
	pos int
	// symbols interns the strings that repeat across a plan: kinds, types,
	// dtypes, mesh names, operands.
	symbols map[string]string
	// The last values of the fields that symbols interns.
	kinds, types, dtypes, meshNames, shardTypes, shardKinds, opNames, names, others recent

	tensorsRead tensorsRead

	text    textBatch
	escaped []byte // a string's bytes once its escapes are decoded

	// Scratch for lists whose length is known only at their end; their
	// contents are then copied into a chunk.
	scratchInts      []int
	scratchLists     [][]int
	scratchStrings   []string
	scratchSchedule  []ScheduleStep
	scratchShardings []Sharding

	ints      chunk[int]
	lists     chunk[[]int]
	strings   chunk[string]
	schedules chunk[ScheduleStep]
	shardings chunk[Sharding]
	intPtrs   chunk[int]
	strPtrs   chunk[string]
	floatPtrs chunk[float64]
	splits    chunk[SplitArgs]
	merges    chunk[AxisArgs]
	parallels chunk[ParallelizeArgs]
	bytes     chunk[Bytes]
}

func (d *fastDecoder) fail() { panic(fastGiveUp) }

// space skips JSON's blanks.
func (d *fastDecoder) space() {
	i := d.pos // in a register, not written back each byte
	for i < len(d.src) {
		switch d.src[i] {
		case ' ':
			if i+8 > len(d.src) {
				i++
				continue
			}
			// Indentation: the bytes of w that are not spaces are not
			// zero, the first of them tz/8 bytes on.
			w := binary.LittleEndian.Uint64(d.src[i:]) ^ eightSpaces
			if w == 0 {
				i += 8
			} else {
				i += bits.TrailingZeros64(w) / 8
			}
		case '\n', '\t', '\r':
			i++
		default:
			d.pos = i
			return
		}
	}
	d.pos = i
}

// eightSpaces is eight bytes of spaces, read as one number.
const eightSpaces = 0x2020202020202020

// peek is the byte at pos, 0 at the end.
func (d *fastDecoder) peek() byte {
	if d.pos < len(d.src) {
		return d.src[d.pos]
	}
	return 0
}

// expect consumes c, which must be next.
func (d *fastDecoder) expect(c byte) {
	if d.peek() != c {
		d.fail()
	}
	d.pos++
}

// literal consumes word, which must be next.
func (d *fastDecoder) literal(word string) {
	if len(d.src)-d.pos < len(word) || string(d.src[d.pos:d.pos+len(word)]) != word {
		d.fail()
	}
	d.pos += len(word)
}

// isNull consumes a null, if one is next. The library sets a value that
// is null to its zero value, as the callers here do.
func (d *fastDecoder) isNull() bool {
	if d.peek() != 'n' {
		return false
	}
	d.literal("null")
	return true
}

// object consumes the opening brace of an object, or a null (false).
func (d *fastDecoder) object() bool {
	if d.isNull() {
		return false
	}
	d.expect('{')
	return true
}

// firstKey reads an open object's first key, or its closing brace (false).
func (d *fastDecoder) firstKey() ([]byte, bool) {
	d.space()
	if d.peek() == '}' {
		d.pos++
		return nil, false
	}
	return d.key(), true
}

// nextKey reads the comma and key after a field, or the object's closing
// brace (false).
func (d *fastDecoder) nextKey() ([]byte, bool) {
	d.space()
	switch d.peek() {
	case ',':
		d.pos++
		d.space()
		return d.key(), true
	case '}':
		d.pos++
		return nil, false
	}
	d.fail()
	return nil, false
}

// key reads a key and its colon, and the blanks before the value. The
// key's bytes are valid until the next string is read.
func (d *fastDecoder) key() []byte {
	k := d.str()
	if d.pos+1 < len(d.src) && d.src[d.pos] == ':' && d.src[d.pos+1] == ' ' {
		d.pos += 2 // as Encode writes it: no blank to look for
	} else {
		d.space()
		d.expect(':')
	}
	d.space()
	return k
}

// once records a struct field's bit in seen; a field read twice gives up
// (Decode reports the duplicate).
func (d *fastDecoder) once(seen *uint32, bit uint32) {
	if *seen&bit != 0 {
		d.fail()
	}
	*seen |= bit
}

// list consumes the opening bracket of a list, or a null (false).
func (d *fastDecoder) list() bool {
	if d.isNull() {
		return false
	}
	d.expect('[')
	return true
}

// firstItem reports whether an open list has an item, else consumes its
// closing bracket.
func (d *fastDecoder) firstItem() bool {
	d.space()
	if d.peek() == ']' {
		d.pos++
		return false
	}
	return true
}

// nextItem consumes the comma before a list's next item, or its closing
// bracket (false).
func (d *fastDecoder) nextItem() bool {
	d.space()
	switch d.peek() {
	case ',':
		d.pos++
		d.space()
		return true
	case ']':
		d.pos++
		return false
	}
	d.fail()
	return false
}

// str reads a string and returns its bytes, unescaped: valid until the
// next string is read. Control bytes (which JSON forbids), \u escapes and
// invalid UTF-8 (which the library rejects) give up.
func (d *fastDecoder) str() []byte {
	d.expect('"')
	start, i := d.pos, d.pos
	for i+8 <= len(d.src) { // eight bytes at a time, to the first not plain
		m := notPlain(binary.LittleEndian.Uint64(d.src[i:]))
		if m != 0 {
			i += bits.TrailingZeros64(m) / 8
			break
		}
		i += 8
	}
	for i < len(d.src) && plainByte[d.src[i]] {
		i++
	}
	if i < len(d.src) && d.src[i] == '"' {
		d.pos = i + 1
		return d.src[start:i]
	}
	return d.strRest(start, i)
}

// notPlain sets the high bit of the lowest byte of w (eight bytes of a
// string, the first lowest) that is not plain (plainByte), and maybe of
// bytes above it, none when all are plain: a quote, a backslash, a
// control byte or a byte past ASCII. The tests for a zero byte (x−1)&^x
// and for a byte under n (x−n)&^x flag the lowest such byte exactly; a
// borrow from it can flag only bytes above.
func notPlain(w uint64) uint64 {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	quote, backslash := w^(ones*'"'), w^(ones*'\\')
	return ((quote-ones)&^quote | (backslash-ones)&^backslash | (w-ones*0x20)&^w | w) & highs
}

// plainByte marks the bytes that stand for themselves in a string and
// are ASCII: all the printable ones but the quote and the backslash.
var plainByte = func() (plain [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		plain[c] = c != '"' && c != '\\'
	}
	return plain
}()

// strRest reads the rest of a string that began at start from i, where
// str met a byte that is not plain.
func (d *fastDecoder) strRest(start, i int) []byte {
	ascii := true
	for ; i < len(d.src); i++ {
		switch c := d.src[i]; {
		case c == '"':
			d.pos = i + 1
			s := d.src[start:i]
			if !ascii && !utf8.Valid(s) {
				d.fail()
			}
			return s
		case c == '\\':
			d.pos = i
			return d.unescape(start, ascii)
		case c < 0x20:
			d.fail()
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	d.fail()
	return nil
}

// unescape reads the rest of a string with an escape at pos, which began
// at start.
func (d *fastDecoder) unescape(start int, ascii bool) []byte {
	b := append(d.escaped[:0], d.src[start:d.pos]...)
	for d.pos < len(d.src) {
		c := d.src[d.pos]
		d.pos++
		switch {
		case c == '"':
			if !ascii && !utf8.Valid(b) {
				d.fail()
			}
			d.escaped = b
			return b
		case c == '\\':
			e := simpleEscapes[d.peek()]
			if e == 0 {
				d.fail() // \u, or not an escape
			}
			b = append(b, e)
			d.pos++
		case c < 0x20:
			d.fail()
		default:
			ascii = ascii && c < utf8.RuneSelf
			b = append(b, c)
		}
	}
	d.fail()
	return nil
}

// simpleEscapes are the escapes fastDecode reads, by the byte after the
// backslash; 0 for the others.
var simpleEscapes = [256]byte{'"': '"', '\\': '\\', '/': '/', 'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t'}

// string reads a string value (null is "") into memory of its own.
func (d *fastDecoder) string() string {
	if d.isNull() {
		return ""
	}
	return string(d.str())
}

// symbol reads a string value (null is "") that a plan is likely to
// repeat, interned. c holds the last few values of the field, which the
// next one most often is: comparing with them costs less than a lookup.
func (d *fastDecoder) symbol(c *recent) string {
	if d.isNull() {
		return ""
	}
	b := d.str()
	for _, s := range c.s {
		if string(b) == s {
			return s
		}
	}
	s := d.intern(b)
	c.s[c.next] = s
	c.next = (c.next + 1) % len(c.s)
	return s
}

// recent is the last few values that a field took.
type recent struct {
	s    [4]string
	next int
}

// intern returns b as a string, the same string for the same bytes.
func (d *fastDecoder) intern(b []byte) string {
	s, ok := d.symbols[string(b)]
	if !ok {
		s = string(b)
		d.symbols[s] = s
	}
	return s
}

// textInto reads a string value (null leaves it "") into *dst, which must
// stay where it is until d.text is flushed.
func (d *fastDecoder) textInto(dst *string) {
	if !d.isNull() {
		d.text.add(dst, d.str())
	}
}

// integer reads an integer without fraction or exponent (null is 0) that
// fits in 64 bits: what the library reads into an int64 of the forms JSON
// allows.
func (d *fastDecoder) integer() int64 {
	if d.isNull() {
		return 0
	}
	i, neg := d.pos, false
	if i < len(d.src) && d.src[i] == '-' {
		neg = true
		i++
	}
	start := i
	var v uint64
	for ; i < len(d.src) && '0' <= d.src[i] && d.src[i] <= '9'; i++ {
		v = v*10 + uint64(d.src[i]-'0')
	}
	digits := i - start
	switch {
	case digits == 0, digits > 19, digits > 1 && d.src[start] == '0':
		d.fail() // no number, or one that may overflow, or a leading zero
	case i < len(d.src) && (d.src[i] == '.' || d.src[i] == 'e' || d.src[i] == 'E'):
		d.fail()
	case !neg && v > math.MaxInt64, neg && v > -math.MinInt64:
		d.fail()
	}
	d.pos = i
	if neg {
		return -int64(v)
	}
	return int64(v)
}

// int reads an integer that fits in an int.
func (d *fastDecoder) int() int {
	v := d.integer()
	if int64(int(v)) != v {
		d.fail()
	}
	return int(v)
}

// number reads a JSON number and converts it as the library does, with
// strconv.ParseFloat; out of range gives up.
func (d *fastDecoder) number() float64 {
	start := d.pos
	if d.peek() == '-' {
		d.pos++
	}
	if d.peek() == '0' {
		d.pos++
	} else if d.digits() == 0 {
		d.fail()
	}
	if d.peek() == '.' {
		d.pos++
		if d.digits() == 0 {
			d.fail()
		}
	}
	if c := d.peek(); c == 'e' || c == 'E' {
		d.pos++
		if c := d.peek(); c == '+' || c == '-' {
			d.pos++
		}
		if d.digits() == 0 {
			d.fail()
		}
	}
	f, err := strconv.ParseFloat(string(d.src[start:d.pos]), 64)
	if err != nil {
		d.fail()
	}
	return f
}

// digits consumes decimal digits and returns how many.
func (d *fastDecoder) digits() int {
	start := d.pos
	for d.pos < len(d.src) && '0' <= d.src[d.pos] && d.src[d.pos] <= '9' {
		d.pos++
	}
	return d.pos - start
}

// bool reads true or false (null is false).
func (d *fastDecoder) bool() bool {
	switch d.peek() {
	case 't':
		d.literal("true")
		return true
	case 'f':
		d.literal("false")
	case 'n':
		d.literal("null")
	default:
		d.fail()
	}
	return false
}

// intList reads a list of ints: null is nil, [] empty.
func (d *fastDecoder) intList() []int {
	if !d.list() {
		return nil
	}
	xs := d.scratchInts[:0]
	for more := d.firstItem(); more; more = d.nextItem() {
		xs = append(xs, d.int())
	}
	d.scratchInts = xs
	return d.ints.take(xs)
}

// intLists reads a list of lists of ints.
func (d *fastDecoder) intLists() [][]int {
	if !d.list() {
		return nil
	}
	xs := d.scratchLists[:0]
	for more := d.firstItem(); more; more = d.nextItem() {
		xs = append(xs, d.intList()) // which uses scratchInts, not scratchLists
	}
	d.scratchLists = xs
	lists := d.lists.take(xs)
	clear(xs) // drop the references
	return lists
}

// symbolList reads a list of names, interned.
func (d *fastDecoder) symbolList() []string {
	if !d.list() {
		return nil
	}
	xs := d.scratchStrings[:0]
	for more := d.firstItem(); more; more = d.nextItem() {
		xs = append(xs, d.symbol(&d.names))
	}
	d.scratchStrings = xs
	return d.strings.take(xs)
}

// intPtr reads an integer into memory of its own (null is nil).
func (d *fastDecoder) intPtr() *int {
	if d.isNull() {
		return nil
	}
	p := d.intPtrs.one()
	*p = d.int()
	return p
}

// symbolPtr reads an interned string into memory of its own (null is nil).
func (d *fastDecoder) symbolPtr() *string {
	if d.isNull() {
		return nil
	}
	p := d.strPtrs.one()
	*p = d.symbol(&d.others)
	return p
}

// chunk hands out values and copies of lists from blocks that grow from
// 64 values to chunkMax values or chunkBytes: no value or list is
// shared, and each full-slice expression stops an append from reaching
// its neighbours.
type chunk[T any] []T

// chunkMax is the size of the largest blocks in values, but for values
// so small that chunkBytes hold more; a list longer than a quarter of
// chunkMax takes memory of its own.
const chunkMax = 4096

// chunkBytes is the size in bytes up to which blocks of small values
// grow: blocks of 4,096 ints were 32 KiB, each faulted in a page at a
// time, and the lists of a plan of 100k ops fill thousands of them.
// Blocks of chunkPopulate bytes or more are populated at once.
const (
	chunkBytes    = 256 << 10
	chunkPopulate = 64 << 10
)

// grow starts a new block that holds at least k values.
func (c *chunk[T]) grow(k int) {
	size := unsafe.Sizeof(*new(T))
	n := min(max(2*cap(*c), 64), max(chunkMax, int(chunkBytes/size)))
	*c = make([]T, 0, max(n, k))
	if uintptr(cap(*c))*size >= chunkPopulate {
		populate(unsafe.Pointer(unsafe.SliceData(*c)), uintptr(cap(*c))*size)
	}
}

// one returns a zeroed value.
func (c *chunk[T]) one() *T {
	if len(*c) == cap(*c) {
		c.grow(1)
	}
	*c = (*c)[:len(*c)+1]
	return &(*c)[len(*c)-1]
}

// take returns a copy of xs, non-nil even when empty, as the library
// decodes [].
func (c *chunk[T]) take(xs []T) []T {
	k := len(xs)
	switch {
	case k == 0:
		return []T{}
	case k > chunkMax/4:
		return append(make([]T, 0, k), xs...)
	case cap(*c)-len(*c) < k:
		c.grow(k)
	}
	start := len(*c)
	*c = append(*c, xs...)
	return (*c)[start : start+k : start+k]
}

// blocks gathers the items of a list of structs in blocks that stay where
// they are, so that d.text can write into them, until all returns them as
// one slice: a slice grown by append would copy every step of a plan
// several times over, and clear the memory it grows into. A list whose
// length can be foreseen is decoded in place into one block (reserve).
type blocks[T any] struct {
	full [][]T
	cur  []T
	n    int
}

// blockMax is the most items a block holds, but for a reserved one.
const blockMax = 1024

// next returns a zeroed item at the end of the list.
func (b *blocks[T]) next() *T {
	if len(b.cur) == cap(b.cur) {
		if b.cur != nil {
			b.full = append(b.full, b.cur)
		}
		b.cur = make([]T, 0, min(max(2*cap(b.cur), 16), blockMax))
	}
	b.cur = b.cur[:len(b.cur)+1]
	b.n++
	return &b.cur[len(b.cur)-1]
}

// reserve moves the items into one block with room for n in all, where
// the next are decoded; items past n go to new blocks. The items move:
// d.text must be flushed first.
func (b *blocks[T]) reserve(n int) {
	if n <= b.n {
		return
	}
	r := make([]T, 0, n)
	populateBlock(r)
	for _, f := range b.full {
		r = append(r, f...)
	}
	b.cur, b.full = append(r, b.cur...), nil
}

// populateMin is the size from which a block reserved is populated.
const populateMin = 1 << 20

// populateBlock faults in the memory of a reserved block of a megabyte
// or more at once (populate), fresh from the system as a block that size
// is: the plan's steps (80 MB for a chain of 100k ops), tensors and ops
// are decoded into such blocks, and `nvcomm validate` of that chain
// faulted them in a page at a time (75k page faults in all, 43k since;
// system time 0.56–0.72 → 0.40–0.43 s on this project's virtual
// machines).
func populateBlock[T any](r []T) {
	if size := uintptr(cap(r)) * unsafe.Sizeof(*new(T)); size >= populateMin {
		populate(unsafe.Pointer(unsafe.SliceData(r)), size)
	}
}

// all returns the items in order, non-nil even when empty, as the
// library decodes []: the one block itself, when there is one and
// it is nearly full, else a copy.
func (b *blocks[T]) all() []T {
	if len(b.full) == 0 && b.cur != nil && cap(b.cur)-len(b.cur) <= len(b.cur)/8+16 {
		return b.cur
	}
	out := make([]T, 0, b.n)
	for _, f := range b.full {
		out = append(out, f...)
	}
	return append(out, b.cur...)
}

// listLength counts the items of the list whose opening bracket was read
// last, by its commas outside strings, lists and objects, without
// decoding them, and returns how many there are, at most one for every
// 64 bytes of the list, so that a list of items too small to be what the
// caller reads (1, 1, …) reserves no more than a few times its size
// before the decoder gives up on it; -1 when the list does not end (the
// decoder then gives up on it too). It reads more than half a gigabyte a
// second, most of it blanks.
func (d *fastDecoder) listLength() int {
	n, end := d.countItems()
	return min(n, (end-d.pos)/64)
}

// countItems is listLength's count, uncapped, and the position after the
// list's closing bracket (-1, len(src) when it does not end).
func (d *fastDecoder) countItems() (n, end int) {
	src, depth, commas, items := d.src, 0, 0, false
	for i := d.pos; i < len(src); i++ {
		switch src[i] {
		case ' ':
			// Indentation, eight bytes at a time as space() skips it.
			for i+9 <= len(src) && binary.LittleEndian.Uint64(src[i+1:]) == eightSpaces {
				i += 8
			}
		case '\n', '\t', '\r':
		case '"':
			for i++; i < len(src) && src[i] != '"'; i++ {
				if src[i] == '\\' {
					i++ // the escaped byte
				}
			}
			items = true
		case '[', '{':
			depth++
			items = true
		case ']', '}':
			if depth == 0 {
				if !items {
					return 0, i + 1
				}
				return commas + 1, i + 1
			}
			depth--
		case ',':
			if depth == 0 {
				commas++
			}
		default:
			items = true
		}
	}
	return -1, len(src)
}

// foresee is how many items of a list a decoder reads before it foresees
// the list's length.
const foresee = 256

// foreseeLength estimates the length of a list that began at start, of
// which n items have been read, that runs to the end of the plan (the
// steps, which Encode writes last but for the summary): n and as many
// again as the bytes left hold, at the average size so far, and 1/16 more.
// It is at most one item for every 64 bytes left, so that the memory
// reserved, wasted where the list ends early, is a few times src at most.
func (d *fastDecoder) foreseeLength(start, n int) int {
	left, read := int64(len(d.src)-d.pos), int64(d.pos-start)
	more := min(left*int64(n)/max(read, 1), left/64)
	return n + int(more+more/16)
}

// textBatch gathers the bytes of strings that are written into the plan
// later, in one allocation for many: the strings of steps, tensors and
// ops, which are most of a plan's strings, each a name or expression of a
// few bytes. The destinations must not move until flush, which is why
// lists of structs are gathered in blocks.
type textBatch struct {
	buf  []byte
	refs []textRef
}

// textRef is a string to write: buf[start:end] into *dst.
type textRef struct {
	dst        *string
	start, end int
}

// textFlushSize is the size of batch at which add flushes.
const textFlushSize = 32 << 10

// add queues b for *dst.
func (t *textBatch) add(dst *string, b []byte) {
	start := len(t.buf)
	t.buf = append(t.buf, b...)
	t.refs = append(t.refs, textRef{dst, start, len(t.buf)})
	if len(t.buf) >= textFlushSize {
		t.flush()
	}
}

// flush writes every queued string.
func (t *textBatch) flush() {
	s := string(t.buf)
	for _, r := range t.refs {
		*r.dst = s[r.start:r.end]
	}
	clear(t.refs) // drop the pointers
	t.buf, t.refs = t.buf[:0], t.refs[:0]
}
