package plan

import (
	"bytes"
	"io"
	"unicode/utf8"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/nvcomm/nvcomm/internal/diag"
)

// Encode writes p as two-space indented JSON with a trailing newline, short
// lists and objects kept on one line. The output is deterministic: struct
// fields in declaration order, map keys sorted, no HTML escaping; it is
// what encoding/json writes, re-indented. It streams: w receives the plan
// in pieces of about 64 KiB. A plan that cannot be encoded (a bytes_ratio
// that is NaN or infinite) is an error before anything is written.
func Encode(w io.Writer, p *Plan) error {
	if err := checkRatio(&p.Summary); err != nil {
		return err
	}
	return newWriter(w, [numSections]bool{p.Tensors == nil, p.Ops == nil, p.Steps == nil}).Whole(p)
}

// Marshal returns the encoding of p.
func Marshal(p *Plan) ([]byte, error) {
	var b bytes.Buffer
	err := Encode(&b, p)
	return b.Bytes(), err
}

// Decode reads a plan strictly: an unknown field (names match exactly, case
// included), a key repeated in one object, invalid UTF-8, data after the
// plan and a format other than [Format] and [FormatGraph] are errors. Errors are a
// *diag.List positioned by line and column.
//
// A plan as Encode writes it is read by fastDecode; any other goes to
// decodeLibrary, which decodes to the same plan or reports the error.
func Decode(file string, src []byte) (*Plan, error) {
	if p, ok := fastDecode(src); ok {
		return p, nil
	}
	return decodeLibrary(file, src)
}

// decodeLibrary is Decode with github.com/go-json-experiment/json (the
// encoding/json/v2 to come), which by default rejects a repeated name and
// invalid UTF-8 and matches names exactly; it rejects unknown fields by an
// option, and data after the plan is rejected here. Its errors are
// reworded by describe: the library's own messages may change between
// versions, and some vary on purpose from run to run.
func decodeLibrary(file string, src []byte) (*Plan, error) {
	fail := func(off int, format string, args ...any) error {
		errs := &diag.List{File: file}
		errs.Add(offsetPos(src, off), format, args...)
		return errs
	}
	dec := jsontext.NewDecoder(bytes.NewBuffer(src)) // reads src in place
	var p Plan
	if err := jsonv2.UnmarshalDecode(dec, &p, jsonv2.RejectUnknownMembers(true)); err != nil {
		off, msg := describe(src, err)
		return nil, fail(off, "invalid plan: %s", msg)
	}
	if rest := bytes.TrimLeft(src[dec.InputOffset():], " \t\r\n"); len(rest) > 0 {
		return nil, fail(len(src)-len(rest), "invalid plan: unexpected data after the plan")
	}
	if !KnownFormat(p.Format) {
		return nil, fail(0, "unsupported plan format %d (expected %d, or %d for a step graph)", p.Format, Format, FormatGraph)
	}
	return &p, nil
}

// offsetPos converts a byte offset into a 1-based line and column, the
// column in characters as diag.Pos counts it (an invalid UTF-8 byte is
// one).
func offsetPos(src []byte, off int) diag.Pos {
	off = min(max(off, 0), len(src))
	line := 1 + bytes.Count(src[:off], []byte("\n"))
	col := 1 + utf8.RuneCount(src[bytes.LastIndexByte(src[:off], '\n')+1:off])
	return diag.At(line, col)
}
