package syntax

import (
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/nvcomm/nvcomm/internal/diag"
	"github.com/nvcomm/nvcomm/internal/ir"
)

// A tensor's declaration, read into an ir.TensorDecl: its mesh (named
// among those declared before it), dtype and shape checked as they are
// read, its schedule and allocation decoded with their problems kept for
// the replay to report, its placements kept for the Source to decode.

// checkAuto reports `placements: auto` where it is not accepted.
func (p *reader) checkAuto(n *yaml.Node, what string) {
	if !p.auto {
		p.errs.AddHint(posOf(n), "run nvcomm lower --auto, which chooses the shardings of such tensors, or give placements",
			"%s placements: auto asks nvcomm to choose the sharding", what)
	}
}

// tensorKeys are the keys of a tensor's declaration.
var tensorKeys = []string{"mesh", "dtype", "shape", "schedule", "allocation", "placements"}

// parseTensors reads the tensors mapping n, nil when the file has none,
// one declaration at a time.
func (p *reader) parseTensors(n *yaml.Node) {
	fields, ok := p.section(n, "tensors")
	if !ok {
		return
	}
	for _, f := range fields {
		p.tensorEntry(f.KeyN, f.Value)
	}
}

// tensorEntry reads the declaration v of the tensor named by key k.
func (p *reader) tensorEntry(k, v *yaml.Node) {
	if !ir.IsBackwardName(k.Value) && !p.w.keyIdent(k, "tensor") {
		p.structural = true
		return
	}
	p.tensor = ir.TensorDecl{Name: k.Value, Pos: posOf(k)}
	if v.Kind != yaml.ScalarNode || v.Tag != "!!null" { // "tv1:" with nothing: declared, all defaults
		p.parseTensor(&p.tensor, v)
	}
	p.src.AddTensor(&p.tensor)
}

// parseTensor reads one tensor's declaration n into d, and marks it
// broken if it has errors. The mesh, dtype and shape are checked now, so
// that their errors are reported along with those of the ops; the
// schedule and allocation are decoded, their problems kept for the
// replay to report.
func (p *reader) parseTensor(d *ir.TensorDecl, n *yaml.Node) {
	before := p.errs.Count()
	what := "tensor " + strconv.Quote(d.Name)
	tf, ok := p.w.mapping(n, what, tensorKeys)
	if !ok {
		d.Broken = true
		return
	}
	var pls *yaml.Node
	for _, x := range tf {
		v := x.Value
		switch x.Key {
		case "mesh":
			d.MeshAt, d.Mesh = posOf(v), p.meshRef(v, what)
		case "dtype":
			d.DTypeAt, d.DType = posOf(v), p.dtype(v, what)
		case "shape":
			d.ShapeAt = posOf(v)
			d.Shape, _ = p.extents(v, what+" shape")
		case "schedule":
			d.Schedule = p.scheduleIn(d.Name, v)
		case "allocation":
			d.Alloc = p.allocOf(d.Name, v)
		case "placements":
			if v.Kind == yaml.ScalarNode && v.Value == "auto" {
				d.Auto = true
				p.checkAuto(v, what)
			} else {
				pls = v
			}
		}
	}
	d.Broken = p.errs.Count() > before
	if pls != nil {
		d.Placements = listOf(pls)
	}
}

// meshRef is the declared mesh n names, nil after reporting that it
// names none, or when the mesh it names is broken (reported).
func (p *reader) meshRef(n *yaml.Node, what string) *ir.Mesh {
	name, ok := p.w.str(n, what+" mesh")
	if !ok {
		return nil
	}
	m, found := p.meshes[name]
	if !found {
		p.errs.AddHint(posOf(n), diag.Suggest(name, p.meshNames), "%s: unknown mesh %q", what, name)
		return nil
	}
	if m.Devices == nil {
		return nil // the mesh itself is broken and was reported
	}
	return m
}

// dtype decodes the dtype of what.
func (p *reader) dtype(n *yaml.Node, what string) ir.DType {
	return p.dtypeName(n, what+" dtype", what)
}

// dtypeName decodes a dtype's name, which value names in the message of
// a value that is no string and what in that of an unknown name.
func (p *reader) dtypeName(n *yaml.Node, value, what string) ir.DType {
	s, ok := p.w.str(n, value)
	if !ok {
		return ""
	}
	if ir.DType(s).Size() == 0 {
		names := ir.DTypeNames()
		p.errs.AddHint(posOf(n), diag.Suggest(s, names), "%s: unknown dtype %q (expected one of %s)", what, s, strings.Join(names, ", "))
		return ""
	}
	return ir.DType(s)
}

// extents decodes a shape: at most ir.MaxRank extents, each an integer
// >= 1. The shape has an entry for each extent, bad ones included, when
// the list itself is good.
func (p *reader) extents(n *yaml.Node, what string) ([]int, bool) {
	items, ok := p.w.sequence(n, what)
	if !ok {
		return nil, false
	}
	if !ir.CheckRank(p.errs, len(items), posOf(n), what) {
		return nil, false
	}
	shape := make([]int, 0, len(items))
	good := true
	for _, it := range items {
		e, ok := p.w.positive(it, what+" extent")
		good = good && ok
		shape = append(shape, e)
	}
	return shape, good
}
