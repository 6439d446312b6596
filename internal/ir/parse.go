package ir

import (
	"bytes"
	"io"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"

	"github.com/nvcomm/nvcomm/internal/diag"
	"github.com/nvcomm/nvcomm/internal/ops"
	"github.com/nvcomm/nvcomm/internal/shard"
)

// Parse reads a fusion file (format 1 or 2) and returns the checked fusion,
// or the list of problems found (at most diag.MaxErrors) as a *diag.List.
// file is the name used in diagnostics and, without its extension, the
// default fusion name. In format 2 the tensors that declare no sharding get
// one by propagation (propagate.go). Parse never panics on any input.
func Parse(file string, src []byte) (*Fusion, error) {
	return parse(file, src, false)
}

// ParseAuto is Parse for nvcomm lower --auto: a format-2 tensor may declare
// `placements: auto`, a sharding for the auto-sharder to choose. Such a
// tensor is marked Auto and parsed as if it declared no placements.
func ParseAuto(file string, src []byte) (*Fusion, error) {
	return parse(file, src, true)
}

// ParseWhole is Parse of a fusion with a pipeline section as one program
// over the whole batch: the section is read but not applied (the fusion
// has no Pipeline), for simulate to check the micro-batches against
// (docs/pipeline.md).
func ParseWhole(file string, src []byte) (*Fusion, error) {
	return parseWith(file, src, false, true)
}

func parse(file string, src []byte, allowAuto bool) (*Fusion, error) {
	return parseWith(file, src, allowAuto, false)
}

func parseWith(file string, src []byte, allowAuto, whole bool) (*Fusion, error) {
	p := newParser(file, allowAuto)
	p.whole = whole
	if !p.stream(src) {
		p = newParser(file, allowAuto)
		p.whole = whole
		p.readTree(src)
	}
	// src is not read from here on: build runs without it (and without
	// the caller's copy, once the caller no longer needs it), since the
	// fusion keeps no part of it.
	f := p.finish()
	if err := p.errs.Err(); err != nil {
		return nil, err
	}
	return f, nil
}

// newParser is a parser of the file named file, which has read nothing.
func newParser(file string, allowAuto bool) *parser {
	p := &parser{file: file, errs: &diag.Collector{File: file}, format: 1, allowAuto: allowAuto,
		name:   strings.TrimSuffix(filepath.Base(file), filepath.Ext(file)),
		meshes: map[string]*Mesh{}, raw: map[string]declared{}}
	p.w = walker{errs: p.errs}
	return p
}

type parser struct {
	file string
	errs *diag.Collector
	w    walker
	// stepErrs and lateErrs hold the problems of the schedule step or
	// allocation being decoded, for the replay to report (schedparse.go).
	stepErrs, lateErrs diag.Collector
	// format is the file's format: 1, or 2, which propagates shardings.
	format int
	// allowAuto accepts `placements: auto` (ParseAuto).
	allowAuto bool

	meshes    map[string]*Mesh
	meshNames []string
	// raw holds the declared tensors by name: their declarations until
	// build has made them, then the tensors alone (declared).
	raw         map[string]declared
	tensorNames []string // declared, in file order
	ops         []*rawOp
	// inputs and outputs are the lists the file gives, nil for none.
	inputs, outputs *listIn
	// name is the fusion's: the file's name without its extension, unless
	// the file gives one.
	name string
	// producers are the ops by the tensor they produce (sortOps).
	producers map[string]*rawOp
	// read holds the names the ops read (isRead), built on first use.
	read map[string]bool
	// parsedPlacements are the placements read so far by their text: a
	// fusion repeats a few, and the regular expression that reads one
	// was a tenth of building a fusion of 100k tensors.
	parsedPlacements map[string]shard.Placement
	// reducedNames counts the tensors build inserted to reduce a Partial
	// tensor that an op other than set reads, by the tensor's name.
	reducedNames map[string]int
	// sharedPls are the placement lists that declarations share, by
	// their key (sharedPlacements), written into plsKey.
	sharedPls map[string]*[]placement
	plsKey    []byte

	// An error stops only the checks that depend on what is wrong, so
	// that a file's independent errors are reported in one run, and none
	// that only repeats an earlier one's cause. structural is set by an
	// error in the file's frame (its top-level keys, or the meshes,
	// tensors and ops collections themselves, their keys included):
	// build, whose every check relies on the frame, is then not run.
	structural bool
	// lost are the tensors whose producer is unknown: written by an op
	// left out for its errors, produced twice, or on a cycle. No op
	// reading one is checked, and it is no fusion input.
	lost map[string]bool
	// lostReads are the names that the ops left out for their errors
	// read, so that such a name is not reported as unused.
	lostReads map[string]bool
	// opsLost is set when an op whose output or operands are unknown was
	// left out: a tensor that seems unused or unproduced may then be
	// that op's, and is not reported.
	opsLost bool
	// back is the backward section, nil for none (backward.go).
	back *rawBackward
	// pipe is the pipeline section, nil for none (pipeline.go); whole
	// leaves it unapplied (ParseWhole).
	pipe  *rawPipeline
	whole bool
}

