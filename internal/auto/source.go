package auto

import (
	"bytes"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/nvcomm/nvcomm/internal/ir"
	"github.com/nvcomm/nvcomm/internal/shard"
)

// source is the fusion file as a YAML tree: the given tensors' placements
// are read from it, and the chosen ones written into it, comments and
// order kept.
type source struct {
	doc     *yaml.Node // the document
	tensors *yaml.Node // the tensors mapping; nil when the file has none
}

func readSource(src []byte) (*source, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(src, &doc); err != nil {
		return nil, err
	}
	s := &source{doc: &doc}
	if root := s.root(); root != nil {
		s.tensors = lookup(root, "tensors")
	}
	return s, nil
}

// root is the top-level mapping, or nil.
func (s *source) root() *yaml.Node {
	if len(s.doc.Content) == 0 || s.doc.Content[0].Kind != yaml.MappingNode {
		return nil
	}
	return s.doc.Content[0]
}

// lookup returns the value of key in mapping m, or nil.
func lookup(m *yaml.Node, key string) *yaml.Node {
	if m == nil || m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

// given returns the sharding of a given tensor as its declaration writes
// it: its placements, or Replicate on every mesh axis when it declares a
// mesh alone. A fusion input given by a schedule, or with an allocation,
// keeps its schedule and allocation in its ops' own fusions, since they
// decide its layout and so its ops' steps; decl is then its keys as
// written (flow YAML: shape, schedule or placements, allocation), which
// the prices' keys name it by. A produced tensor
// given by a schedule has no placements to start the search from: its
// schedule's positions count its reduction axes, which its readers do not
// see.
func (s *source) given(t *ir.Tensor) (sh sharding, decl string, err error) {
	n := lookup(s.tensors, t.Name)
	sched, alloc := lookup(n, "schedule"), lookup(n, "allocation")
	if t.Producer != nil && sched != nil {
		return nil, "", fmt.Errorf("tensor %q is produced by an op and given by a schedule; lower --auto reads given shardings as placements (write them with placements, or mark the tensor placements: auto)", t.Name)
	}
	if t.Producer == nil && (sched != nil || alloc != nil) {
		var keys []string
		for _, kv := range []struct {
			key  string
			node *yaml.Node
		}{{"shape", lookup(n, "shape")}, {"schedule", sched}, {"placements", lookup(n, "placements")}, {"allocation", alloc}} {
			if kv.node != nil {
				keys = append(keys, kv.key+": "+flowYAML(kv.node))
			}
		}
		return nil, strings.Join(keys, ", "), nil
	}
	pls := lookup(n, "placements")
	if pls == nil {
		return replicated(t.Mesh.Rank()), "", nil
	}
	var items []string
	if err := pls.Decode(&items); err != nil {
		return nil, "", fmt.Errorf("tensor %q: placements: %v", t.Name, err)
	}
	sh, err = parseSharding(items)
	return sh, "", err
}

// flowYAML writes n on one line, in flow style.
func flowYAML(n *yaml.Node) string {
	var flow func(n *yaml.Node) *yaml.Node
	flow = func(n *yaml.Node) *yaml.Node {
		c := *n
		c.Style |= yaml.FlowStyle
		c.HeadComment, c.LineComment, c.FootComment = "", "", ""
		c.Content = nil
		for _, k := range n.Content {
			c.Content = append(c.Content, flow(k))
		}
		return &c
	}
	out, err := yaml.Marshal(flow(n))
	if err != nil {
		return "null" // a node the parser accepted always marshals
	}
	return strings.TrimSpace(string(out))
}

func replicated(rank int) sharding {
	s := make(sharding, rank)
	for i := range s {
		s[i].Kind = "Replicate"
	}
	return s
}

// annotate writes the chosen shardings into the file: each decision
// tensor's placements (a declared tensor's replaced, an undeclared one
// added at the end of tensors), and the mesh propagation gave each fusion
// input of meshes (declared without one, which placements alone would not
// parse), and returns the new file. An op's output in produced whose
// sharding has a Partial, which the auto-sharder's candidates mean held
// complete (the op combines across the devices), is written as the
// schedule that says so (combinedSchedule): its placements would leave
// pending terms.
func (s *source) annotate(order []string, chosen map[string]sharding, meshes map[string]string, produced map[string]*ir.Tensor) ([]byte, error) {
	root := s.root()
	if root == nil {
		return nil, fmt.Errorf("the fusion is not a mapping")
	}
	if s.tensors == nil {
		s.tensors = &yaml.Node{Kind: yaml.MappingNode}
		root.Content = append(root.Content, scalar("tensors"), s.tensors)
	}
	for _, name := range order {
		decl := lookup(s.tensors, name)
		if decl == nil {
			decl = &yaml.Node{Kind: yaml.MappingNode, Style: yaml.FlowStyle}
			s.tensors.Content = append(s.tensors.Content, scalar(name), decl)
		}
		if mesh, ok := meshes[name]; ok && lookup(decl, "mesh") == nil {
			setKey(decl, "mesh", scalar(mesh))
		}
		if steps, ok := combinedSchedule(produced[name], chosen[name]); ok {
			renameKey(decl, "placements", "schedule")
			setKey(decl, "schedule", steps)
			continue
		}
		setKey(decl, "placements", placementsNode(chosen[name]))
	}
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(s.doc); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

func scalar(v string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Value: v} }

// setKey sets key in mapping m to v, in place when present.
func setKey(m *yaml.Node, key string, v *yaml.Node) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			v.LineComment = m.Content[i+1].LineComment
			m.Content[i+1] = v
			return
		}
	}
	m.Content = append(m.Content, scalar(key), v)
}

