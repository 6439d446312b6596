package auto

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/nvcomm/nvcomm/internal/diag"
	"github.com/nvcomm/nvcomm/internal/ir"
)

// Building a gradient's fusion without its text. Writing each
// combination's fusion as YAML and parsing it again (vjpSource) was half
// of a training step's pricing: a transformer block's 673 gradient
// fusions took 1.5 ms each. vjpFusion hands the same declarations to an
// ir.Source, as internal/syntax does when it reads that text, so that
// the fusion, and so the price, is the same (TestGradientFusionAsText);
// vjpKeyer names it for the memo as the text did. The parts a file
// writes that only text keeps (a given input's schedule or allocation, a
// gradient declared by more than its mesh and placements) still go
// through the text (direct reports false).

// written is the position of every part vjpFusion declares: the Source
// tells a part given from one left out by its line, and a gradient's
// fusion that does not build is priced maxCost, its messages unread.
var written = diag.Pos{Line: 1, Col: 1}

// direct reports whether vjpFusion builds fa's gradient: no tensor of
// it is a given input declared by more than its placements, the file
// declares the gradients of its tensors by their mesh and placements
// alone (gradDecl), and the op as built is the op as the file writes it
// (its kind and operands).
func (m *model) direct(fa *factor) bool {
	g := fa.vjp
	for _, n := range g.gradNodes {
		if m.gradDecl("", n) == nil {
			return false
		}
	}
	for _, k := range fa.vars {
		if m.vars[k].decl != "" {
			return false
		}
	}
	if g.seed >= 0 && m.vars[g.seed].decl != "" {
		return false
	}
	d, ok := m.opDecl(fa, nil)
	return ok && d != nil
}

// opDecl is fa's op as the file writes it, its operands renamed by
// rename (nil: as written), from the op the file's op built: a
// composite's record of itself, or the primitive op. False when that
// op is not the file's as written (a set the parser made a reduction,
// an operand it inserted): its kind or operands differ from the node's.
func (m *model) opDecl(fa *factor, rename map[string]string) (*ir.OpDecl, bool) {
	g, op := fa.vjp, fa.op
	d := &ir.OpDecl{Pos: written, Out: "y", OutAt: written, InList: written, Axis: -1,
		Written: func(key string) bool { return lookup(g.node, key) != nil }}
	var ins []string
	if op.Of != nil && !op.Of.Grad {
		c := op.Of
		d.Kind, ins, d.Axis, d.Axes, d.Attrs = c.Kind, c.Inputs, c.Axis, c.Axes, c.Attrs
	} else {
		d.Kind, d.Axis, d.Axes, d.Attrs, d.Scalar = op.Kind, op.Axis, op.Axes, op.Attrs, op.Scalar
		for _, in := range op.Inputs {
			ins = append(ins, in.Name)
		}
	}
	kind := lookup(g.node, "op")
	if kind == nil || kind.Value != string(d.Kind) || !slices.Equal(ins, writtenInputs(lookup(g.node, "in"))) {
		return nil, false
	}
	if lookup(g.node, "axis") != nil {
		d.AxisAt = written
	}
	if lookup(g.node, "axes") != nil {
		d.AxesAt, d.AxesEach = written, slices.Repeat([]diag.Pos{written}, len(d.Axes))
	}
	for range d.Attrs {
		d.AttrAt = append(d.AttrAt, written)
		d.AttrEach = append(d.AttrEach, nil)
	}
	if d.Scalar != nil {
		d.ScalarAt = written
	}
	for _, in := range ins {
		if r, ok := rename[in]; ok {
			in = r
		}
		d.In, d.InAt = append(d.In, in), append(d.InAt, written)
	}
	return d, true
}

// writtenInputs are the names an op's in lists (a number, an operand
// the op takes as its scalar, left out).
func writtenInputs(n *yaml.Node) []string {
	if n == nil {
		return nil
	}
	if n.Kind == yaml.ScalarNode {
		return []string{n.Value}
	}
	var out []string
	for _, c := range n.Content {
		if c.Kind == yaml.ScalarNode && c.Tag != "!!int" && c.Tag != "!!float" {
			out = append(out, c.Value)
		}
	}
	return out
}

// vjpFusion builds the fusion vjpSource writes of fa under combo, with
// the declarations syntax.Parse hands its Source for that text, in the
// text's order.
func (m *model) vjpFusion(fa *factor, combo []int) (*ir.Fusion, error) {
	g := fa.vjp
	p := ir.NewSource("gradient.yaml")
	p.SetFormat(2)
	for _, mesh := range m.f.Meshes {
		p.AddMesh(mesh)
	}
	rename := map[string]string{g.out: "y"}
	last := len(fa.vars) - 1
	for j, k := range fa.vars[:last] {
		v := m.vars[k]
		name := "t" + strconv.Itoa(j)
		rename[g.names[j]] = name
		p.AddTensor(tensorDecl(name, v, v.options[combo[j]].held(v.produced)))
	}
	out := m.vars[fa.vars[last]]
	s := out.options[combo[last]]
	y := &ir.TensorDecl{Name: "y", Pos: written, MeshAt: written, Mesh: out.t.Mesh}
	if steps, ok := combinedSteps(out.t, s); ok {
		y.Schedule = &ir.ScheduleDecl{At: written, N: len(steps)}
		for _, st := range steps {
			st.Pos = written
			y.Schedule.Steps = append(y.Schedule.Steps, ir.StepDecl{ScheduleStep: st, AxisAt: written, ArgAt: written})
		}
	} else {
		y.Placements = placementList(s)
	}
	p.AddTensor(y)
	for _, name := range slices.Sorted(maps.Keys(g.gradNodes)) {
		p.AddTensor(m.gradDecl(name, g.gradNodes[name]))
	}
	seed := ir.SeedDecl{Name: "y", At: written, DYAt: written, One: g.one}
	if !g.one {
		seed.DY = "dy"
		dy := &variable{t: out.t, options: []sharding{s.held(true)}}
		if g.seed >= 0 {
			dy = m.vars[g.seed]
		}
		p.AddTensor(tensorDecl("dy", dy, dy.options[0]))
	}
	d, ok := m.opDecl(fa, rename)
	if !ok {
		return nil, fmt.Errorf("the op of %q is not as written", g.out)
	}
	p.AddOp(d)
	b := &ir.BackwardDecl{At: written, Seeds: []ir.SeedDecl{seed}}
	for _, w := range g.wrt {
		b.Wrt = append(b.Wrt, ir.Str{Value: rename[w], Pos: written})
	}
	p.SetBackward(b)
	return p.Build(false)
}

