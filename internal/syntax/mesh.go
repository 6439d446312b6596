package syntax

import (
	"fmt"

	"go.yaml.in/yaml/v3"

	"github.com/nvcomm/nvcomm/internal/ir"
)

// The meshes of a fusion file: each a name and a nested list of device
// ids, whose nesting depth is the mesh's rank.

// parseMeshes reads the file's meshes.
func (p *reader) parseMeshes(n *yaml.Node) {
	fields, ok := p.section(n, "meshes")
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
		m := &ir.Mesh{Name: f.Key, Pos: posOf(f.KeyN)}
		if p.meshShape(f.Value, m, 0) {
			p.checkMeshDevices(m, f.Value)
		} else {
			m.Devices = nil // broken: meshRef finds no mesh in it
		}
		p.meshes[f.Key] = m
		p.meshNames = append(p.meshNames, f.Key)
		p.src.AddMesh(m)
	}
}

// meshShape walks a nested list of device ids at the given depth, filling
// m.Shape (from the first element at each depth) and m.Devices, and reports
// ragged nesting.
func (p *reader) meshShape(n *yaml.Node, m *ir.Mesh, depth int) bool {
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
func (p *reader) checkMeshDevices(m *ir.Mesh, n *yaml.Node) {
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
