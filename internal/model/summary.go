package model

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/nvcomm/nvcomm/internal/cost"
	"github.com/nvcomm/nvcomm/internal/explain"
	"github.com/nvcomm/nvcomm/internal/plan"
)

// Summary is what a step of the model costs each device under its plan:
// the memory of its weights, their gradients and optimizer state and of
// the tensors it computes, the bytes of each kind of collective over each
// mesh axis, the predicted time, and the throughput it implies.
type Summary struct {
	// Devices is the mesh's size.
	Devices int
	// Parameters and ParameterBytes are one device's share of the
	// weights (the most over devices).
	Parameters, ParameterBytes int64
	// GradientBytes is one device's share of the weights' gradients: one
	// a parameter, in the weights' dtype, sharded as its weight (the
	// shard FSDP's ReduceScatter leaves; data parallelism's whole).
	GradientBytes int64
	// OptimizerBytes is one device's share of Adam's state: under mixed
	// precision (16-bit weights) an fp32 master copy and two fp32
	// moments, 12 bytes a parameter (ZeRO's K = 12); otherwise the two
	// moments in the weights' dtype. It is sharded as the parameters:
	// ZeRO-3 under fsdp, whole on every dp replica.
	OptimizerBytes int64
	// GatheredBytes is one device's share of FSDP's gathered copies of
	// the weights (Gathered), all held at once: an upper bound, as FSDP
	// frees each layer's after its use.
	GatheredBytes int64
	// ActivationBytes is one device's share of every other tensor the
	// step computes, all held at once: an upper bound on the activations
	// a step keeps, as it frees and recomputes none.
	ActivationBytes int64
	// Tokens are the step's tokens, batch × seq, over every replica.
	Tokens int64
	// MatmulParameters are the model's parameters that multiply each
	// token (every weight but the token embedding, unless the LM head
	// is tied to it, and learned positions: lookups, not products).
	MatmulParameters int64
	// FlopsPerToken are the model's floating-point operations a token
	// of the step: 2·MatmulParameters + 4·layers·seq·heads·head_dim
	// (attention's two products, causal or not) for the forward, three
	// times that with the backward (torchtitan's 6·N + 12·l·h·q·t).
	FlopsPerToken float64
	// Backward is whether the step computes the backward.
	Backward bool
	// PeakFLOPS is one device's throughput in the weights' dtype on the
	// topology, operations a second; 0 when the topology lists none.
	PeakFLOPS float64
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
	// steps are the steps counted, while collectives totals them.
	steps []int
}

// Summarize totals plan pl of the fusion of model c's step under p and
// o (Fusion), its time predicted on topology t.
func Summarize(pl *plan.Plan, c *Config, p Parallel, o Options, t *cost.Topology) (*Summary, error) {
	w, err := write(c, p, o)
	if err != nil {
		return nil, err
	}
	pr, err := cost.Predict(t, pl)
	if err != nil {
		return nil, err
	}
	o = withDefaults(c, p, o)
	s := &Summary{Devices: p.devices() * p.stageGroups(), Time: pr.Total, LowerBound: pr.LowerBound, Topology: pr.Topology,
		Tokens: int64(o.Batch) * int64(o.Seq), Backward: o.Backward}
	if t.Compute != nil {
		s.PeakFLOPS = t.Compute.TFLOPS[o.DType] * 1e12
	}
	s.memory(pl, w.weights, matmulWeights(w))
	perToken := 2*float64(s.MatmulParameters) + 4*float64(w.c.Layers)*float64(o.Seq)*float64(w.c.Heads*w.c.HeadDim)
	if o.Backward {
		perToken *= 3
	}
	s.FlopsPerToken = perToken
	s.GradientBytes = s.ParameterBytes
	s.OptimizerBytes = s.Parameters * adamBytes(o.DType)
	s.Collectives = collectives(pl, p)
	return s, nil
}

