package auto

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/nvcomm/nvcomm/internal/cost"
	"github.com/nvcomm/nvcomm/internal/ir"
	"github.com/nvcomm/nvcomm/internal/lower"
	"github.com/nvcomm/nvcomm/internal/syntax"
)

// Pricing a training step's backward. A backward section appends, per op
// of the fusion as written, its vector-Jacobian product: ops that read
// the op's operands and output (or a composite's intermediates, made
// from them), the gradient of its output, and write its operands'
// gradients (ir's gradients; every such op records the op it is the
// gradient of). Those ops take their shardings by propagation, so their
// plan depends on the forward's shardings they read and on the sharding
// of the output's gradient, which the ops after it decide. Putting every
// saved tensor on the programme's frontier until the backward would make
// it as wide as the forward is long (21 decisions of a transformer block,
// 1.9e10 states). So the search prices each op with its own gradient, as
// the op's *training price*: a small fusion of the op alone, as the file
// writes it, its operands and output sharded as the combination chooses,
// and a backward section seeding the output's gradient in the output's
// sharding (or the file's upstream gradient, for a seeded output) and
// asking for the gradients of the operands the step differentiates. Its
// backward's steps are the op's gradient's price, a function of the op's
// own tensors: a factor of the programme like the op's forward (added to
// the forward op's table when it reads no other tensor, so the programme
// keeps its width). Not exact: the output's gradient may arrive sharded
// otherwise than seeded here (a set between two ops' gradients), and the
// sums of a tensor's gradients read by several ops are no op's; the
// headline time is always the chosen plan's prediction, and
// TestTrainingObjective measures the distance.

// vjp is the gradient of one op of the fusion as written.
type vjp struct {
	out  string     // the op's output
	node *yaml.Node // the op as the file writes it
	// names are the op's operands and output (vars' tensors, in order);
	// wrt the operands whose gradients the step computes.
	names []string
	wrt   []string
	// seed is the file's upstream gradient of the output when it is a
	// seed (its variable; -1 otherwise), or one is its gradient 1.
	seed int
	one  bool
	// again is set when the backward makes the op's output again
	// (recompute, regather, or reshard_after_forward of a weight's
	// gather): its forward's steps are then the gradient's too.
	again bool
	// grads are the file's declarations of the gradients of the op's
	// tensors, by the tensor's name in the op's fusion, kept there.
	grads map[string]string
	// gradNodes are those declarations as the file writes them.
	gradNodes map[string]*yaml.Node
}

// addGradients adds to m a factor per op of the fusion as written that
// the backward differentiates: its training price (vjp), placed after
// the forward op that writes its output. Ops whose gradient the file's
// source does not let it rebuild (an op not found in the file's ops) are
// left to the forward's price.
func (m *model) addGradients(src *source) {
	root := src.root()
	back := lookup(root, "backward")
	if back == nil {
		return
	}
	byName := map[string]*ir.Tensor{}
	for _, t := range m.f.Tensors {
		byName[t.Name] = t
	}
	var order []string // op outputs with gradients, in fusion order of their backward ops
	seen := map[string]bool{}
	for _, op := range m.f.Ops {
		if backward(op) && !seen[op.Of.Output] {
			seen[op.Of.Output] = true
			order = append(order, op.Of.Output)
		}
	}
	nodes := map[string]*yaml.Node{}
	if ops := lookup(root, "ops"); ops != nil && ops.Kind == yaml.SequenceNode {
		for _, n := range ops.Content {
			if out := lookup(n, "out"); out != nil && out.Kind == yaml.ScalarNode {
				nodes[out.Value] = n
			}
		}
	}
	after := map[int][]*factor{} // by the index of the forward factor they follow
	for _, name := range order {
		node, out := nodes[name], byName[name]
		if node == nil || out == nil || out.Producer == nil {
			continue
		}
		g := &vjp{out: name, node: node, seed: -1}
		fa := &factor{op: out.Producer}
		var ins []string
		for _, op := range m.f.Ops {
			if backward(op) && op.Of.Output == name {
				ins = op.Of.Inputs
				break
			}
		}
		for _, in := range ins {
			t := byName[in]
			if t == nil {
				fa = nil
				break
			}
			if !slices.Contains(g.names, in) {
				g.names = append(g.names, in)
				fa.vars = append(fa.vars, m.index[t])
				if byName[in+".grad"] != nil {
					g.wrt = append(g.wrt, in)
				}
			}
		}
		if fa == nil || len(g.wrt) == 0 {
			continue
		}
		g.names = append(g.names, name)
		fa.vars = append(fa.vars, m.index[out])
		if dy := lookup(lookup(back, "seeds"), name); dy != nil {
			if t := byName[dy.Value]; t != nil {
				g.seed = m.index[t]
			} else {
				g.one = true
			}
		}
		g.again = madeAgain(back, name, out)
		g.grads, g.gradNodes = map[string]string{}, map[string]*yaml.Node{}
		for j, n := range g.names {
			if d := lookup(src.tensors, n+".grad"); d != nil {
				local := "y"
				if j < len(g.names)-1 {
					local = fmt.Sprintf("t%d", j)
				}
				g.grads[local+".grad"], g.gradNodes[local+".grad"] = flowYAML(d), d
			}
		}
		n := 1
		for _, k := range fa.vars {
			n *= len(m.vars[k].options)
		}
		if n > maxCombinations {
			continue
		}
		fa.vjp, fa.table = g, make([]int64, n)
		at := slices.IndexFunc(m.factors, func(f *factor) bool { return f.op == out.Producer })
		after[at] = append(after[at], fa)
	}
	var factors []*factor
	for i, fa := range m.factors {
		factors = append(factors, fa)
		factors = append(factors, after[i]...)
	}
	m.factors = factors
}

