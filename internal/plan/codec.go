package plan

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/nvcomm/nvcomm/internal/diag"
)

// Encode writes p as two-space indented JSON with a trailing newline, short
// lists and objects kept on one line. The output is deterministic: struct
// fields in declaration order, map keys sorted, no HTML escaping; it is
// what encoding/json writes, re-indented. It streams: w receives the plan
// in pieces of about 64 KiB. A plan that cannot be encoded (a bytes_ratio
// that is NaN or infinite) is an error before anything is written.
func Encode(w io.Writer, p *Plan) error {
	if r := p.Summary.BytesRatio; r != nil {
		if _, err := json.Marshal(*r); err != nil {
			return err
		}
	}
	e := &encoder{w: w, buf: make([]byte, 0, flushSize+4*inlineWidth), open: make([]frame, 0, 16)}
	e.plan(p)
	e.buf = append(e.buf, '\n')
	e.flush()
	return e.err
}

// Marshal returns the encoding of p.
func Marshal(p *Plan) ([]byte, error) {
	var b bytes.Buffer
	err := Encode(&b, p)
	return b.Bytes(), err
}

// Decode reads a plan strictly: unknown fields, a key repeated in one object
// (two that differ only in case, in a struct), trailing data and a format
// other than [Format] are errors. Errors are a *diag.List positioned by line
// and column where the JSON decoder says where.
//
// A plan as Encode writes it is read by fastDecode; any other goes to
// encoding/json, which decodes to the same plan or reports the error.
func Decode(file string, src []byte) (*Plan, error) {
	if p, ok := fastDecode(src); ok {
		return p, nil
	}
	return decodeLibrary(file, src)
}

// decodeLibrary is Decode with encoding/json, and findDuplicate for what it
// lets through.
func decodeLibrary(file string, src []byte) (*Plan, error) {
	errs := &diag.List{File: file}
	dec := json.NewDecoder(bytes.NewReader(src))
	dec.DisallowUnknownFields()
	var p Plan
	if err := dec.Decode(&p); err != nil {
		errs.Add(offsetPos(src, jsonOffset(err, dec)), "invalid plan: %s", jsonMessage(err))
		return nil, errs
	}
	if dec.More() {
		errs.Add(offsetPos(src, int(dec.InputOffset())), "invalid plan: unexpected data after the plan")
		return nil, errs
	}
	if d, ok := findDuplicate(src); ok {
		first := offsetPos(src, d.first)
		errs.Add(offsetPos(src, d.next), "invalid plan: duplicate key %q (first at %d:%d); a plan states each field once", d.key, first.Line, first.Col)
		return nil, errs
	}
	if p.Format != Format {
		errs.Add(diag.Pos{Line: 1, Col: 1}, "unsupported plan format %d (expected %d)", p.Format, Format)
		return nil, errs
	}
	return &p, nil
}

// jsonOffset finds the byte offset an encoding/json error refers to.
func jsonOffset(err error, dec *json.Decoder) int {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return int(syn.Offset) - 1 // the decoder reports the offset after the bad byte
	case errors.As(err, &typ):
		return int(typ.Offset)
	}
	return int(dec.InputOffset())
}

func jsonMessage(err error) string {
	var typ *json.UnmarshalTypeError
	if errors.As(err, &typ) {
		field := typ.Field
		if field == "" {
			field = "plan"
		}
		return fmt.Sprintf("field %q: expected %s, got JSON %s", field, typ.Type, typ.Value)
	}
	if errors.Is(err, io.EOF) {
		return "empty input"
	}
	return strings.TrimPrefix(err.Error(), "json: ")
}

// offsetPos converts a byte offset into a 1-based line and column.
func offsetPos(src []byte, off int) diag.Pos {
	off = min(max(off, 0), len(src))
	line := 1 + bytes.Count(src[:off], []byte("\n"))
	col := off - bytes.LastIndexByte(src[:off], '\n')
	return diag.Pos{Line: line, Col: col}
}
