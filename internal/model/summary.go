package model

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/nvcomm/nvcomm/internal/cost"
	"github.com/nvcomm/nvcomm/internal/explain"
	"github.com/nvcomm/nvcomm/internal/plan"
)

// Summary is what a step of the model costs each device under its plan:
// the memory of its weights and of the tensors it computes, the bytes of
// each kind of collective over each mesh axis, and the predicted time.
type Summary struct {
	// Devices is the mesh's size.
	Devices int
	// Parameters and ParameterBytes are one device's share of the
	// weights (the most over devices).
	Parameters, ParameterBytes int64
	// ActivationBytes is one device's share of every tensor the step
	// computes, all held at once: an upper bound on the activations a
	// step keeps, as it frees and recomputes none.
	ActivationBytes int64
	// Collectives are the step's collectives by type and mesh axes, in
	// the order of their first step.
	Collectives []CollectiveBytes
	// Time is the plan's predicted time, LowerBound the least any plan of
	// the fusion takes, on topology Topology.
	Time, LowerBound float64
	Topology         string
}

// CollectiveBytes totals the collectives of one type over one set of mesh
// axes.
type CollectiveBytes struct {
	// Type is the collective (Allreduce, Allgather, ...); Axes the mesh
	// axes its teams span ("tp", "dp", "dp×tp").
	Type, Axes string
	// Count is the number of steps; Sent and Received the bytes of the
	// busiest device, summed over the steps.
	Count          int
	Sent, Received int64
}

// Summarize totals plan pl of the model's fusion under p, its time
// predicted on topology t. weights are the fusion's weights (Weights).
func Summarize(pl *plan.Plan, p Parallel, weights []string, t *cost.Topology) (*Summary, error) {
	pr, err := cost.Predict(t, pl)
	if err != nil {
		return nil, err
	}
	s := &Summary{Devices: p.devices(), Time: pr.Total, LowerBound: pr.LowerBound, Topology: pr.Topology}
	computed := map[string]bool{}
	for _, o := range pl.Ops {
		computed[o.Output] = true
	}
	for _, tn := range pl.Tensors {
		n, b := localSize(tn)
		switch {
		case slices.Contains(weights, tn.Name):
			s.Parameters += n
			s.ParameterBytes += b
		case computed[tn.Name]:
			s.ActivationBytes += b
		}
	}
	s.Collectives = collectives(pl, p)
	return s, nil
}

// localSize is one device's elements of t and their bytes.
func localSize(t plan.Tensor) (n, bytes int64) {
	n = 1
	for _, e := range t.LocalShape {
		n *= int64(e)
	}
	return n, n * int64(plan.DTypeSize(t.DType))
}

// collectives totals pl's collectives by type and mesh axes.
func collectives(pl *plan.Plan, p Parallel) []CollectiveBytes {
	var out []CollectiveBytes
	for _, st := range pl.Steps {
		if st.Kind != plan.KindCollective {
			continue
		}
		axes := teamAxes(pl, p, st.Teams)
		i := slices.IndexFunc(out, func(c CollectiveBytes) bool { return c.Type == st.Type && c.Axes == axes })
		if i < 0 {
			out = append(out, CollectiveBytes{Type: st.Type, Axes: axes})
			i = len(out) - 1
		}
		out[i].Count++
		if st.Bytes != nil {
			out[i].Sent += st.Bytes.SentPerDevice
			out[i].Received += st.Bytes.ReceivedPerDevice
		}
	}
	return out
}

// teamAxes names the mesh axes along which the members of a collective's
// teams differ: "tp" for a team within a row of a dp×tp mesh.
func teamAxes(pl *plan.Plan, p Parallel, teams [][]int) string {
	m, ok := pl.Meshes["m"]
	if !ok || len(teams) == 0 || len(m.Shape) != len(p.Mesh) {
		return "?"
	}
	coord := func(dev int) []int {
		i := slices.Index(m.Devices, dev)
		c := make([]int, len(m.Shape))
		for k := len(m.Shape) - 1; k >= 0; k-- {
			c[k] = i % m.Shape[k]
			i /= m.Shape[k]
		}
		return c
	}
	var names []string
	first := coord(teams[0][0])
	for k, a := range p.Mesh {
		if slices.ContainsFunc(teams[0], func(d int) bool { return coord(d)[k] != first[k] }) {
			names = append(names, a.Name)
		}
	}
	if len(names) == 0 {
		return "-"
	}
	return strings.Join(names, "×")
}

// WriteText writes s as a table for readers.
func (s *Summary) WriteText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "per device (of %d):\n", s.Devices)
	fmt.Fprintf(tw, "  parameters\t%s\t(%d elements)\n", plan.Size(s.ParameterBytes), s.Parameters)
	fmt.Fprintf(tw, "  activations\t%s\t(every tensor the step computes, held at once: an upper bound)\n", plan.Size(s.ActivationBytes))
	fmt.Fprintf(tw, "\nper step, the busiest device:\n")
	fmt.Fprintf(tw, "  collective\taxes\tsteps\tsent\treceived\n")
	for _, c := range s.Collectives {
		fmt.Fprintf(tw, "  %s\t%s\t%d\t%s\t%s\n", c.Type, c.Axes, c.Count, plan.Size(c.Sent), plan.Size(c.Received))
	}
	if len(s.Collectives) == 0 {
		fmt.Fprintf(tw, "  (none)\n")
	}
	fmt.Fprintf(tw, "\npredicted %s on topology %s (lower bound %s)\n", explain.Seconds(s.Time), s.Topology, explain.Seconds(s.LowerBound))
	return tw.Flush()
}