// rawTensor is a tensor declaration before shapes and schedules are
// resolved: its parts decoded, with where each is written, and no YAML
// node, so that the nodes of an entry may be reused once it is read.
type rawTensor struct {
	name string
	pos  diag.Pos
	// meshAt is where the mesh is written, the zero position when the
	// declaration leaves it out; mesh its value. A value that is wrong
	// breaks the tensor, and build reads the values of unbroken tensors
	// only.
	meshAt diag.Pos
	mesh   *Mesh
	// plsAt is where the placements are written, the zero position for
	// none; their entries are kept (rawRest.plsList) only until they are
	// decoded on the mesh the tensor declares (into pls), which build
	// then uses: a tensor that declares a mesh lies on it.
	plsAt diag.Pos
	// pls are the placements decoded on the mesh the tensor declares,
	// shared by the declarations that write the same list and with
	// positions relative to plsAt (sharedPlacements): read them through
	// placementsOf. A pointer to the shared list rather than a slice
	// keeps the declaration at 96 bytes (112 with the slice's header).
	pls *[]placement
	// more holds the parts that most declarations leave out, nil when
	// this one does (the declarations of a generated file give a mesh
	// and placements): read them through rest, write them through own.
	more *rawRest
	// auto is set by `placements: auto` (ParseAuto), which gives no
	// placements.
	auto bool
	// broken is set when the declaration has an error that parseTensors
	// reported, or names a broken mesh: build checks it no further, and
	// the ops reading it are not checked.
	broken bool
}

// rawRest is the rest of a tensor declaration (rawTensor.more).
type rawRest struct {
	// dtypeAt and shapeAt are where the dtype and shape are written, the
	// zero position for those the declaration leaves out; dtype and
	// shape their values.
	dtypeAt, shapeAt diag.Pos
	dtype            DType
	shape            []int
	// sched and alloc are the schedule and allocation as decoded, nil
	// when not given.
	sched *schedIn
	alloc *allocIn
	// plsList holds the placements' entries when they were not decoded
	// while reading (rawTensor.pls): the declaration gives no mesh, or
	// the list has errors.
	plsList *listIn
}

// rest is the rest of rt's declaration, to read.
func (rt *rawTensor) rest() rawRest { return readPart(rt.more) }

// own is the rest of rt's declaration, to write.
func (rt *rawTensor) own() *rawRest { return ownPart(&rt.more) }

// readPart is *part, or the zero value when part is nil: a part of a raw
// entry that most entries leave out, kept behind a pointer so that those
// take no room for it (rawTensor.more, rawOp.axes).
func readPart[T any](part *T) (v T) {
	if part != nil {
		v = *part
	}
	return v
}

// ownPart is *part, made first when nil: such a part, to write.
func ownPart[T any](part **T) *T {
	if *part == nil {
		*part = new(T)
	}
	return *part
}

// declared is a declared tensor: its declaration, which build drops
// once it has made the tensor of it, and that tensor, nil until then.
// The declarations of a file of 100k tensors were a quarter of the heap
// at the end of parsing, beside the fusion they had become.
type declared struct {
	raw    *rawTensor
	tensor *Tensor
}

// decl is the declaration of the tensor name, nil for a tensor the file
// does not declare or that build has made already.
func (p *parser) decl(name string) *rawTensor { return p.raw[name].raw }

// given reports whether the file writes a part at pos: the zero position
// is that of a part left out.
func given(pos diag.Pos) bool { return pos.Line > 0 }

// what names the tensor in messages, `tensor "t0"`: made each time it
// is asked for rather than kept with every declaration.
func (rt *rawTensor) what() string {
	return "tensor " + strconv.Quote(rt.name)
}

