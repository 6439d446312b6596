package explain

import (
	"fmt"
	"io"
	"strings"

	"github.com/nvcomm/nvcomm/internal/plan"
)

// WriteDot writes p as a Graphviz graph (dot -Tsvg renders it): a box per
// tensor with its shape and sharding, a cluster per op holding its steps
// in order, and edges along the buffers the steps read and write, labelled
// with the bytes a collective makes its busiest device receive.
func WriteDot(w io.Writer, p *plan.Plan) error {
	var b strings.Builder
	fmt.Fprintf(&b, "digraph %s {\n", dotID(p.Fusion))
	b.WriteString("  rankdir=TB;\n  node [fontname=\"monospace\", fontsize=10];\n  edge [fontname=\"monospace\", fontsize=9];\n")
	for _, t := range p.Tensors {
		fmt.Fprintf(&b, "  %s [shape=box, label=%s];\n", dotID("t:"+t.Name), dotID(tensorLabel(p, t)))
	}
	for i, op := range p.Ops {
		dotOp(&b, p, i, op)
	}
	b.WriteString("}\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// tensorLabel is a tensor's box: its name, shape, dtype and sharding.
func tensorLabel(p *plan.Plan, t plan.Tensor) string {
	s, err := analyze(p, t)
	if err != nil {
		return fmt.Sprintf("%s\n%s %s on %s", t.Name, intList(t.Shape), t.DType, t.Mesh)
	}
	return fmt.Sprintf("%s\n%s %s\n%s on %s", t.Name, intList(s.valueShape()), t.DType, s.placements(reduceOpOf(p, t.Name)), t.Mesh)
}

// dotOp writes an op's cluster of steps and the edges of its buffers: from
// the tensor or the step of the op that last wrote a buffer to the step
// that reads it, and from the step that writes the op's output to it.
func dotOp(b *strings.Builder, p *plan.Plan, i int, op plan.Op) {
	fmt.Fprintf(b, "  subgraph %s {\n    label=%s; style=rounded;\n", dotID(fmt.Sprintf("cluster_op%d", i)), dotID(fmt.Sprintf("op %d: %s", i, op.Expr())))
	writer := map[string]string{}  // buffer -> node that last wrote it in this op
	written := map[string]string{} // buffer -> the bytes its writer moved
	var edges []string
	for k := range p.Steps {
		s := &p.Steps[k]
		if s.Op != i {
			continue
		}
		id := dotID(fmt.Sprintf("s:%d", s.ID))
		shape := "ellipse"
		if s.Kind == plan.KindCollective {
			shape = "hexagon"
		}
		fmt.Fprintf(b, "    %s [shape=%s, label=%s];\n", id, shape, dotID(fmt.Sprintf("%d %s\n%s", s.ID, s.Type, plan.StepDevices(s))))
		for _, in := range s.Operands() {
			from, ok := writer[in]
			if !ok {
				from = dotID("t:" + in)
			}
			edges = append(edges, fmt.Sprintf("  %s -> %s [label=%s];", from, id, dotID(strings.TrimSpace(in+"\n"+written[in]))))
		}
		writer[s.Output], written[s.Output] = id, stepBytes(s)
		if s.Output == op.Output {
			edges = append(edges, fmt.Sprintf("  %s -> %s [label=%s];", id, dotID("t:"+s.Output), dotID(stepBytes(s))))
		}
	}
	b.WriteString("  }\n")
	for _, e := range edges {
		b.WriteString(e + "\n")
	}
}

// stepBytes labels a step's output edge: what its busiest device receives,
// and the bound, for a collective; nothing for a local step.
func stepBytes(s *plan.Step) string {
	if s.Bytes == nil {
		return ""
	}
	return fmt.Sprintf("%s (bound %s)", plan.Size(s.Bytes.ReceivedPerDevice), plan.Size(s.Bytes.LowerBound))
}

// dotID quotes s as a DOT string: in double quotes, with quotes and
// backslashes escaped and newlines as \n.
func dotID(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)
	return `"` + r.Replace(s) + `"`
}