// madeAgain reports whether the file's backward section makes the
// output of the op writing out again: recompute or regather lists it, or
// reshard_after_forward applies to it (a set of a fusion input: a
// weight's gather).
func madeAgain(back *yaml.Node, name string, out *ir.Tensor) bool {
	for _, key := range []string{"recompute", "regather"} {
		if l := lookup(back, key); l != nil && slices.ContainsFunc(l.Content, func(n *yaml.Node) bool { return n.Value == name }) {
			return true
		}
	}
	r := lookup(back, "reshard_after_forward")
	return r != nil && r.Value == "true" && out.Producer.Kind == ir.OpSet && out.Producer.Inputs[0].Producer == nil
}

// vjpSource is the fusion of fa's op and its gradient under combo: the
// op as the file writes it, its operands named t0, t1, … and its output
// y, each declared as combo shards it (operands as the op reads them,
// the output as the op writes it), the output's gradient dy as the
// output (or as the file declares its upstream gradient), and a backward
// section seeding y with dy and asking for the gradients of the operands
// that the step differentiates.
func (m *model) vjpSource(meshes string, fa *factor, combo []int) string {
	g := fa.vjp
	var b strings.Builder
	fmt.Fprintf(&b, "format: 2\nmeshes: %s\ntensors:\n", meshes)
	rename := map[string]string{g.out: "y"}
	last := len(fa.vars) - 1
	for j, k := range fa.vars[:last] {
		v := m.vars[k]
		name := fmt.Sprintf("t%d", j)
		rename[g.names[j]] = name
		fmt.Fprintf(&b, "  %s: %s\n", name, declare(v, v.options[combo[j]].held(v.produced)))
	}
	out := m.vars[fa.vars[last]]
	s := out.options[combo[last]]
	if steps, ok := combinedSchedule(out.t, s); ok {
		fmt.Fprintf(&b, "  y: {mesh: %s, schedule: %s}\n", out.t.Mesh.Name, flowYAML(steps))
	} else {
		fmt.Fprintf(&b, "  y: {mesh: %s, placements: %s}\n", out.t.Mesh.Name, flowYAML(placementsNode(s)))
	}
	for _, name := range slices.Sorted(maps.Keys(g.grads)) {
		fmt.Fprintf(&b, "  %s: %s\n", name, g.grads[name])
	}
	seed := "1"
	if !g.one {
		seed = "dy"
		dy := &variable{t: out.t, options: []sharding{s.held(true)}}
		if g.seed >= 0 {
			dy = m.vars[g.seed]
		}
		fmt.Fprintf(&b, "  dy: %s\n", declare(dy, dy.options[0]))
	}
	op := &yaml.Node{Kind: yaml.MappingNode, Style: yaml.FlowStyle}
	for i := 0; i+1 < len(g.node.Content); i += 2 {
		key, val := g.node.Content[i], g.node.Content[i+1]
		switch key.Value {
		case "out":
			val = scalar("y")
		case "in":
			val = renamed(val, rename)
		}
		op.Content = append(op.Content, scalar(key.Value), val)
	}
	fmt.Fprintf(&b, "ops:\n  - %s\nbackward: {seeds: {y: %s}, wrt: [", flowYAML(op), seed)
	for i, w := range g.wrt {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(rename[w])
	}
	b.WriteString("]}\n")
	return b.String()
}