// memory totals one device's weights, gathered weights and activations,
// and the model's parameters that multiply each token.
func (s *Summary) memory(pl *plan.Plan, weights []string, matmul map[string]share) {
	computed := map[string]bool{}
	for _, o := range pl.Ops {
		computed[o.Output] = true
	}
	gathered := map[string]bool{}
	for _, w := range weights {
		// Under fsdp × cp, the copy gathered along cp too.
		gathered[Gathered(w)], gathered[gatheredCP(w)] = true, true
	}
	// Per device: a pipeline's stages hold their own tensors; the
	// summary is the device that holds the most.
	type held struct{ params, paramBytes, gathered, activations int64 }
	byDevice := map[int]*held{}
	for _, tn := range pl.Tensors {
		n, b := localSize(tn)
		if m := matmul[tn.Name]; slices.Contains(weights, tn.Name) && m.of > 0 {
			s.MatmulParameters += globalSize(tn) / m.of * m.n
		}
		for _, d := range pl.Meshes[tn.Mesh].Devices {
			h := byDevice[d]
			if h == nil {
				h = &held{}
				byDevice[d] = h
			}
			switch {
			case slices.Contains(weights, tn.Name):
				h.params += n
				h.paramBytes += b
			case gathered[tn.Name] && computed[tn.Name]:
				h.gathered += b
			case remadeGather(tn.Name, gathered) && computed[tn.Name]:
				// Gathered again for the backward (reshard_after_forward):
				// the forward's copy, counted above, lives until its last
				// forward reader, before this one is made.
			case computed[tn.Name]:
				h.activations += b
			}
		}
	}
	busiest, most := -1, int64(-1)
	for _, d := range slices.Sorted(maps.Keys(byDevice)) {
		h := byDevice[d]
		if total := h.paramBytes + h.gathered + h.activations; total > most {
			busiest, most = d, total
		}
	}
	if h := byDevice[busiest]; h != nil {
		s.Parameters, s.ParameterBytes, s.GatheredBytes, s.ActivationBytes = h.params, h.paramBytes, h.gathered, h.activations
	}
}

// remadeGather reports whether name is the copy of a gathered weight
// that the backward gathers again (ir.Remade).
func remadeGather(name string, gathered map[string]bool) bool {
	t, regathered := plan.Remade(name)
	return t != "" && !regathered && gathered[t]
}

// share is the part n/of of a weight that multiplies each token; of 0
// for none.
type share struct{ n, of int64 }

// matmulWeights are the parts of the weights of w's fusion that multiply
// each token: all but the token embedding (a lookup) unless the LM head
// is tied to it, and learned positions; of a mixture of experts' weights
// [experts, ...], top_k experts' (the active parameters).
func matmulWeights(w *writer) map[string]share {
	m := map[string]share{}
	for _, name := range w.weights {
		switch {
		case name == "positions" || name == "embed" && !w.c.TiedEmbeddings:
		case w.c.Experts > 0 && isExpertWeight(name):
			m[name] = share{int64(w.c.TopK), int64(w.c.Experts)}
		default:
			m[name] = share{1, 1}
		}
	}
	return m
}

// adamBytes are the bytes of Adam's state a parameter of dtype: an fp32
// master copy and two fp32 moments under mixed precision (a 16-bit
// dtype), else the two moments in the dtype itself.
func adamBytes(dtype string) int64 {
	n := plan.DTypeSize(dtype)
	if n < 4 {
		return 4 + 4 + 4
	}
	return 2 * int64(n)
}

// TokensPerSecond is the step's tokens over its predicted time.
func (s *Summary) TokensPerSecond() float64 { return float64(s.Tokens) / s.Time }

// MFU is the model FLOPs utilization the predicted time implies: the
// step's FlopsPerToken·Tokens over the devices' peak for that time; 0
// when the topology has no throughput for the dtype.
func (s *Summary) MFU() float64 {
	if s.PeakFLOPS == 0 || s.Time == 0 {
		return 0
	}
	return s.FlopsPerToken * float64(s.Tokens) / (s.Time * float64(s.Devices) * s.PeakFLOPS)
}

// globalSize is t's elements over every device.
func globalSize(t plan.Tensor) int64 {
	n := int64(1)
	for i, e := range t.Shape {
		if !slices.Contains(t.ReductionAxes, i) {
			n *= int64(e)
		}
	}
	return n
}

// localSize is one device's elements of t and their bytes.
func localSize(t plan.Tensor) (n, bytes int64) {
	n = 1
	for _, e := range t.LocalShape {
		n *= int64(e)
	}
	return n, n * int64(plan.DTypeSize(t.DType))
}

// collectives totals pl's collectives by type and mesh axes, over the
// steps of the device that receives the most: every device, but in a
// pipeline, those of its stages.
func collectives(pl *plan.Plan, p Parallel) []CollectiveBytes {
	byDevice := map[int][]CollectiveBytes{}
	received := map[int]int64{}
	for _, st := range pl.Steps {
		if st.Kind != plan.KindCollective {
			continue
		}
		axes := teamAxes(pl, p, st.Teams)
		var sent, recv int64
		if st.Bytes != nil {
			sent, recv = st.Bytes.SentPerDevice, st.Bytes.ReceivedPerDevice
		}
		for _, team := range st.Teams {
			for _, d := range team {
				out := byDevice[d]
				i := slices.IndexFunc(out, func(c CollectiveBytes) bool { return c.Type == st.Type && c.Axes == axes })
				if i < 0 {
					out = append(out, CollectiveBytes{Type: st.Type, Axes: axes})
					i = len(out) - 1
				}
				if len(out[i].steps) == 0 || out[i].steps[len(out[i].steps)-1] != st.ID {
					out[i].steps = append(out[i].steps, st.ID)
					out[i].Count++
					out[i].Sent += sent
					out[i].Received += recv
					received[d] += recv
				}
				byDevice[d] = out
			}
		}
	}
	busiest, most := -1, int64(-1)
	for _, d := range slices.Sorted(maps.Keys(byDevice)) {
		if received[d] > most {
			busiest, most = d, received[d]
		}
	}
	out := byDevice[busiest]
	for i := range out {
		out[i].steps = nil
	}
	return out
}

