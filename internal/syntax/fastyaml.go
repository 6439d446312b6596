package syntax

import (
	"go.yaml.in/yaml/v3"

	"github.com/nvcomm/nvcomm/internal/ir"
)

// fastDecode builds the yaml.Node tree that the YAML library would build
// for src, when src keeps to the small part of YAML that generated fusions
// and most hand-written ones use: block mappings and sequences, one-line
// flow collections, and plain scalars that are names, placements such as
// Shard(0), or decimal integers. Anything else — comments, quotes, tabs,
// anchors, multi-line scalars, an empty value, any scalar it is not sure
// how the library would type — makes it give up (ok false), and the
// library decodes the file instead, errors included. The library takes
// about ten times as long (BenchmarkDecode) and allocates several objects
// a node, most of the cost of parsing a fusion of 100k ops; here nodes
// and their contents come from a few large allocations, and a string is
// made for each name and for the first of each other scalar (str).
// TestFastDecode and FuzzFastDecode hold it to the library's trees.
func fastDecode(src []byte) (doc *yaml.Node, ok bool) {
	var root *yaml.Node
	if !fastRead(src, func(d *fastDecoder) { root = d.blockNode(d.col()) }) {
		return nil, false
	}
	doc = &yaml.Node{Kind: yaml.DocumentNode, Line: 1, Column: 1, Content: []*yaml.Node{root}}
	return doc, true
}

// fastHandler takes what fastStream reads of a file's root mapping.
type fastHandler interface {
	// open is offered each key whose value is a block collection on the
	// lines below it, as a node without its content (a mapping or a
	// list): stream asks for its entries one at a time (entry), else the
	// whole value goes to field.
	open(k, coll *yaml.Node) (stream, ok bool)
	// field takes a key and its whole value.
	field(k, v *yaml.Node) bool
	// entry takes an entry of the collection opened last: a mapping's key
	// and value, a list's item (k nil). Their nodes are the handler's
	// until it returns only: the next entry's are made in their place.
	entry(k, v *yaml.Node) bool
}

// fastStream reads src as fastDecode does, but hands the fields of its
// root mapping to h one at a time, and the entries of a collection that h
// opens one at a time, without building the collection: the tree of the
// whole file never exists, and the next entry's nodes are made in the
// place of those h has read. It reports false when src leaves fastDecode's part of YAML,
// when the root is no block mapping, or when a method of h returns false;
// h may then have taken part of the file.
func fastStream(src []byte, h fastHandler) bool {
	return fastStreamTelling(src, h, nil)
}

// fastStreamTelling is fastStream that tells consumed, when not nil, as
// it finishes with each consumedStep bytes of src: it will not read
// src[:n] again.
func fastStreamTelling(src []byte, h fastHandler, consumed func(n int)) bool {
	return fastRead(src, func(d *fastDecoder) {
		d.consumed = consumed
		col := d.col()
		if d.dash() {
			d.fail() // a list: the library's message
		}
		d.fields(col, func(k *yaml.Node) bool { return d.streamField(col, k, h) })
	})
}

// fastRead runs read on a decoder of src, positioned at the first content
// line, and reports whether src is in fastDecode's part of YAML and read
// took all of it.
func fastRead(src []byte, read func(d *fastDecoder)) (ok bool) {
	for _, c := range src {
		if !fastByte[c] {
			return false
		}
	}
	d := &fastDecoder{s: src, line: 1}
	defer func() {
		// The decoder gives up by panicking with giveUp, from any depth.
		if r := recover(); r != nil {
			if r != giveUp {
				panic(r)
			}
			ok = false
		}
	}()
	if !d.nextLine() {
		return false // empty: the library's message
	}
	read(d)
	if d.pos < len(d.s) {
		d.fail() // content left of the root's indentation
	}
	return true
}

