package cost

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"sync"

	"github.com/nvcomm/nvcomm/internal/checked"
	"github.com/nvcomm/nvcomm/internal/plan"
	"github.com/nvcomm/nvcomm/internal/shard"
)

// StepTime is the predicted time of one step.
type StepTime struct {
	// Step is the step's id.
	Step int    `json:"step"`
	Type string `json:"type"`
	// Link is the link class of the slowest team: nvlink, network or
	// memory (a local step, or a collective whose teams have no peers).
	Link string `json:"link"`
	// Bytes is S, the message size as nccl-tests counts it, of the slowest
	// team (for an AllToAllV, what its busiest member receives); for
	// memory, the bytes read plus written on one device.
	Bytes int64 `json:"bytes"`
	// Seconds is the predicted time: the slowest team's, teams running
	// concurrently.
	Seconds float64 `json:"seconds"`
	// Start is, in a plan of format 2, when the step starts, in seconds
	// from the plan's start (Prediction.Total is then the makespan); in
	// one of format 1 the steps run one after another and it is left 0.
	Start float64 `json:"start,omitempty"`
	// FusedInto is, for a step that runs inside the kernel of a run of
	// local steps fused into one (kernels.go) and is not its first, the
	// id of the run's first step, which launches the kernel and pays its
	// latency.
	FusedInto *int `json:"fused_into,omitempty"`
	// Slowed is, in a plan of format 2, what Seconds includes for the time
	// a collective and a Matmul share a device ([Contention]); 0 otherwise.
	Slowed float64 `json:"slowed,omitempty"`
}

// Prediction is the predicted time of a whole plan.
type Prediction struct {
	// Topology is the name of the topology used.
	Topology string     `json:"topology"`
	Steps    []StepTime `json:"steps"`
	// Total is the plan's predicted time, in seconds: the sum of the
	// steps' times in a plan of format 1, whose steps run one after
	// another; in one of format 2 the makespan of its step graph
	// ([Schedule]).
	Total float64 `json:"total"`
	// LowerBound is the least time any plan of the same fusion takes on
	// the topology (Topology.LowerBound of the plan's bytes_lower_bound);
	// Ratio is Total over it, rounded to 3 decimals, 0 when the bound is.
	LowerBound float64 `json:"lower_bound"`
	Ratio      float64 `json:"ratio"`
}

// BusFactor is nccl-tests' bus factor f(n) of a collective type for a team
// of n devices.
func BusFactor(typ string, n int) float64 {
	switch typ {
	case plan.Allreduce:
		return 2 * float64(n-1) / float64(n)
	case plan.Broadcast, plan.Reduce, plan.SendRecv:
		return 1
	}
	return float64(n-1) / float64(n)
}

// Collective predicts one collective of type typ over n devices of link
// class link with message size bytes (nccl-tests' S), in seconds (see
// [Params]).
func (t *Topology) Collective(link, typ string, bytes int64, n int) float64 {
	l := t.NVLink
	if link == LinkNetwork {
		l = t.Network
	}
	return l.For(typ).Seconds(float64(bytes) * BusFactor(typ, n))
}

// Seconds is the model's time for x = S·f(n) bytes:
// max(λ, min(α + x/busbw, α_ll + x/busbw_ll)).
func (p Params) Seconds(x float64) float64 {
	t := Line{Bandwidth: p.Bandwidth, Latency: p.Latency}.Seconds(x)
	if p.LowLatency != nil {
		t = min(t, p.LowLatency.Seconds(x))
	}
	return max(p.Launch*1e-6, t)
}

// Seconds is the line's time for x bytes: α + x/busbw.
func (l Line) Seconds(x float64) float64 {
	return l.Latency*1e-6 + x/(l.Bandwidth*1e9)
}

// Memory prices local steps: the parameters of a contiguous copy (Params,
// bytes read plus written), and optionally those of a strided copy
// (Strided), which `nvcomm calibrate` measures. Without them a strided
// copy costs what a contiguous one does, as in topology files before they
// had the field.
type Memory struct {
	Params `yaml:",inline"`
	// Strided prices a copy between strided views: a Permute, and a Pad's
	// or an Unpad's box, written or read row by row.
	Strided *Params `yaml:"strided,omitempty"`
}

// StridedParams are the parameters of a strided copy.
func (m Memory) StridedParams() Params {
	if m.Strided != nil {
		return *m.Strided
	}
	return m.Params
}

