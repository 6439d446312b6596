// Package explain shows a plan to a person: for every tensor its mesh, its
// sharding in DTensor's notation (in nvcomm's where DTensor has none) and a
// picture of which devices hold which block, as JAX's
// visualize_array_sharding and DTensor's visualize_sharding draw them; for
// every op the shardings it goes between, its steps and why each was
// chosen, the bytes they move, their predicted time and both bounds.
//
// It reads plans (internal/plan) and prices them with internal/cost; the
// output is deterministic, coloured only when asked (see ColorAuto).
package explain

import (
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/dustin/go-humanize"

	"github.com/nvcomm/nvcomm/internal/cost"
	"github.com/nvcomm/nvcomm/internal/plan"
)

// Options select what Write explains and how.
type Options struct {
	// Tensor, when not empty, limits the output to that tensor (and, with
	// Op, that op).
	Tensor string
	// Op, when not negative, limits the output to that op.
	Op int
	// Topology prices the steps; nil leaves times out.
	Topology *cost.Topology
	// Color paints the output with terminal colours.
	Color bool
	// Forms are the prices of the forms of the sdpas the ring could
	// compute, which the lowering chose between (lower.Forms); nil leaves
	// them out.
	Forms []Form
	// Overlaps are the prices of the forms of the decomposed collectives
	// the lowering chose between (lower.Overlaps); nil leaves them out.
	Overlaps []Overlap
}

// Overlap is the optimal policy's choice of a decomposed collective
// (docs/overlap.md, "Decomposed collectives"): the prices, under its
// objective, of the undecomposed form and of each decomposed one.
type Overlap struct {
	// Op is the linear's or matmul's index.
	Op int
	// Kind is plan.OverlapAllgather, plan.OverlapReduceScatter or
	// plan.OverlapAllgatherWeight.
	Kind string
	// Prices are the forms' prices, the undecomposed one first.
	Prices []OverlapPrice
	// Bytes says that the prices are bytes, not seconds.
	Bytes bool
	// Chosen is the form the plan takes.
	Chosen OverlapPrice
}

// OverlapPrice is one form of a decomposed collective: none (the
// undecomposed form), collective or ring, its chunks, and its price.
type OverlapPrice struct {
	Form   string
	Chunks int
	Price  float64
}

// Form is the optimal policy's choice of an sdpa's form: the prices, under
// its objective, of the ring, of the all-gather form and of the expansion
// planned op by op (docs/layers.md, "Ring attention").
type Form struct {
	// Op is the expansion's last op.
	Op int
	// Ring, Gather and Expansion are the three prices: seconds (each
	// form's step graph's makespan), or with Bytes what the busiest device
	// receives.
	Ring, Gather, Expansion float64
	Bytes                   bool
	// Chosen is the form the plan takes, as sdpa's cp names it: ring,
	// allgather or expansion.
	Chosen string
}

// All explains every tensor and op, priced on the default topology,
// without colour.
func All() Options { return Options{Op: -1, Topology: cost.Default()} }

// Check reports a Tensor or Op that p does not have, naming what it has.
func (o Options) Check(p *plan.Plan) error {
	if o.Tensor != "" && !slices.ContainsFunc(p.Tensors, func(t plan.Tensor) bool { return t.Name == o.Tensor }) {
		names := make([]string, len(p.Tensors))
		for i, t := range p.Tensors {
			names[i] = t.Name
		}
		return fmt.Errorf("no tensor %q in %s (tensors: %s)", o.Tensor, p.Fusion, strings.Join(names, ", "))
	}
	if o.Op >= len(p.Ops) {
		return fmt.Errorf("no op %d in %s: it has ops 0 to %d", o.Op, p.Fusion, len(p.Ops)-1)
	}
	return nil
}

// explainer holds what every part of the output needs.
type explainer struct {
	p     *plan.Plan
	o     Options
	st    *styles
	sh    map[string]*sharding // nil for a tensor whose schedule does not replay
	errs  map[string]error
	times map[int]cost.StepTime // by step id; empty without a topology
	total float64               // the plan's predicted time: a step graph's makespan
	price error                 // why the plan could not be priced
	// inserted are the tensors nvcomm made: the outputs of the sets it
	// inserted before an op, and the outputs an op computed before the set
	// inserted after it (plan.Inserted).
	inserted map[string]bool
}

