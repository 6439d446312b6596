package explain

import (
	"fmt"
	"slices"
	"strings"

	"github.com/nvcomm/nvcomm/internal/ops"
	"github.com/nvcomm/nvcomm/internal/plan"
)

// ops writes every op, or the one asked for.
func (e *explainer) ops(b *strings.Builder) {
	b.WriteString("\n" + e.st.paint(e.st.title, "Ops") + "\n")
	for i, op := range e.p.Ops {
		if e.o.Op < 0 || e.o.Op == i {
			b.WriteString("\n")
			e.op(b, i, op)
		}
	}
}

// op writes one op: where its operands and output stand, why its
// sharding changes, its steps with their reasons, and its totals.
func (e *explainer) op(b *strings.Builder, i int, op plan.Op) {
	st := e.st
	fmt.Fprintf(b, "%s %s\n", st.paint(st.name, fmt.Sprintf("op %d:", i)), st.paint(st.name, op.Expr()))
	for _, line := range e.opContext(i, op) {
		fmt.Fprintf(b, "  %s\n", line)
	}
	steps := e.stepsOf(i)
	if len(steps) == 0 && op.Within != nil {
		fmt.Fprintf(b, "  no steps: computed within op %d's steps (%s); no device holds %s\n", *op.Within, e.wholeForm(*op.Within), op.Output)
		return
	}
	if len(steps) == 0 {
		b.WriteString("  no steps\n")
		return
	}
	rows := [][]cell{{{"step", st.name}, {"type", st.name}, {"input -> output", st.name}, {"teams / devices", st.name},
		{"received", st.name}, {"bound", st.name}, {"time", st.name}, {"why", st.name}}}
	for k, s := range steps {
		style := st.typ
		if s.Kind == plan.KindCollective {
			style = st.collective
		}
		recv, bound := stepSizes(s)
		rows = append(rows, []cell{{fmt.Sprint(s.ID), nil}, {s.Type, style},
			{strings.Join(s.Operands(), ", ") + " -> " + s.Output, nil}, {plan.StepDevices(s), nil},
			{recv, nil}, {bound, nil}, {e.stepTime(s), nil}, {e.why(op, steps, k), st.dim}})
	}
	st.writeTable(b, "  ", rows)
	fmt.Fprintf(b, "  %s\n", e.opTotals(steps))
}

// stepSizes are what the busiest device of a step receives and its bound,
// "-" for a local step.
func stepSizes(s *plan.Step) (recv, bound string) {
	if s.Bytes == nil {
		return "-", "-"
	}
	return plan.Size(s.Bytes.ReceivedPerDevice), plan.Size(s.Bytes.LowerBound)
}

// stepsOf returns the steps of op i, in order.
func (e *explainer) stepsOf(i int) []*plan.Step {
	var out []*plan.Step
	for k := range e.p.Steps {
		if e.p.Steps[k].Op == i {
			out = append(out, &e.p.Steps[k])
		}
	}
	return out
}

// stepTime is a step's predicted time, or "-" without a prediction.
func (e *explainer) stepTime(s *plan.Step) string {
	t, ok := e.times[s.ID]
	if !ok {
		return "-"
	}
	return Seconds(t.Seconds)
}

// opTotals sums an op's bytes and times: what the busiest device of each
// step receives against the steps' bounds, the predicted time against the
// time the bound takes at the links' bandwidth.
func (e *explainer) opTotals(steps []*plan.Step) string {
	var recv, bound int64
	for _, s := range steps {
		if s.Bytes != nil {
			recv += s.Bytes.ReceivedPerDevice
			bound += s.Bytes.LowerBound
		}
	}
	moved := "moves nothing between devices"
	if recv > 0 || bound > 0 {
		moved = fmt.Sprintf("receives %s on the busiest device of each step (lower bound %s)", plan.Size(recv), plan.Size(bound))
	}
	if len(e.times) == 0 {
		return moved
	}
	total := e.opTime(func(s *plan.Step) bool { return slices.Contains(steps, s) })
	return fmt.Sprintf("%s; predicted %s (bound %s)", moved, Seconds(total), Seconds(e.o.Topology.LowerBound(bound)))
}

