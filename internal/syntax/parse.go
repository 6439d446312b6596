// Package syntax is the fusion file's syntax: it decodes a fusion's YAML
// (the plain part of YAML that generated fusions use by a fast reader that
// hands over each tensor and op as it reads it, so that no tree of the
// whole file is built; the rest by the YAML library, into its node tree),
// checks the file's keys and the kinds of its values, and hands what each
// entry declares, with where each part is written, to an ir.Source, whose
// Build checks the declarations together and builds the fusion: the
// front end of the IR builder, as hclsyntax is HCL's and cue's parser
// compiles its syntax tree into adt.
package syntax

import (
	"bytes"
	"errors"
	"io"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"

	"github.com/nvcomm/nvcomm/internal/diag"
	"github.com/nvcomm/nvcomm/internal/ir"
)

// Parse reads a fusion file (format 1 or 2) and returns the checked fusion,
// or the list of problems found (at most diag.MaxErrors) as a *diag.List.
// file is the name used in diagnostics and, without its extension, the
// default fusion name. In format 2 the tensors that declare no sharding get
// one by propagation. Parse never panics on any input.
func Parse(file string, src []byte) (*ir.Fusion, error) {
	return ParseWith(file, src, Options{})
}

// ParseAuto is Parse for nvcomm lower --auto: a format-2 tensor may declare
// `placements: auto`, a sharding for the auto-sharder to choose. Such a
// tensor is marked Auto and parsed as if it declared no placements.
func ParseAuto(file string, src []byte) (*ir.Fusion, error) {
	return ParseWith(file, src, Options{Auto: true})
}

// ParseWhole is Parse of a fusion with a pipeline section as one program
// over the whole batch: the section is read but not applied (the fusion
// has no Pipeline), for simulate to check the micro-batches against
// (docs/pipeline.md).
func ParseWhole(file string, src []byte) (*ir.Fusion, error) {
	return ParseWith(file, src, Options{Whole: true})
}

// Options say how ParseWith reads a file.
type Options struct {
	// Auto accepts `placements: auto` (ParseAuto).
	Auto bool
	// Whole leaves a pipeline section unapplied (ParseWhole).
	Whole bool
	// SumsAsWritten keeps every reduction of pending terms where the file
	// puts it (ir.Source.SumsAsWritten): the program as written, which
	// simulate compares with the one whose sums are computed late. Auto
	// implies it.
	SumsAsWritten bool
	// Reader chooses the reader; both give the same fusion and
	// diagnostics for every file the streaming reader takes, which the
	// tests that set it hold them to.
	Reader Reader
	// Consumed, when not nil, is told as the streaming reader finishes
	// with each megabyte of src or so: src[:n] is not read again, unless
	// the whole file is (a file that the streaming reader does not take,
	// or that is not built as read), so that a caller whose src is a
	// mapped file may give back its pages as it is read.
	Consumed func(n int)
}

// Reader is a way of reading a fusion file.
type Reader int

// The readers.
const (
	// AnyReader streams the file when the streaming reader takes it, and
	// reads its tree otherwise.
	AnyReader Reader = iota
	// StreamReader streams the file, or returns ErrNotStreamed.
	StreamReader
	// TreeReader reads the file's tree, by the fast reader or the YAML
	// library.
	TreeReader
)

// ErrNotStreamed is ParseWith's error, with StreamReader, for a file the
// streaming reader does not take.
var ErrNotStreamed = errors.New("the streaming reader does not take this file")

// ParseWith is Parse with options: Read, then the Source's Build.
func ParseWith(file string, src []byte, opts Options) (*ir.Fusion, error) {
	decls, err := Read(file, src, opts)
	if decls == nil {
		return nil, err
	}
	// src is not read from here on: Build runs without it (and without
	// the caller's copy, once the caller no longer needs it), since the
	// fusion keeps no part of it.
	return decls.Build(opts.Whole)
}