// Write explains p as o asks.
func Write(w io.Writer, p *plan.Plan, o Options) error {
	if err := o.Check(p); err != nil {
		return err
	}
	e := newExplainer(p, o)
	var b strings.Builder
	e.summary(&b)
	if o.Tensor != "" || o.Op < 0 {
		e.tensors(&b)
	}
	if o.Op >= 0 || o.Tensor == "" {
		e.ops(&b)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// newExplainer analyses every tensor of p and prices its steps when o has
// a topology.
func newExplainer(p *plan.Plan, o Options) *explainer {
	e := &explainer{p: p, o: o, st: newStyles(o.Color), sh: map[string]*sharding{}, errs: map[string]error{}, times: map[int]cost.StepTime{}, inserted: insertedTensors(p)}
	for _, t := range p.Tensors {
		e.sh[t.Name], e.errs[t.Name] = analyze(p, t)
	}
	if o.Topology != nil {
		e.prices()
	}
	return e
}

// prices predicts every step's time.
func (e *explainer) prices() {
	pr, err := cost.Predict(e.o.Topology, e.p)
	if err != nil {
		e.price = err
		return
	}
	for _, st := range pr.Steps {
		e.times[st.Step] = st
	}
	e.total = pr.Total
}

// summary writes the plan's headline: its size, the bytes the busiest
// device receives against the bound, and the predicted time.
func (e *explainer) summary(b *strings.Builder) {
	p, st := e.p, e.st
	fmt.Fprintf(b, "%s (policy %s): %s, %s, %s (%s, %d local)\n",
		st.paint(st.name, p.Fusion), p.Policy, count(len(p.Tensors), "tensor"), count(len(p.Ops), "op"), count(len(p.Steps), "step"),
		count(p.Summary.Collectives, "collective"), p.Summary.LocalSteps)
	ratio := "-"
	if r := p.Summary.BytesRatio; r != nil {
		ratio = fmt.Sprintf("%.3g", *r)
	}
	fmt.Fprintf(b, "the busiest device receives %s (lower bound %s, ratio %s)", plan.Size(p.Summary.BytesReceivedMax), plan.Size(p.Summary.BytesLowerBound), ratio)
	if t := e.o.Topology; t != nil && e.price == nil {
		fmt.Fprintf(b, "; predicted %s on topology %s (bound %s)", Seconds(e.total), t.Name, Seconds(t.LowerBound(p.Summary.BytesLowerBound)))
	} else if e.price != nil {
		fmt.Fprintf(b, "; no prediction: %v", e.price)
	}
	b.WriteString("\n")
	for _, name := range slices.Sorted(maps.Keys(p.Meshes)) {
		m := p.Meshes[name]
		fmt.Fprintf(b, "mesh %s: shape %s, devices %s (%s)\n", st.paint(st.name, name), intList(m.Shape), deviceList(m.Devices), meshAxes(m))
	}
}

// meshAxes names a mesh's axes by device type, outermost first.
func meshAxes(m plan.Mesh) string {
	parts := make([]string, len(m.Shape))
	for d := range m.Shape {
		parts[d] = fmt.Sprintf("axis %d: %s", d, typeOfDim(m, d))
	}
	return strings.Join(parts, ", ")
}

// tensors writes every tensor, or the one asked for.
func (e *explainer) tensors(b *strings.Builder) {
	b.WriteString("\n" + e.st.paint(e.st.title, "Tensors") + "\n")
	b.WriteString(e.st.paint(e.st.dim, "Pictures: a 2-D tensor's dim 0 down and dim 1 across (a 1-D tensor's dim 0 across), each block labelled\n"+
		"with the ids of the devices that hold it; for more dims, each device's index ranges as Python slices\n"+
		"(8:16 is 8 to 15, 1:16:4 every fourth from 1).") + "\n")
	for _, t := range e.p.Tensors {
		if e.o.Tensor == "" || e.o.Tensor == t.Name {
			b.WriteString("\n")
			e.tensor(b, t)
		}
	}
}

// tensor writes one tensor: its line, its sharding and its picture.
func (e *explainer) tensor(b *strings.Builder, t plan.Tensor) {
	st := e.st
	s := e.sh[t.Name]
	if s == nil {
		fmt.Fprintf(b, "%s  %s %s on %s: %v\n", st.paint(st.name, t.Name), t.DType, intList(t.Shape), t.Mesh, e.errs[t.Name])
		return
	}
	fmt.Fprintf(b, "%s  %s %s on %s, %s\n", st.paint(st.name, t.Name), t.DType, intList(s.valueShape()), t.Mesh, e.origin(t))
	red := reduceOpOf(e.p, t.Name)
	fmt.Fprintf(b, "  %s\n", st.paint(st.typ, s.notation(red)))
	for _, n := range s.notes(red) {
		fmt.Fprintf(b, "  %s\n", n)
	}
	s.picture(b, st, "  ")
}

// notation is the tensor's sharding in DTensor's placements, or in
// nvcomm's notation where DTensor has none.
func (s *sharding) notation(reduceOp string) string {
	if !s.isDTensor(reduceOp) {
		return "sharding (nvcomm's notation; DTensor has none) " + s.placements(reduceOp)
	}
	return "placements " + s.placements(reduceOp)
}

// valueShape is the extents of the value axes.
func (s *sharding) valueShape() []int {
	out := make([]int, len(s.Axes))
	for i, ax := range s.Axes {
		out[i] = ax.Extent
	}
	return out
}

// origin says where a tensor's sharding comes from: the fusion file, the
// propagation of format 2, or nvcomm's resharding of an operand.
func (e *explainer) origin(t plan.Tensor) string {
	switch {
	case t.Propagated:
		return e.st.paint(e.st.dim, "propagated (format 2)")
	case e.inserted[t.Name]:
		return e.st.paint(e.st.dim, "inserted by nvcomm")
	}
	return "given"
}

// Seconds renders a time for readers with three significant digits and
// an SI prefix: "12.3 µs", "1.5 ms"; "0 s" for none.
func Seconds(x float64) string {
	if x <= 0 || math.IsNaN(x) || math.IsInf(x, 0) {
		return "0 s"
	}
	v, prefix := humanize.ComputeSI(x)
	if v >= 999.5 { // rounds up to the next prefix's 1
		v, prefix = humanize.ComputeSI(1000 * x / v)
	}
	return fmt.Sprintf("%.3g %ss", v, prefix)
}

// count renders n things: "1 op", "3 ops".
func count(n int, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	return fmt.Sprintf("%d %ss", n, thing)
}

// intList renders xs as "[8, 16]".
func intList(xs []int) string { return "[" + joinInts(xs, ", ") + "]" }

// insertedTensors are the tensors of p that nvcomm made (plan.Inserted):
// a set's output when it was inserted before an op, the op's output
// when the set was inserted after it.
func insertedTensors(p *plan.Plan) map[string]bool {
	made := map[string]bool{}
	for _, op := range p.Ops {
		switch in := op.Inserted; {
		case in == nil:
		case !in.Output:
			made[op.Output] = true
		case in.For >= 0 && in.For < len(p.Ops):
			made[p.Ops[in.For].Output] = true
		}
	}
	return made
}
