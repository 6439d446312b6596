package ir

import (
	"path/filepath"
	"strconv"
	"strings"

	"github.com/nvcomm/nvcomm/internal/diag"
	"github.com/nvcomm/nvcomm/internal/ops"
	"github.com/nvcomm/nvcomm/internal/shard"
)

// Source is a fusion file's declarations as its front end reads them
// (internal/syntax decodes the YAML): its header, meshes, tensors, ops and
// backward and pipeline sections, each with where its parts are written,
// and the diagnostics found so far. The front end reports the file's
// syntax (its keys, the kinds of its values) into Errors and hands each
// entry over as it reads it (AddTensor, AddOp), so that no tree of the
// whole file need exist; Build then checks the declarations together and
// builds the fusion, with the checks and messages the builder gives
// values (NewTensor, NewOp).
type Source struct {
	file string
	errs *diag.Collector
	// format is the file's format: 1, or 2, which propagates shardings.
	format int
	// sumsAsWritten is set by SumsAsWritten.
	sumsAsWritten bool

	meshes    map[string]*Mesh
	meshNames []string
	// raw holds the declared tensors by name: their declarations until
	// build has made them, then the tensors alone (declared).
	raw map[string]declared
	// tensorNames are the declared names in file order; none when the
	// fusion is built as read, whose inputs their positions order.
	tensorNames []string
	ops         []*rawOp
	// inputs and outputs are the lists the file gives, nil for none.
	inputs, outputs *StrList
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
	// that only repeats an earlier one's cause (the front end stops at an
	// error in the file's frame, its top-level keys or collections).
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
	// pipe is the pipeline section, nil for none (pipeline.go).
	pipe *PipelineDecl
	// asRead is set when the fusion is built as the file is read
	// (asread.go): its ops are built as they are added, and none is kept.
	asRead *asRead
}

// NewSource is the Source of the file named file, which declares
// nothing yet: of format 1, and named as the file without its extension.
func NewSource(file string) *Source {
	return &Source{file: file, errs: &diag.Collector{File: file}, format: 1,
		name:   strings.TrimSuffix(filepath.Base(file), filepath.Ext(file)),
		meshes: map[string]*Mesh{}, raw: map[string]declared{}}
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
	// auto is set by `placements: auto` (syntax.ParseAuto), which gives no
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
	sched *ScheduleDecl
	alloc *AllocDecl
	// plsList holds the placements' entries when they were not decoded
	// while reading (rawTensor.pls): the declaration gives no mesh, or
	// the list has errors.
	plsList *StrList
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
func (p *Source) decl(name string) *rawTensor { return p.raw[name].raw }

// given reports whether the file writes a part at pos: the zero position
// is that of a part left out.
func given(pos diag.Pos) bool { return pos.Line > 0 }

// what names the tensor in messages, `tensor "t0"`: made each time it
// is asked for rather than kept with every declaration.
func (rt *rawTensor) what() string {
	return "tensor " + strconv.Quote(rt.name)
}

// whatPart names a part of the tensor in messages, `tensor "t0"
// placements` for part " placements", in one allocation.
func (rt *rawTensor) whatPart(part string) string {
	var buf [64]byte
	b := strconv.AppendQuote(append(buf[:0], "tensor "...), rt.name)
	return string(append(b, part...))
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
	// gradOf is the tensor a file's op names with grad_of (gradof.go),
	// written at gradOfAt: build resolves it into of.
	gradOf   string
	gradOfAt diag.Pos
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

// Build checks the declarations and builds the fusion: its ops ordered,
// its tensors inferred and their schedules replayed, its backward and (but
// for whole, which builds the fusion over the whole batch, as
// syntax.ParseWhole) its pipeline written out. It returns the fusion, or
// every problem reported, the front end's included (at most
// diag.MaxErrors, by position), as a *diag.List. The front end does not
// call it on a file whose frame is broken: every check here relies on it.
func (p *Source) Build(whole bool) (*Fusion, error) {
	f := p.build(p.name)
	if f != nil && p.pipe == nil && !p.sumsAsWritten {
		// A pipeline's stages keep every reduction where build put it.
		f = sumLate(f)
	}
	if !whole {
		f = p.pipelineOf(f)
	}
	if err := p.errs.Err(); err != nil {
		return nil, err
	}
	return f, nil
}

// SumsAsWritten makes Build keep every reduction of pending terms where
// the file puts it, without summing terms late (sums.go): the
// auto-sharder models the fusion as written, before its shardings are
// chosen.
func (p *Source) SumsAsWritten() { p.sumsAsWritten = true }

// propagates reports whether tensor name's sharding is propagated: in
// format 2, when the file declares none of its mesh, schedule and
// placements (or does not declare it). A tensor that declares any of them
// is given, and propagation never changes it: a mesh alone means
// replicated on purpose, as a TensorView with a mesh and no device split
// does in nvFuser.
func (p *Source) propagates(name string) bool {
	if p.format != 2 {
		return false
	}
	rt := p.decl(name)
	return rt == nil || !given(rt.meshAt) && rt.rest().sched == nil && !given(rt.plsAt)
}