// opTime sums the predicted time of the steps in.
func (e *explainer) opTime(in func(*plan.Step) bool) float64 {
	total := 0.0
	for k := range e.p.Steps {
		s := &e.p.Steps[k]
		if t, ok := e.times[s.ID]; ok && in(s) {
			total += t.Seconds
		}
	}
	return total
}

// opContext says where the op's tensors stand and what changes between
// them: for a set or a reduction, the producer's and the consumer's
// shardings and the mesh axes along which they differ; for a layer op, its
// operands, which of them nvcomm resharded, and its output.
func (e *explainer) opContext(i int, op plan.Op) []string {
	var lines []string
	if of := op.Of; of != nil {
		lines = append(lines, fmt.Sprintf("part of %s%s, written as primitive ops", of.What(), of.Expr()))
	}
	switch t, regathered := plan.Remade(op.Output); {
	case t != "" && regathered:
		lines = append(lines, fmt.Sprintf("gathered again for the backward (backward regather): the forward's gathered copy of %s is not kept for the backward", t))
	case t != "":
		lines = append(lines, fmt.Sprintf("made again for the backward (backward recompute): the forward's %s is not kept for the backward, and lives until its last forward reader", t))
	}
	if in := op.Inserted; in != nil && !in.Output {
		lines = append(lines, e.reshardedFor(op)...)
	} else if in != nil && op.Op != "set" && in.For >= 0 && in.For < len(e.p.Ops) {
		lines = append(lines, fmt.Sprintf("inserted by nvcomm after op %d, which computed on pending terms of sums (an add, sub or neg of sums is the sum of the op of their terms): one reduction of its terms serves every operand",
			in.For))
	} else if in != nil && in.For >= 0 && in.For < len(e.p.Ops) && e.p.Ops[in.For].Op == "sum" {
		lines = append(lines, fmt.Sprintf("inserted by nvcomm after op %d, the second of two sums over dims split along two mesh axes: the first reduce-scattered along its axis, op %d all-reduced the shard along the other, and this set gathers it (one Allreduce's bytes over both axes, in collectives along one axis each)",
			in.For, in.For))
	}
	lines = append(lines, e.formOf(i, op)...)
	lines = append(lines, e.overlapOf(i, op)...)
	out := e.sh[op.Output]
	if out == nil {
		return lines
	}
	red := reduceOpOf(e.p, op.Output)
	ins := op.Operands()
	for _, name := range ins {
		if s := e.sh[name]; s != nil {
			lines = append(lines, fmt.Sprintf("reads  %s %s on %s%s", name, s.placements(reduceOpOf(e.p, name)), s.Tensor.Mesh, e.reshardedNote(name)))
		}
	}
	lines = append(lines, fmt.Sprintf("writes %s %s on %s", op.Output, out.placements(red), out.Tensor.Mesh))
	if len(ins) == 1 && (op.Op == "set" || ops.Is(op.Op, ops.Reduction)) {
		if in := e.sh[ins[0]]; in != nil {
			var r *reduction
			if op.Op != "set" && op.Axis != nil {
				r = &reduction{Dim: *op.Axis, Op: op.Op}
			}
			lines = append(lines, changes(in, out, reduceOpOf(e.p, ins[0]), red, r)...)
		}
	}
	summed := len(out.Reduced) > 0 && e.sums(i)
	if len(out.Reduced) > 0 && !summed && ops.Is(op.Op, ops.Contraction) {
		lines = append(lines, fmt.Sprintf("%s's sharding splits the summed dim along %s, but nvcomm resharded the operands to hold it whole, which costs less than summing partial products of the output: each device computes its block of the output alone", op.Output, typesOf(out.Reduced)))
	}
	if summed && (op.Op == "matmul" || op.Op == "linear") {
		lines = append(lines, fmt.Sprintf("k, the summed dim, is split along %s: each device multiplies its slices of k, and the partial products are summed", typesOf(out.Reduced)))
	}
	if summed && isLookup(op.Op) {
		lines = append(lines, fmt.Sprintf("the table's rows are split along %s: each device looks up the indices in its rows, zero rows for the others, and the partial rows are summed", typesOf(out.Reduced)))
	}
	return lines
}