// streamField reads the value of the root's key k, at column col, for h:
// a block collection that h opens entry by entry, any other whole. It
// reports whether a content line follows.
func (d *fastDecoder) streamField(col int, k *yaml.Node, h fastHandler) bool {
	if d.inline() {
		v := d.flowValue()
		more := d.endLine()
		d.check(h.field(k, v))
		return more
	}
	c := d.below(col)
	coll := d.node(yaml.MappingNode, "!!map", d.line, c, false)
	if d.dash() {
		coll = d.node(yaml.SequenceNode, "!!seq", d.line, c, false)
	}
	stream, ok := h.open(k, coll)
	d.check(ok)
	// Each entry's nodes are made where the previous entry's were, which
	// h has read: chunks that each held parts of several entries linked
	// every entry read to the next, and kept them all.
	mark := d.mark()
	switch {
	case !stream:
		d.check(h.field(k, d.blockNode(c)))
	case coll.Kind == yaml.MappingNode:
		d.fields(c, func(ek *yaml.Node) bool {
			v, more := d.blockValue(c)
			d.check(h.entry(ek, v))
			d.rewind(mark)
			d.tell()
			return more
		})
	default:
		d.items(c, func(item *yaml.Node) {
			d.check(h.entry(nil, item))
			d.rewind(mark)
			d.tell()
		})
	}
	return d.pos < len(d.s)
}

// chunks are the decoder's chunks at a time: mark's, for rewind.
type chunks struct {
	keys, maps, values nodeChunk
	mapPtrs, listPtrs  ptrChunk
}

// mark is where the decoder's chunks are now.
func (d *fastDecoder) mark() chunks {
	return chunks{d.keys, d.maps, d.values, d.mapPtrs, d.listPtrs}
}

// rewind takes back every node and content allocated since m: no one
// may hold them any more.
func (d *fastDecoder) rewind(m chunks) {
	rewindChunk(&d.keys, m.keys)
	rewindChunk(&d.maps, m.maps)
	rewindChunk(&d.values, m.values)
	rewindChunk(&d.mapPtrs, m.mapPtrs)
	rewindChunk(&d.listPtrs, m.listPtrs)
}

// rewindChunk zeroes the slots of chunk *c taken since it was mark, and
// gives them back. A chunk begun since then holds nothing older than
// mark, and starts again empty; mark's own chunk keeps what it held then.
func rewindChunk[C ~[]E, E any](c *C, mark C) {
	from := 0
	if cap(mark) > 0 && cap(*c) > 0 && &(*c)[:1][0] == &mark[:1][0] {
		from = len(mark)
	}
	clear((*c)[from:])
	*c = (*c)[:from]
}

// check gives up unless ok: a handler stopped the reading.
func (d *fastDecoder) check(ok bool) {
	if !ok {
		d.fail()
	}
}

// fastByte marks the bytes fastDecode reads: letters, digits, _ ( ) -
// and the punctuation of mappings, sequences and flow collections.
var fastByte = func() (ok [256]bool) {
	for _, c := range []byte("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_()- \n:,[]{}") {
		ok[c] = true
	}
	return ok
}()

// giveUp is what fastDecoder panics with when src leaves its subset.
var giveUp = new(int)

// maxFastDepth bounds the nesting fastDecode follows (a fusion nests a few
// levels): deeper input goes to the library, with its own limits.
const maxFastDepth = 64

// fastDecoder reads src byte by byte; pos is the next byte, on line line,
// which starts at lineStart.
//
// Nodes and contents come from chunks (of keys, mappings and other
// values), which fastStream reuses from one entry to the next (rewind).
type fastDecoder struct {
	s                    []byte // the file, which it never changes
	pos, line, lineStart int
	depth                int
	keys, maps, values   nodeChunk
	mapPtrs, listPtrs    ptrChunk     // the contents of mappings, of lists
	stack                []*yaml.Node // the children of the open collections
	// words are scalars read before, by a hash of their bytes (str).
	words [512]string
	// consumed, when not nil, is told the length of the part of s that
	// the decoder is done with, at most every consumedStep bytes (tell);
	// told is the last length told.
	consumed func(n int)
	told     int
}

// consumedStep is how many bytes a streaming decoder reads between two
// calls of its consumed.
const consumedStep = 1 << 20

