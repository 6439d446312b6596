package ir

// The front end (internal/syntax) imports ir, so ir's own tests, which
// parse fusion files to check what ir builds of them, reach it through
// FrontEnd and ReadFront, which frontend_ext_test.go (package ir_test, which may import
// it) fills before any test runs.

// FrontEnd is the front end's parse with its options: auto accepts
// `placements: auto`, whole leaves a pipeline unapplied, and reader is 0
// for the streaming reader or the tree, 1 for the streaming reader alone
// (taken false when it does not take the file) and 2 for the tree.
var FrontEnd func(file string, src []byte, auto, whole bool, reader int) (f *Fusion, err error, taken bool)

// ReadFront is the front end's syntax.Read, which reads a file into its
// Source without building it: nil when the file's frame is broken, or
// when stream is set and the streaming reader does not take the file.
var ReadFront func(file string, src []byte, stream bool) *Source

// Parse is the front end's syntax.Parse.
func Parse(file string, src []byte) (*Fusion, error) {
	f, err, _ := FrontEnd(file, src, false, false, 0)
	return f, err
}

// ParseAuto is the front end's syntax.ParseAuto.
func ParseAuto(file string, src []byte) (*Fusion, error) {
	f, err, _ := FrontEnd(file, src, true, false, 0)
	return f, err
}

// ParseWhole is the front end's syntax.ParseWhole.
func ParseWhole(file string, src []byte) (*Fusion, error) {
	f, err, _ := FrontEnd(file, src, false, true, 0)
	return f, err
}