// Local predicts a local step that reads and writes bytes in all, in
// seconds, at the rate of a contiguous copy.
func (t *Topology) Local(bytes int64) float64 {
	return t.Memory.Seconds(float64(bytes))
}

// StridedSlice names, for pricing, a Slice with dims: each rank keeps a
// chunk of the middle dim of [outer, T, inner], outer chunks of inner
// elements apart, a strided copy.
const StridedSlice = "Slice (strided)"

// localElements are the elements the busiest device of a local step reads
// and writes, as the exporter runs it; moves is false when it moves no
// memory, which costs nothing (no bytes, no launch): an Unpad whose every
// box is the head of its input keeps a prefix of it, a view (export's "the
// box is the buffer's head"), and a Pad's device whose box fills dims pads
// nothing, its input is its padded buffer, so a Pad is priced by its
// busiest device that has holes to fill (plan.Step.PadInput).
func localElements(s *plan.Step) (in, out int64, moves bool) {
	switch {
	case s.Type == plan.Unpad && s.HeadBoxes():
		return 0, 0, false
	case s.Type == plan.Pad:
		n, ok := s.PadInput()
		return int64(n), int64(s.Count.Output), ok
	}
	in, out = localCounts(s.Type, s.Count)
	return in, out, true
}

// localType is the type a local step is priced as.
func localType(s *plan.Step) string {
	if s.Type == plan.Slice && len(s.Dims) > 0 {
		return StridedSlice
	}
	return s.Type
}

// localStep predicts a local step of type typ that reads and writes bytes
// in all: the strided copies (Permute, Pad, Unpad, a strided Slice, a
// Concat, which copies a window of each input's rows) at the strided
// rate, the others at a contiguous copy's.
func (t *Topology) localStep(typ string, bytes int64) float64 {
	if stridedType(typ) {
		return t.Pass(PassStrided, bytes, 1)
	}
	return t.Local(bytes)
}

// stridedType reports whether a local step of type typ (as localType
// names it) copies between strided views.
func stridedType(typ string) bool {
	switch typ {
	case plan.Permute, plan.Pad, plan.Unpad, StridedSlice, plan.Concat:
		return true
	}
	return false
}

// Pass predicts one pass over memory of an exported program's local block
// that reads plus writes bytes in kernels copies or fills: a "copy"
// (contiguous) at the memory's rate, a "strided" copy between strided
// views at its own rate where the topology has one (memory.strided, which
// calibrate measures), and a "view", which moves nothing, as free. Each
// kernel past the first adds its latency (at least the launch floor): a
// Pad's fill of its holes is a kernel of its own, however few they are.
func (t *Topology) Pass(pass string, bytes int64, kernels int) float64 {
	p := t.Memory.Params
	switch pass {
	case PassView:
		return 0
	case PassStrided:
		p = t.Memory.StridedParams()
	}
	return p.Seconds(float64(bytes)) + float64(max(kernels-1, 0))*max(p.Latency, p.Launch)*1e-6
}

// The passes over memory of [Topology.Pass].
const (
	PassCopy    = "copy"
	PassStrided = "strided"
	PassView    = "view"
)

// arithmetic is the time of a Matmul step's multiply-adds on its dtype's
// compute line; zero for other steps and unlisted dtypes.
func (t *Topology) arithmetic(p *plan.Plan, s *plan.Step) float64 {
	if s.Type != plan.Matmul || t.Compute == nil || len(s.Dims) != 4 {
		return 0
	}
	flops := 2.0
	for _, d := range s.Dims {
		flops *= float64(d)
	}
	return t.Compute.Seconds(stepDType(p, s), flops)
}

// Predict prices every step of p, a run of local steps as one kernel
// (kernels.go).
func Predict(t *Topology, p *plan.Plan) (*Prediction, error) {
	pr := &Prediction{Topology: t.Name, LowerBound: t.LowerBound(p.Summary.BytesLowerBound)}
	for i := range p.Steps {
		st, err := t.Step(p, &p.Steps[i])
		if err != nil {
			return nil, err
		}
		pr.Steps = append(pr.Steps, st)
	}
	t.fuseRuns(p, pr.Steps, t.attentionKernels(p, pr.Steps))
	for _, st := range pr.Steps {
		pr.Total += st.Seconds
	}
	if p.Graph() {
		pr.Total = Schedule(p, pr.Steps)
	}
	if pr.LowerBound > 0 {
		pr.Ratio = math.Round(pr.Total/pr.LowerBound*1000) / 1000
	}
	return pr, nil
}