// tell tells consumed, between two entries, that the decoder is done with
// the lines before the current one, when it has read consumedStep bytes
// since it last told.
func (d *fastDecoder) tell() {
	if d.consumed != nil && d.lineStart-d.told >= consumedStep {
		d.told = d.lineStart
		d.consumed(d.lineStart)
	}
}

// str is scalar b as a string of its own: the one read last of those of
// its hash when it is the same (a file repeats its keys, meshes,
// placements and ops throughout), else a new one. No string is a slice
// of the file: the parser keeps names, and one slice of a string of the
// whole file would keep all of it as long as the fusion, and a copy of
// the file as long as the reading (TestParseKeepsNoFileText).
func (d *fastDecoder) str(b []byte) string {
	h := uint32(2166136261) // FNV-1a
	for _, c := range b {
		h = (h ^ uint32(c)) * 16777619
	}
	w := &d.words[h%uint32(len(d.words))]
	if *w != string(b) {
		*w = string(b)
	}
	return *w
}

// nodeChunk allocates nodes from chunks of 1024.
type nodeChunk []yaml.Node

// next is a zeroed node.
func (c *nodeChunk) next() *yaml.Node {
	if len(*c) == cap(*c) {
		*c = make([]yaml.Node, 0, 1024)
	}
	*c = (*c)[:len(*c)+1]
	return &(*c)[len(*c)-1]
}

// ptrChunk allocates the contents of collections from chunks of 4096
// pointers.
type ptrChunk []*yaml.Node

// take returns a copy of kids.
func (c *ptrChunk) take(kids []*yaml.Node) []*yaml.Node {
	k := len(kids)
	if k > 256 {
		return append([]*yaml.Node(nil), kids...)
	}
	if cap(*c)-len(*c) < k {
		*c = make([]*yaml.Node, 0, 4096)
	}
	start := len(*c)
	*c = append(*c, kids...)
	return (*c)[start : start+k : start+k]
}

func (d *fastDecoder) fail() { panic(giveUp) }

// col is pos's column, 1-based: src is ASCII, so bytes are characters.
func (d *fastDecoder) col() int { return d.pos - d.lineStart + 1 }

// peek is the byte at pos, 0 at the end.
func (d *fastDecoder) peek() byte {
	if d.pos < len(d.s) {
		return d.s[d.pos]
	}
	return 0
}

// node allocates a node at line, col: a key when key is set.
func (d *fastDecoder) node(kind yaml.Kind, tag string, line, col int, key bool) *yaml.Node {
	chunk := &d.values
	switch {
	case key:
		chunk = &d.keys
	case kind == yaml.MappingNode:
		chunk = &d.maps
	}
	// Field by field into the chunk's zeroed node: a whole yaml.Node
	// assigned is copied with a write barrier on every pointer it holds.
	n := chunk.next()
	n.Kind, n.Tag, n.Line, n.Column = kind, tag, line, col
	return n
}

// content moves the children pushed since stack height from onto n.
func (d *fastDecoder) content(n *yaml.Node, from int) {
	kids := d.stack[from:]
	switch {
	case len(kids) == 0:
	case n.Kind == yaml.MappingNode:
		n.Content = d.mapPtrs.take(kids)
	default:
		n.Content = d.listPtrs.take(kids)
	}
	d.stack = d.stack[:from] // the decoder is dropped with what it still points at
}

// spaces skips blanks within the line.
func (d *fastDecoder) spaces() {
	for d.peek() == ' ' {
		d.pos++
	}
}

// nextLine skips the rest of the current line, which must be blank, and
// the blank lines after it, stopping at the first content byte; false at
// the end of src.
func (d *fastDecoder) nextLine() bool {
	for {
		d.spaces()
		switch d.peek() {
		case 0:
			return false
		case '\n':
			d.pos++
			d.line, d.lineStart = d.line+1, d.pos
		default:
			return true
		}
	}
}

// endLine ends a line after its last value: only blanks may follow. It
// reports whether a content line follows.
func (d *fastDecoder) endLine() bool {
	d.spaces()
	if c := d.peek(); c != '\n' && c != 0 {
		d.fail()
	}
	return d.nextLine()
}

