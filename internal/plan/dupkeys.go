package plan

import (
	"bytes"
	"encoding/json"
	"strings"
)

// duplicate is a key that an object of a plan repeats.
type duplicate struct {
	key         string
	first, next int // byte offsets of the two keys' opening quotes
}

// mapKeys are the fields whose objects are maps from names to values:
// their keys are case-sensitive names. Every other object is a struct,
// whose keys encoding/json matches without regard to case.
var mapKeys = []string{"meshes", "by_type"}

// findDuplicate returns the first key that a JSON object of src repeats,
// and false when none does. encoding/json keeps the last of two equal keys
// without a word, so a plan could show a reader one value and mean
// another. Keys are compared after unescaping and, in struct objects, as
// encoding/json matches field names: without regard to case. src must be
// valid JSON (Decode has parsed it): the scan is one pass that allocates
// only for large or escaped keys, so plans of 100k steps cost milliseconds.
func findDuplicate(src []byte) (duplicate, bool) {
	var stack []object // reused: an object's slices keep their capacity
	depth := 0
	var pending []byte // the last key read, which may introduce an object
	for i := 0; i < len(src); i++ {
		switch src[i] {
		case '{':
			if depth == len(stack) {
				stack = append(stack, object{})
			}
			stack[depth].reset(pending != nil && containsFold(mapKeys, pending))
			depth++
			pending = nil
		case '}':
			depth = max(depth-1, 0)
			pending = nil
		case '[', ',':
			pending = nil
		case '"':
			end := stringEnd(src, i)
			if isKey(src, end) && depth > 0 {
				key := src[i+1 : end]
				if first, dup := stack[depth-1].add(key, i); dup {
					return duplicate{key: unquote(key), first: first, next: i}, true
				}
				pending = key
			} else {
				pending = nil
			}
			i = end
		}
	}
	return duplicate{}, false
}

// object is the keys read so far of one open JSON object.
type object struct {
	isMap bool
	keys  [][]byte // raw keys, while few
	at    []int    // their offsets
	index map[string]int
}

// reset empties o for a new object.
func (o *object) reset(isMap bool) {
	o.isMap, o.keys, o.at, o.index = isMap, o.keys[:0], o.at[:0], nil
}

// smallObject is how many keys an object holds before a map indexes them:
// plan objects have at most 20 fields, but meshes may be many.
const smallObject = 32

// add records key, read at offset off, and returns the offset of an equal
// key read before, if any.
func (o *object) add(key []byte, off int) (int, bool) {
	if o.index == nil && bytes.IndexByte(key, '\\') < 0 {
		for k, old := range o.keys {
			if o.equal(old, key) {
				return o.at[k], true
			}
		}
		if len(o.keys) < smallObject {
			o.keys, o.at = append(o.keys, key), append(o.at, off)
			return 0, false
		}
	}
	o.buildIndex()
	name := o.normal(unquote(key))
	if first, ok := o.index[name]; ok {
		return first, true
	}
	o.index[name] = off
	return 0, false
}

// buildIndex moves the keys read so far into a map.
func (o *object) buildIndex() {
	if o.index != nil {
		return
	}
	o.index = make(map[string]int, 2*len(o.keys))
	for k, key := range o.keys {
		o.index[o.normal(unquote(key))] = o.at[k]
	}
	o.keys, o.at = o.keys[:0], o.at[:0]
}

// equal compares two unescaped keys as the object's kind does.
func (o *object) equal(a, b []byte) bool {
	if o.isMap {
		return bytes.Equal(a, b)
	}
	return bytes.EqualFold(a, b)
}

// normal is a key as the object's kind compares it.
func (o *object) normal(key string) string {
	if o.isMap {
		return key
	}
	return strings.ToLower(key)
}

// stringEnd returns the offset of the quote that closes the string opening
// at src[i].
func stringEnd(src []byte, i int) int {
	for j := i + 1; j < len(src); j++ {
		switch src[j] {
		case '\\':
			j++
		case '"':
			return j
		}
	}
	return len(src) - 1
}

// isKey reports whether the string closing at src[end] is followed by a
// colon: an object key, not a value.
func isKey(src []byte, end int) bool {
	for j := end + 1; j < len(src); j++ {
		switch src[j] {
		case ' ', '\t', '\n', '\r':
			continue
		case ':':
			return true
		}
		return false
	}
	return false
}

// unquote decodes a key's escapes.
func unquote(raw []byte) string {
	if bytes.IndexByte(raw, '\\') < 0 {
		return string(raw)
	}
	var s string
	if err := json.Unmarshal(append(append([]byte{'"'}, raw...), '"'), &s); err != nil {
		return string(raw) // not reached on valid JSON
	}
	return s
}

// containsFold reports whether names holds key, without regard to case.
func containsFold(names []string, key []byte) bool {
	for _, n := range names {
		if bytes.EqualFold([]byte(n), key) {
			return true
		}
	}
	return false
}