// renameKey renames key from to to in mapping m, where present.
func renameKey(m *yaml.Node, from, to string) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == from {
			m.Content[i].Value = to
		}
	}
}

// combinedSchedule writes sharding s of t, an op's output (nil: none)
// whose Partial the op combines across the devices itself, as the
// schedule of that (combinedSteps). False when s has no Partial.
func combinedSchedule(t *ir.Tensor, s sharding) (*yaml.Node, bool) {
	steps, ok := combinedSteps(t, s)
	if !ok {
		return nil, false
	}
	n := &yaml.Node{Kind: yaml.SequenceNode}
	for i := 0; i+1 < len(steps); i += 2 {
		split, par := steps[i], steps[i+1]
		n.Content = append(n.Content,
			stepNode(string(split.Kind), "axis", strconv.Itoa(split.Axis), "factor", strconv.Itoa(split.Factor)),
			stepNode(string(par.Kind), "axis", strconv.Itoa(par.Axis), "type", par.Type.String()))
	}
	return n, true
}

// combinedSteps is the schedule of sharding s of t, an op's output (nil:
// none) whose Partial the op combines across the devices itself: the
// op's reduction axis (a contraction's trailing rk, a reduction's axis)
// and the dims s shards, each outer-split by its mesh axis's size and
// parallelized, from the last position, in pairs of those two steps.
// False when s has no Partial.
func combinedSteps(t *ir.Tensor, s sharding) ([]ir.ScheduleStep, bool) {
	if t == nil || t.Producer == nil || !slices.ContainsFunc(s, func(p shard.Placement) bool { return p.Kind == shard.Partial }) {
		return nil, false
	}
	rank := t.NumValueAxes()
	red := rank
	if t.Producer.Kind.IsReduction() {
		red = t.Producer.Axis
	}
	pos := make([]int, len(s)) // the logical position each mesh axis splits, -1 for none
	for i, p := range s {
		pos[i] = -1
		switch p.Kind {
		case shard.Partial:
			pos[i] = red
		case shard.Shard:
			pos[i] = (p.Dim + rank) % rank
			if pos[i] >= red {
				pos[i]++
			}
		}
	}
	var steps []ir.ScheduleStep
	for at := rank; at >= 0; at-- {
		for i, p := range pos {
			if p == at {
				steps = append(steps,
					ir.ScheduleStep{Kind: ir.StepOuterSplit, Axis: at, Factor: t.Mesh.Shape[i]},
					ir.ScheduleStep{Kind: ir.StepParallelize, Axis: at, Type: ir.DeviceTypes[len(s)-1-i]})
			}
		}
	}
	return steps, true
}

// stepNode is a schedule step {kind: {k1: v1, k2: v2}} in flow style.
func stepNode(kind string, kv ...string) *yaml.Node {
	args := &yaml.Node{Kind: yaml.MappingNode, Style: yaml.FlowStyle}
	for _, x := range kv {
		args.Content = append(args.Content, scalar(x))
	}
	return &yaml.Node{Kind: yaml.MappingNode, Style: yaml.FlowStyle, Content: []*yaml.Node{scalar(kind), args}}
}

func placementsNode(s sharding) *yaml.Node {
	n := &yaml.Node{Kind: yaml.SequenceNode, Style: yaml.FlowStyle}
	for _, p := range s {
		n.Content = append(n.Content, scalar(p.String()))
	}
	return n
}
