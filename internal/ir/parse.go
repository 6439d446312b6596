package ir

import (
	"bytes"
	"fmt"
	"io"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"

	"github.com/nvcomm/nvcomm/internal/diag"
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

func parse(file string, src []byte, allowAuto bool) (*Fusion, error) {
	p := &parser{file: file, errs: &errList{file: file}, format: 1, allowAuto: allowAuto}
	p.w = walker{errs: p.errs}
	f := p.parse(src)
	if err := p.errs.Err(); err != nil {
		return nil, err
	}
	return f, nil
}

type parser struct {
	file string
	errs *errList
	w    walker
	// stepErrs and lateErrs hold the problems of the schedule step or
	// allocation being decoded, for the replay to report (schedparse.go).
	stepErrs, lateErrs errList
	// format is the file's format: 1, or 2, which propagates shardings.
	format int
	// allowAuto accepts `placements: auto` (ParseAuto).
	allowAuto bool

	meshes      map[string]*Mesh
	meshNames   []string
	raw         map[string]*rawTensor
	tensorNames []string // declared, in file order
	ops         []*rawOp
	inputsN     *yaml.Node
	outputsN    *yaml.Node
	// producers are the ops by the tensor they produce (sortOps).
	producers map[string]*rawOp
	// read holds the names the ops read (isRead), built on first use.
	read map[string]bool
	// parsedPlacements are the placements read so far by their text: a
	// fusion repeats a few, and the regular expression that reads one
	// was a tenth of building a fusion of 100k tensors.
	parsedPlacements map[string]shard.Placement

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
}

// rawTensor is a tensor declaration before shapes and schedules are resolved.
type rawTensor struct {
	name                             string
	pos                              diag.Pos
	mesh, dtype, shape, sched, alloc *yaml.Node
	placements                       *yaml.Node
	// auto is set by `placements: auto` (ParseAuto), which leaves
	// placements nil.
	auto bool
	// tensor is the tensor build made of the declaration.
	tensor *Tensor
	// named is what(), once built.
	named string
	// broken is set when the declaration has an error that parseTensors
	// reported, or names a broken mesh: build checks it no further, and
	// the ops reading it are not checked.
	broken bool
	// pls are the placements decoded for the mesh plsMesh, the one the
	// tensor declares (placementsOf).
	pls     []placement
	plsMesh *Mesh
}

// what names the tensor in messages, `tensor "t0"`: built once, though
// parsing and building the fusion each ask.
func (rt *rawTensor) what() string {
	if rt.named == "" {
		rt.named = "tensor " + strconv.Quote(rt.name)
	}
	return rt.named
}

// rawOp is an op as written.
type rawOp struct {
	kind  OpKind
	ins   []string     // the operands' names, in order
	inNs  []*yaml.Node // where each is written
	inN   *yaml.Node   // the "in" value: a name or a list of names
	out   string
	outN  *yaml.Node
	axis  int
	axisN *yaml.Node
	axes  []int // broadcast's new axes as written
	axesN *yaml.Node
	pos   diag.Pos
	// fileIdx is the op's position in the file's ops list, for messages.
	fileIdx int
	// visit is how far sortOps's depth-first search is with the op: a
	// field rather than a map, which cost a tenth of parsing 100k ops.
	visit visitState
}

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

var topKeys = []string{"format", "name", "meshes", "tensors", "ops", "inputs", "outputs"}

var yamlLineRE = regexp.MustCompile(`^yaml: (?:line (\d+): )?(.*)$`)

func (p *parser) parse(src []byte) *Fusion {
	if !utf8.Valid(src) {
		// The YAML library would decode UTF-16 by its byte-order mark, and
		// positions would then not match the file as bytes.
		p.errs.AddHint(diag.Pos{Line: 1, Col: 1}, "save the file as UTF-8", "the fusion file is not UTF-8 text")
		return nil
	}
	root := p.decode(src)
	if root == nil {
		return nil
	}
	fields, ok := p.w.mapping(root, "fusion", topKeys)
	if !ok {
		return nil
	}
	frame := p.errs.Count()
	name := strings.TrimSuffix(filepath.Base(p.file), filepath.Ext(p.file))
	var meshesN, tensorsN, opsN *yaml.Node
	for _, f := range fields {
		switch f.Key {
		case "format":
			if v, ok := p.w.integer(f.Value, "format"); ok && v != 1 && v != 2 {
				p.errs.AddHint(posOf(f.Value), "format 2 is format 1 with sharding propagation",
					"format: unsupported format %d (expected 1 or 2)", v)
			} else if ok {
				p.format = v
			}
		case "name":
			if s, ok := p.w.str(f.Value, "name"); ok {
				name = s
			}
		case "meshes":
			meshesN = f.Value
		case "tensors":
			tensorsN = f.Value
		case "ops":
			opsN = f.Value
		case "inputs":
			p.inputsN = f.Value
		case "outputs":
			p.outputsN = f.Value
		}
	}
	if meshesN == nil && !misspelled(root, topKeys, "meshes") {
		p.errs.Add(posOf(root), "fusion: missing key \"meshes\"")
	}
	p.structural = p.errs.Count() > frame || meshesN == nil
	p.parseMeshes(meshesN)
	p.parseTensors(tensorsN)
	p.parseOps(opsN)
	if p.structural {
		return nil
	}
	return p.build(name)
}

// decode reads src's one YAML document and returns its root node, or nil
// after reporting why not. Files in fastDecode's part of YAML are read by
// it, the others by the YAML library.
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

func (p *parser) parseMeshes(n *yaml.Node) {
	p.meshes = map[string]*Mesh{}
	if n == nil {
		return
	}
	before := p.errs.Count()
	fields, ok := p.w.mapping(n, "meshes", nil)
	p.structural = p.structural || p.errs.Count() > before
	if !ok {
		return
	}
	if len(fields) == 0 {
		p.errs.Add(posOf(n), "meshes: expected at least one mesh")
		p.structural = true
	}
	for _, f := range fields {
		if !p.w.keyIdent(f.KeyN, "mesh") {
			p.structural = true
			continue
		}
		m := &Mesh{Name: f.Key, Pos: posOf(f.KeyN)}
		if p.meshShape(f.Value, m, 0) {
			p.checkMeshDevices(m, f.Value)
		} else {
			m.Devices = nil // broken: meshRef finds no mesh in it
		}
		p.meshes[f.Key] = m
		p.meshNames = append(p.meshNames, f.Key)
	}
}

// meshShape walks a nested list of device ids at the given depth, filling
// m.Shape (from the first element at each depth) and m.Devices, and reports
// ragged nesting.
func (p *parser) meshShape(n *yaml.Node, m *Mesh, depth int) bool {
	what := fmt.Sprintf("mesh %q", m.Name)
	items, ok := p.w.sequence(n, what)
	if !ok {
		return false
	}
	if len(items) == 0 {
		p.errs.Add(posOf(n), "%s: expected a non-empty list of device ids", what)
		return false
	}
	if depth == len(m.Shape) {
		if len(m.Devices) > 0 {
			// Earlier lists at this depth held device ids, not lists.
			p.errs.Add(posOf(n), "%s: ragged mesh: expected a device id at depth %d, got a list", what, depth)
			return false
		}
		if depth >= 3 {
			p.errs.Add(posOf(n), "%s: a mesh has at most 3 axes (DIDz, DIDy, DIDx)", what)
			return false
		}
		m.Shape = append(m.Shape, len(items))
	} else if m.Shape[depth] != len(items) {
		p.errs.Add(posOf(n), "%s: ragged mesh: this list has %d entries, expected %d like the first at its depth", what, len(items), m.Shape[depth])
		return false
	}
	nested := items[0].Kind == yaml.SequenceNode
	if depth == 0 && !nested {
		// 1-D mesh: the shape is the list length.
	}
	for _, it := range items {
		if (it.Kind == yaml.SequenceNode) != nested {
			p.errs.Add(posOf(it), "%s: ragged mesh: mixes device ids and lists at the same depth", what)
			return false
		}
		if nested {
			if !p.meshShape(it, m, depth+1) {
				return false
			}
			continue
		}
		if depth+1 != len(m.Shape) {
			p.errs.Add(posOf(it), "%s: ragged mesh: expected a list at depth %d", what, depth+1)
			return false
		}
		d, ok := p.w.integer(it, what+" device id")
		if !ok {
			return false
		}
		if d < 0 {
			p.errs.Add(posOf(it), "%s: device id %d is negative (expected >= 0)", what, d)
			return false
		}
		m.Devices = append(m.Devices, d)
	}
	return true
}

// checkMeshDevices reports duplicate device ids, pointing at the second one.
func (p *parser) checkMeshDevices(m *Mesh, n *yaml.Node) {
	seen := map[int]bool{}
	var leaves []*yaml.Node
	var collect func(*yaml.Node)
	collect = func(x *yaml.Node) {
		for _, c := range x.Content {
			if c.Kind == yaml.SequenceNode {
				collect(c)
			} else {
				leaves = append(leaves, c)
			}
		}
	}
	collect(n)
	for i, d := range m.Devices {
		if seen[d] {
			p.errs.Add(posOf(leaves[i]), "mesh %q: duplicate device id %d", m.Name, d)
			m.Devices = nil
			return
		}
		seen[d] = true
	}
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
	rt := p.raw[name]
	return rt == nil || rt.mesh == nil && rt.sched == nil && rt.placements == nil
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
	p.raw = map[string]*rawTensor{}
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
		if !p.w.keyIdent(f.KeyN, "tensor") {
			p.structural = true
			continue
		}
		rt := &rawTensor{name: f.Key, pos: posOf(f.KeyN)}
		p.raw[f.Key] = rt
		p.tensorNames = append(p.tensorNames, f.Key)
		if f.Value.Kind == yaml.ScalarNode && f.Value.Tag == "!!null" {
			continue // "tv1:" with nothing: declared, all defaults
		}
		p.parseTensor(rt, f.Value)
	}
}