// rawOp is an op as written: its parts decoded, with where each is
// written (the zero position for a part left out), and no YAML node.
type rawOp struct {
	kind  OpKind
	ins   []string   // the operands' names, in order
	inAt  []diag.Pos // where each is written
	out   string
	outAt diag.Pos
	axis  int
	// keys are where the attributes are written, and those but axis: nil
	// for an op that writes none (a set, an elementwise op; most ops of a
	// generated file). Read them through keysOf, write them through
	// ownKeys.
	keys *rawKeys
	pos  diag.Pos
	// fileIdx is the op's position in the file's ops list, for messages.
	fileIdx int
	// visit is how far sortOps's depth-first search is with the op: a
	// field rather than a map, which cost a tenth of parsing 100k ops.
	visit visitState
}

// rawKeys are the attributes of an op (rawOp.keys).
type rawKeys struct {
	axisAt   diag.Pos
	axes     []int      // broadcast's new axes as written
	axesAt   diag.Pos   // the list
	axesEach []diag.Pos // its entries
	// attrs are the other attributes, nil for an op that has none (all
	// but the few ops of a fusion that take them): a pointer, so that
	// the keys of the reductions and broadcasts of a file of 100k ops do
	// not carry their room.
	attrs *rawAttrs
	// scalar is the number a binary op takes as an operand, nil for
	// none, written at scalarAt.
	scalar   *ops.Scalar
	scalarAt diag.Pos
	// of is, on an op of a composite's expansion, the composite; on a
	// backward's op, the op it is part of the gradient of.
	of *Composite
	// outShape is, on a gradient rule's broadcast back over a reduced
	// axis, its output's shape, which no file declares.
	outShape []int
}

// rawAttrs are an op's attributes but axis and axes as written
// (ops.Values), in the file's order until checkAttrs puts them in the
// entry's, with where each (at) and each list's entries (each) are
// written.
type rawAttrs struct {
	vals ops.Values
	at   []diag.Pos
	each [][]diag.Pos
}

// attrPos is where attribute k is written, and its list's entry i when i
// is not negative; the zero position when it is not.
func (k rawKeys) attrPos(key ops.Attr, i int) diag.Pos {
	a := readPart(k.attrs)
	for j, v := range a.vals {
		switch {
		case v.Key != key:
		case i < 0:
			return a.at[j]
		case i < len(a.each[j]):
			return a.each[j][i]
		}
	}
	return diag.Pos{}
}

// keysOf are ro's keys, to read.
func (ro *rawOp) keysOf() rawKeys { return readPart(ro.keys) }

// ownKeys are ro's keys, to write.
func (ro *rawOp) ownKeys() *rawKeys { return ownPart(&ro.keys) }

// visitState is a depth-first search's mark of a node.
type visitState uint8

// The marks: not reached yet, on the search's path, done.
const (
	unvisited visitState = iota
	visiting
	visited
)

// reads reports whether the op names t among its operands.
func (o *rawOp) reads(t string) bool { return contains(o.ins, t) }

var topKeys = []string{"format", "name", "meshes", "tensors", "ops", "inputs", "outputs", "backward", "pipeline"}

var yamlLineRE = regexp.MustCompile(`^yaml: (?:line (\d+): )?(.*)$`)

