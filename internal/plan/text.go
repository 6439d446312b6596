package plan

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/dustin/go-humanize"
)

// WriteText writes a readable table of p's steps and its summary. Sizes
// are in B, KiB, MiB or GiB and element counts have thousands separators;
// the JSON plan keeps the raw integers.
func WriteText(w io.Writer, p *Plan) error {
	ratio := "-"
	if r := p.Summary.BytesRatio; r != nil {
		ratio = fmt.Sprintf("%.3g", *r)
	}
	fmt.Fprintf(w, "plan %s (policy %s): %s, %s, max received per device %s (lower bound %s, ratio %s)\n\n",
		p.Fusion, p.Policy, things(p.Summary.Collectives, "collective"), things(p.Summary.LocalSteps, "local step"), Size(p.Summary.BytesReceivedMax), Size(p.Summary.BytesLowerBound), ratio)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "step\top\ttype\tinput -> output\tteams / devices\troot\treduce\telements in/out\tsent\treceived\tbound")
	resolves := resolvedPartials(p)
	for _, s := range p.Steps {
		root, red := "-", "-"
		if s.Root != nil {
			root = fmt.Sprint(*s.Root)
		}
		if s.ReduceOp != nil {
			red = *s.ReduceOp
		}
		sent, recv, bound := "-", "-", "-"
		if b := s.Bytes; b != nil {
			sent, recv, bound = Size(b.SentPerDevice), Size(b.ReceivedPerDevice), Size(b.LowerBound)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s -> %s\t%s\t%s\t%s\t%s/%s\t%s\t%s\t%s\n",
			s.ID, s.Expr+resolves[s.Op], s.Type, strings.Join(s.Operands(), ", "), s.Output, StepDevices(&s), root, red,
			humanize.Comma(int64(s.Count.Input)), humanize.Comma(int64(s.Count.Output)), sent, recv, bound)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if err := writeSplitSizes(w, p); err != nil {
		return err
	}
	if err := writeTerms(w, p); err != nil {
		return err
	}
	if err := writeGraph(w, p); err != nil {
		return err
	}
	if err := writeComposites(w, p); err != nil {
		return err
	}
	return writePropagated(w, p)
}

// writeComposites lists, after the steps, the composite ops of the fusion
// (softmax, mean, the norms) with the ops and steps of their expansion,
// so that a reader finds the user's op above the primitive ones the table
// shows, and then the ops whose gradients a backward section appended,
// with the ops and steps of each gradient. A plan without any writes
// nothing.
func writeComposites(w io.Writer, p *Plan) error {
	if err := writeOrigins(w, p, false, "composite ops, written as primitive ops:"); err != nil {
		return err
	}
	return writeOrigins(w, p, true, "backward: the gradients of the fusion's ops, written as primitive ops:")
}

// writeOrigins lists under head the ops that the plan's ops point at
// (Of), those of gradients (grad) or of composites, with the ops and
// steps that point at each.
func writeOrigins(w io.Writer, p *Plan, grad bool, head string) error {
	var order []*Of
	opsOf := map[string][]int{}
	for i, op := range p.Ops {
		if of := op.Of; of != nil && of.Grad == grad {
			if _, seen := opsOf[of.Output]; !seen {
				order = append(order, of)
			}
			opsOf[of.Output] = append(opsOf[of.Output], i)
		}
	}
	if len(order) == 0 {
		return nil
	}
	stepsOf := map[string][]int{}
	for _, s := range p.Steps {
		if s.Op >= 0 && s.Op < len(p.Ops) && p.Ops[s.Op].Of != nil && p.Ops[s.Op].Of.Grad == grad {
			out := p.Ops[s.Op].Of.Output
			stepsOf[out] = append(stepsOf[out], s.ID)
		}
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "\n"+head)
	for _, of := range order {
		line := "ops " + ranges(opsOf[of.Output])
		if ids := stepsOf[of.Output]; len(ids) > 0 {
			line += ", steps " + ranges(ids)
		}
		fmt.Fprintf(tw, "  %s\t%s\n", of.Expr(), line)
	}
	return tw.Flush()
}

// ranges writes increasing numbers as runs: "0-9, 11".
func ranges(xs []int) string {
	var b strings.Builder
	for i := 0; i < len(xs); {
		j := i
		for j+1 < len(xs) && xs[j+1] == xs[j]+1 {
			j++
		}
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.Itoa(xs[i]))
		if j > i {
			b.WriteString("-" + strconv.Itoa(xs[j]))
		}
		i = j + 1
	}
	return b.String()
}

// writeGraph lists, for a plan of format 2, each step's stream and the
// steps it waits for.
func writeGraph(w io.Writer, p *Plan) error {
	if !p.Graph() {
		return nil
	}
	fmt.Fprintln(w, "\nstep graph (format 2): each step runs on its stream of every device it names, after the steps of that stream before it and those it waits for")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  step\tstream\twaits for")
	for i := range p.Steps {
		s := &p.Steps[i]
		after := "-"
		if len(s.After) > 0 {
			after = joinInts(s.After)
		}
		fmt.Fprintf(tw, "  %d\t%s\t%s\n", s.ID, s.StreamName(), after)
	}
	return tw.Flush()
}

