package ir_test

import (
	"errors"

	"github.com/nvcomm/nvcomm/internal/ir"
	"github.com/nvcomm/nvcomm/internal/syntax"
)

// init hands ir's tests the front end (frontend_test.go).
func init() {
	ir.FrontEnd = func(file string, src []byte, auto, whole bool, reader int) (*ir.Fusion, error, bool) {
		f, err := syntax.ParseWith(file, src, syntax.Options{Auto: auto, Whole: whole, Reader: syntax.Reader(reader)})
		if errors.Is(err, syntax.ErrNotStreamed) {
			return nil, nil, false
		}
		return f, err, true
	}
	ir.ReadFront = func(file string, src []byte, stream bool) *ir.Source {
		reader := syntax.AnyReader
		if stream {
			reader = syntax.StreamReader
		}
		decls, _ := syntax.Read(file, src, syntax.Options{Reader: reader})
		return decls
	}
}
