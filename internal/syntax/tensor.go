package syntax

import (
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/nvcomm/nvcomm/internal/diag"
	"github.com/nvcomm/nvcomm/internal/ir"
)

// The values of a tensor's declaration that are checked as they are
// read: its mesh, named among those declared before it, its dtype and its
// shape.

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
