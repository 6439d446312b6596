package syntax

import (
	"slices"

	"go.yaml.in/yaml/v3"

	"github.com/nvcomm/nvcomm/internal/ir"
)

// stream reads src as readTree does, for Build, without the tree of the
// whole file: fastStream hands it the top-level fields, and the tensors
// and ops one entry at a time, each read into a declaration that keeps no
// node.
// It takes the files whose frame needs no check that spans entries: src
// in fastDecode's part of YAML, every top-level key known and given once,
// meshes before tensors and ops, tensors (a block mapping of names, none
// given twice) before ops. It reports false for any other file, having
// read part of it perhaps: ParseWith then reads the file again with a fresh
// reader, the tree way, which reports what is wrong with its frame.
func (p *reader) stream(src []byte) bool {
	s := &streamer{p: p, seen: map[int]bool{}}
	return fastStreamTelling(src, s, p.consumed) && s.seen[meshesKey]
}

// streamAsRead is stream into a Source that builds the fusion's ops as
// it reads them (ir.Source.BuildAsRead), so that no op's raw entry is kept
// (the peak of parsing a big file). It reports false for a file that it
// does not stream, or whose Source gives up, having read part of it
// perhaps: the Source then tells which (Abandoned).
func (p *reader) streamAsRead(src []byte) bool {
	p.src.BuildAsRead()
	return p.stream(src) && p.src.FinishRead()
}

// restart is a fresh reader of the file, for a Source that builds once the
// file is read, kept as p.next.
func (p *reader) restart(file string, opts Options) *reader {
	p.next = newReader(file, opts)
	return p.next
}

// The top-level keys whose order stream checks, as indexes into topKeys.
var (
	meshesKey  = slices.Index(topKeys, "meshes")
	tensorsKey = slices.Index(topKeys, "tensors")
	opsKey     = slices.Index(topKeys, "ops")
)

// streamer is stream's fastHandler.
type streamer struct {
	p *reader
	// seen marks the top-level keys read, by their index in topKeys.
	seen map[int]bool
	// inOps is set while the entries of ops are read, those of tensors
	// otherwise; ops counts them.
	inOps bool
	ops   int
}

// take marks the top-level key k as read, and reports whether stream
// takes it there.
func (s *streamer) take(k *yaml.Node) bool {
	i := slices.Index(topKeys, k.Value)
	if i < 0 || s.seen[i] {
		return false
	}
	switch i {
	case tensorsKey:
		if !s.seen[meshesKey] || s.seen[opsKey] {
			return false
		}
	case opsKey:
		if !s.seen[meshesKey] {
			return false
		}
		s.seen[tensorsKey] = true // none: they may not come after
	}
	s.seen[i] = true
	return true
}

// open streams the entries of tensors, a mapping, and of ops, a list.
func (s *streamer) open(k, coll *yaml.Node) (stream, ok bool) {
	ops, kind := k.Value == "ops", coll.Kind
	if ops && kind != yaml.SequenceNode || !ops && (k.Value != "tensors" || kind != yaml.MappingNode) {
		return false, true // a whole value for field
	}
	s.inOps = ops
	return true, s.take(k)
}

// field reads a top-level key and its whole value.
func (s *streamer) field(k, v *yaml.Node) bool {
	if !s.take(k) {
		return false
	}
	switch k.Value {
	case "meshes":
		s.p.parseMeshes(v)
	case "tensors":
		s.p.parseTensors(v)
	case "ops":
		s.p.parseOps(v)
	default:
		s.p.header(k.Value, v)
	}
	return true
}

// entry reads a tensor, unless its key is no name or repeats one, which
// only the tree's check of the whole mapping reports as parse does; or
// an op.
func (s *streamer) entry(k, v *yaml.Node) bool {
	if s.p.src.Abandoned() {
		return false // read again (streamAsRead)
	}
	if s.inOps {
		s.p.opEntry(v, s.ops)
		s.ops++
		return true
	}
	if s.p.src.Declares(k.Value) || !ir.IsIdent(k.Value) && !ir.IsBackwardName(k.Value) {
		return false
	}
	s.p.tensorEntry(k, v)
	return true
}