// Read reads a fusion file into its declarations, for their Build to
// check and build the fusion. It returns no Source when the file's frame
// (its top-level keys, or its meshes, tensors and ops collections) is
// broken, with the problems found, since every check of Build relies on
// the frame; and ErrNotStreamed with StreamReader for a file that reader
// does not take.
func Read(file string, src []byte, opts Options) (*ir.Source, error) {
	p := newReader(file, opts)
	switch {
	case opts.Reader == TreeReader:
		p.readTree(src)
	case p.streamAsRead(src):
	case p.src.Abandoned() && p.restart(file, opts).stream(src):
		// A file that streams but is not built as read is built once it
		// is read, as a file read the tree way is.
		p = p.next
	case opts.Reader == StreamReader:
		return nil, ErrNotStreamed
	default:
		p = newReader(file, opts)
		p.readTree(src)
	}
	if p.structural {
		return nil, p.errs.Err()
	}
	return p.src, nil
}

// reader reads one fusion file into its Source.
type reader struct {
	// next is the reader that reads the file again when its Source,
	// built as read, gave up (restart).
	next *reader
	// consumed is Options.Consumed.
	consumed func(n int)
	src      *ir.Source
	errs     *diag.Collector
	w        walker
	// auto accepts `placements: auto` (ParseAuto).
	auto bool
	// structural is set by an error in the file's frame (its top-level
	// keys, or the meshes, tensors and ops collections themselves, their
	// keys included): the Source is then not built, as its every check
	// relies on the frame.
	structural bool
	// meshes are the meshes declared, by name, and their names in file
	// order, which the tensors' mesh names are resolved against.
	meshes    map[string]*ir.Mesh
	meshNames []string
	// stepErrs and lateErrs hold the problems of the schedule step or
	// allocation being decoded, for the replay to report (schedule.go).
	stepErrs, lateErrs diag.Collector
	// tensor and op are the declaration being read, reused for the next
	// one: the Source keeps what it needs of it. opNode is the op's node
	// while it is read, for written, its writes.
	tensor  ir.TensorDecl
	op      ir.OpDecl
	opNode  *yaml.Node
	written func(key string) bool
}

// newReader is a reader of the file named file, which has read nothing.
func newReader(file string, opts Options) *reader {
	src := ir.NewSource(file)
	if opts.Auto || opts.SumsAsWritten {
		// Under Auto, the shardings that late sums depend on are to be
		// chosen.
		src.SumsAsWritten()
	}
	auto := opts.Auto
	p := &reader{src: src, errs: src.Errors(), auto: auto, meshes: map[string]*ir.Mesh{}, consumed: opts.Consumed}
	p.w = walker{errs: p.errs}
	p.written = p.writes
	return p
}

// topKeys are the keys of a fusion file's root mapping.
var topKeys = []string{"format", "name", "meshes", "tensors", "ops", "inputs", "outputs", "backward", "pipeline"}

// yamlLineRE reads the line of a YAML library error.
var yamlLineRE = regexp.MustCompile(`^yaml: (?:line (\d+): )?(.*)$`)

// readTree reads the whole file src the tree way, for Build. A
// file that is no UTF-8 YAML mapping breaks the frame: the Source is
// not built.
func (p *reader) readTree(src []byte) {
	p.structural = true // until the root is read
	if !utf8.Valid(src) {
		// The YAML library would decode UTF-16 by its byte-order mark, and
		// positions would then not match the file as bytes.
		p.errs.AddHint(diag.Pos{Line: 1, Col: 1}, "save the file as UTF-8", "the fusion file is not UTF-8 text")
		return
	}
	root := p.decode(src)
	if root == nil {
		return
	}
	fields, ok := p.w.mapping(root, "fusion", topKeys)
	if !ok {
		return
	}
	p.structural = false
	var meshesN, tensorsN, opsN *yaml.Node
	for _, f := range fields {
		switch f.Key {
		case "meshes":
			meshesN = f.Value
		case "tensors":
			tensorsN = f.Value
		case "ops":
			opsN = f.Value
		default:
			p.header(f.Key, f.Value)
		}
	}
	if meshesN == nil && !misspelled(root, topKeys, "meshes") {
		p.errs.Add(posOf(root), "fusion: missing key \"meshes\"")
	}
	p.structural = p.structural || meshesN == nil
	p.parseMeshes(meshesN)
	p.parseTensors(tensorsN)
	p.parseOps(opsN)
}