// sums reports whether op i's steps sum partial results over devices —
// a reducing collective, or a ring that passes on a partial product its
// Matmul wrote (a decomposed matmul + ReduceScatter) — where a
// contraction whose output's sharding splits its summed axis may instead
// have its operands gathered (the optimal policy's choice).
func (e *explainer) sums(i int) bool {
	steps := e.stepsOf(i)
	products := map[string]bool{}
	for _, s := range steps {
		if s.Type == plan.Matmul {
			products[s.Output] = true
		}
	}
	return slices.ContainsFunc(steps, func(s *plan.Step) bool {
		return s.Type == plan.Allreduce || s.Type == plan.ReduceScatter || s.Type == plan.Reduce ||
			s.Type == plan.SendRecv && products[s.Input]
	})
}

// reshardedNote marks an operand that a resharding set made.
func (e *explainer) reshardedNote(name string) string {
	for k, op := range e.p.Ops {
		if op.Output == name && op.Inserted != nil && !op.Inserted.Output {
			return fmt.Sprintf(" (resharded from %s by op %d)", op.Input, k)
		}
	}
	return ""
}

// reshardedFor says why nvcomm inserted the resharding set op: which op
// reads it, and what that op computes.
func (e *explainer) reshardedFor(op plan.Op) []string {
	k := op.Inserted.For
	switch {
	case k >= 0 && k < len(e.p.Ops) && op.Op != "set":
		return []string{fmt.Sprintf("inserted by nvcomm: op %d reads %s, pending terms, which are reduced first (DTensor's redistribution of a Partial operand), into the sharding op %d needs",
			k, op.Input, k)}
	case k >= 0 && k < len(e.p.Ops):
		return []string{fmt.Sprintf("inserted by nvcomm: op %d computes each device's block of %s from the blocks it holds, which needs %s sharded otherwise",
			k, e.p.Ops[k].Output, op.Input)}
	}
	return []string{"inserted by nvcomm to reshard " + op.Input}
}

// changes lists the mesh axes along which a set's or a reduction's
// producer and consumer differ, and a change of mesh; r is the reduction
// (nil for a set), whose output numbers the dims without the reduced one.
func changes(in, out *sharding, inRed, outRed string, r *reduction) []string {
	var lines []string
	if in.Tensor.Mesh != out.Tensor.Mesh {
		lines = append(lines, fmt.Sprintf("changes mesh: %s (devices %s) -> %s (devices %s)",
			in.Tensor.Mesh, deviceList(in.Mesh.Devices), out.Tensor.Mesh, deviceList(out.Mesh.Devices)))
		return lines
	}
	for dim := range out.Mesh.Shape {
		a, b := in.placementAfter(dim, inRed, r), out.complete().placement(dim, outRed)
		if a != b {
			lines = append(lines, fmt.Sprintf("changes mesh axis %d (%s, %d devices): %s -> %s", dim, typeOfDim(out.Mesh, dim), out.Mesh.Shape[dim], a, b))
		}
	}
	if r != nil && in.Partial == nil { // pending terms' placements say Partial already
		lines = append(lines, fmt.Sprintf("(%s's placements as the %s over its dim %d sees them: a split of that dim is a partial result)", in.Tensor.Name, r.Op, r.Dim))
	}
	if len(lines) == 0 {
		lines = append(lines, "changes no mesh axis")
	}
	return lines
}

// complete is the sharding of the tensor's values once the op that
// produces it has combined its partial results: without them.
func (s *sharding) complete() *sharding {
	c := *s
	c.Reduced = nil
	return &c
}

// typesOf names the device types of digits.
func typesOf(ds []digit) string {
	names := make([]string, len(ds))
	for i, d := range ds {
		names[i] = d.Type
	}
	return strings.Join(names, " and ")
}