// Contention is how much slower a collective and a Matmul run for the time
// they share a device, each: NCCL's kernels take streaming multiprocessors
// and memory bandwidth from the GEMM, and the GEMM from them (nvFuser
// found its overlapped GEMM and Allreduce competing for SMs, PR #5742). It
// is assumed, not measured: `nvcomm calibrate` would time an Allgather and
// a GEMM alone and then on two streams at once, and take the ratio of the
// overlapped time to the longer one alone (docs/overlap.md).
const Contention = 1.2

// Schedule sets the start of every step of p, a plan of format 2, priced
// in times (in p's order), and returns the makespan: a step starts once
// the steps it waits for (After) have finished and its stream is free on
// each of its devices. Streams run at once, but a collective and a Matmul
// that overlap on a device slow each other by [Contention]: a first pass
// without it finds the overlaps, each such step is lengthened by
// (Contention − 1) times its overlap (StepTime.Slowed), and a second pass
// places the lengthened steps. One correction, not a fixed point: what
// the second pass moves is not charged again, so the model stays
// deterministic and linear in the overlaps.
func Schedule(p *plan.Plan, times []StepTime) float64 {
	end := place(p, times)
	if !contend(p, times) {
		return end
	}
	return place(p, times)
}

// onStream is one stream of one device.
type onStream struct {
	device int
	name   string
}

// place sets every step's start, its times' Seconds as they are, and
// returns the makespan.
func place(p *plan.Plan, times []StepTime) float64 {
	free := map[onStream]float64{}
	finish := make([]float64, len(p.Steps))
	end := 0.0
	for i := range p.Steps {
		s := &p.Steps[i]
		start := 0.0
		for _, d := range s.Members() {
			start = max(start, free[onStream{d, s.StreamName()}])
		}
		for _, a := range s.After {
			if a >= 0 && a < i {
				start = max(start, finish[a])
			}
		}
		times[i].Start = start
		finish[i] = start + times[i].Seconds
		for _, d := range s.Members() {
			free[onStream{d, s.StreamName()}] = finish[i]
		}
		end = max(end, finish[i])
	}
	return end
}

// contends is the class of a step for contention: a collective (1), a
// Matmul (2), or neither (0).
func contends(s *plan.Step) int {
	switch {
	case s.Kind == plan.KindCollective:
		return 1
	case s.Type == plan.Matmul:
		return 2
	}
	return 0
}

// contend lengthens every collective and Matmul by (Contention − 1) times
// the longest it overlaps, on one of its devices, steps of the other
// class, as placed; it reports whether any step was lengthened. The steps
// of one stream never overlap and start in list order, so each stream's
// steps are searched for the first that ends after a step starts and
// scanned only while they overlap it.
func contend(p *plan.Plan, times []StepTime) bool {
	type span struct{ start, end float64 }
	spans := map[onStream][]span{} // by stream, of one class each: a stream's name and class
	classOf := map[onStream]int{}
	for i := range p.Steps {
		s := &p.Steps[i]
		c := contends(s)
		if c == 0 {
			continue
		}
		for _, d := range s.Members() {
			k := onStream{d, s.StreamName() + "/" + strconv.Itoa(c)}
			spans[k] = append(spans[k], span{times[i].Start, times[i].Start + times[i].Seconds})
			classOf[k] = c
		}
	}
	streams := map[int][]onStream{} // by device
	for _, k := range slices.SortedFunc(maps.Keys(spans), func(a, b onStream) int {
		return cmp.Or(cmp.Compare(a.device, b.device), cmp.Compare(a.name, b.name))
	}) {
		streams[k.device] = append(streams[k.device], k)
	}
	slowed := false
	for i := range p.Steps {
		s := &p.Steps[i]
		c := contends(s)
		if c == 0 {
			continue
		}
		from, to := times[i].Start, times[i].Start+times[i].Seconds
		most := 0.0
		for _, d := range slices.Compact(slices.Sorted(slices.Values(s.Members()))) {
			shared := 0.0
			for _, k := range streams[d] {
				if classOf[k] == c {
					continue
				}
				list := spans[k]
				j, _ := slices.BinarySearchFunc(list, from, func(x span, t float64) int { return cmp.Compare(x.end, t+1e-18) })
				for ; j < len(list) && list[j].start < to; j++ {
					shared += max(0, min(to, list[j].end)-max(from, list[j].start))
				}
			}
			most = max(most, min(shared, to-from))
		}
		if most > 0 {
			times[i].Slowed = (Contention - 1) * most
			times[i].Seconds += times[i].Slowed
			slowed = true
		}
	}
	return slowed
}