// readTree reads the whole file src the tree way, for finish to build. A
// file that is no UTF-8 YAML mapping breaks the frame: finish builds
// nothing.
func (p *parser) readTree(src []byte) {
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

// finish builds the fusion of what parse read, unless its frame is
// broken.
func (p *parser) finish() *Fusion {
	if p.structural {
		return nil
	}
	if p.whole {
		return p.build(p.name)
	}
	return p.pipelineOf(p.build(p.name))
}

// header reads the top-level key of the file other than meshes, tensors
// and ops. A problem with the format or the name breaks the file's frame.
func (p *parser) header(key string, v *yaml.Node) {
	before := p.errs.Count()
	switch key {
	case "format":
		if f, ok := p.w.integer(v, "format"); ok && f != 1 && f != 2 {
			p.errs.AddHint(posOf(v), "format 2 is format 1 with sharding propagation",
				"format: unsupported format %d (expected 1 or 2)", f)
		} else if ok {
			p.format = f
		}
	case "name":
		if s, ok := p.w.str(v, "name"); ok {
			p.name = s
		}
	case "inputs":
		p.inputs = listOf(v)
	case "outputs":
		p.outputs = listOf(v)
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
func (p *parser) decode(src []byte) *yaml.Node {
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
func (p *parser) syntaxError(err error) {
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
	p.errs.Add(diag.Pos{Line: line, Col: 1}, "invalid YAML: %s", m[2])
}

// propagates reports whether tensor name's sharding is propagated: in
// format 2, when the file declares none of its mesh, schedule and
// placements (or does not declare it). A tensor that declares any of them
// is given, and propagation never changes it: a mesh alone means
// replicated on purpose, as a TensorView with a mesh and no device split
// does in nvFuser.
func (p *parser) propagates(name string) bool {
	if p.format != 2 {
		return false
	}
	rt := p.decl(name)
	return rt == nil || !given(rt.meshAt) && rt.rest().sched == nil && !given(rt.plsAt)
}

// checkAuto reports `placements: auto` where it is not accepted.
func (p *parser) checkAuto(n *yaml.Node, what string) {
	if !p.allowAuto {
		p.errs.AddHint(posOf(n), "run nvcomm lower --auto, which chooses the shardings of such tensors, or give placements",
			"%s placements: auto asks nvcomm to choose the sharding", what)
	}
}

var tensorKeys = []string{"mesh", "dtype", "shape", "schedule", "allocation", "placements"}

func (p *parser) parseTensors(n *yaml.Node) {
	if n == nil {
		return
	}
	before := p.errs.Count()
	fields, ok := p.w.mapping(n, "tensors", nil)
	p.structural = p.structural || p.errs.Count() > before
	if !ok {
		return
	}
	for _, f := range fields {
		p.tensorEntry(f.KeyN, f.Value)
	}
}

// tensorEntry reads the declaration v of the tensor named by key k.
func (p *parser) tensorEntry(k, v *yaml.Node) {
	if !isGradName(k.Value) && !p.w.keyIdent(k, "tensor") {
		p.structural = true
		return
	}
	rt := &rawTensor{name: k.Value, pos: posOf(k)}
	p.raw[k.Value] = declared{raw: rt}
	p.tensorNames = append(p.tensorNames, k.Value)
	if v.Kind == yaml.ScalarNode && v.Tag == "!!null" {
		return // "tv1:" with nothing: declared, all defaults
	}
	p.parseTensor(rt, v)
}

// parseTensor reads one tensor's declaration n into rt, and marks it
// broken if it has errors. The mesh, dtype and shape are checked now, so
// that their errors are reported along with those of the ops; the
// schedule and allocation are decoded, their problems kept for the
// replay to report.
func (p *parser) parseTensor(rt *rawTensor, n *yaml.Node) {
	before := p.errs.Count()
	what := rt.what()
	tf, ok := p.w.mapping(n, what, tensorKeys)
	if !ok {
		rt.broken = true
		return
	}
	var pls *yaml.Node
	for _, x := range tf {
		v := x.Value
		switch x.Key {
		case "mesh":
			rt.meshAt, rt.mesh = posOf(v), p.meshRef(v, what)
		case "dtype":
			rt.own().dtypeAt, rt.own().dtype = posOf(v), p.dtype(v, what, "")
		case "shape":
			rt.own().shapeAt = posOf(v)
			rt.own().shape, _ = p.extents(v, what+" shape")
		case "schedule":
			rt.own().sched = p.scheduleIn(rt.name, v)
		case "allocation":
			rt.own().alloc = p.allocOf(rt.name, v)
		case "placements":
			if v.Kind == yaml.ScalarNode && v.Value == "auto" {
				rt.auto = true
				p.checkAuto(v, what)
			} else {
				pls = v
			}
		}
	}
	rt.broken = p.errs.Count() > before || given(rt.meshAt) && rt.mesh == nil
	if pls == nil {
		return
	}
	rt.plsAt = posOf(pls)
	list := listOf(pls)
	if rt.mesh != nil {
		// The list's own errors (an entry, how many) are reported even
		// when the op producing the tensor is broken. They leave it
		// unbroken: an output's shape comes from its op, and the ops
		// reading it are still checked; build reports them again.
		if decoded, ok := p.placements(list, rt.mesh, what+" placements"); ok {
			rt.pls = p.sharedPlacements(decoded, rt.plsAt)
			return
		}
	}
	rt.own().plsList = list
}