// things counts n things: "1 collective", "3 local steps".
func things(n int, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	return fmt.Sprintf("%d %ss", n, thing)
}

// resolvedPartials marks, by op index, the ops that read an input of
// partial terms: the plan writes a set from a Partial(sum) input as the
// sum over the input's terms, "y = sum(p, axis=0)", which alone would not
// say that it resolves the Partial.
func resolvedPartials(p *Plan) map[int]string {
	out := map[int]string{}
	partials := partialInputs(p)
	for i, op := range p.Ops {
		if pi, ok := partials[op.Input]; ok && op.Input != "" && !passesSums(op.Op) {
			out[i] = fmt.Sprintf(", resolves Partial(%s)", pi.Op)
		}
	}
	return out
}

// maxSplitRanks is how many ranks of an AllToAllV's split sizes
// writeSplitSizes shows along each side of the matrix; the rest are
// counted.
const maxSplitRanks = 16

// writeSplitSizes shows, after the steps, the split sizes of every
// AllToAllV, which the table's counts (a member's whole input and output)
// do not: row k is what rank k sends to each rank, in elements, and the
// one matrix serves every team. A plan without an AllToAllV writes nothing.
func writeSplitSizes(w io.Writer, p *Plan) error {
	header := false
	for _, s := range p.Steps {
		if s.Type != AllToAllV {
			continue
		}
		if !header {
			if _, err := fmt.Fprintln(w, "\nsplit sizes (AllToAllV, in elements: row k is what rank k sends to ranks 0, 1, …; one matrix for every team):"); err != nil {
				return err
			}
			header = true
		}
		if _, err := io.WriteString(w, splitSizesText(s.ID, s.SendCounts)); err != nil {
			return err
		}
	}
	return nil
}

// splitSizesText renders step id's split sizes as an aligned matrix, one
// line per rank, at most maxSplitRanks ranks along each side.
func splitSizesText(id int, counts [][]int) string {
	label := fmt.Sprintf("  step %d  ", id)
	if len(counts) == 0 {
		return label + "none\n"
	}
	rows := counts[:min(len(counts), maxSplitRanks)]
	width := 1
	for _, row := range rows {
		for _, n := range row[:min(len(row), maxSplitRanks)] {
			width = max(width, len(fmt.Sprint(n)))
		}
	}
	rankWidth := len(fmt.Sprintf("rank %d:", len(rows)-1))
	var b strings.Builder
	for k, row := range rows {
		b.WriteString(label)
		fmt.Fprintf(&b, "%-*s", rankWidth, fmt.Sprintf("rank %d:", k))
		for _, n := range row[:min(len(row), maxSplitRanks)] {
			fmt.Fprintf(&b, "  %*d", width, n)
		}
		if len(row) > maxSplitRanks {
			fmt.Fprintf(&b, "  … %d more", len(row)-maxSplitRanks)
		}
		b.WriteString("\n")
		label = strings.Repeat(" ", len(label))
	}
	if n := len(counts) - len(rows); n > 0 {
		fmt.Fprintf(&b, "%s… %d more ranks\n", label, n)
	}
	return b.String()
}

// writeTerms explains, after the steps, the inputs that hold partial
// terms: a set from a Partial(op) input is, in a plan, the reduction of
// the input's added leading dim ("y = sum(p, axis=0)"), which a reader of
// the fusion file would not recognize.
func writeTerms(w io.Writer, p *Plan) error {
	header := false
	partials := partialInputs(p)
	for _, t := range p.Tensors {
		pi, ok := partials[t.Name]
		if !ok {
			continue
		}
		if !header {
			fmt.Fprintln(w, "\npartial terms:")
			header = true
		}
		if _, err := fmt.Fprintf(w, "  %s: dim 0 holds one term per device along %s, %s\n", t.Name, pi.Type, termsFate(p, t.Name, pi.Op)); err != nil {
			return err
		}
	}
	return nil
}