// Step prices one step of p on its own, as its own kernel (Predict
// prices a run of local steps as one).
func (t *Topology) Step(p *plan.Plan, s *plan.Step) (StepTime, error) {
	size, err := elemSize(p, s)
	if err != nil {
		return StepTime{}, err
	}
	return t.stepOf(s, size, t.arithmetic(p, s))
}

// StepOf prices step s, of elements of size bytes, as Step prices it in a
// plan, but a Matmul's arithmetic, which needs the plan's dtype: the
// optimal policy prices steps it may emit instead of others with it.
func (t *Topology) StepOf(s *plan.Step, size int64) (StepTime, error) {
	return t.stepOf(s, size, 0)
}

// stepOf prices step s of size-byte elements; arithmetic is a local
// step's least time, what its multiply-adds take.
func (t *Topology) stepOf(s *plan.Step, size int64, arithmetic float64) (StepTime, error) {
	st := StepTime{Step: s.ID, Type: s.Type, Link: LinkMemory}
	var err error
	if s.Kind == plan.KindLocal {
		in, out, moves := localElements(s)
		if !moves {
			return st, nil
		}
		st.Bytes, err = stepBytes(s, size, in, out)
		st.Seconds = max(t.localStep(localType(s), st.Bytes), arithmetic)
		return st, err
	}
	if len(s.Teams) == 0 {
		return StepTime{}, fmt.Errorf("step %d (%s): a collective needs at least one team", s.ID, s.Type)
	}
	for _, team := range s.Teams {
		cand, err := t.team(s, team, size)
		if err != nil {
			return StepTime{}, err
		}
		if cand.Seconds > st.Seconds {
			st = cand
		}
	}
	return st, nil
}

// team prices one team of a collective step. A team without peers (one
// device, or a SendRecv to itself) copies locally.
func (t *Topology) team(s *plan.Step, team []int, size int64) (StepTime, error) {
	st := StepTime{Step: s.ID, Type: s.Type}
	members := slices.Compact(slices.Sorted(slices.Values(team)))
	var err error
	if len(members) < 2 {
		st.Link = LinkMemory
		st.Bytes, err = stepBytes(s, size, int64(s.Count.Input), int64(s.Count.Input))
		st.Seconds = t.Local(st.Bytes)
		return st, err
	}
	st.Link = t.LinkOf(members)
	if s.Type == plan.AllToAllV {
		received, ok := exchangeReceived(s, team, size)
		if !ok {
			return st, tooManyBytes(s)
		}
		st.Seconds, st.Bytes = t.ExchangeSeconds(st.Link, received), received
		return st, nil
	}
	var ok bool
	if st.Seconds, st.Bytes, ok = t.TeamSeconds(st.Link, s.Type, s.Count, len(team), size); !ok {
		err = tooManyBytes(s)
	}
	return st, err
}

// TeamSeconds predicts one team of n devices (at least two distinct) of a
// collective step of type typ with counts c of elem-byte elements, on link
// class link: what Step charges that team, and the message size S in
// bytes. The optimal policy's search prices the steps it may emit with it,
// so its objective is the prediction of the plan it writes. ok is false
// when S does not fit in int64.
func (t *Topology) TeamSeconds(link, typ string, c plan.Count, n int, elem int64) (seconds float64, bytes int64, ok bool) {
	elems, ok := MessageElements(typ, c, n)
	if ok {
		bytes, ok = checked.Mul(elems, elem)
	}
	if !ok {
		return 0, 0, false
	}
	return t.Collective(link, typ, bytes, n), bytes, true
}