// section returns the entries of the top-level mapping n (meshes or
// tensors), false when the file has none or n is not a mapping: an error
// there breaks the file's frame.
func (p *reader) section(n *yaml.Node, what string) ([]field, bool) {
	if n == nil {
		return nil, false
	}
	before := p.errs.Count()
	fields, ok := p.w.mapping(n, what, nil)
	p.structural = p.structural || p.errs.Count() > before
	return fields, ok
}

// header reads the top-level key of the file other than meshes, tensors
// and ops. A problem with the format or the name breaks the file's frame.
func (p *reader) header(key string, v *yaml.Node) {
	before := p.errs.Count()
	switch key {
	case "format":
		if f, ok := p.w.integer(v, "format"); ok && f != 1 && f != 2 {
			p.errs.AddHint(posOf(v), "format 2 is format 1 with sharding propagation",
				"format: unsupported format %d (expected 1 or 2)", f)
		} else if ok {
			p.src.SetFormat(f)
		}
	case "name":
		if s, ok := p.w.str(v, "name"); ok {
			p.src.SetName(s)
		}
	case "inputs":
		p.src.SetInputs(listOf(v))
	case "outputs":
		p.src.SetOutputs(listOf(v))
	case "backward":
		p.parseBackward(v)
	case "pipeline":
		p.parsePipeline(v)
	}
	p.structural = p.structural || p.errs.Count() > before
}

// decode reads src's one YAML document and returns its root node, or nil
// after reporting why not. Files in fastDecode's part of YAML are read by
// it, the others by the YAML library. (Most files in fastDecode's part
// are read by stream, without a tree.)
func (p *reader) decode(src []byte) *yaml.Node {
	if doc, ok := fastDecode(src); ok {
		return doc.Content[0]
	}
	dec := yaml.NewDecoder(bytes.NewReader(src))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil && err != io.EOF {
		p.syntaxError(err)
		return nil
	}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		p.errs.Add(diag.Pos{Line: 1, Col: 1}, "empty fusion file: expected a mapping with meshes, tensors and ops")
		return nil
	}
	// A second document would otherwise be ignored without a word.
	var extra yaml.Node
	if err := dec.Decode(&extra); err != nil && err != io.EOF {
		p.syntaxError(err)
		return nil
	} else if err == nil {
		p.errs.Add(posOf(&extra), "expected a single YAML document, found a second one")
	}
	return doc.Content[0]
}

// parserProblems are the messages of the YAML library's parser errors, whose
// line numbers it reports 0-based; its scanner errors are 1-based.
var parserProblems = map[string]bool{
	"did not find expected ',' or ']'":       true,
	"did not find expected ',' or '}'":       true,
	"did not find expected '-' indicator":    true,
	"did not find expected <document start>": true,
	"did not find expected <stream-start>":   true,
	"did not find expected key":              true,
	"did not find expected node content":     true,
	"found duplicate %TAG directive":         true,
	"found duplicate %YAML directive":        true,
	"found incompatible YAML document":       true,
	"found undefined tag handle":             true,
}

// syntaxError turns a YAML library error ("yaml: line 3: ...") into a diagnostic.
func (p *reader) syntaxError(err error) {
	msg := strings.Split(err.Error(), "\n")[0]
	m := yamlLineRE.FindStringSubmatch(msg)
	if m == nil {
		p.errs.Add(diag.Pos{Line: 1, Col: 1}, "invalid YAML: %s", msg)
		return
	}
	line, _ := strconv.Atoi(m[1])
	if line > 0 && parserProblems[m[2]] {
		// The YAML library reports its parser's (not its scanner's) marks
		// 0-based.
		line++
	}
	if line == 0 {
		line = 1
	}
	p.errs.Add(diag.At(line, 1), "invalid YAML: %s", m[2])
}