// gradDecl is the declaration n of a gradient, named name, as the file
// writes it, when it gives no more than its mesh, as a declared mesh's
// name, and its placements, as a list of strings; nil otherwise (the
// text declares it).
func (m *model) gradDecl(name string, n *yaml.Node) *ir.TensorDecl {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	d := &ir.TensorDecl{Name: name, Pos: written}
	for i := 0; i+1 < len(n.Content); i += 2 {
		key, val := n.Content[i].Value, n.Content[i+1]
		switch {
		case key == "mesh" && val.Kind == yaml.ScalarNode && d.Mesh == nil:
			k := slices.IndexFunc(m.f.Meshes, func(mesh *ir.Mesh) bool { return mesh.Name == val.Value })
			if k < 0 {
				return nil
			}
			d.MeshAt, d.Mesh = written, m.f.Meshes[k]
		case key == "placements" && val.Kind == yaml.SequenceNode && d.Placements == nil:
			d.Placements = &ir.StrList{At: written}
			for _, c := range val.Content {
				if c.Kind != yaml.ScalarNode || c.Tag != "!!str" {
					return nil
				}
				d.Placements.Items = append(d.Placements.Items, ir.Str{Value: c.Value, Pos: written})
			}
		default:
			return nil
		}
	}
	return d
}

// tensorDecl is declare's declaration of v under s, named name (v has
// no decl).
func tensorDecl(name string, v *variable, s sharding) *ir.TensorDecl {
	return &ir.TensorDecl{Name: name, Pos: written, MeshAt: written, Mesh: v.t.Mesh, DTypeAt: written, DType: v.t.DType,
		ShapeAt: written, Shape: v.t.Shape(), Placements: placementList(s)}
}

// placementList is s as a file's placements list.
func placementList(s sharding) *ir.StrList {
	l := &ir.StrList{At: written}
	for _, pl := range s {
		l.Items = append(l.Items, ir.Str{Value: pl.String(), Pos: written})
	}
	return l
}

// vjpKeyer returns, for any combination, the key of fa's gradient's
// fusion that vjpFusion builds: what vjpSource's text says, each tensor's
// part written once per option.
func (m *model) vjpKeyer(fa *factor) func(combo []int) string {
	g := fa.vjp
	last := len(fa.vars) - 1
	parts := make([][]string, len(fa.vars))
	for j, k := range fa.vars {
		v := m.vars[k]
		for _, o := range v.options {
			if j < last {
				parts[j] = append(parts[j], tensorKey(v, o.held(v.produced)))
				continue
			}
			key := tensorKey(v, o)
			if steps, ok := combinedSteps(v.t, o); ok {
				key = fmt.Sprintf("%s schedule %v\x00", v.t.Mesh.Name, steps)
			}
			if !g.one {
				dy := &variable{t: v.t, options: []sharding{o.held(true)}}
				if g.seed >= 0 {
					dy = m.vars[g.seed]
				}
				key += "dy " + tensorKey(dy, dy.options[0])
			}
			parts[j] = append(parts[j], key)
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "vjp %v:", g.one)
	rename := map[string]string{g.out: "y"}
	for j := range fa.vars[:last] {
		rename[g.names[j]] = "t" + strconv.Itoa(j)
	}
	d, _ := m.opDecl(fa, rename)
	if d != nil {
		fmt.Fprintf(&b, " %s %v %d %v %s", d.Kind, d.In, d.Axis, d.Axes, d.Attrs.Key())
		if d.Scalar != nil {
			fmt.Fprintf(&b, " scalar %d %v", d.Scalar.Slot, d.Scalar.Value)
		}
	}
	for _, w := range g.wrt {
		b.WriteString(" " + rename[w])
	}
	for _, name := range slices.Sorted(maps.Keys(g.grads)) {
		b.WriteString(" " + name + ": " + g.grads[name])
	}
	tail := b.String()
	return func(combo []int) string {
		var b strings.Builder
		for j, o := range combo {
			b.WriteString(parts[j][o])
		}
		b.WriteString(tail)
		return b.String()
	}
}

// tensorKey is a tensor's part of vjpKeyer's key: v's mesh, dtype, shape
// and sharding s.
func tensorKey(v *variable, s sharding) string {
	return fmt.Sprintf("%s %s %v %s\x00", v.t.Mesh.Name, v.t.DType, v.t.Shape(), s)
}