// ExchangeSeconds predicts an AllToAllV over a team of link class link
// whose busiest member receives received bytes from the others. NCCL runs
// it as grouped sends and receives, as it runs an AllToAll, so it is priced
// on the AllToAll line at x = received (an AllToAll's S·(n−1)/n is what
// each of its members receives), or on its own line where the topology
// has one.
func (t *Topology) ExchangeSeconds(link string, received int64) float64 {
	l := t.NVLink
	if link == LinkNetwork {
		l = t.Network
	}
	p, ok := l.Collectives[plan.AllToAllV]
	if !ok {
		p = l.For(plan.AllToAll)
	}
	return p.Seconds(float64(received))
}

// exchangeReceived is the most bytes a member of an AllToAllV's team
// receives from other devices (its chunk for itself stays), for elements
// of size bytes; ok is false when it does not fit in int64.
func exchangeReceived(s *plan.Step, team []int, size int64) (most int64, ok bool) {
	for r, d := range team {
		got := int64(0)
		for k, row := range s.SendCounts {
			if k < len(team) && team[k] != d && r < len(row) {
				if got, ok = checked.Add(got, int64(row[r])); !ok {
					return 0, false
				}
			}
		}
		most = max(most, got)
	}
	return checked.Mul(most, size)
}

// localCounts are the elements a local step of type typ with counts c
// reads and writes: a Slice reads only the chunk it keeps (its output), a
// Lookup its indices and the rows it copies (or zeros: as many), every
// other step its whole input.
func localCounts(typ string, c plan.Count) (in, out int64) {
	switch typ {
	case plan.Slice, StridedSlice, plan.Concat:
		return int64(c.Output), int64(c.Output) // a Concat reads what it writes
	case plan.Lookup:
		return int64(c.Input) + int64(c.Output), int64(c.Output)
	case plan.ScatterAdd: // the indices, and the values added: as many as its rows
		return int64(c.Input) + int64(c.Output), int64(c.Output)
	}
	return int64(c.Input), int64(c.Output)
}

// LocalSeconds predicts a local step of type typ (other than a Matmul,
// whose arithmetic Step adds) with counts c of elem-byte elements, as Step
// does: its bytes read plus written at the memory's rate. ok is false when
// they do not fit in int64. It knows no boxes: a Pad's c.Input is what its
// busiest padding device reads, and an Unpad is priced as a copy (Step
// prices one whose boxes are the heads of its input as a view).
func (t *Topology) LocalSeconds(typ string, c plan.Count, elem int64) (float64, bool) {
	ci, co := localCounts(typ, c)
	in, ok1 := checked.Mul(ci, elem)
	out, ok2 := checked.Mul(co, elem)
	sum, ok3 := checked.Add(in, out)
	if !ok1 || !ok2 || !ok3 {
		return 0, false
	}
	return t.localStep(typ, sum), true
}

// stepBytes is the bytes of the given element counts of size bytes, summed;
// an error names the step when they do not fit in int64.
func stepBytes(s *plan.Step, size int64, elems ...int64) (int64, error) {
	total := int64(0)
	for _, n := range elems {
		b, ok := checked.Mul(n, size)
		if ok {
			total, ok = checked.Add(total, b)
		}
		if !ok {
			return 0, tooManyBytes(s)
		}
	}
	return total, nil
}

// tooManyBytes is the error for a step whose bytes do not fit in int64.
func tooManyBytes(s *plan.Step) error {
	return fmt.Errorf("step %d (%s): its bytes exceed %d, the most nvcomm counts (int64); price the plan without a topology (--topology none)",
		s.ID, s.Type, int64(math.MaxInt64))
}

// MessageElements is nccl-tests' message size S of a collective step, in
// elements, for a team of n: the whole gathered or scattered buffer for
// Allgather, Gather (n·count.input), ReduceScatter, AllToAll and Scatter
// (count.input), the buffer for the others. ok is false when it does not
// fit in int64.
func MessageElements(typ string, c plan.Count, n int) (elems int64, ok bool) {
	switch typ {
	case plan.Allgather, plan.Gather:
		return checked.Mul(int64(n), int64(c.Input))
	}
	return int64(c.Input), true
}

// LinkOf is the link class of a team of devices: NVLink when every device
// is on one node, else the network.
func (t *Topology) LinkOf(devices []int) string {
	for _, d := range devices {
		if d/t.DevicesPerNode != devices[0]/t.DevicesPerNode {
			return LinkNetwork
		}
	}
	return LinkNVLink
}