// teamAxes names the mesh axes along which the members of a collective's
// teams differ: "tp" for a team within a row of a dp×tp mesh.
func teamAxes(pl *plan.Plan, p Parallel, teams [][]int) string {
	if len(teams) == 0 {
		return "?"
	}
	m, ok := stageMesh(pl, p, teams[0])
	if !ok {
		if p.stageGroups() > 1 {
			return PP // between two stages' meshes
		}
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

// stageMesh is the mesh of pl (a stage's, under a pipeline) that holds
// every device of team.
func stageMesh(pl *plan.Plan, p Parallel, team []int) (plan.Mesh, bool) {
	for _, name := range slices.Sorted(maps.Keys(pl.Meshes)) {
		m := pl.Meshes[name]
		if len(m.Shape) == len(p.Mesh) && !slices.ContainsFunc(team, func(d int) bool { return !slices.Contains(m.Devices, d) }) {
			return m, true
		}
	}
	return plan.Mesh{}, false
}

// WriteText writes s as a table for readers.
func (s *Summary) WriteText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "per device (of %d):\n", s.Devices)
	fmt.Fprintf(tw, "  parameters\t%s\t(%d elements)\n", plan.Size(s.ParameterBytes), s.Parameters)
	fmt.Fprintf(tw, "  gradients\t%s\t(one a parameter, sharded as its weight)\n", plan.Size(s.GradientBytes))
	fmt.Fprintf(tw, "  optimizer state\t%s\t(Adam: %s)\n", plan.Size(s.OptimizerBytes), adamNote(s))
	if s.GatheredBytes > 0 {
		fmt.Fprintf(tw, "  gathered weights\t%s\t(FSDP's gathered copies, held at once: an upper bound)\n", plan.Size(s.GatheredBytes))
	}
	fmt.Fprintf(tw, "  activations\t%s\t(every other tensor the step computes, held at once: an upper bound)\n", plan.Size(s.ActivationBytes))
	fmt.Fprintf(tw, "\nper step, the busiest device:\n")
	fmt.Fprintf(tw, "  collective\taxes\tsteps\tsent\treceived\n")
	for _, c := range s.Collectives {
		fmt.Fprintf(tw, "  %s\t%s\t%d\t%s\t%s\n", c.Type, c.Axes, c.Count, plan.Size(c.Sent), plan.Size(c.Received))
	}
	if len(s.Collectives) == 0 {
		fmt.Fprintf(tw, "  (none)\n")
	}
	fmt.Fprintf(tw, "\npredicted %s on topology %s (lower bound %s)\n", explain.Seconds(s.Time), s.Topology, explain.Seconds(s.LowerBound))
	if err := tw.Flush(); err != nil {
		return err
	}
	return s.writeThroughput(w)
}

// adamNote says what the optimizer state's bytes assume.
func adamNote(s *Summary) string {
	if s.Parameters > 0 && s.OptimizerBytes/s.Parameters == 12 {
		return "fp32 master weights and two fp32 moments, 12 bytes a parameter, sharded as the parameters"
	}
	return "two moments in the weights' dtype, sharded as the parameters"
}

// writeThroughput writes the tokens a second and the MFU that the
// predicted time implies.
func (s *Summary) writeThroughput(w io.Writer) error {
	pass, factor := "forward", "2·N + 4·layers·seq·heads·head_dim"
	if s.Backward {
		pass, factor = "forward and backward", "6·N + 12·layers·seq·heads·head_dim"
	}
	perSecond := s.TokensPerSecond()
	_, err := fmt.Fprintf(w, "throughput: %s tokens a step, %s tokens/s (%s a device)\n",
		withCommas(s.Tokens), withCommas(int64(perSecond)), withCommas(int64(perSecond/float64(s.Devices))))
	if err != nil || s.PeakFLOPS == 0 {
		return err
	}
	_, err = fmt.Fprintf(w, "MFU %.1f%%: the %s's %s = %.3g FLOPs a token (N = %s parameters multiply each token), against %.1f TFLOPS a device\n",
		100*s.MFU(), pass, factor, s.FlopsPerToken, withCommas(s.MatmulParameters), s.PeakFLOPS/1e12)
	return err
}

// withCommas writes n with its thousands separated: 8,030,261,248.
func withCommas(n int64) string {
	d := strconv.FormatInt(n, 10)
	var b strings.Builder
	for i, r := range d {
		if i > 0 && (len(d)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	return b.String()
}