// enter and leave bound the nesting.
func (d *fastDecoder) enter() {
	if d.depth++; d.depth > maxFastDepth {
		d.fail()
	}
}

func (d *fastDecoder) leave() { d.depth-- }

// dash reports whether pos starts a block sequence entry, "- ".
func (d *fastDecoder) dash() bool {
	return d.peek() == '-' && d.pos+1 < len(d.s) && d.s[d.pos+1] == ' '
}

// blockNode reads the block collection at column col, where pos is.
func (d *fastDecoder) blockNode(col int) *yaml.Node {
	if d.dash() {
		return d.blockSequence(col)
	}
	return d.blockMapping(col)
}

// blockMapping reads the keys at column col and their values; it returns
// at the first line indented less, or at the end.
func (d *fastDecoder) blockMapping(col int) *yaml.Node {
	n := d.node(yaml.MappingNode, "!!map", d.line, col, false)
	from := len(d.stack)
	d.fields(col, func(k *yaml.Node) bool {
		v, more := d.blockValue(col)
		d.stack = append(d.stack, k, v)
		return more
	})
	d.content(n, from)
	return n
}

// fields reads the keys of a block mapping at column col, handing each to
// value, which reads its value and reports whether a content line
// follows; it returns at the first line indented less, or at the end.
func (d *fastDecoder) fields(col int, value func(k *yaml.Node) (more bool)) {
	d.enter()
	defer d.leave()
	for more := true; more && d.col() == col; {
		more = value(d.key())
	}
	if d.col() > col && d.pos < len(d.s) {
		d.fail() // indented more than its mapping, not under a key
	}
}

// key reads a mapping key, a name, and the colon after it.
func (d *fastDecoder) key() *yaml.Node {
	k := d.scalar(true)
	if k.Tag != "!!str" || len(k.Value) > 1000 || d.peek() != ':' {
		d.fail() // the library takes no longer implicit keys
	}
	d.pos++
	return k
}

// blockValue reads the value after a block mapping key at column col: the
// rest of the line, or the block below it. It reports whether a content
// line follows.
func (d *fastDecoder) blockValue(col int) (*yaml.Node, bool) {
	if d.inline() {
		v := d.flowValue()
		return v, d.endLine()
	}
	v := d.blockNode(d.below(col))
	return v, d.pos < len(d.s)
}

// inline reports whether a value follows a key on its line, after the
// blanks that it skips.
func (d *fastDecoder) inline() bool {
	d.spaces()
	if c := d.peek(); c == '\n' || c == 0 {
		return false
	}
	if d.s[d.pos-1] != ' ' {
		d.fail() // "key:value"
	}
	return true
}

// below moves to the block collection below a key at column col, whose
// line ends after it, and returns its column: one indented more than the
// key, or a list at the key's column.
func (d *fastDecoder) below(col int) int {
	if !d.nextLine() {
		d.fail() // an empty value: null, positioned as the library knows
	}
	c := d.col()
	if c < col || c == col && !d.dash() {
		d.fail()
	}
	return c
}

// blockSequence reads the entries "- " at column col.
func (d *fastDecoder) blockSequence(col int) *yaml.Node {
	n := d.node(yaml.SequenceNode, "!!seq", d.line, col, false)
	from := len(d.stack)
	d.items(col, func(item *yaml.Node) { d.stack = append(d.stack, item) })
	d.content(n, from)
	return n
}

// items reads the entries "- " at column col, handing each to take.
func (d *fastDecoder) items(col int, take func(item *yaml.Node)) {
	d.enter()
	defer d.leave()
	more := true
	for more && d.col() == col && d.dash() {
		d.pos += 2
		d.spaces()
		var item *yaml.Node
		if d.compactKey() {
			item = d.blockMapping(d.col())
			more = d.pos < len(d.s)
		} else {
			item = d.flowValue()
			more = d.endLine()
		}
		take(item)
	}
}

// compactKey reports whether a sequence entry is a mapping on its line,
// "- key: value": a name followed by a colon.
func (d *fastDecoder) compactKey() bool {
	i := d.pos
	for i < len(d.s) && isNameByte(d.s[i]) {
		i++
	}
	return i > d.pos && i < len(d.s) && d.s[i] == ':'
}