// termsFate says what becomes of the terms of tensor name, combined with
// op: the ops that reduce them (a set from a Partial tensor reads so), the
// ops that compute on them term by term (an op that passes sums), or
// none, when the tensor is a fusion output left pending.
func termsFate(p *Plan, name, op string) string {
	var reduce, pass []string
	for i, o := range p.Ops {
		switch {
		case !slices.Contains(o.Operands(), name):
		case passesSums(o.Op):
			pass = append(pass, fmt.Sprintf("op %d (%s into %s)", i, o.Op, o.Output))
		default:
			reduce = append(reduce, fmt.Sprintf("op %d", i))
		}
	}
	var fates []string
	if len(pass) > 0 {
		fates = append(fates, fmt.Sprintf("read term by term by %s: an add, sub or neg of sums is the sum of the op of their terms",
			strings.Join(pass, ", ")))
	}
	if len(reduce) > 0 {
		whose := "input"
		if slices.ContainsFunc(p.Ops, func(o Op) bool { return o.Output == name }) {
			whose = "op's output"
		}
		fates = append(fates, fmt.Sprintf("reduced with %s by %s: a set from a Partial(%s) %s reads so", op, strings.Join(reduce, ", "), op, whose))
	}
	if len(fates) == 0 {
		return fmt.Sprintf("left pending: a fusion output whose values are the %s of its terms", op)
	}
	return strings.Join(fates, "; ")
}

// Size renders a byte count for readers: "768 B", "1.5 KiB", "24 GiB"
// (powers of 1024, as --max-bytes and --max-input accept them).
func Size(n int64) string {
	if n < 0 {
		return fmt.Sprintf("%d B", n)
	}
	return humanize.IBytes(uint64(n))
}

// StepDevices renders who runs a step: its teams, each in brackets, for a
// collective or a Slice (which has teams), else its devices.
func StepDevices(s *Step) string {
	if len(s.Teams) > 0 {
		return teamsText(s.Teams)
	}
	return fmt.Sprint(s.Devices)
}

// meshExtent is the size of mesh's axis along device type typ, 0 when the
// mesh has no such axis.
func meshExtent(p *Plan, mesh, typ string) int {
	m, ok := p.Meshes[mesh]
	i := slices.Index(deviceTypes, typ)
	if !ok || i < 0 || i >= len(m.Shape) {
		return 0
	}
	return m.Shape[len(m.Shape)-1-i]
}

// tensorNamed finds a tensor of p by name.
func tensorNamed(p *Plan, name string) (Tensor, bool) {
	for _, t := range p.Tensors {
		if t.Name == name {
			return t, true
		}
	}
	return Tensor{}, false
}

// writePropagated lists, after the steps, the tensors whose sharding
// format 2 propagated, with their mesh and placements as a fusion file
// would write them, so that a reader can tell them from the shardings the
// file gave. A plan without any writes nothing.
func writePropagated(w io.Writer, p *Plan) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	header := false
	for _, t := range p.Tensors {
		if !t.Propagated {
			continue
		}
		if !header {
			fmt.Fprintln(tw, "\npropagated shardings (format 2):")
			header = true
		}
		fmt.Fprintf(tw, "  %s\ton %s\t%s%s\n", t.Name, t.Mesh, placementsText(p, t), reducedText(t))
	}
	return tw.Flush()
}

// placementsText renders t's sharding as placements, one per axis of its
// mesh, as a fusion file would write them: Shard(d) for a device type
// that splits dim d, Replicate() otherwise. A device type on a reduction
// axis (the op combined its partial results across those devices) leaves
// complete values: Replicate() or the Shard of a dim it also splits. Only
// pending terms are Partial(op): the device type on the terms' axis 0,
// the other dims numbered without it.
func placementsText(p *Plan, t Tensor) string {
	rank := len(p.Meshes[t.Mesh].Shape)
	pls := make([]string, rank)
	for i := range pls {
		pls[i] = "Replicate()"
	}
	at := func(typ string) int { return rank - 1 - slices.Index(deviceTypes, typ) }
	for _, s := range t.Sharding {
		a := at(s.Type)
		switch {
		case a < 0 || a >= rank:
		case t.Partial != "" && s.LogicalAxis == 0:
			pls[a] = fmt.Sprintf("Partial(%s)", t.Partial)
		case t.Partial != "":
			pls[a] = fmt.Sprintf("Shard(%d)", s.LogicalAxis-1)
		case s.Kind != "block":
			pls[a] = fmt.Sprintf("Shard(%d, %s)", s.LogicalAxis, s.Kind)
		default:
			pls[a] = fmt.Sprintf("Shard(%d)", s.LogicalAxis)
		}
	}
	return "[" + strings.Join(pls, ", ") + "]"
}

// reducedText says, in words, over which device types t's op combined its
// partial results itself (a device type on a reduction axis, nvFuser's
// rDID): what the placements of its complete values do not show.
func reducedText(t Tensor) string {
	loop, _, why := Replay(&t, nil)
	if why != "" {
		return ""
	}
	var types []string
	for _, a := range loop {
		if a.OnDevices() && a.Logical >= 0 && slices.Contains(t.ReductionAxes, a.Logical) {
			types = append(types, a.Parallel)
		}
	}
	if len(types) == 0 {
		return ""
	}
	return "\treduced over " + strings.Join(types, " and ") + " by its op"
}

func teamsText(teams [][]int) string {
	parts := make([]string, len(teams))
	for i, t := range teams {
		parts[i] = fmt.Sprint(t)
	}
	return strings.Join(parts, " ")
}