// declare writes tensor v under sharding s as a fusion input: its mesh,
// dtype and shape and s, or a given input's declaration as written.
func declare(v *variable, s sharding) string {
	if v.decl != "" {
		return fmt.Sprintf("{mesh: %s, dtype: %s, %s}", v.t.Mesh.Name, v.t.DType, v.decl)
	}
	return fmt.Sprintf("{mesh: %s, dtype: %s, shape: %s, placements: %s}", v.t.Mesh.Name, v.t.DType,
		strings.ReplaceAll(fmt.Sprint(v.t.Shape()), " ", ", "), flowYAML(placementsNode(s)))
}

// renamed is an op's in: a name or a list of names, each renamed.
func renamed(n *yaml.Node, names map[string]string) *yaml.Node {
	if n.Kind == yaml.ScalarNode {
		if r, ok := names[n.Value]; ok {
			return scalar(r)
		}
		return n
	}
	out := &yaml.Node{Kind: yaml.SequenceNode, Style: yaml.FlowStyle}
	for _, c := range n.Content {
		out.Content = append(out.Content, renamed(c, names))
	}
	return out
}

// fillGradient tabulates fa's gradient (fa.vjp): every combination's
// fusion built (vjpFusion, or written by vjpSource where direct says it
// must be) and priced, each distinct one once (ops alike but for their
// names share them), in parallel. A gradient that lowers under no
// combination is left out (a table of zeros, counted in m.unpriced):
// the forward's price still decides there.
func (e *evaluator) fillGradient(m *model, meshes string, fa *factor) {
	keys := make([]string, len(fa.table))
	var todo []int
	seen := map[string]bool{}
	var combo []int
	direct := m.direct(fa)
	var key func([]int) string
	if direct {
		key = m.vjpKeyer(fa)
	} else {
		key = func(combo []int) string { return m.vjpSource(meshes, fa, combo) }
	}
	for i := range fa.table {
		combo = m.combination(fa, i, combo)
		keys[i] = key(combo)
		if _, ok := e.grads[keys[i]]; !ok && !seen[keys[i]] {
			seen[keys[i]] = true
			todo = append(todo, i)
		}
	}
	prices := make([]int64, len(todo))
	real := fa.vjp.seed >= 0 || fa.vjp.one
	parallel(len(todo), func(n int) {
		if !direct {
			prices[n] = gradientPrice(keys[todo[n]], real, fa.vjp.again, e.lowering)
			return
		}
		f, err := m.vjpFusion(fa, m.combination(fa, todo[n], nil))
		prices[n] = maxCost
		if err == nil {
			prices[n] = fusionGradientPrice(f, real, fa.vjp.again, e.lowering)
		}
	})
	e.lowered += len(todo)
	for n, i := range todo {
		e.grads[keys[i]] = prices[n]
	}
	runs := false
	for i, k := range keys {
		fa.table[i] = e.grads[k]
		runs = runs || fa.table[i] != maxCost
	}
	if !runs {
		clear(fa.table)
		m.unpriced++
	}
	fa.ends = make([]ends, len(fa.table))
	for i := range fa.ends {
		fa.ends[i].empty = true // no step of the forward's: runs pass through
	}
}

// gradientPrice is fusionGradientPrice of the fusion the text src
// declares.
func gradientPrice(src string, real, again bool, opts lower.Options) int64 {
	f, err := syntax.Parse("gradient.yaml", []byte(src))
	if err != nil {
		return maxCost
	}
	return fusionGradientPrice(f, real, again, opts)
}

// fusionGradientPrice is the predicted time of the backward's steps of
// the fusion f, in picoseconds (maxCost when it does not lower). Two
// steps of that fusion are not the step's: the set of the seed into the
// output's gradient, which only a seeded output's gradient has (real
// says whether it is one), and the latency of the first step where it
// may continue a run of local steps, which in the step it continues from
// the gradient of the op after it (the backward runs the ops' gradients
// in reverse, one after another, as cost.Ends joins them) — but for a
// seeded output's, which runs first, after the forward's last step. When the
// backward makes the op's output again (again), the forward's steps are
// the gradient's too: FSDP's second Allgather of a weight.
func fusionGradientPrice(f *ir.Fusion, real, again bool, opts lower.Options) int64 {
	p, err := lower.Lower(f, opts)
	if err != nil {
		return maxCost
	}
	pr, err := cost.Predict(opts.Topology, p)
	if err != nil {
		return maxCost
	}
	bw, bwp := *p, &cost.Prediction{} // the backward's steps alone, for their ends
	bw.Steps = nil
	total := 0.0
	for i, st := range p.Steps {
		op := &p.Ops[st.Op]
		of := op.Of
		if op.Inserted != nil {
			of = p.Ops[op.Inserted.For].Of // a set the lowering inserted for the op it serves
		}
		if of == nil || !of.Grad {
			if again {
				total += pr.Steps[i].Seconds
			}
			continue
		}
		if !real && op.Op == string(ir.OpSet) && op.Input == "dy" && op.Output == "y.grad" {
			continue
		}
		bw.Steps, bwp.Steps = append(bw.Steps, st), append(bwp.Steps, pr.Steps[i])
	}
	for _, st := range bwp.Steps {
		total += st.Seconds
	}
	if e := opts.Topology.PlanEnds(&bw, bwp); e.Head != "" && !real {
		total -= e.Saving
	}
	return picoseconds(total)
}