func isNameByte(c byte) bool {
	return c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}

// flowValue reads a value within one line: a flow mapping, a flow
// sequence or a scalar.
func (d *fastDecoder) flowValue() *yaml.Node {
	switch d.peek() {
	case '{':
		return d.flowCollection(yaml.MappingNode, "!!map", '}')
	case '[':
		return d.flowCollection(yaml.SequenceNode, "!!seq", ']')
	}
	return d.scalar(false)
}

// flowCollection reads "{key: value, ...}" or "[value, ...]" on one line.
func (d *fastDecoder) flowCollection(kind yaml.Kind, tag string, end byte) *yaml.Node {
	d.enter()
	defer d.leave()
	n := d.node(kind, tag, d.line, d.col(), false)
	n.Style = yaml.FlowStyle
	from := len(d.stack)
	d.pos++
	d.spaces()
	if d.peek() == end {
		d.pos++
		return n
	}
	for {
		if kind == yaml.MappingNode {
			k := d.key()
			if d.peek() != ' ' {
				d.fail() // "key:value", or a null value
			}
			d.spaces()
			d.stack = append(d.stack, k)
		}
		v := d.flowValue() // pushes and pops its own children
		d.stack = append(d.stack, v)
		d.spaces()
		c := d.peek()
		d.pos++
		if c == end {
			break
		}
		if c != ',' {
			d.fail()
		}
		d.spaces()
		if c := d.peek(); c == end || c == ',' {
			d.fail() // an empty entry
		}
	}
	d.content(n, from)
	return n
}

// scalar reads a plain scalar, a mapping key when key is set: a name (!!str), a name with a
// parenthesized name or number such as Shard(0) (!!str), or a decimal
// integer of at most 18 digits (!!int). Names the library types
// otherwise (true, null, ...) and every other scalar give up.
func (d *fastDecoder) scalar(key bool) *yaml.Node {
	line, col, start := d.line, d.col(), d.pos
	for d.pos < len(d.s) && (isNameByte(d.s[d.pos]) || d.s[d.pos] == '(' || d.s[d.pos] == ')' || d.s[d.pos] == '-') {
		d.pos++
	}
	v := d.str(d.s[start:d.pos])
	tag := scalarTag(v)
	if tag == "" {
		d.fail()
	}
	n := d.node(yaml.ScalarNode, tag, line, col, key)
	n.Value = v
	return n
}

// scalarTag is the tag of plain scalar v, or "" when fastDecode leaves it
// to the library.
func scalarTag(v string) string {
	if isDecimal(v) {
		return "!!int"
	}
	name, rest := v, ""
	for i := range len(v) {
		if v[i] == '(' {
			name, rest = v[:i], v[i:]
			break
		}
	}
	if !ir.IsIdent(name) || reserved(name) {
		return ""
	}
	if rest != "" && (len(rest) < 2 || rest[len(rest)-1] != ')' || !isNameOrEmpty(rest[1:len(rest)-1])) {
		return ""
	}
	return "!!str"
}

// isDecimal reports whether v is -?(0|[1-9][0-9]*), at most 18 digits.
func isDecimal(v string) bool {
	digits := v
	if len(digits) > 0 && digits[0] == '-' {
		digits = digits[1:]
	}
	if digits == "" || len(digits) > 18 || len(digits) > 1 && digits[0] == '0' {
		return false
	}
	for i := range len(digits) {
		if digits[i] < '0' || digits[i] > '9' {
			return false
		}
	}
	return true
}

// isNameOrEmpty reports whether s is made of name bytes only.
func isNameOrEmpty(s string) bool {
	for i := range len(s) {
		if !isNameByte(s[i]) {
			return false
		}
	}
	return true
}

// reserved reports whether the YAML library reads name as something other
// than a string (its resolve table): a boolean or null.
func reserved(name string) bool {
	switch name {
	case "true", "True", "TRUE", "false", "False", "FALSE", "null", "Null", "NULL":
		return true
	}
	return false
}