// parseTensor reads one tensor's declaration n into rt, and marks it
// broken if it has errors.
func (p *parser) parseTensor(rt *rawTensor, n *yaml.Node) {
	before := p.errs.Count()
	what := rt.what()
	tf, ok := p.w.mapping(n, what, tensorKeys)
	if !ok {
		rt.broken = true
		return
	}
	for _, x := range tf {
		switch x.Key {
		case "mesh":
			rt.mesh = x.Value
		case "dtype":
			rt.dtype = x.Value
		case "shape":
			rt.shape = x.Value
		case "schedule":
			rt.sched = x.Value
		case "allocation":
			rt.alloc = x.Value
		case "placements":
			rt.placements = x.Value
			if x.Value.Kind == yaml.ScalarNode && x.Value.Value == "auto" {
				rt.placements, rt.auto = nil, true
				p.checkAuto(x.Value, what)
			}
		}
	}
	// Check what needs no op now, so these errors are reported along
	// with those of the ops; build checks them again, unless broken.
	m := p.meshRef(rt.mesh, what)
	p.dtype(rt.dtype, what, "")
	if rt.shape != nil {
		p.extents(rt.shape, what+" shape")
	}
	rt.broken = p.errs.Count() > before || rt.mesh != nil && m == nil
	if m != nil && rt.placements != nil {
		// The list's own errors (an entry, how many) are reported even
		// when the op producing the tensor is broken. They leave it
		// unbroken: an output's shape comes from its op, and the ops
		// reading it are still checked; build reports them again.
		if pls, ok := p.placements(rt.placements, m, what+" placements"); ok {
			rt.pls, rt.plsMesh = pls, m
		}
	}
}