// foldGradients adds each gradient's table into its forward op's when it
// reads only that op's tensors (a primitive op's gradient), so that the
// programme keeps its steps and a weight read by one op still leaves the
// frontier when chosen; a composite's gradient, which reads the
// composite's operands, stays a factor of its own after its last op.
func (m *model) foldGradients() {
	var out []*factor
	for _, fa := range m.factors {
		prev := len(out) - 1
		if fa.vjp == nil || prev < 0 || out[prev].vjp != nil || !subset(fa.vars, out[prev].vars) {
			out = append(out, fa)
			continue
		}
		fw := out[prev]
		table := slices.Clone(fw.table) // tables of identical ops are shared
		var combo, sub []int
		for i := range table {
			combo = m.combination(fw, i, combo)
			sub = sub[:0]
			for _, k := range fa.vars {
				sub = append(sub, combo[slices.Index(fw.vars, k)])
			}
			table[i] = satAdd(table[i], fa.table[m.entry(fa, sub)])
		}
		fw.table = table
	}
	m.factors = out
}

// subset reports whether every element of a is in b.
func subset(a, b []int) bool {
	for _, x := range a {
		if !slices.Contains(b, x) {
			return false
		}
	}
	return true
}

// entry is the index in fa's table of combo (combination's inverse).
func (m *model) entry(fa *factor, combo []int) int {
	i := 0
	for j, k := range fa.vars {
		i = i*len(m.vars[k].options) + combo[j]
	}
	return i
}

// Optimizers are the values of Options.Optimizer: what a device holds for
// each parameter of a training step besides the parameter itself.
var Optimizers = []string{"none", "sgd", "adam"}

// countTraining adds to the bytes of each parameter of a training step —
// a tensor of the backward's wrt that no op makes, a weight in
// docs/training.md's sense — what the optimizer keeps of it per device:
// under "sgd" its gradient (sharded as the parameter, or as the file
// declares the gradient), under "adam" also Adam's two moments, each a
// float32 copy of the parameter's shard (Kingma and Ba 2015; PyTorch's
// torch.optim.Adam keeps exp_avg and exp_avg_sq in the parameter's
// dtype, mixed-precision trainers in float32, as Megatron-LM's
// distributed optimizer does). "none" (or "") counts the forward's
// tensors alone, the activations kept for the backward included.
func (m *model) countTraining(src *source, optimizer string) error {
	if optimizer == "" || optimizer == "none" {
		return nil
	}
	if !slices.Contains(Optimizers, optimizer) {
		return fmt.Errorf("optimizer %q: want one of %s", optimizer, strings.Join(Optimizers, ", "))
	}
	wrt := lookup(lookup(src.root(), "backward"), "wrt")
	if wrt == nil {
		return nil
	}
	byName := map[string]*ir.Tensor{}
	for _, t := range m.f.Tensors {
		byName[t.Name] = t
	}
	for _, n := range wrt.Content {
		t := byName[n.Value]
		if t == nil || t.Producer != nil {
			continue
		}
		v := m.vars[m.index[t]]
		grad := byName[t.Name+".grad"]
		for o, s := range v.options {
			g := v.bytes[o]
			if grad != nil && lookup(src.tensors, grad.Name) != nil { // declared: its own sharding
				g = int64(grad.LocalSize()) * int64(grad.DType.Size())
			}
			if optimizer == "adam" {
				moment := int64(t.LocalSize()) * 4 // a given parameter's shard, as declared
				if v.decision {
					moment = localBytes(s, t.Shape(), t.Mesh.Shape, "float32")
				}
				g = satAdd(g, 2*moment)
			}
			v.bytes[o] = satAdd(v.bytes[o], g)
		}
	}
	return nil
}