// elemSize is the element size of a step's buffers: the dtype of its op's
// output tensor.
func elemSize(p *plan.Plan, s *plan.Step) (int64, error) {
	if s.Op < 0 || s.Op >= len(p.Ops) {
		return 0, fmt.Errorf("step %d (%s): op %d does not exist", s.ID, s.Type, s.Op)
	}
	name := p.Ops[s.Op].Output
	if dtype, ok := tensorDType(p, name); ok {
		if n := shard.DTypeSize(dtype); n > 0 {
			return int64(n), nil
		}
		return 0, fmt.Errorf("tensor %q: unknown dtype %q", name, dtype)
	}
	return 0, fmt.Errorf("step %d (%s): unknown tensor %q", s.ID, s.Type, name)
}

// tensorDType is the dtype of p's tensor name, looked up in an index of
// the plan's tensors made once: a scan of every tensor for every step was
// quadratic in the plan (a pipeline's thousands of steps).
func tensorDType(p *plan.Plan, name string) (string, bool) {
	dtypes.mu.Lock()
	defer dtypes.mu.Unlock()
	if dtypes.p != p || dtypes.n != len(p.Tensors) || len(p.Tensors) > 0 && dtypes.first != &p.Tensors[0] {
		dtypes.p, dtypes.n, dtypes.first = p, len(p.Tensors), nil
		if len(p.Tensors) > 0 {
			dtypes.first = &p.Tensors[0]
		}
		dtypes.of = make(map[string]string, len(p.Tensors))
		for _, tv := range p.Tensors {
			if _, dup := dtypes.of[tv.Name]; !dup {
				dtypes.of[tv.Name] = tv.DType // the first of a name, as a scan finds
			}
		}
	}
	d, ok := dtypes.of[name]
	return d, ok
}

// dtypes is tensorDType's index, of the plan it was last asked about
// (identified by its tensors' slice, so that one grown or replaced since
// is indexed again).
var dtypes struct {
	mu    sync.Mutex
	p     *plan.Plan
	n     int
	first *plan.Tensor
	of    map[string]string
}

// stepDType is the dtype of the output of the op a step belongs to, or ""
// (elemSize has checked that it exists).
func stepDType(p *plan.Plan, s *plan.Step) string {
	if s.Op < 0 || s.Op >= len(p.Ops) {
		return ""
	}
	d, _ := tensorDType(p, p.Ops[s.Op].Output)
	return d
}

// Less reports whether plan a is preferred over plan b: fewer bytes
// received by the busiest device (summary.bytes_received_max), and on a
// tie the shorter predicted time. A policy that searches for the best plan
// orders candidates with it.
func Less(t *Topology, a, b *plan.Plan) (bool, error) {
	if a.Summary.BytesReceivedMax != b.Summary.BytesReceivedMax {
		return a.Summary.BytesReceivedMax < b.Summary.BytesReceivedMax, nil
	}
	pa, err := Predict(t, a)
	if err != nil {
		return false, err
	}
	pb, err := Predict(t, b)
	if err != nil {
		return false, err
	}
	return pa.Total < pb.Total, nil
}

// LowerBound is the least time in which the busiest device of any plan
// can receive bytes (docs/lowering.md, "Lower bounds"): every step that
// moves data takes at least one latency, and a device receives at most at
// the largest bus bandwidth of any line of the topology — so one latency,
// the smallest of any line, plus the bytes at that bandwidth. 0 for no
// bytes: a plan that moves nothing may take no time.
func (t *Topology) LowerBound(bytes int64) float64 {
	if bytes <= 0 {
		return 0
	}
	latency, bandwidth := math.Inf(1), 0.0
	for _, l := range []Link{t.NVLink, t.Network} {
		params := []Params{l.Params}
		for _, typ := range slices.Sorted(maps.Keys(l.Collectives)) {
			params = append(params, l.Collectives[typ])
		}
		for _, p := range params {
			lines := []Line{{Bandwidth: p.Bandwidth, Latency: p.Latency}}
			if p.LowLatency != nil {
				lines = append(lines, *p.LowLatency)
			}
			for _, ln := range lines {
				latency, bandwidth = min(latency, ln.Latency), max(bandwidth, ln.Bandwidth)
			}
		}
	}
	if bandwidth <= 0 || math.IsInf(latency, 1) {
		return 0
	}
	return max(latency, 0)*1e-6 + float64(bytes)/(bandwidth*1e9)
}
